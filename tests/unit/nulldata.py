"""Synthetic trials with and without each claim's effect, for the null-data calibration
(tests/unit/test_claims_nulldata.py, benchmarks/null_data.py): noise like the emulator's, the
paper's effect size when `effect`, none (or the tolerance's edge) otherwise."""
# ruff: noqa: RUF002

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from testbed import models, papers
from testbed.measure.ping_tool import udp_data_size
from testbed.report.claims import Data
from testbed.results import TrialRow

Gen = Callable[[np.random.Generator, bool], list[TrialRow]]
_keys = itertools.count()


def row(kind: str, metrics: dict[str, float], point: dict[str, Any],
        params: dict[str, Any] | None = None) -> TrialRow:
    k = f"n{next(_keys)}"
    return TrialRow(k, "run", "x", "quick", "m", kind, point, k, 0, 0.0, 1.0, "ok", None,
                    metrics, {"params": params or {}}, {}, [])


def _noisy(rng: np.random.Generator, mean: float, sd: float, n: int) -> list[float]:
    return [float(v) for v in mean * (1 + sd * rng.standard_normal(n))]


def gamess(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """OWD through 0-2 routers and zero-loss throughput; without the effect IPv6 equals IPv4."""
    out = []
    for rate, routers, n in itertools.product((10e6, 100e6), (0, 1, 2), (10, 100, 1000)):
        for ip in (4, 6):
            owd = models.owd(n, rate, ip if effect else 4, routers, 30e-6) * 1e6
            for v in _noisy(rng, owd, 0.02, 3):
                out.append(row("pingpong", {"owd_median_us": v}, {
                    "ip": ip, "ip_payload": n, "topology.rate": f"{rate / 1e6:g}mbit",
                    "topology.routers": routers}))
    for n, ip in itertools.product((100, 500, 1000, 1400), (4, 6)):
        thr = models.max_throughput_bps(n, 10e6, ip if effect else 4)
        for v in _noisy(rng, thr, 0.005, 3):
            out.append(row("rfc2544", {"throughput_bps": v}, {
                "ip": ip, "ip_payload": n, "topology.rate": "10mbit"}))
    return out


def ze_rtt(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """RTT per protocol and size; the paper's IPv6 11 % lower (7-15 %) or equal."""
    out = []
    for proto, size, ip in itertools.product(("tcp", "udp"), (64, 256, 1024), (4, 6)):
        f = 0.89 if effect and ip == 6 else 1.0
        for v in _noisy(rng, 60.0 * f, 0.03, 3):
            out.append(row("pingpong", {"rtt_median_us": v}, {"ip": ip, "size": size},
                           {"protocol": proto}))
    return out


def ze_stack(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """Stack costs, five repetitions with 1 % noise: the paper's +12 %, +50 %, 450 -> 426, or
    no change."""
    out = []
    for ip in (4, 6):
        sock, conn, cps = (1.12, 1.5, 426 / 450) if effect and ip == 6 else (1.0, 1.0, 1.0)
        for a, b, c in zip(_noisy(rng, 3.0 * sock, 0.01, 5), _noisy(rng, 50.0 * conn, 0.01, 5),
                           _noisy(rng, 450.0 * cps, 0.01, 5), strict=True):
            out.append(row("stackcost", {"tcp_socket_create_us": a, "tcp_connect_us": b,
                                         "connections_per_s": c}, {"ip": ip}))
    return out


def qu_nat64(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """OWD through TAYGA and Jool in 8 cells, two repetitions: Jool 5 % lower, or equal."""
    out = []
    for proto, rate, size, mech in itertools.product(
            ("udp", "tcp"), ("10mbit", "100mbit"), (100, 1000), ("nat64-tayga", "nat64-jool")):
        f = 0.95 if effect and mech == "nat64-jool" else 1.0
        for v in _noisy(rng, 300.0 * f * (1 + size / 1000), 0.03, 2):
            out.append(row("pingpong", {"owd_median_us": v}, {
                "topology": mech, "topology.rate": rate, "size": size},
                {"ip": 6, "protocol": proto}))
    return out


def qu_native(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """OWD (UDP, TCP) and UDP throughput of native IPv4, native IPv6 and 6to4 in 12 cells,
    two repetitions: IPv6 2 % behind IPv4 (20 more header bytes), or level with it."""
    out = []
    gap = 0.02 if effect else 0.0
    for rate, size in itertools.product(("10mbit", "100mbit"), (100, 500, 1000, 1400)):
        for mech, f in (("native4", 1.0), ("native6", 1.0 + gap), ("6to4", 1.1)):
            ip = 4 if mech == "native4" else 6
            for proto in ("udp", "tcp"):
                for v in _noisy(rng, 200.0 * f, 0.01, 2):
                    out.append(row("pingpong", {"owd_median_us": v}, {
                        "topology": mech, "topology.rate": rate, "size": size},
                        {"ip": ip, "protocol": proto}))
            for v in _noisy(rng, 9e6 / f, 0.01, 2):
                out.append(row("iperf3", {"receiver_bps": v}, {
                    "topology": mech, "topology.rate": rate, "length": size},
                    {"ip": ip, "protocol": "udp"}))
    return out


def go_perf(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """iperf TCP throughput and ping RTT per frame size, three repetitions (the paper's):
    IPv4 about 1 % better (or no difference); latency rising with size, IPv6 anomalies twice
    IPv4's, neither version lower everywhere (or flat with equal anomalies)."""
    out = []
    for ip, size in itertools.product((4, 6), (128, 512, 1518)):
        adv = 0.01 if effect else 0.0
        for v in _noisy(rng, 900e6 * (1 + (adv if ip == 4 else 0)), 0.005, 3):
            out.append(row("iperf3", {"receiver_bps": v}, {"ip": ip, "length": size},
                           {"protocol": "tcp"}))
        rise = size * 2e-4 if effect else 0.0
        # IPv6 higher below 1000 B, IPv4 higher at 1518 B: neither lower everywhere
        base = 0.5 + rise + (0.0 if not effect else 0.005 if ip == 6 and size < 1000
                             else 0.005 if ip == 4 and size >= 1000 else 0.0)
        extra = 0.4 if effect and ip == 6 else 0.2
        for m in _noisy(rng, base, 0.005, 3):
            out.append(row("ping", {"rtt_mean_ms": m, "rtt_max_ms": m + extra * (
                1 + 0.2 * float(rng.standard_normal()))}, {"ip": ip, "frame_size": size}))
    return out


def go_spread(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """iperf TCP throughput, twenty repetitions per frame size: the noise growing with frame
    size and 1.8 times larger for IPv6 (the paper's 90 vs 51 Mbit/s at 1518 B), or the same
    everywhere."""
    out = []
    for ip, size in itertools.product((4, 6), (128, 512, 1518)):
        sd = (size / 1518 * (1.8 if ip == 6 else 1.0)) * 0.02 if effect else 0.01
        for v in _noisy(rng, 900e6, sd, 20):
            out.append(row("iperf3", {"receiver_bps": v}, {"ip": ip, "length": size},
                           {"protocol": "tcp"}))
    return out


def go_equal(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """go:1's paper: no significant difference, IPv4 slightly (1 %) better in throughput and
    RTT at every frame size, three repetitions; or no difference at all."""
    out = []
    adv = 0.01 if effect else 0.0
    for ip, size in itertools.product((4, 6), (128, 512, 1518)):
        for v in _noisy(rng, 900e6 * (1 + (adv if ip == 4 else 0)), 0.005, 3):
            out.append(row("iperf3", {"receiver_bps": v}, {"ip": ip, "length": size},
                           {"protocol": "tcp"}))
        for m in _noisy(rng, (0.5 + size * 2e-4) * (1 + (adv if ip == 6 else 0)), 0.005, 3):
            out.append(row("ping", {"rtt_mean_ms": m, "rtt_max_ms": m + 0.2},
                           {"ip": ip, "frame_size": size}))
    return out


def do_icmp(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """Router CPU under ICMP echo load: rising with rate and size; ICMPv6 a third cheaper (the
    paper's −33 %) or the same."""
    out = []
    for ip, pps, size in itertools.product((4, 6), (1000.0, 5000.0), (64, 1000)):
        cpu = pps / 1000 * (1 + size / 1000) * (0.67 if effect and ip == 6 else 1.0)
        for v in _noisy(rng, cpu, 0.05, 3):
            out.append(row("icmpload", {"router_cpu_pct": v}, {"ip": ip, "pps": pps,
                                                               "size": size}))
    return out


def do_srh(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """Router CPU with and without a Segment Routing header: the paper's 'little' (1 and 3
    points), or exactly the bound (2 and 6 points: no longer 'little')."""
    out = []
    for pps in (1000.0, 5000.0):
        added = (1.0 if pps <= 1000 else 3.0) if effect else (2.0 if pps <= 1000 else 6.0)
        for variant, extra in (("none", 0.0), ("srh", added)):
            for v in 5.0 + extra + 0.3 * rng.standard_normal(5):
                out.append(row("exthdr", {"router_cpu_pct": float(v)}, {
                    "variant": variant, "rule": False, "pps": pps}))
    return out


def do_onset(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """A load sweep (50-100 % of the link, steps of 5 %) of pure IPv4 and pure IPv6 at two frame
    sizes, two repetitions: loss starts at 90 % for IPv4 and 80 % for IPv6 (the paper's earlier
    onset), or at 90 % for both; 0.05 % of noise on the loss."""
    out = []
    for ratio, size, load in itertools.product(("100/0", "0/100"), (128, 1518),
                                               [0.5 + 0.05 * i for i in range(11)]):
        onset = 0.8 if effect and ratio == "0/100" else 0.9
        for _ in range(2):
            loss = max(0.0, (load - onset) / load * 100) + abs(0.05 * rng.standard_normal())
            out.append(row("load", {"loss_percent": loss}, {
                "ratio": ratio, "frame_size": size, "load": round(load, 2)}))
    return out


QU_OWD = {"native4": 1.0, "native6": 1.03, "6to4": 1.10, "isatap": 1.10, "nat64-tayga": 1.0,
          "nat64-jool": 0.97}
QU_THR = {"native4": 1.0, "native6": 0.98, "6to4": 0.95, "isatap": 0.95, "nat64-tayga": 0.97,
          "nat64-jool": 0.97}


def qu_mechs(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """Every mechanism at 10 and 100 Mbit/s, four payloads, three repetitions, 0.5 % noise: OWD
    twice the serialization + 20 µs and UDP throughput 95 % of the rate, scaled per mechanism as
    the paper's figures order them (IPv6 +3 %, tunnels +10 %, NAT64 below IPv6 at 10 Mbit/s,
    Jool 3 % below TAYGA, TAYGA's anomaly twice the OWD above 1750 B, 10x per rate); or every
    mechanism and both rates alike."""
    out = []
    for rate, size, mech in itertools.product((10e6, 100e6), (100, 1000, 2000, 4000), QU_OWD):
        point = {"topology": mech, "topology.rate": f"{rate / 1e6:g}mbit", "size": size}
        eff = rate if effect else 10e6
        ip = 4 if mech == "native4" else 6
        for proto in ("udp", "tcp"):
            f = QU_OWD[mech] if effect else 1.0
            if effect and rate == 100e6 and proto == "udp" and size > 1750 and \
                    mech == "nat64-tayga":
                f *= 2
            for v in _noisy(rng, (2 * size * 8 / eff * 1e6 + 20) * f, 0.005, 3):
                out.append(row("pingpong", {"owd_median_us": v}, point,
                               {"ip": ip, "protocol": proto}))
        thr = eff * 0.95 * (QU_THR[mech] if effect else 1.0)
        for v in _noisy(rng, thr, 0.005, 3):
            out.append(row("iperf3", {"receiver_bps": v}, {
                "topology": mech, "topology.rate": point["topology.rate"], "length": size},
                {"ip": ip, "protocol": "udp"}))
    return out


def gm_model(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """Zero-loss throughput at the model's value (0.5 % noise) and OWD through 0-3 routers at
    equation (9)'s (π = 30 µs, 2 % noise), three repetitions; without the effect throughput
    10 % below the model (twice gm:5's tolerance) and OWD flat in the number of routers."""
    out = []
    for rate, ip, n in itertools.product((10e6, 100e6), (4, 6), (100, 1000, 1400)):
        thr = models.max_throughput_bps(n, rate, ip) * (1.0 if effect else 0.9)
        for v in _noisy(rng, thr, 0.005, 3):
            out.append(row("rfc2544", {"throughput_bps": v}, {
                "ip": ip, "ip_payload": n, "topology.rate": f"{rate / 1e6:g}mbit"}))
        for routers in range(4):
            owd = models.owd(n, rate, ip, routers if effect else 0, 30e-6) * 1e6
            for v in _noisy(rng, owd, 0.02, 3):
                out.append(row("pingpong", {"owd_median_us": v}, {
                    "ip": ip, "ip_payload": n, "topology.rate": f"{rate / 1e6:g}mbit",
                    "topology.routers": routers}))
    return out


def do_bidir(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """Mixed UDP traffic at 1518 B, one and both directions, three repetitions, 2 % noise:
    traffic falling and CPU rising with the IPv6 share; both directions need 1.5 times the CPU
    and carry half the unidirectional maximum each (the paper's Figs. 9-10), or the same CPU
    and each direction the full unidirectional traffic."""
    out = []
    for mix, share in (("100/0", 0.0), ("50/50", 0.5), ("0/100", 1.0)):
        traffic, cpu = 90e6 * (1 - 0.2 * share), 10 + 20 * share
        for direction in ("forward", "bidir"):
            bi = direction == "bidir"
            t = traffic * (1 if effect or not bi else 2)
            c = cpu * (1.5 if effect and bi else 1.0)
            for tv, cv in zip(_noisy(rng, t, 0.02, 3), _noisy(rng, c, 0.02, 3), strict=True):
                out.append(row("iperf3", {"receiver_bps": tv, "cpu_machine_softirq_pct": cv},
                               {"ratio": mix, "frame_size": 1518},
                               {"protocol": "udp", "direction": direction}))
    return out


def do_ipd(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """Receiver inter-packet delay of 1518-byte frames at 10 and 95 Mbit/s, five repetitions
    (with three the IPv6/IPv4 interval reaches past ±5 % one time in five), 1 % noise: the
    wire's 1.23 ms and 0.13 ms for both protocols, or 20 % above them with IPv6 8 % above
    IPv4."""
    out = []
    for ip, rate, wire in itertools.product((4, 6), ("10mbit", "95mbit"), (1230.0,)):
        ipd = wire / (9.5 if rate == "95mbit" else 1.0)
        if not effect:
            ipd *= 1.2 * (1.08 if ip == 6 else 1.0)
        for v in _noisy(rng, ipd, 0.01, 5):
            out.append(row("receiver", {"ipd_mean_us": v}, {"ip": ip, "rate": rate},
                           {"frame_size": 1518}))
    return out


def go_loss(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """RFC 2544 throughput and frame loss per IP version and frame size: steps of 10 % down from
    line rate; loss only above the measured throughput (the paper's 0 %), or, without the
    effect, a random 0.01-1 % at one step at or below it in every series."""
    out = []
    for ip, size in itertools.product((4, 6), (128, 512, 1518)):
        thr = 1e9 * (0.7 + 0.2 * float(rng.random()))
        steps = [{"offered": 1e9 * (1 - k / 10), "generator_short": False} for k in range(6)]
        below = [p for p in steps if p["offered"] <= thr]
        bad = below[int(rng.integers(len(below)))] if not effect and below else None
        for p in steps:
            p["loss_percent"] = (max(0.0, (p["offered"] - thr) / p["offered"] * 100)
                                 if p["offered"] > thr else
                                 float(rng.uniform(0.01, 1.0)) if p is bad else 0.0)
        out.append(TrialRow(f"n{next(_keys)}", "run", "x", "quick", "m", "rfc2544",
                            {"ip": ip, "frame_size": size}, "k", 0, 0.0, 1.0, "ok", None,
                            {"throughput_bps": thr}, {"params": {}, "frame_loss": steps}, {},
                            []))
    return out


def gm_saw(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """Zero-loss throughput at 10 Mbit/s around the fragmentation knees, five repetitions (with
    three, t on 2 degrees of freedom leaves a +1 % bound or a 1.5 % fall undecided about one
    time in two), 0.3 % noise: the model's sawtooth 0.5 % below it (Tables I-II: Exp ≤ Max),
    or no fall after the knee (flat at the knee's value) 3 % above the model."""
    out = []
    for ip, knee, second in ((4, 1480, 2960), (6, 1460, 2900)):
        for n in (10, 100, 500, 1000, knee, knee + 1, 1500, 2000, second, second + 1):
            thr = (models.max_throughput_bps(n, 10e6, ip) * 0.995 if effect else
                   models.max_throughput_bps(min(n, knee), 10e6, ip) * 1.03)
            for v in _noisy(rng, thr, 0.003, 5):
                out.append(row("rfc2544", {"throughput_bps": v}, {
                    "ip": ip, "ip_payload": n, "topology.rate": "10mbit"}))
    return out


def do_mix(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """Mixed UDP traffic per IPv6 share and frame size, three repetitions, 2 % noise: traffic
    falling and CPU rising with the share, CPU rising as IPv4 frames get smaller, packets/s
    falling with frame size (Figs. 3-6); or traffic and CPU flat across shares, CPU flat across
    sizes and packets/s the same at every size."""
    out = []
    for mix, share in (("100/0", 0.0), ("50/50", 0.5), ("0/100", 1.0)):
        for size in (128, 512, 1518):
            if effect:
                traffic = 90e6 * (1 - 0.2 * share) * (size / 1518) ** 0.1
                cpu = (10 + 20 * share) * (1518 / size) ** 0.2
            else:  # the same packets/s at every size
                traffic, cpu = 8 * 7000.0 * udp_data_size(size, 4 if share < 0.5 else 6), 20.0
            for tv, cv in zip(_noisy(rng, traffic, 0.02, 3), _noisy(rng, cpu, 0.02, 3),
                              strict=True):
                out.append(row("iperf3", {"receiver_bps": tv, "cpu_machine_softirq_pct": cv},
                               {"ratio": mix, "frame_size": size}, {"protocol": "udp"}))
    return out


def do_frag(rng: np.random.Generator, effect: bool) -> list[TrialRow]:
    """Router CPU at MTU 100 for frames of 1-11 fragments as the full profile measures them
    (frames 118-918 B in steps of 100: nine counts), three repetitions each: the paper's
    +4.5 % per fragment, or flat."""
    out = []
    for frags in (1, 3, 4, 5, 6, 8, 9, 10, 11):
        for v in _noisy(rng, 6.0 + (4.5 * (frags - 1) if effect else 0.0), 0.1, 3):
            out.append(row("fragment", {"router_cpu_pct": v,
                                        "fragments_per_datagram": float(frags)},
                           {"core_mtu": 100, "frame_size": 38 + 80 * frags}))
    return out


GENERATORS: dict[str, Gen] = {
    "gm:1": gamess, "gm:8": gamess, "ze:5": ze_rtt, "ze:6": ze_stack, "ze:7": ze_stack,
    "ze:8": ze_stack, "qu:1": qu_native, "qu:4": qu_nat64, "go:1": go_equal, "go:2": go_spread,
    "go:4": go_perf, "do:6": do_onset, "do:10": do_icmp, "do:16": do_srh, "do:15": do_frag,
    "go:5": go_loss, "gm:2": gm_saw, "gm:3": gm_saw, "gm:9": gm_saw, "gm:5": gm_model,
    **{f"do:{i}": do_mix for i in (1, 3, 4, 5)}, "do:7": do_bidir, "do:9": do_ipd, "gm:7": gm_model,
    **{f"qu:{i}": qu_mechs for i in (2, 3, 5, 6, 7, 8, 9, 10)},
}


def hold_rate(cid: str, seeds: int, effect: bool) -> float:
    """The share of `seeds` synthetic data sets on which claim `cid` holds."""
    claim = next(c for p in papers.all_papers() for c in p.claims if c.id == cid)
    gen = GENERATORS[cid]
    held = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed * 7919 + 1 + (1 if effect else 0))
        held += claim.check(Data(gen(rng, effect))).status == "holds"
    return held / seeds
