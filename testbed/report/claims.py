"""The papers' claims as code: one small function per claim id, evaluated on stored trials."""
# ruff: noqa: RUF001  (claims and evidence keep the papers' minus, times and approx signs)

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from testbed import models, results, units
from testbed.results import TrialRow

Status = Literal["holds", "does not hold", "not measured", "not measurable here"]


@dataclass(frozen=True)
class ClaimResult:
    """One claim of a paper, evaluated: holds / does not hold / not measured / not measurable."""

    claim_id: str
    paper: str
    text: str
    status: Status
    evidence: str
    reason: str = ""


PAPERS: tuple[str, ...] = (
    "gamess-morales", "quintero-2016", "gometz-2015", "dobrinov-2016", "zeadally-2004")

# experiment name -> paper id (an experiment file's `name`)
EXPERIMENTS: dict[str, str] = {
    "gamess-morales": "gamess-morales",
    "transition": "quintero-2016",
    "quintero-2016": "quintero-2016",
    "gometz-2015": "gometz-2015",
    "gometz-2015-kernel": "gometz-2015",
    "dobrinov-2016": "dobrinov-2016",
    "zeadally-2004": "zeadally-2004",
}

# The claims of ../shared/claims.md, verbatim (a unit test keeps them equal to that file).
CLAIMS: dict[str, tuple[tuple[str, str], ...]] = {
    "gamess-morales": (
        ("gm:1", "IPv4 performs slightly better than IPv6 (higher throughput, lower OWD) at every payload."),  # noqa: E501
        ("gm:2", "IPv4 Ethernet maximum throughput rises up to 1480 B, falls at 1481, repeats every 1480 B; peak 9.62 Mbit/s."),  # noqa: E501
        ("gm:3", "IPv6 maximum rises up to 1460 B, falls at 1461 and 2901; peak 9.49 Mbit/s."),
        ("gm:4", "Fast Ethernet has the same shape, IPv4 above IPv6."),
        ("gm:5", "Measured throughput is very close to the model, except small payloads on GigabitEthernet (Tables I–II)."),  # noqa: E501
        ("gm:6", "Measured OWD through 0–5 routers is very close to equation (10) at 10 and 100 Mbit/s (Tables III–VI)."),  # noqa: E501
        ("gm:7", "OWD grows linearly with the number of routers (slope TTFS + π)."),
        ("gm:8", "IPv6 OWD is slightly above IPv4 at equal payload."),
        ("gm:9", "The models are an upper bound on achievable throughput."),
    ),
    "quintero-2016": (
        ("qu:1", "Native IPv4 performs best, closely followed by native IPv6 (20 vs 40-byte header)."),  # noqa: E501
        ("qu:2", "ISATAP and 6to4 perform similarly and lowest of all (extra IPv4 header)."),
        ("qu:3", "TCP OWD at 10 Mbit/s: ISATAP and 6to4 highest for almost all payloads."),
        ("qu:4", "Jool and TAYGA have similar OWD, Jool slightly lower."),
        ("qu:5", "At 10 Mbit/s NAT64 has lower OWD than native IPv6 (one IPv6 + one IPv4 serialization vs two IPv6)."),  # noqa: E501
        ("qu:6", "UDP OWD at 100 Mbit/s: IPv4 < IPv6 < ISATAP ≈ 6to4; TAYGA unexpectedly high above 1750 B, Jool normal."),  # noqa: E501
        ("qu:7", "TCP OWD at 100 Mbit/s has the Ethernet shape, about 10× lower."),
        ("qu:8", "UDP throughput at 10 Mbit/s: IPv4 upper bound, then IPv6; tunnels below IPv6 and similar; Jool ≈ TAYGA."),  # noqa: E501
        ("qu:9", "UDP throughput at 100 Mbit/s: same shape, about 10× higher."),
        ("qu:10", "Jool is preferable to TAYGA (no large-payload anomaly)."),
        ("qu:11", "(cross-OS) modern OSes perform very similarly — not measurable here."),
    ),
    "gometz-2015": (
        ("go:1", "IPv4 and IPv6 show no significant difference; IPv4 slightly better."),
        ("go:2", "Throughput spread (max − min) is small at small frames and grows at large frames; IPv6 spread larger."),  # noqa: E501
        ("go:3", "Average IPv4 throughput ≥ IPv6 at most frame sizes; differences too small to pick a winner."),  # noqa: E501
        ("go:4", "Latency rises with frame size; IPv6 has larger anomalies; neither version consistently lower."),  # noqa: E501
        ("go:5", "Frame loss was 0 % in every test (the paper stepped down by 10 % from its measured throughput; RFC 2544 §26.3 starts at the maximum rate)."),  # noqa: E501
        ("go:6", "The router offers source/destination NAT and NPTv6 (IPv6 prefix translation)."),
        ("go:7", "The router offers DHCP server and relay, and DHCPv6."),
        ("go:8", "The router's firewall filters IPv4 and IPv6 (netfilter); rule groups exist for IPv4."),  # noqa: E501
        ("go:9", "The router supports IPsec VPN; QoS uses tc with HTB and HFSC."),
        ("go:10", "(vendor) VyOS beats pfSense on throughput, pfSense has lower latency — not measurable here; the emulator's analogue compares router profiles (plain forwarding, conntrack, nftables rule sets)."),  # noqa: E501
    ),
    "dobrinov-2016": (
        ("do:1", "More IPv6 share → higher router CPU and lower maximum traffic."),
        ("do:2", "Maximum traffic rises with frame size up to 1518 B and drops from 1518 to 1522 (fragmentation), far more for IPv6-heavy mixes."),  # noqa: E501
        ("do:3", "At every frame size pure IPv4 carries the most traffic; more IPv6 means less."),
        ("do:4", "CPU rises with throughput and with IPv6 share; for IPv4 it rises as frames get smaller."),  # noqa: E501
        ("do:5", "Packets per second fall with frame size."),
        ("do:6", "IPv6 reaches its loss onset at a lower offered load than IPv4."),
        ("do:7", "Bidirectional traffic needs more CPU; mixed bidirectional reaches about half the unidirectional maximum."),  # noqa: E501
        ("do:8", "Reset (software vs hardware restart) times do not differ significantly (one-way ANOVA, 5 repetitions each)."),  # noqa: E501
        ("do:9", "Inter-packet delay at the receiver is ~1.2 ms at 10 Mbit/s and ~0.12 ms at 95 Mbit/s for 1518-byte frames, with no protocol effect."),  # noqa: E501
        ("do:10", "ICMP echo load on the router: CPU rises with size and rate; ICMPv6 costs less than ICMPv4."),  # noqa: E501
        ("do:11", "ACLs raise CPU; 1 vs 25 rules differ by < 2 %; both interfaces cost more than one."),  # noqa: E501
        ("do:12", "ACLs cut maximum traffic only when IPv6 share ≥ 50 %."),
        ("do:13", "Extension headers cost CPU; 4 vs 20 extension headers make no difference."),
        ("do:14", "Below the MTU, pps and CPU are the same for every MTU; fragmentation raises CPU (2.7× in the paper)."),  # noqa: E501
        ("do:15", "CPU is linear in fragments per packet."),
        ("do:16", "A Routing Header adds little CPU (< 2 % at 1000 pps, 6 % at 5000 pps). (RH0 is deprecated by RFC 5095 and dropped by Linux; the emulated analogue is a Segment Routing header.)"),  # noqa: E501
    ),
    "zeadally-2004": (
        ("ze:1", "Linux TCP throughput ≈ line rate (~93 Mbit/s) at all sizes for both versions, IPv6 ~1 Mbit/s lower."),  # noqa: E501
        ("ze:2", "UDP throughput IPv4 and IPv6 similar on Linux."),
        ("ze:3", "Address-size overhead: 12.5 % vs 3 % at 128 B, 3 % vs 0.78 % at 512 B."),
        ("ze:4", "TCP and UDP round-trip latency are about equal."),
        ("ze:5", "On Linux, TCP and UDP round-trip latency is 7–15 % lower with IPv6 than with IPv4."),  # noqa: E501
        ("ze:6", "TCP/IPv6 socket creation costs more than TCP/IPv4 (+12 % on Linux)."),
        ("ze:7", "TCP connect is slower with IPv6 (about +50 % on Linux)."),
        ("ze:8", "Connections per second drop with IPv6 (Linux 450 → 426, −5 %)."),
        ("ze:9", "(cross-OS) Linux beats Windows 2000 and Solaris 8 on every metric — not measurable here."),  # noqa: E501
    ),
}

# Thresholds, named so that the evidence can quote them.
CLOSE = 0.05  # "very close", "similar", "no significant difference" (relative)
MOST = 0.75  # "almost all", "most" cells
NO_SERIALIZATION = ("the host tier shapes with tbf, which passes a packet on an idle link at once: "
                    "no per-packet serialization delay (the full-kernel tier's netem rate has it)")
LINUX_ROUTER = "a Linux router on this machine is not the paper's hardware router"
GENERATOR = "the Python UDP sender cannot offer every rate (limited_by = generator)"


@dataclass(frozen=True)
class Outcome:
    """What a claim function returns: the status, its deciding numbers, the known reason."""

    status: Status
    evidence: str
    reason: str = ""


def _not_measured(missing: str) -> Outcome:
    """Nothing of the claim can be checked on these trials: say what is missing."""
    return Outcome("not measured", "", f"not measured: needs {missing}")


def _verdict(ok: bool, evidence: str, reason: str = "") -> Outcome:
    return Outcome("holds" if ok else "does not hold", evidence, "" if ok else reason)


# --- reading trials --------------------------------------------------------------------------


def param(row: TrialRow, key: str) -> Any:
    """A trial's parameter: swept (its point) or fixed (the stored resolved parameters)."""
    if key in row.point:
        return row.point[key]
    params = row.result.get("params") if isinstance(row.result, dict) else None
    return params.get(key) if isinstance(params, dict) else None


def size_of(row: TrialRow) -> int | None:
    """The size a trial swept: ip_payload, frame_size, size or length, whichever it has."""
    for key in ("ip_payload", "frame_size", "size", "length"):
        v = param(row, key)
        if v is not None:
            return int(v)
    return None


def rate_bps(row: TrialRow) -> float | None:
    """The topology's link rate (bit/s) of a trial, or None when unshaped or unknown."""
    v = row.point.get("topology.rate")
    if v is None or str(v) in ("unlimited", "max", "0"):
        return None
    try:
        return units.rate(str(v), unlimited=False)
    except ValueError:
        return None


def rate_name(bps: float | None) -> str:
    if bps is None:
        return "unshaped"
    names = {10e6: "10 Mbit/s", 100e6: "100 Mbit/s", 1e9: "1 Gbit/s"}
    return names.get(bps, f"{bps / 1e6:g} Mbit/s")


class Data:
    """The ok trials of one paper's experiments, with grouping helpers."""

    def __init__(self, trials: Sequence[TrialRow], runs: Sequence[Mapping[str, Any]] = ()):
        self.rows = [t for t in trials if t.status == "ok"]
        self.runs = list(runs)

    def select(self, kind: str, **where: Any) -> list[TrialRow]:
        out = []
        for r in self.rows:
            if r.kind != kind:
                continue
            if all(param(r, k.replace("__", ".")) == v for k, v in where.items()):
                out.append(r)
        return out

    def cells(self, rows: Iterable[TrialRow], metric: str,
              key: Callable[[TrialRow], tuple[Any, ...] | None]
              ) -> dict[tuple[Any, ...], list[float]]:
        """metric values grouped by key(row) (rows without the metric or key are left out)."""
        out: dict[tuple[Any, ...], list[float]] = defaultdict(list)
        for r in rows:
            k = key(r)
            v = r.metrics.get(metric)
            if k is None or v is None or not math.isfinite(float(v)):
                continue
            out[k].append(float(v))
        return dict(out)

    def means(self, rows: Iterable[TrialRow], metric: str,
              key: Callable[[TrialRow], tuple[Any, ...] | None]) -> dict[tuple[Any, ...], float]:
        return {k: statistics.fmean(v) for k, v in self.cells(rows, metric, key).items()}

    def shapers(self) -> set[str]:
        """The shaping qdiscs in force in these trials ('tbf', 'netem')."""
        kinds = set()
        for r in self.rows:
            for q in r.qdiscs or []:
                if isinstance(q, dict) and q.get("kind") in ("tbf", "netem"):
                    kinds.add(str(q["kind"]))
        return kinds

    def serialization_reason(self) -> str:
        """NO_SERIALIZATION when the links were shaped by tbf only, else ''."""
        s = self.shapers()
        return NO_SERIALIZATION if "tbf" in s and "netem" not in s else ""


def _frac(n: int, d: int) -> str:
    return f"{n}/{d}"


def _mbps(v: float) -> str:
    return f"{v / 1e6:.2f}"


def _rel(a: float, b: float) -> float:
    """Relative difference of a to b (a/b - 1)."""
    return a / b - 1.0 if b else math.inf


# --- gamess-morales --------------------------------------------------------------------------


def _gm_throughput(d: Data, *, exclude_limited: bool = True) -> dict[tuple[Any, ...], float]:
    """(rate bit/s, ip, ip_payload) -> mean zero-loss throughput (bit/s of IP payload)."""
    rows = [r for r in d.select("rfc2544") if not (exclude_limited and
                                                   r.metrics.get("generator_limited"))]
    return d.means(rows, "throughput_bps",
                   lambda r: (rate_bps(r), int(param(r, "ip")), size_of(r)))


def _gm_limited(d: Data) -> set[tuple[Any, ...]]:
    return {(rate_bps(r), int(param(r, "ip")), size_of(r)) for r in d.select("rfc2544")
            if r.metrics.get("generator_limited")}


def _gm_owd(d: Data) -> dict[tuple[Any, ...], float]:
    """(rate, routers, ip, ip_payload) -> mean of the median OWD (µs)."""
    return d.means(d.select("pingpong"), "owd_median_us",
                   lambda r: (rate_bps(r), int(r.point.get("topology.routers", 0)),
                              int(param(r, "ip")), size_of(r)))


def gm_1(d: Data) -> Outcome:
    thr, owd = _gm_throughput(d), _gm_owd(d)
    t_cells = [(k, thr[k], thr[(k[0], 6, k[2])]) for k in thr
               if k[1] == 4 and (k[0], 6, k[2]) in thr]
    o_cells = [(k, owd[k], owd[(k[0], k[1], 6, k[3])]) for k in owd
               if k[2] == 4 and (k[0], k[1], 6, k[3]) in owd]
    if not t_cells and not o_cells:
        return _not_measured("IPv4 and IPv6 throughput or OWD at equal payloads")
    t_ok = sum(a > b for _, a, b in t_cells)
    o_ok = sum(a < b for _, a, b in o_cells)
    ev = (f"throughput IPv4 > IPv6 in {_frac(t_ok, len(t_cells))} cells" if t_cells else
          "throughput: no equal payload of both versions that the sender could offer")
    ev += f", OWD IPv4 < IPv6 in {_frac(o_ok, len(o_cells))} cells (equal payload)"
    if o_cells:
        med = statistics.median(b - a for _, a, b in o_cells)
        ev += f"; median OWD gap IPv6 − IPv4 {med:+.1f} µs"
    return _verdict(t_ok == len(t_cells) and o_ok == len(o_cells), ev, d.serialization_reason())


def _sawtooth(d: Data, ip: int, rate: float, knee: int, second: int | None,
              peak_mbps: float | None) -> Outcome:
    thr = {k[2]: v for k, v in _gm_throughput(d).items() if k[0] == rate and k[1] == ip}
    if knee not in thr or knee + 1 not in thr:
        have = ", ".join(str(n) for n in sorted(thr)) or "none"
        return _not_measured(f"IPv{ip} throughput at {knee} and {knee + 1} B at "
                             f"{rate_name(rate)} (have: {have})")
    below = [thr[n] for n in sorted(thr) if n <= knee]
    rises = all(b >= a * (1 - 0.002) for a, b in itertools.pairwise(below))
    falls = thr[knee + 1] < thr[knee]
    parts = [f"{n} B {_mbps(v)}" for n, v in sorted(thr.items())]
    ok = rises and falls
    ev = (f"IPv{ip} at {rate_name(rate)} (Mbit/s): {', '.join(parts)}; rises to {knee}: "
          f"{'yes' if rises else 'no'}; falls at {knee + 1}: {'yes' if falls else 'no'}")
    if second is not None:
        if second in thr and second - 1 in thr:
            again = thr[second] < thr[second - 1]
            ok = ok and again
            ev += f"; falls again at {second}: {'yes' if again else 'no'}"
        else:
            ev += f"; fall at {second} not measured"
    if peak_mbps is not None:
        peak = max(thr.values()) / 1e6
        close = abs(peak / peak_mbps - 1) <= 0.02
        ok = ok and close
        ev += f"; peak {peak:.2f} vs paper {peak_mbps:.2f} Mbit/s"
    return _verdict(ok, ev)


def gm_2(d: Data) -> Outcome:
    return _sawtooth(d, 4, 10e6, 1480, 2961, 9.62)


def gm_3(d: Data) -> Outcome:
    return _sawtooth(d, 6, 10e6, 1460, 2901, 9.49)


def gm_4(d: Data) -> Outcome:
    v4 = _sawtooth(d, 4, 100e6, 1480, None, None)
    v6 = _sawtooth(d, 6, 100e6, 1460, None, None)
    if v4.status == "not measured" and v6.status == "not measured":
        return _not_measured("throughput at 100 Mbit/s around 1480/1460 B")
    thr = _gm_throughput(d)
    pairs = [(thr[k], thr[(k[0], 6, k[2])]) for k in thr
             if k[0] == 100e6 and k[1] == 4 and (k[0], 6, k[2]) in thr]
    above = sum(a > b for a, b in pairs)
    ok = (v4.status != "does not hold" and v6.status != "does not hold"
          and above == len(pairs))
    return _verdict(ok, f"{v4.evidence} | {v6.evidence} | IPv4 > IPv6 in "
                        f"{_frac(above, len(pairs))} equal payloads")


def gm_5(d: Data) -> Outcome:
    thr = _gm_throughput(d, exclude_limited=False)
    limited = _gm_limited(d)
    if not thr:
        return _not_measured("zero-loss throughput (rfc2544) at a shaped rate")
    worst: tuple[float, tuple[float, int, int] | None] = (0.0, None)
    slow: list[str] = []
    gig_small: list[tuple[int, int, float, bool]] = []
    gig_large: list[tuple[int, int, float, bool]] = []
    for (rate, ip, n), v in thr.items():
        if rate is None or n is None:
            continue
        ratio = v / models.max_throughput_bps(n, rate, ip)
        if rate >= 1e9:
            (gig_small if n <= 100 else gig_large).append((ip, n, ratio, (rate, ip, n) in limited))
        elif (rate, ip, n) in limited:  # measures the sender, not the path: shown, not judged
            slow.append(f"v{ip} {n} B at {rate_name(rate)} {ratio:.2f}")
        elif abs(ratio - 1) >= abs(worst[0] - 1) or worst[1] is None:
            worst = (ratio, (rate, ip, n))
    ok = True
    parts = []
    if worst[1] is not None:
        rate, ip, n = worst[1]
        ok = abs(worst[0] - 1) <= CLOSE
        parts.append(f"10/100 Mbit/s: worst measured/model {worst[0]:.3f} "
                     f"(IPv{ip} {n} B at {rate_name(rate)})")
    reason = ""
    if slow:
        parts.append("not judged, generator-limited: " + ", ".join(slow))
    for label, cells in (("small (≤100 B)", gig_small), ("larger", gig_large)):
        if cells:
            txt = ", ".join(f"v{ip} {n} B {r:.2f}{'*' if lim else ''}"
                            for ip, n, r, lim in sorted(cells))
            parts.append(f"1 Gbit/s {label}: {txt}")
    if gig_large and any(abs(r - 1) > CLOSE for _, _, r, _ in gig_large):
        ok = False
        if any(lim for *_, lim in gig_large):
            reason = GENERATOR
    if worst[1] is None and not gig_small and not gig_large:
        return _not_measured("a throughput cell the sender could offer (all generator-limited)")
    if gig_small or gig_large:
        parts.append("* = generator-limited")
    else:
        parts.append("1 Gbit/s not measured")
    return _verdict(ok, "; ".join(parts), reason)


def _gm_net_owd(d: Data) -> dict[tuple[Any, ...], float]:
    """(rate, routers, ip, payload) -> OWD less the probe's own loopback cost (µs), at the
    paper's two rates: what equation (10) describes."""
    owd = _gm_owd(d)
    over = d.means(d.select("pingpong"), "probe_overhead_median_us",
                   lambda r: (rate_bps(r), int(r.point.get("topology.routers", 0)),
                              int(param(r, "ip")), size_of(r)))
    # on a busy machine the probe's median cost can exceed the OWD's: never below zero
    return {k: max(0.0, v - over.get(k, 0.0)) for k, v in owd.items()
            if k[0] in (10e6, 100e6) and k[3] is not None}


def fit_pi(net: dict[tuple[Any, ...], float]) -> float | None:
    """The per-link cost π (s) that fits equation (9) to these cells best (least squares), as
    the paper fitted its own π = 30 µs: measured - model(π = 0) = (routers + 1) · π."""
    num = den = 0.0
    for (rate, routers, ip, n), v in net.items():
        links = routers + 1
        num += links * (v * 1e-6 - models.owd(n, rate, ip, routers, propagation_s=0.0))
        den += links * links
    return num / den if den else None


def gm_6(d: Data) -> Outcome:
    net = _gm_net_owd(d)
    pi = fit_pi(net)
    if pi is None:
        return _not_measured("OWD at 10 or 100 Mbit/s")
    cells = []
    for (rate, routers, ip, n), v in net.items():
        model = models.owd(n, rate, ip, routers, propagation_s=max(pi, 0.0)) * 1e6
        cells.append((abs(v - model) <= max(0.10 * model, 10.0), rate, routers, ip, n, v, model))
    close = sum(c[0] for c in cells)
    worst = max(cells, key=lambda c: abs(c[5] / c[6] - 1) if c[6] else 0.0)
    ev = (f"π fitted here {pi * 1e6:.1f} µs per link (the paper fitted "
          f"{models.DEFAULT_PROPAGATION_S * 1e6:.0f} µs); with it, within 10 % (or 10 µs) of "
          f"eq. (10) in {_frac(close, len(cells))} cells, less the probe's loopback cost; worst "
          f"IPv{worst[3]} {worst[4]} B, {worst[2]} routers at {rate_name(worst[1])}: "
          f"{worst[5]:.0f} µs vs model {worst[6]:.0f} µs")
    return _verdict(close == len(cells) and pi >= 0, ev, d.serialization_reason())


def gm_7(d: Data) -> Outcome:
    owd = _gm_owd(d)
    pi = fit_pi(_gm_net_owd(d))
    series: dict[tuple[Any, ...], dict[int, float]] = defaultdict(dict)
    for (rate, routers, ip, n), v in owd.items():
        if rate is not None and n is not None:
            series[(rate, ip, n)][routers] = v
    fits = []
    for (rate, ip, n), pts in series.items():
        if len(pts) < 3:
            continue
        xs = sorted(pts)
        ys = [pts[x] for x in xs]
        slope, r2 = _linfit(xs, ys)
        prop = max(pi, 0.0) if pi is not None else models.DEFAULT_PROPAGATION_S
        model = (models.owd(n, rate, ip, 1, propagation_s=prop)
                 - models.owd(n, rate, ip, 0, propagation_s=prop)) * 1e6
        fits.append((rate, ip, n, slope, r2, model))
    if not fits:
        return _not_measured("OWD at three or more router counts for one payload")
    ok_fits = [f for f in fits if f[4] >= 0.9 and abs(f[3] / f[5] - 1) <= 0.25]
    worst = min(fits, key=lambda f: f[3] / f[5])
    where = f"π fitted here {pi * 1e6:.1f} µs" if pi is not None else "the paper's π"
    ev = (f"linear (R² ≥ 0.9) with slope within 25 % of TTFS(m)+π ({where}) in "
          f"{_frac(len(ok_fits), len(fits))} series; e.g. IPv{worst[1]} {worst[2]} B at "
          f"{rate_name(worst[0])}: {worst[3]:.1f} µs/router (R² {worst[4]:.2f}) vs model "
          f"{worst[5]:.1f}")
    return _verdict(len(ok_fits) == len(fits), ev, d.serialization_reason())


def _linfit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope and R² of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    slope = sxy / sxx if sxx else 0.0
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else 0.0
    return slope, r2


def gm_8(d: Data) -> Outcome:
    owd = _gm_owd(d)
    cells = [(owd[k], owd[(k[0], k[1], 6, k[3])]) for k in owd
             if k[2] == 4 and (k[0], k[1], 6, k[3]) in owd]
    if not cells:
        return _not_measured("IPv4 and IPv6 OWD at equal payloads")
    above = sum(b > a for a, b in cells)
    med = statistics.median(b - a for a, b in cells)
    return _verdict(above == len(cells),
                    f"IPv6 OWD above IPv4 in {_frac(above, len(cells))} cells; median gap "
                    f"{med:+.1f} µs", d.serialization_reason())


def gm_9(d: Data) -> Outcome:
    thr = _gm_throughput(d, exclude_limited=False)
    ratios = [(v / models.max_throughput_bps(n, rate, ip), rate, ip, n)
              for (rate, ip, n), v in thr.items() if rate is not None and n is not None]
    if not ratios:
        return _not_measured("zero-loss throughput (rfc2544) at a shaped rate")
    top = max(ratios)
    over = sum(r > 1.01 for r, *_ in ratios)
    return _verdict(over == 0, f"measured ≤ model (+1 % tolerance) in "
                               f"{_frac(len(ratios) - over, len(ratios))} cells; highest "
                               f"measured/model {top[0]:.3f} (IPv{top[2]} {top[3]} B at "
                               f"{rate_name(top[1])})")


# --- quintero-2016 ---------------------------------------------------------------------------

NATIVE4, NATIVE6, SIXTOFOUR, ISATAP, TAYGA, JOOL = (
    "native4", "native6", "6to4", "isatap", "nat64-tayga", "nat64-jool")
TUNNELS = (SIXTOFOUR, ISATAP)


def _mechs(d: Data, kind: str, protocol: str, metric: str
           ) -> dict[tuple[Any, ...], dict[str, float]]:
    """(rate, size) -> {mechanism (topology): mean metric}."""
    rows = [r for r in d.select(kind) if param(r, "protocol") == protocol]
    out: dict[tuple[Any, ...], dict[str, float]] = defaultdict(dict)
    for (topo, rate, size), v in d.means(
            rows, metric, lambda r: (r.point.get("topology"), rate_bps(r), size_of(r))).items():
        out[(rate, size)][str(topo)] = v
    return dict(out)


def _owd_cells(d: Data, protocols: Sequence[str] = ("udp", "tcp")
               ) -> list[tuple[str, float | None, int, dict[str, float]]]:
    out = []
    for proto in protocols:
        for (rate, size), m in _mechs(d, "pingpong", proto, "owd_median_us").items():
            out.append((proto, rate, size, m))
    return out


def _thr_cells(d: Data) -> list[tuple[str, float | None, int, dict[str, float]]]:
    return [("udp", rate, size, m)
            for (rate, size), m in _mechs(d, "iperf3", "udp", "receiver_bps").items()]


def _best(m: Mapping[str, float], higher_better: bool) -> str:
    return max(m, key=lambda k: m[k]) if higher_better else min(m, key=lambda k: m[k])


def qu_1(d: Data) -> Outcome:
    best4 = close6 = n = 0
    for cells, higher_better in ((_owd_cells(d), False), (_thr_cells(d), True)):
        for *_, m in cells:
            if NATIVE4 not in m or NATIVE6 not in m:
                continue
            n += 1
            best4 += _best(m, higher_better) == NATIVE4
            close6 += abs(m[NATIVE6] / m[NATIVE4] - 1) <= 0.10
    if not n:
        return _not_measured("native IPv4 and native IPv6 in the same cells")
    ok = best4 >= MOST * n and close6 >= MOST * n
    return _verdict(ok, f"native IPv4 best in {_frac(best4, n)} cells (OWD and throughput); "
                        f"native IPv6 within 10 % of it in {_frac(close6, n)}",
                    d.serialization_reason())


def qu_2(d: Data) -> Outcome:
    similar = lowest = n = 0
    for cells, worse_is_higher in ((_owd_cells(d), True), (_thr_cells(d), False)):
        for *_, m in cells:
            if not all(t in m for t in TUNNELS) or len(m) < 3:
                continue
            n += 1
            a, b = m[SIXTOFOUR], m[ISATAP]
            similar += abs(a - b) <= 0.10 * max(a, b)
            others = [v for k, v in m.items() if k not in TUNNELS]
            if worse_is_higher:
                lowest += min(a, b) >= max(others)
            else:
                lowest += max(a, b) <= min(others)
    if not n:
        return _not_measured("6to4 and ISATAP beside other mechanisms")
    ok = similar >= MOST * n and lowest >= MOST * n
    return _verdict(ok, f"6to4 ≈ ISATAP (within 10 %) in {_frac(similar, n)} cells; both "
                        f"worst of all in {_frac(lowest, n)}", d.serialization_reason())


def qu_3(d: Data) -> Outcome:
    cells = [m for _, rate, _, m in _owd_cells(d, ("tcp",))
             if rate == 10e6 and all(t in m for t in TUNNELS) and len(m) >= 3]
    if not cells:
        return _not_measured("TCP OWD at 10 Mbit/s with 6to4, ISATAP and another mechanism")
    top = sum(set(sorted(m, key=lambda k: -m[k])[:2]) == set(TUNNELS) for m in cells)
    return _verdict(top >= MOST * len(cells),
                    f"6to4 and ISATAP the two highest TCP OWDs in {_frac(top, len(cells))} "
                    "payloads at 10 Mbit/s", d.serialization_reason())


def qu_4(d: Data) -> Outcome:
    cells = [m for *_, m in _owd_cells(d) if TAYGA in m and JOOL in m]
    if not cells:
        return _not_measured("OWD through both NAT64 translators (TAYGA and Jool)")
    similar = sum(abs(m[JOOL] / m[TAYGA] - 1) <= 0.20 for m in cells)
    lower = sum(m[JOOL] < m[TAYGA] for m in cells)
    med = statistics.median(m[JOOL] / m[TAYGA] for m in cells)
    ok = similar >= MOST * len(cells) and lower > len(cells) / 2
    return _verdict(ok, f"Jool within 20 % of TAYGA in {_frac(similar, len(cells))} cells, "
                        f"lower in {_frac(lower, len(cells))}; median Jool/TAYGA {med:.2f}")


def qu_5(d: Data) -> Outcome:
    cells = [m for _, rate, _, m in _owd_cells(d)
             if rate == 10e6 and NATIVE6 in m and (TAYGA in m or JOOL in m)]
    if not cells:
        return _not_measured("OWD at 10 Mbit/s of native IPv6 and a NAT64")
    lower = sum(all(m[t] < m[NATIVE6] for t in (TAYGA, JOOL) if t in m) for m in cells)
    return _verdict(lower >= MOST * len(cells),
                    f"NAT64 OWD below native IPv6 in {_frac(lower, len(cells))} cells at 10 Mbit/s",
                    d.serialization_reason())


def qu_6(d: Data) -> Outcome:
    cells = [(size, m) for _, rate, size, m in _owd_cells(d, ("udp",))
             if rate == 100e6 and NATIVE4 in m and NATIVE6 in m]
    if not cells:
        return _not_measured("UDP OWD at 100 Mbit/s of native IPv4 and IPv6")
    order = 0
    for _, m in cells:
        tun = [m[t] for t in TUNNELS if t in m]
        order += m[NATIVE4] < m[NATIVE6] and all(m[NATIVE6] < t for t in tun)
    ok = order >= MOST * len(cells)
    tunnels = any(t in m for _, m in cells for t in TUNNELS)
    ev = (f"IPv4 < IPv6{' < tunnels' if tunnels else ' (no tunnel measured)'} in "
          f"{_frac(order, len(cells))} payloads at 100 Mbit/s")
    big = [(s, m) for s, m in cells if s > 1750 and TAYGA in m and JOOL in m]
    if big:
        high = sum(m[TAYGA] > 1.5 * m[JOOL] for _, m in big)
        ok = ok and high > 0
        ev += f"; TAYGA > 1.5 × Jool above 1750 B in {_frac(high, len(big))} payloads"
    else:
        ev += "; TAYGA vs Jool above 1750 B not measured"
    return _verdict(ok, ev, d.serialization_reason())


def qu_7(d: Data) -> Outcome:
    cells = {(rate, size): m for _, rate, size, m in _owd_cells(d, ("tcp",))}
    ratios = []
    same_top = n = 0
    for (rate, size), slow in cells.items():
        fast = cells.get((100e6, size))
        if rate != 10e6 or fast is None:
            continue
        common = [k for k in slow if k in fast]
        if not common:
            continue
        n += 1
        ratios += [slow[k] / fast[k] for k in common]
        same_top += max(common, key=lambda k: slow[k]) == max(common, key=lambda k: fast[k])
    if not ratios:
        return _not_measured("TCP OWD at both 10 and 100 Mbit/s")
    med = statistics.median(ratios)
    ok = 5 <= med <= 15 and same_top >= MOST * n
    return _verdict(ok, f"median OWD(10 Mbit/s)/OWD(100 Mbit/s) {med:.1f} (5–15 accepted); "
                        f"same highest mechanism in {_frac(same_top, n)} payloads",
                    d.serialization_reason())


def _thr_shape(m: Mapping[str, float]) -> bool:
    """IPv4 ≥ everything; IPv6 ≥ tunnels; tunnels similar; Jool ≈ TAYGA (10 %)."""
    ok = all(m[NATIVE4] >= v * 0.99 for v in m.values())
    if NATIVE6 in m:
        ok = ok and all(m[NATIVE6] >= m[t] * 0.99 for t in TUNNELS if t in m)
    if all(t in m for t in TUNNELS):
        ok = ok and abs(m[SIXTOFOUR] - m[ISATAP]) <= 0.10 * max(m[SIXTOFOUR], m[ISATAP])
    if TAYGA in m and JOOL in m:
        ok = ok and abs(m[TAYGA] - m[JOOL]) <= 0.10 * max(m[TAYGA], m[JOOL])
    return ok


def _qu_thr(d: Data, rate: float) -> tuple[int, int, dict[int, dict[str, float]]]:
    cells = {size: m for _, r, size, m in _thr_cells(d) if r == rate and NATIVE4 in m
             and len(m) >= 2}
    return sum(_thr_shape(m) for m in cells.values()), len(cells), cells


MIXED_CLOCKS = ("the mechanisms' throughput was measured on different clocks: some on the "
                "host's real CPUs, some in the one-vCPU virtual-clock guest, where iperf3 -b 0 "
                "shares its one CPU with the router and the receiver (CPU-bound at 100 Mbit/s)")


def _thr_clocks_reason(d: Data) -> str:
    """MIXED_CLOCKS when the UDP throughput rows come from more than one clock, else ''."""
    rows = [r for r in d.select("iperf3") if param(r, "protocol") == "udp"]
    kinds = {results.clock_kind(r.result.get("clock")) or "real" for r in rows}
    return MIXED_CLOCKS if len(kinds) > 1 else ""


def qu_8(d: Data) -> Outcome:
    good, n, _ = _qu_thr(d, 10e6)
    if not n:
        return _not_measured("UDP throughput at 10 Mbit/s of native IPv4 and another mechanism")
    return _verdict(good >= MOST * n, f"paper's ordering holds in {_frac(good, n)} payloads "
                                      "at 10 Mbit/s", _thr_clocks_reason(d))


def qu_9(d: Data) -> Outcome:
    good, n, fast = _qu_thr(d, 100e6)
    if not n:
        return _not_measured("UDP throughput at 100 Mbit/s of native IPv4 and another mechanism")
    _, _, slow = _qu_thr(d, 10e6)
    ratios = [fast[s][k] / slow[s][k] for s in fast if s in slow
              for k in fast[s] if k in slow[s] and slow[s][k] > 0]
    ok = good >= MOST * n
    ev = f"paper's ordering holds in {_frac(good, n)} payloads at 100 Mbit/s"
    if ratios:
        med = statistics.median(ratios)
        ok = ok and 7 <= med <= 13
        ev += f"; median throughput ratio 100/10 Mbit/s {med:.1f} (7–13 accepted)"
    else:
        ev += "; ratio to 10 Mbit/s not measured"
    return _verdict(ok, ev, _thr_clocks_reason(d))


def qu_10(d: Data) -> Outcome:
    cells = [(size, m) for *_, size, m in _owd_cells(d) if TAYGA in m and JOOL in m]
    big = [(s, m) for s, m in cells if s > 1750]
    if not big:
        return _not_measured("OWD of TAYGA and Jool above 1750 B")
    anomaly = sum(m[TAYGA] > 1.5 * m[JOOL] for _, m in big)
    jool_ok = sum(m[JOOL] <= m[TAYGA] * 1.05 for _, m in big)
    udp_slow = [s for s, m in ((s, m) for _, _, s, m in _owd_cells(d, ("udp",))
                               if TAYGA in m and JOOL in m and s > 1750)
                if m[JOOL] > m[TAYGA] * 1.05]
    return _verdict(jool_ok == len(big),
                    f"Jool ≤ TAYGA (+5 %) in {_frac(jool_ok, len(big))} payloads above 1750 B; "
                    f"TAYGA anomaly (> 1.5 × Jool) in {_frac(anomaly, len(big))}",
                    JOOL_REASSEMBLES if udp_slow else "")


JOOL_REASSEMBLES = ("Jool translates behind the kernel's IPv6 defragmentation: a fragmented UDP "
                    "datagram is reassembled on the router before it is translated, while TAYGA "
                    "translates each fragment as it arrives; Jool's UDP OWD above the MTU is "
                    "about one fragment's serialization higher (docs/transition.md)")


def _cross_os(_: Data) -> Outcome:
    return Outcome("not measurable here", "", "the emulator runs Linux only; other operating "
                   "systems' stacks are not emulated")


# --- gometz-2015 -----------------------------------------------------------------------------


def _go_series(d: Data) -> tuple[str, dict[tuple[Any, ...], list[float]]]:
    """The paper's throughput (iperf TCP, write length = frame size), else RFC 2544's."""
    tcp = [r for r in d.select("iperf3") if param(r, "protocol") == "tcp"]
    if tcp:
        return "iperf TCP", d.cells(tcp, "receiver_bps",
                                    lambda r: (int(param(r, "ip")), size_of(r)))
    return "RFC 2544", d.cells(d.select("rfc2544"), "throughput_bps",
                               lambda r: (int(param(r, "ip")), size_of(r)))


def go_1(d: Data) -> Outcome:
    from testbed.stats import welch_t

    label, thr = _go_series(d)
    lat = d.cells(d.select("ping"), "rtt_mean_ms", lambda r: (int(param(r, "ip")), size_of(r)))
    sizes = sorted({k[1] for k in thr if (6, k[1]) in thr and (4, k[1]) in thr})
    lsizes = sorted({k[1] for k in lat if (6, k[1]) in lat and (4, k[1]) in lat})
    if not sizes and not lsizes:
        return _not_measured("IPv4 and IPv6 throughput or latency at equal frame sizes")
    signif = better4 = n = 0
    tests = []
    for series, higher_better, ss in ((thr, True, sizes), (lat, False, lsizes)):
        for s in ss:
            a, b = series[(4, s)], series[(6, s)]
            n += 1
            ma, mb = statistics.fmean(a), statistics.fmean(b)
            better4 += (ma > mb) if higher_better else (ma < mb)
            if len(a) >= 2 and len(b) >= 2 and (statistics.pstdev(a) or statistics.pstdev(b)):
                sig = welch_t(a, b).significant_at_0_05
                tests.append("t")
            else:
                sig = abs(_rel(ma, mb)) > CLOSE
                tests.append("rel")
            signif += sig
    how = ("Welch t, p < 0.05" if all(t == "t" for t in tests)
           else f"Welch t where ≥ 2 repetitions, else |diff| > {CLOSE:.0%}")
    ok = signif == 0 and better4 > n / 2
    return _verdict(ok, f"{label} throughput and ping RTT: significant IPv4/IPv6 difference "
                        f"({how}) in {_frac(signif, n)} frame sizes; IPv4 better in "
                        f"{_frac(better4, n)}")


def go_2(d: Data) -> Outcome:
    label, thr = _go_series(d)
    spread = {k: max(v) - min(v) for k, v in thr.items() if len(v) >= 2}
    per_ip: dict[int, dict[int, float]] = defaultdict(dict)
    for (ip, s), v in spread.items():
        per_ip[ip][s] = v
    if not per_ip or any(len(v) < 2 for v in per_ip.values()):
        return _not_measured(f"{label} throughput with ≥ 2 repetitions at ≥ 2 frame sizes")
    ok = True
    parts = []
    for ip, by in sorted(per_ip.items()):
        small, large = by[min(by)], by[max(by)]
        ok = ok and large > small
        parts.append(f"IPv{ip} spread {min(by)} B {_mbps(small)}, {max(by)} B "
                     f"{_mbps(large)} Mbit/s")
    if 4 in per_ip and 6 in per_ip:
        s4, s6 = sum(per_ip[4].values()), sum(per_ip[6].values())
        ok = ok and s6 > s4
        parts.append(f"total spread IPv6 {_mbps(s6)} vs IPv4 {_mbps(s4)} Mbit/s")
    return _verdict(ok, f"{label}: " + "; ".join(parts))


def go_3(d: Data) -> Outcome:
    label, thr = _go_series(d)
    sizes = sorted({s for ip, s in thr if ip == 4 and (6, s) in thr})
    if not sizes:
        return _not_measured("IPv4 and IPv6 throughput at equal frame sizes")
    diffs = [(s, _rel(statistics.fmean(thr[(4, s)]), statistics.fmean(thr[(6, s)])))
             for s in sizes]
    ge = sum(r >= 0 for _, r in diffs)
    big = max(diffs, key=lambda x: abs(x[1]))
    ok = ge > len(diffs) / 2 and abs(big[1]) <= CLOSE
    return _verdict(ok, f"{label}: IPv4 ≥ IPv6 in {_frac(ge, len(diffs))} frame sizes; largest "
                        f"difference {big[1]:+.1%} at {big[0]} B")


def go_4(d: Data) -> Outcome:
    rows = d.select("ping")
    mean = d.means(rows, "rtt_mean_ms", lambda r: (int(param(r, "ip")), size_of(r)))
    worst = d.means(rows, "rtt_max_ms", lambda r: (int(param(r, "ip")), size_of(r)))
    by: dict[int, dict[int, float]] = defaultdict(dict)
    for (ip, s), v in mean.items():
        by[ip][s] = v
    if not by or any(len(v) < 2 for v in by.values()):
        return _not_measured("ping RTT at two or more frame sizes")
    ok = True
    parts = []
    for ip, m in sorted(by.items()):
        rises = m[max(m)] > m[min(m)]
        ok = ok and rises
        parts.append(f"IPv{ip} mean RTT {min(m)} B {m[min(m)] * 1000:.0f} µs → {max(m)} B "
                     f"{m[max(m)] * 1000:.0f} µs")
    common = sorted(set(by.get(4, {})) & set(by.get(6, {})))
    if common:
        anom = {ip: sum(worst[(ip, s)] - mean[(ip, s)] for s in common) for ip in (4, 6)}
        lower4 = sum(by[4][s] < by[6][s] for s in common)
        ok = ok and anom[6] > anom[4] and 0 < lower4 < len(common)
        parts.append(f"anomalies (max − mean, summed) IPv6 {anom[6] * 1000:.0f} µs vs IPv4 "
                     f"{anom[4] * 1000:.0f} µs; IPv4 lower in {_frac(lower4, len(common))} sizes")
    else:
        parts.append("IPv4 vs IPv6 not measured")
    return _verdict(ok, "; ".join(parts))


def go_5(d: Data) -> Outcome:
    """The paper's frame loss test: steps of 10 % down from the measured throughput, all 0 %.
    Ours steps down from line rate (RFC 2544 §26.3); the steps at or below the measured
    throughput are the paper's test, those above it are shown but not judged."""
    series: list[tuple[TrialRow, list[dict[str, Any]]]] = []
    for row in d.select("rfc2544"):
        steps = row.result.get("frame_loss")
        if isinstance(steps, list) and steps and "throughput_bps" in row.metrics:
            series.append((row, steps))
    if not series:
        return _not_measured("an RFC 2544 throughput and frame loss test (rfc2544 with "
                             "test = both)")
    judged = [(r, p) for r, s in series for p in s
              if float(p["offered"]) <= float(r.metrics["throughput_bps"]) * 1.0001
              and not p.get("generator_short")]
    if not judged:
        return _not_measured("a frame loss step at or below the measured throughput (rfc2544 "
                             "with test = both steps down until two steps lose nothing)")
    lossy = [(r, p) for r, p in judged if float(p["loss_percent"]) > 0]
    above = sum(any(float(p["offered"]) > float(r.metrics["throughput_bps"]) * 1.0001
                    and float(p["loss_percent"]) > 0 for p in s) for r, s in series)
    ev = (f"{len(judged) - len(lossy)}/{len(judged)} steps at or below the measured "
          f"throughput lost nothing ({len(series)} series); above it (line rate down, "
          f"RFC 2544 §26.3) {_frac(above, len(series))} series lost frames")
    if lossy:
        r, p = max(lossy, key=lambda x: float(x[1]["loss_percent"]))
        ev += (f"; worst {float(p['loss_percent']):.1f} % at {_mbps(float(p['offered']))} "
               f"Mbit/s (IPv{param(r, 'ip')} {size_of(r)} B)")
    reason = ("frames were lost at a rate the throughput test had passed: the device is not "
              "steady at its own measured throughput")
    return _verdict(not lossy, ev, reason)


def _router_feature(missing: str) -> Callable[[Data], Outcome]:
    def check(_: Data) -> Outcome:
        return _not_measured(missing)
    return check


def _feature_claim(parts: Sequence[tuple[str, int]], what: str) -> Callable[[Data], Outcome]:
    """A go:6-go:9 claim from the featurecheck trials: holds when every (check, IP version)
    of `parts` works in every trial; "not measured" names the parts this tier could not build
    (IPsec and HFSC need the full-kernel tier) or that were not run."""

    def check(d: Data) -> Outcome:
        got: dict[tuple[str, int], list[str]] = {}
        for r in d.select("featurecheck"):
            res = r.result if isinstance(r.result, dict) else {}
            got.setdefault((str(res.get("feature")), int(res.get("ip", 0))), []).append(
                str(res.get("status")))
        if not any(k in got for k in parts):
            return _not_measured(f"featurecheck trials of {what}")
        ev, failing, missing = [], [], []
        for check_name, ip in parts:
            st = got.get((check_name, ip), [])
            label = f"{check_name} IPv{ip}"
            if not st or all(x == "not supported" for x in st):
                missing.append(label)
                continue
            st = [x for x in st if x != "not supported"]  # another tier could build it
            n_ok = st.count("works")
            ev.append(f"{label}: {n_ok}/{len(st)} work")
            if n_ok < len(st):
                failing.append(label)
        evidence = "; ".join(ev)
        if failing:
            return _verdict(False, evidence, "failed its traffic check: " + ", ".join(failing))
        if missing:
            return Outcome("not measured", evidence, "not measured here: " + ", ".join(missing)
                           + " (not supported on this tier or not run; ipsec and qos-hfsc "
                           "need the full-kernel tier)")
        return _verdict(True, evidence)

    return check


def go_10(d: Data) -> Outcome:
    thr: dict[tuple[str, int], list[float]] = {}
    for r in d.select("routerprofile"):
        if "throughput_bps" in r.metrics:
            thr.setdefault((str(param(r, "profile")), int(param(r, "ip") or 4)), []).append(
                r.metrics["throughput_bps"])
    ev = []
    for (prof, ip), v in sorted(thr.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        base = thr.get(("plain", ip))
        if prof != "plain" and base:
            ev.append(f"IPv{ip} {prof}/plain throughput "
                      f"{statistics.fmean(v) / statistics.fmean(base):.2f}")
    return Outcome("not measurable here", "; ".join(ev), "VyOS and pfSense are not emulated "
                   "(Linux only); the analogue, router profiles (plain forwarding, conntrack, "
                   "firewall, NAT), is in the report's profile table"
                   + ("" if ev else " once the routerprofile measurement has run"))


# --- dobrinov-2016 ---------------------------------------------------------------------------


def _v6_share(row: TrialRow) -> float | None:
    ratio = param(row, "ratio")
    if ratio:
        try:
            a, b = (float(x) for x in str(ratio).split("/"))
        except ValueError:
            return None
        return b / (a + b) if a + b else None
    ip = param(row, "ip")
    return 1.0 if ip == 6 else 0.0 if ip == 4 else None


def _cpu(row: TrialRow) -> float | None:
    m = row.metrics
    if "cpu_machine_softirq_pct" not in m:
        return None
    return float(m["cpu_machine_softirq_pct"]) + float(m.get("cpu_machine_system_pct", 0.0))


def _do_mixed(d: Data, direction: str = "forward"
              ) -> tuple[dict[tuple[Any, ...], float], dict[tuple[Any, ...], float]]:
    """(frame_size, IPv6 share) -> (mean receiver bit/s, mean router-side CPU %): from the
    zero-loss searches (kind maxtraffic: the router's own CPU) when the senders limited none
    of them, else from iperf3's mixed flows (the machine's softirq + system share)."""
    best = [r for r in d.select("maxtraffic") if "max_received_bps" in r.metrics
            and (param(r, "direction") or "forward") == direction]
    if best and not any(r.metrics.get("generator_limited") for r in best):
        def mkey(r: TrialRow) -> tuple[Any, ...]:
            return (size_of(r), _v6_share(r))

        return (d.means(best, "max_received_bps", mkey), d.means(best, "router_cpu_pct", mkey))
    rows = [r for r in d.select("iperf3") if param(r, "protocol") == "udp"
            and (param(r, "direction") or "forward") == direction and param(r, "ratio")]
    def key(r: TrialRow) -> tuple[Any, ...]:
        return (size_of(r), _v6_share(r))

    traffic = d.means(rows, "receiver_bps", key)
    cpu: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for r in rows:
        c = _cpu(r)
        if c is not None:
            cpu[(size_of(r), _v6_share(r))].append(c)
    return traffic, {k: statistics.fmean(v) for k, v in cpu.items()}


def _by_size(cells: Mapping[tuple[Any, ...], float]) -> dict[Any, dict[float, float]]:
    out: dict[Any, dict[float, float]] = defaultdict(dict)
    for (size, share), v in cells.items():
        if share is not None:
            out[size][share] = v
    return dict(out)


def do_1(d: Data) -> Outcome:
    traffic, cpu = _do_mixed(d)
    t, c = _by_size(traffic), _by_size(cpu)
    sizes = [s for s in t if len(t[s]) >= 2 and s in c and len(c[s]) >= 2]
    if not sizes:
        return _not_measured("mixed IPv4/IPv6 traffic at two or more IPv6 shares, with CPU")
    ok = True
    parts = []
    for s in sorted(sizes):
        lo, hi = min(t[s]), max(t[s])
        more_cpu = c[s][hi] > c[s][lo]
        less = t[s][hi] < t[s][lo] * (1 - 0.01)
        ok = ok and more_cpu and less
        parts.append(f"{s} B: IPv6 {lo:.0%}→{hi:.0%}: CPU {c[s][lo]:.1f}→{c[s][hi]:.1f} %, "
                     f"traffic {_mbps(t[s][lo])}→{_mbps(t[s][hi])} Mbit/s")
    return _verdict(ok, "; ".join(parts), LINUX_ROUTER + " (the paper's Cisco 1841 was "
                    "CPU-bound; Linux forwards the offered load)")


def do_2(d: Data) -> Outcome:
    traffic, _ = _do_mixed(d)
    t = _by_size(traffic)
    if 1518 not in t or 1522 not in t:
        return _not_measured("mixed traffic at 1518 and 1522-byte frames (have: "
                             + (", ".join(str(s) for s in sorted(t)) or "none") + ")")
    shares = sorted(set(t[1518]) & set(t[1522]))
    drops = {sh: 1 - t[1522][sh] / t[1518][sh] for sh in shares}
    rises = all(all(t[a][sh] <= t[b][sh] * 1.01 for sh in shares if sh in t[a] and sh in t[b])
                for a, b in zip(sorted(t), sorted(t)[1:], strict=False) if b <= 1518)
    ok = rises and all(v > 0 for v in drops.values()) and (
        len(shares) < 2 or drops[max(shares)] > drops[min(shares)])
    txt = ", ".join(f"IPv6 {sh:.0%}: {v:.1%}" for sh, v in drops.items())
    return _verdict(ok, f"rises to 1518 B: {'yes' if rises else 'no'}; drop 1518→1522 {txt}",
                    LINUX_ROUTER)


def do_3(d: Data) -> Outcome:
    traffic, _ = _do_mixed(d)
    t = {s: v for s, v in _by_size(traffic).items() if len(v) >= 2 and 0.0 in v}
    if not t:
        return _not_measured("mixed traffic including pure IPv4 at two or more shares")
    ok = True
    parts = []
    for s, by in sorted(t.items()):
        order = [by[k] for k in sorted(by)]
        monotone = all(b <= a * 1.005 for a, b in itertools.pairwise(order))
        strict = order[-1] < order[0] * (1 - 0.01)
        ok = ok and monotone and strict
        parts.append(f"{s} B: " + ", ".join(f"IPv6 {k:.0%} {_mbps(v)}"
                                            for k, v in sorted(by.items())))
    return _verdict(ok, "; ".join(parts) + " Mbit/s", LINUX_ROUTER)


def do_4(d: Data) -> Outcome:
    _, cpu = _do_mixed(d)
    c = _by_size(cpu)
    if not c:
        return _not_measured("router CPU under mixed traffic")
    parts = []
    ok = True
    share_sizes = [s for s in c if len(c[s]) >= 2]
    for s in share_sizes:
        rises = c[s][max(c[s])] > c[s][min(c[s])]
        ok = ok and rises
        parts.append(f"{s} B: CPU IPv6 {min(c[s]):.0%} {c[s][min(c[s])]:.1f} % → "
                     f"{max(c[s]):.0%} {c[s][max(c[s])]:.1f} %")
    v4 = {s: by[0.0] for s, by in c.items() if 0.0 in by}
    if len(v4) >= 2:
        small, large = min(v4), max(v4)
        ok = ok and v4[small] > v4[large]
        parts.append(f"pure IPv4 CPU {small} B {v4[small]:.1f} % vs {large} B {v4[large]:.1f} %")
    else:
        parts.append("not measured: IPv4 CPU at two or more frame sizes")
    if not share_sizes and len(v4) < 2:
        return _not_measured("CPU at two IPv6 shares or two frame sizes")
    return _verdict(ok, "; ".join(parts), LINUX_ROUTER)


def do_5(d: Data) -> Outcome:
    traffic, _ = _do_mixed(d)
    t = _by_size(traffic)
    sizes = sorted(s for s in t if s is not None)
    if len(sizes) < 2:
        return _not_measured("traffic at two or more frame sizes")
    from testbed.measure.ping_tool import udp_data_size

    pps: dict[int, float] = {}
    for s in sizes:
        vals = [v / (8.0 * udp_data_size(int(s), 4 if sh < 0.5 else 6)) for sh, v in t[s].items()]
        pps[s] = statistics.fmean(vals)
    falls = all(pps[b] < pps[a] for a, b in itertools.pairwise(sizes))
    return _verdict(falls, "packets/s " + ", ".join(f"{s} B {pps[s]:.0f}" for s in sizes))


def do_7(d: Data) -> Outcome:
    uni_t, uni_c = _do_mixed(d)
    bi_t, bi_c = _do_mixed(d, "bidir")
    common = [k for k in bi_t if k in uni_t]
    if not common:
        return _not_measured("unidirectional and bidirectional mixed traffic at the same "
                             "frame size and share")
    ok = True
    parts = []
    for k in sorted(common):
        size, share = k
        per_dir = bi_t[k] / 2
        half = per_dir / max(v for kk, v in uni_t.items() if kk[0] == size)
        cpu_more = k in bi_c and k in uni_c and bi_c[k] > uni_c[k]
        mixed = share is not None and 0 < share < 1
        ok = ok and cpu_more and (not mixed or 0.35 <= half <= 0.65)
        parts.append(f"{size} B IPv6 {share:.0%}: CPU bidir {bi_c.get(k, math.nan):.1f} vs "
                     f"uni {uni_c.get(k, math.nan):.1f} %, per-direction traffic "
                     f"{half:.0%} of the unidirectional maximum")
    return _verdict(ok, "; ".join(parts), LINUX_ROUTER)


def do_9(d: Data) -> Outcome:
    rows = [r for r in d.select("receiver") if size_of(r) in (None, 1518)]

    def short(r: TrialRow) -> bool:  # the sender fell behind its schedule: its gaps, not the path's
        m = r.metrics
        return "sender_pps" in m and m["sender_pps"] < 0.95 * m.get("offered_pps", 0.0)

    slow = sorted({f"IPv{param(r, 'ip')} {param(r, 'rate')} "
                   f"({r.metrics['sender_pps']:.0f} of {r.metrics['offered_pps']:.0f} pps)"
                   for r in rows if short(r)})
    ipd: dict[tuple[Any, ...], float] = d.means(
        [r for r in rows if not short(r)], "ipd_mean_us",
        lambda r: (param(r, "rate"), int(param(r, "ip"))))
    # the mixed stream (kind load with ipd = true): one receiver for IPv4 and IPv6 at once
    loads = {0.1: "10mbit", 0.95: "95mbit"}
    mixed = [r for r in d.select("load") if "ipd_mean_us" in r.metrics
             and size_of(r) in (None, 1518) and param(r, "ratio") == "50/50"
             and float(param(r, "load") or 0) in loads]
    slow += sorted({f"50/50 at {float(param(r, 'load')):.0%} ({r.metrics['sender_pps']:.0f} of "
                    f"{r.metrics['offered_pps']:.0f} pps)" for r in mixed if short(r)})
    ipd.update(d.means([r for r in mixed if not short(r)], "ipd_mean_us",
                       lambda r: (loads[float(param(r, "load"))], "50/50")))
    if not ipd:
        if slow:
            return Outcome("not measured", "", "not measured: the sender fell short of the "
                           "offered rate in every trial: " + ", ".join(slow))
        return _not_measured("receiver inter-packet delay of 1518-byte frames")
    expect = {"10mbit": 1200.0, "95mbit": 120.0}
    ok = True
    parts = []
    for rate, target in expect.items():
        got = {ip: v for (r, ip), v in ipd.items() if str(r) == rate}
        if not got:
            parts.append(f"{rate} not measured")
            continue
        near = all(abs(v / target - 1) <= 0.10 for v in got.values())
        # IPv4 vs IPv6 at the same offered rate; the mixed stream (offered as a share of the
        # wire, not of IP payload) is judged by its nearness to the paper's delay only
        pure = [v for ip, v in got.items() if ip in (4, 6)]
        same = len(pure) < 2 or max(pure) <= min(pure) * (1 + CLOSE)
        ok = ok and near and same
        parts.append(f"{rate}: " + ", ".join(
            f"{'IPv' if ip in (4, 6) else ''}{ip} {v:.0f} µs"
            for ip, v in sorted(got.items(), key=lambda kv: str(kv[0])))
            + f" (paper ~{target:.0f} µs)")
    if all("not measured" in p for p in parts):
        return _not_measured("inter-packet delay at 10 or 95 Mbit/s")
    if slow:
        parts.append("not judged, sender short: " + ", ".join(slow))
    return _verdict(ok, "; ".join(parts), GENERATOR if slow else "")


def do_6(d: Data) -> Outcome:
    """Loss onset: the lowest offered load with loss above 0.1 %, IPv6 (0/100) vs IPv4 (100/0),
    per frame size, from the `load` sweep."""
    rows = [r for r in d.select("load") if param(r, "ratio") in ("100/0", "0/100")
            and (param(r, "direction") or "forward") == "forward"]
    if not rows:
        return _not_measured("an offered-load sweep (kind load) of pure IPv4 and pure IPv6")
    loss = d.means(rows, "loss_percent", lambda r: (size_of(r), param(r, "ratio"),
                                                    float(param(r, "load") or 0)))
    sizes = sorted({k[0] for k in loss if k[0] is not None})
    parts, ok, any_onset = [], True, False
    for s in sizes:
        onset: dict[str, float | None] = {}
        for ratio in ("100/0", "0/100"):
            loads = sorted(k[2] for k in loss if k[0] == s and k[1] == ratio)
            onset[ratio] = next((ld for ld in loads if loss[(s, ratio, ld)] > 0.1), None)
        if not all(any(k[0] == s and k[1] == r for k in loss) for r in onset):
            continue
        v4, v6 = onset["100/0"], onset["0/100"]
        any_onset = any_onset or v4 is not None or v6 is not None
        ok = ok and v6 is not None and (v4 is None or v6 < v4)
        parts.append(f"{s} B: IPv4 {'none' if v4 is None else f'{v4:.0%}'}, IPv6 "
                     f"{'none' if v6 is None else f'{v6:.0%}'}")
    if not parts:
        return _not_measured("loss at the same frame sizes for pure IPv4 and pure IPv6")
    ev = "loss onset (first load with > 0.1 % loss): " + "; ".join(parts)
    return _verdict(ok, ev, LINUX_ROUTER + (" (no loss up to the highest load offered: the "
                    "link, not the router, is the limit)" if not any_onset else ""))


def do_8(d: Data) -> Outcome:
    """One-way ANOVA of the outages of the two restart methods (5 each in the paper)."""
    from testbed import stats

    groups: dict[str, list[float]] = defaultdict(list)
    for r in d.select("reset"):
        ms = r.result.get("outages_ms") if isinstance(r.result, dict) else None
        if isinstance(ms, list):
            groups[str(param(r, "method"))].extend(float(v) for v in ms)
    if len(groups) < 2 or any(len(v) < 2 for v in groups.values()):
        return _not_measured("router restarts by two methods, two or more outages each "
                             "(kind reset)")
    names = sorted(groups)
    res = stats.anova([groups[n] for n in names])
    ev = (", ".join(f"{n}: {statistics.fmean(groups[n]):.1f} ms (n={len(groups[n])})"
                    for n in names)
          + f"; one-way ANOVA F={res.statistic:.2f}, p={res.pvalue:.3g} (paper: 67.3 vs "
          "66.86 s, p=0.168)")
    return _verdict(not res.significant_at_0_05, ev,
                    "restarting a namespace's links and rebuilding the namespace take "
                    "different kernel paths (link-state events vs new devices); the paper's "
                    "two resets both rebooted the same IOS")


def do_10(d: Data) -> Outcome:
    rows = d.select("icmpload")
    cpu = d.means(rows, "router_cpu_pct", lambda r: (int(param(r, "ip")),
                                                    float(param(r, "pps")), size_of(r)))
    if len({k[0] for k in cpu}) < 2:
        return _not_measured("ICMPv4 and ICMPv6 echo load on the router with its CPU "
                             "(kind icmpload)")
    ok, parts = True, []
    for ip in (4, 6):
        mine = {k[1:]: v for k, v in cpu.items() if k[0] == ip}
        rates = sorted({k[0] for k in mine})
        sizes = sorted({k[1] for k in mine if k[1] is not None})
        if len(rates) >= 2 and (rates[-1], sizes[-1]) in mine and (rates[0], sizes[-1]) in mine:
            up = mine[(rates[-1], sizes[-1])] > mine[(rates[0], sizes[-1])]
            ok = ok and up
            parts.append(f"ICMPv{ip} {sizes[-1]} B: {rates[0]:g}→{rates[-1]:g}/s CPU "
                         f"{mine[(rates[0], sizes[-1])]:.2f}→{mine[(rates[-1], sizes[-1])]:.2f} %")
        if len(sizes) >= 2 and (rates[-1], sizes[0]) in mine and (rates[-1], sizes[-1]) in mine:
            up = mine[(rates[-1], sizes[-1])] > mine[(rates[-1], sizes[0])]
            ok = ok and up
            parts.append(f"ICMPv{ip} {rates[-1]:g}/s: {sizes[0]}→{sizes[-1]} B CPU "
                         f"{mine[(rates[-1], sizes[0])]:.2f}→{mine[(rates[-1], sizes[-1])]:.2f} %")
    common = [k[1:] for k in cpu if k[0] == 4 and (6, *k[1:]) in cpu]
    if common:
        v4 = statistics.fmean(cpu[(4, *k)] for k in common)
        v6 = statistics.fmean(cpu[(6, *k)] for k in common)
        ok = ok and v6 < v4
        parts.append(f"mean over {len(common)} cells: ICMPv4 {v4:.2f} %, ICMPv6 {v6:.2f} % "
                     f"({_rel(v6, v4):+.0%}; paper −33 %)")
    return _verdict(ok, "; ".join(parts), LINUX_ROUTER)


def _acl_rows(d: Data) -> tuple[dict[tuple[Any, ...], float], dict[tuple[Any, ...], float]]:
    """(IPv6 share, rules (0 = none), apply) -> mean router CPU, and -> mean loss (%)."""
    rows = d.select("acl")

    def key(r: TrialRow) -> tuple[Any, ...]:
        rules = int(param(r, "rules") or 0) if param(r, "acl") is not False else 0
        return (_v6_share(r), rules, param(r, "apply") if rules else "-")

    return d.means(rows, "router_cpu_pct", key), d.means(rows, "loss_percent", key)


def do_11(d: Data) -> Outcome:
    cpu, _ = _acl_rows(d)
    shares = sorted({k[0] for k in cpu if k[0] is not None})
    if not shares or not any(k[1] == 0 for k in cpu) or not any(k[1] > 0 for k in cpu):
        return _not_measured("router CPU with and without ACLs (kind acl, acl = false too)")
    ok, parts = True, []
    for sh in shares:
        base = cpu.get((sh, 0, "-"))
        one, many = cpu.get((sh, 1, "in")), cpu.get((sh, 25, "in"))
        both = cpu.get((sh, 25, "both"))
        bits = [f"IPv6 {sh:.0%}: none {base:.2f}" if base is not None else f"IPv6 {sh:.0%}:"]
        if base is not None and many is not None:
            ok = ok and many > base
            bits.append(f"25 in {many:.2f}")
        if one is not None and many is not None:
            ok = ok and abs(many - one) < 2.0
            bits.append(f"1 in {one:.2f} (|25−1| {abs(many - one):.2f} points)")
        if both is not None and many is not None:
            ok = ok and both > many
            bits.append(f"25 both {both:.2f}")
        parts.append(", ".join(bits) + " %")
    return _verdict(ok, "router CPU: " + "; ".join(parts), LINUX_ROUTER)


def do_12(d: Data) -> Outcome:
    """At one offered load, an ACL "cuts the traffic" at an IPv6 share when every ACL set-up
    there loses more than 1 point more than no ACL (one odd trial cannot make it hold), and
    does not when none does."""
    _, loss = _acl_rows(d)
    base = {k[0]: v for k, v in loss.items() if k[1] == 0}
    if not base or not any(k[1] > 0 for k in loss):
        return _not_measured("traffic with and without ACLs at several IPv6 shares (kind acl)")
    ok, parts = True, []
    for sh in sorted(s for s in base if s is not None):
        cuts = [v - base[sh] for k, v in loss.items() if k[0] == sh and k[1] > 0]
        if not cuts:
            continue
        ok = ok and ((min(cuts) > 1.0) if sh >= 0.5 else (max(cuts) <= 1.0))
        parts.append(f"IPv6 {sh:.0%}: extra loss with an ACL {min(cuts):+.1f} to "
                     f"{max(cuts):+.1f} points ({len(cuts)} set-ups)")
    if not parts:
        return _not_measured("ACL and no-ACL traffic at the same IPv6 share")
    return _verdict(ok, "; ".join(parts) + " (paper: cuts only at ≥ 50 % IPv6)",
                    LINUX_ROUTER + " (the link, not the ACL, limits the traffic)")


def _exthdr_cpu(d: Data) -> dict[tuple[Any, ...], float]:
    """(variant, rule, pps) -> mean router CPU."""
    return d.means(d.select("exthdr"), "router_cpu_pct",
                   lambda r: (param(r, "variant"), bool(param(r, "rule")),
                              float(param(r, "pps"))))


def do_13(d: Data) -> Outcome:
    cpu = _exthdr_cpu(d)
    cells = [k for k in cpu if k[0] == "none"]
    if not cells or not any(k[0] in ("four", "dest20") for k in cpu):
        return _not_measured("IPv6 traffic with none, 4 and 20 extension headers (kind exthdr)")
    ok, parts = True, []
    for _, rule, pps in sorted(cells, key=lambda k: (k[2], k[1])):
        base = cpu[("none", rule, pps)]
        got = {v: cpu[(v, rule, pps)] for v in ("hbh", "four", "dest20")
               if (v, rule, pps) in cpu}
        if not got:
            continue
        costs = all(v > base for v in got.values())
        same = ("four" not in got or "dest20" not in got
                or abs(got["four"] - got["dest20"]) <= max(2.0, 0.25 * got["four"]))
        ok = ok and costs and same
        parts.append(f"{pps:g}/s rule {'on' if rule else 'off'}: none {base:.2f}, "
                     + ", ".join(f"{v} {c:.2f}" for v, c in got.items()) + " %")
    return _verdict(ok, "router CPU: " + "; ".join(parts), LINUX_ROUTER)


def _frag(d: Data, measurement: str | None = None) -> list[TrialRow]:
    return [r for r in d.select("fragment") if measurement is None or r.measurement == measurement]


def do_14(d: Data) -> Outcome:
    rows = _frag(d)
    if not rows:
        return _not_measured("IPv4 traffic through a small-MTU link (kind fragment, topology "
                             "two-routers-v4)")
    cpu = d.means(rows, "router_cpu_pct", lambda r: (size_of(r), int(param(r, "core_mtu"))))
    pps = d.means(rows, "received_pps", lambda r: (size_of(r), int(param(r, "core_mtu"))))
    frags = d.means(rows, "fragments_per_datagram",
                    lambda r: (size_of(r), int(param(r, "core_mtu"))))
    ok, parts, ratios = True, [], []
    for size in sorted({k[0] for k in cpu if k[0] is not None}):
        whole = {m: cpu[(size, m)] for (s, m) in cpu if s == size and frags.get((s, m)) == 1.0}
        cut = {m: cpu[(size, m)] for (s, m) in cpu if s == size and frags.get((s, m), 1) > 1}
        if len(whole) >= 2:
            lo, hi = min(whole.values()), max(whole.values())
            same = hi <= lo * 1.5 + 0.5
            same_pps = max(pps[(size, m)] for m in whole) <= 1.05 * min(pps[(size, m)]
                                                                       for m in whole)
            ok = ok and same and same_pps
            parts.append(f"{size} B unfragmented at MTU {sorted(whole)}: CPU {lo:.2f}–{hi:.2f} %")
        if whole and cut:
            ref = statistics.fmean(whole.values())
            worst = max(cut, key=lambda m: cut[m])
            ratios.append(cut[worst] / ref if ref else math.inf)
            parts.append(f"{size} B fragmented at MTU {worst} "
                         f"({frags[(size, worst)]:.0f} fragments): CPU {cut[worst]:.2f} % = "
                         f"{ratios[-1]:.1f}× unfragmented")
    if not parts:
        return _not_measured("the same frame sizes at several MTUs")
    ok = ok and bool(ratios) and all(x > 1.0 for x in ratios)
    return _verdict(ok, "; ".join(parts) + " (paper: 2.7×)", LINUX_ROUTER)


def do_15(d: Data) -> Outcome:
    rows = [r for r in _frag(d) if "fragments_per_datagram" in r.metrics
            and "router_cpu_pct" in r.metrics]
    pts = d.means(rows, "router_cpu_pct", lambda r: (float(r.metrics["fragments_per_datagram"]),
                                                    int(param(r, "core_mtu"))))
    by_mtu: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for (f, m), c in pts.items():
        by_mtu[m].append((f, c))
    best = max(by_mtu.values(), key=lambda v: len({f for f, _ in v}), default=[])
    if len({f for f, _ in best}) < 3:
        return _not_measured("router CPU at three or more fragment counts at one MTU (kind "
                             "fragment, e.g. MTU 100 with frames 118–918 B)")
    xs, ys = [f for f, _ in best], [c for _, c in best]
    slope, r2 = _linfit(xs, ys)
    ok = slope > 0 and r2 >= 0.9
    return _verdict(ok, f"{len(xs)} points, CPU = {slope:.3f} % per fragment, R² = {r2:.3f} "
                    "(paper: +4.5 % per fragment, linear)", LINUX_ROUTER)


def do_16(d: Data) -> Outcome:
    cpu = _exthdr_cpu(d)
    rows = d.select("exthdr")
    rh0 = [r for r in rows if param(r, "variant") == "rh0"]
    pairs = sorted(k[2] for k in cpu if k[0] == "srh" and not k[1] and ("none", False, k[2]) in cpu)
    if not pairs:
        return _not_measured("IPv6 traffic with and without a Segment Routing header at the "
                             "same rate (kind exthdr, variants none and srh)")
    ok, parts = True, []
    for pps in pairs:
        added = cpu[("srh", False, pps)] - cpu[("none", False, pps)]
        ok = ok and added > 0 and added < (2.0 if pps <= 1000 else 6.0)
        parts.append(f"{pps:g}/s: +{added:.2f} points of router CPU")
    if rh0:
        dropped = all(r.metrics.get("router_hdr_errors", 0) >= r.metrics.get("attempted", 1)
                      and not r.metrics.get("captured") for r in rh0)
        parts.append(f"RH0 dropped by the router: {'yes' if dropped else 'no'} "
                     f"({len(rh0)} trials)")
        ok = ok and dropped
    return _verdict(ok, "SRH vs none: " + "; ".join(parts)
                    + " (paper, RH0: < 2 % at 1000/s, 6 % at 5000/s)", LINUX_ROUTER)


# --- zeadally-2004 ---------------------------------------------------------------------------


def _ze(d: Data, kind: str, protocol: str | None, metric: str) -> dict[tuple[Any, ...], float]:
    rows = [r for r in d.select(kind) if protocol is None or param(r, "protocol") == protocol]
    return d.means(rows, metric, lambda r: (int(param(r, "ip")), size_of(r)))


def ze_1(d: Data) -> Outcome:
    thr = _ze(d, "iperf3", "tcp", "receiver_bps")
    if not thr:
        return _not_measured("TCP throughput (iperf3)")
    low = min(thr.values())
    common = [s for ip, s in thr if ip == 4 and (6, s) in thr]
    gap = statistics.fmean(thr[(4, s)] - thr[(6, s)] for s in common) if common else None
    ok = low >= 88e6 and gap is not None and 0 <= gap <= 3e6
    ev = (f"lowest TCP throughput {_mbps(low)} Mbit/s (≥ 88 accepted) at "
          + ", ".join(f"IPv{ip} {s} B" for (ip, s), v in thr.items() if v == low))
    ev += (f"; mean IPv4 − IPv6 {_mbps(gap)} Mbit/s (0–3 accepted)" if gap is not None
           else "; IPv4 vs IPv6 not measured")
    return _verdict(ok, ev)


def ze_2(d: Data) -> Outcome:
    thr = _ze(d, "iperf3", "udp", "receiver_bps")
    common = sorted(s for ip, s in thr if ip == 4 and (6, s) in thr)
    if not common:
        return _not_measured("UDP throughput of IPv4 and IPv6 at equal sizes")
    diffs = {s: _rel(thr[(6, s)], thr[(4, s)]) for s in common}
    ok = all(abs(v) <= 0.10 for v in diffs.values())
    small = common[0]
    wire = -20 / (small + 8 + 40 + 38)  # 20 more header bytes a datagram, Ethernet 38 on the wire
    return _verdict(ok, "IPv6/IPv4 − 1: " + ", ".join(f"{s} B {v:+.1%}" for s, v in diffs.items())
                    + " (within 10 % accepted)",
                    f"on a saturated link IPv6's 20 more header bytes alone cost {wire:+.1%} at "
                    f"{small} B")


def ze_3(d: Data) -> Outcome:
    thr = _ze(d, "iperf3", "udp", "receiver_bps")
    need = [(ip, s) for ip in (4, 6) for s in (128, 512)]
    if not all(k in thr for k in need):
        return _not_measured("UDP throughput of IPv4 and IPv6 at 128 and 512 B")
    deficit = {s: 1 - thr[(6, s)] / thr[(4, s)] for s in (128, 512)}
    arith = {s: (16 / s, 4 / s) for s in (128, 512)}
    ok = deficit[128] > deficit[512]
    return _verdict(ok, f"address bytes per message: 128 B {arith[128][0]:.1%} vs "
                        f"{arith[128][1]:.1%}, 512 B {arith[512][0]:.1%} vs {arith[512][1]:.2%}; "
                        f"measured IPv6 UDP throughput deficit {deficit[128]:.1%} at 128 B, "
                        f"{deficit[512]:.1%} at 512 B (must shrink with size)")


def _rtt(d: Data, protocol: str) -> dict[tuple[Any, ...], float]:
    rtt = _ze(d, "pingpong", protocol, "rtt_median_us")
    if not rtt:  # results stored before rtt_* existed: the round trip is twice owd
        rtt = {k: 2 * v for k, v in _ze(d, "pingpong", protocol, "owd_median_us").items()}
    return rtt


def ze_4(d: Data) -> Outcome:
    tcp, udp = _rtt(d, "tcp"), _rtt(d, "udp")
    common = sorted(k for k in tcp if k in udp)
    if not common:
        return _not_measured("TCP and UDP round-trip latency at equal sizes")
    diffs = [(k, _rel(tcp[k], udp[k])) for k in common]
    close = sum(abs(v) <= 0.20 for _, v in diffs)
    med = statistics.median(v for _, v in diffs)
    return _verdict(close == len(diffs), f"TCP within 20 % of UDP RTT in "
                                         f"{_frac(close, len(diffs))} cells; median TCP/UDP − 1 "
                                         f"{med:+.1%}")


def ze_5(d: Data) -> Outcome:
    cells = []
    for proto in ("tcp", "udp"):
        rtt = _rtt(d, proto)
        cells += [(proto, s, _rel(rtt[(6, s)], rtt[(4, s)])) for ip, s in rtt
                  if ip == 4 and (6, s) in rtt]
    if not cells:
        return _not_measured("IPv4 and IPv6 round-trip latency at equal sizes")
    lower = sum(v < 0 for *_, v in cells)
    in_range = sum(-0.15 <= v <= -0.07 for *_, v in cells)
    med = statistics.median(v for *_, v in cells)
    return _verdict(lower == len(cells),
                    f"IPv6 RTT lower than IPv4 in {_frac(lower, len(cells))} cells, 7–15 % lower "
                    f"in {_frac(in_range, len(cells))}; median IPv6/IPv4 − 1 {med:+.1%} "
                    "(paper: −7 … −15 %)")


def _ze_stack(metric: str, more_is_v6: bool, label: str, paper: str) -> Callable[[Data], Outcome]:
    def check(d: Data) -> Outcome:
        v = d.means(d.select("stackcost"), metric, lambda r: (int(param(r, "ip")),))
        if (4,) not in v or (6,) not in v:
            return _not_measured(f"{label} for IPv4 and IPv6 (stackcost)")
        a, b = v[(4,)], v[(6,)]
        ok = b > a if more_is_v6 else b < a
        return _verdict(ok, f"{label}: IPv4 {a:.1f}, IPv6 {b:.1f} ({_rel(b, a):+.1%}; "
                            f"paper {paper})")
    return check


# --- registry --------------------------------------------------------------------------------

CHECKS: dict[str, Callable[[Data], Outcome]] = {
    "gm:1": gm_1, "gm:2": gm_2, "gm:3": gm_3, "gm:4": gm_4, "gm:5": gm_5, "gm:6": gm_6,
    "gm:7": gm_7, "gm:8": gm_8, "gm:9": gm_9,
    "qu:1": qu_1, "qu:2": qu_2, "qu:3": qu_3, "qu:4": qu_4, "qu:5": qu_5, "qu:6": qu_6,
    "qu:7": qu_7, "qu:8": qu_8, "qu:9": qu_9, "qu:10": qu_10, "qu:11": _cross_os,
    "go:1": go_1, "go:2": go_2, "go:3": go_3, "go:4": go_4, "go:5": go_5,
    "go:6": _feature_claim((("nat", 4), ("nat", 6), ("nptv6", 6)), "NAT and NPTv6"),
    "go:7": _feature_claim((("dhcp-server", 4), ("dhcp-server", 6), ("dhcp-relay", 4),
                            ("dhcp-relay", 6)), "DHCP server/relay and DHCPv6"),
    "go:8": _feature_claim((("firewall", 4), ("firewall", 6)), "the firewall"),
    "go:9": _feature_claim((("ipsec", 4), ("ipsec", 6), ("qos", 4), ("qos", 6),
                            ("qos-hfsc", 4), ("qos-hfsc", 6)), "IPsec and HTB/HFSC QoS"),
    "go:10": go_10,
    "do:1": do_1, "do:2": do_2, "do:3": do_3, "do:4": do_4, "do:5": do_5,
    "do:6": do_6,
    "do:7": do_7,
    "do:8": do_8,
    "do:9": do_9,
    "do:10": do_10,
    "do:11": do_11,
    "do:12": do_12,
    "do:13": do_13,
    "do:14": do_14,
    "do:15": do_15,
    "do:16": do_16,
    "ze:1": ze_1, "ze:2": ze_2, "ze:3": ze_3, "ze:4": ze_4, "ze:5": ze_5,
    "ze:6": _ze_stack("tcp_socket_create_us", True, "TCP socket creation µs", "+12 %"),
    "ze:7": _ze_stack("tcp_connect_us", True, "TCP connect µs", "about +50 %"),
    "ze:8": _ze_stack("connections_per_s", False, "connections/s", "450 → 426, −5 %"),
    "ze:9": _cross_os,
}


def paper_of_experiment(experiment: str) -> str | None:
    """The paper an experiment reproduces ("transition" -> "quintero-2016"), or None."""
    return EXPERIMENTS.get(experiment)


def claims_for(paper: str) -> list[tuple[str, str]]:
    """[(claim id, text)] of a paper, in the order of claims.md."""
    if paper not in CLAIMS:
        raise ValueError(f"unknown paper {paper!r}: one of {', '.join(PAPERS)}")
    return list(CLAIMS[paper])


def evaluate(paper: str, trials: Sequence[TrialRow],
             runs: Sequence[Mapping[str, Any]] = ()) -> list[ClaimResult]:
    """Every claim of `paper`, in file order, judged on `trials` (failed ones are ignored)."""
    d = Data(trials, runs)
    out = []
    for cid, text in claims_for(paper):
        try:
            o = CHECKS[cid](d)
        except (ArithmeticError, KeyError, ValueError, TypeError) as exc:
            o = Outcome("not measured", f"could not evaluate: {type(exc).__name__}: {exc}")
        out.append(ClaimResult(cid, paper, text, o.status, o.evidence, o.reason))
    return out
