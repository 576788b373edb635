"""Gamess & Morales, "Modeling IPv4 and IPv6 performance in Ethernet networks": the numbers its
Tables I-VI print, its figures (throughput and one-way delay with the model's curves), the
Tables I-VI comparison cell by cell, and its claims (claims.py)."""

from __future__ import annotations

from typing import Any, Final

from testbed import models
from testbed.papers import Paper
from testbed.papers.gamess_morales.claims import CLAIMS
from testbed.report.claims import printed_trial
from testbed.report.data import Dataset, Stat, group, metric, params_of
from testbed.report.figures import (
    Figure,
    add_extra,
    grouped,
    rate_label,
    rows_of,
    select,
)
from testbed.report.figures import rate_bps as rate_of
from testbed.report.tables import Cell, PaperTable, index_by
from testbed.results import TrialRow

PAPER_ID = "gamess-morales"

# --- Gamess & Morales, Tables I-II: payload -> ((Exp, Max) Ethernet, FastEthernet, Gigabit) -----
# Mbit/s of IP payload, as printed.
RATE_NAMES: Final = ("ethernet", "fastethernet", "gigabit")
Printed = tuple[float, float]  # (Exp, Max) as printed
TABLE_I: Final[dict[int, tuple[Printed, Printed, Printed]]] = {
    10: ((1.19, 1.19), (11.90, 11.90), (30.70, 119.05)),
    100: ((6.32, 6.33), (63.28, 63.29), (297.69, 632.91)),
    500: ((8.96, 8.96), (89.60, 89.61), (895.65, 896.06)),
    1000: ((9.44, 9.45), (94.50, 94.52), (945.10, 945.18)),
    1480: ((9.62, 9.62), (96.23, 96.23), (961.78, 962.29)),
    1481: ((9.12, 9.13), (91.30, 91.31), (912.99, 913.07)),
    1500: ((9.25, 9.25), (92.45, 92.48), (923.12, 924.78)),
    2000: ((9.44, 9.45), (94.51, 94.52), (945.12, 945.18)),
    2960: ((9.59, 9.62), (96.23, 96.23), (961.97, 962.29)),
    2961: ((9.36, 9.37), (93.68, 93.70), (936.95, 937.03)),
}
TABLE_II: Final[dict[int, tuple[Printed, Printed, Printed]]] = {
    10: ((1.09, 1.14), (11.32, 11.36), (30.05, 113.64)),
    100: ((5.58, 5.62), (56.17, 56.18), (295.86, 561.80)),
    500: ((8.62, 8.65), (86.49, 86.51), (864.67, 865.05)),
    1000: ((9.25, 9.28), (92.73, 92.76), (927.63, 927.64)),
    1460: ((9.47, 9.49), (94.93, 94.93), (949.28, 949.28)),
    1461: ((8.92, 8.95), (89.46, 89.47), (894.25, 894.67)),
    1500: ((8.95, 8.97), (89.69, 89.71), (897.11, 897.13)),
    2000: ((9.17, 9.21), (92.06, 92.08), (920.79, 920.81)),
    2900: ((9.44, 9.44), (94.38, 94.40), (944.00, 944.01)),
    2901: ((9.17, 9.18), (91.82, 91.83), (918.25, 918.33)),
}

# Tables III-VI: payload -> (measured row, model row), OWD in µs for 0..5 routers.
Row6 = tuple[int, int, int, int, int, int]
TABLE_III: Final[dict[int, tuple[Row6, Row6]]] = {  # IPv4, Ethernet
    10: ((104, 184, 275, 362, 446, 533), (97, 194, 292, 389, 486, 583)),
    100: ((164, 310, 458, 605, 751, 902), (156, 313, 469, 626, 782, 938)),
    400: ((406, 796, 1182, 1580, 1973, 2367), (396, 793, 1189, 1586, 1982, 2378)),
    700: ((650, 1291, 1913, 2552, 3189, 3831), (636, 1273, 1909, 2546, 3182, 3818)),
    1000: ((890, 1764, 2644, 3526, 4406, 5294), (876, 1753, 2629, 3506, 4382, 5258)),
    1480: ((1288, 2539, 3790, 5079, 6350, 7629), (1260, 2521, 3781, 5042, 6302, 7562)),
}
TABLE_IV: Final[dict[int, tuple[Row6, Row6]]] = {  # IPv4, FastEthernet
    10: ((40, 69, 101, 135, 169, 199), (37, 73, 110, 147, 184, 220)),
    100: ((42, 77, 118, 158, 197, 238), (43, 85, 128, 171, 213, 256)),
    400: ((72, 131, 188, 289, 300, 367), (67, 133, 200, 267, 333, 400)),
    700: ((99, 183, 266, 347, 427, 513), (91, 181, 272, 363, 453, 544)),
    1000: ((120, 239, 348, 456, 558, 670), (115, 229, 344, 459, 573, 688)),
    1480: ((165, 322, 471, 645, 796, 936), (153, 306, 459, 612, 765, 918)),
}
TABLE_V: Final[dict[int, tuple[Row6, Row6]]] = {  # IPv6, Ethernet
    10: ((109, 206, 313, 405, 512, 617), (100, 201, 301, 402, 502, 602)),
    100: ((182, 338, 522, 700, 881, 1002), (172, 345, 517, 690, 862, 1034)),
    400: ((430, 841, 1254, 1662, 2064, 2487), (412, 825, 1237, 1650, 2062, 2474)),
    700: ((672, 1342, 1937, 2636, 3275, 3933), (652, 1305, 1957, 2610, 3262, 3914)),
    1000: ((897, 1774, 2689, 3582, 4472, 5322), (892, 1785, 2677, 3570, 4462, 5354)),
    1460: ((1298, 2541, 3785, 5134, 6322, 7581), (1260, 2521, 3781, 5042, 6302, 7562)),
}
TABLE_VI: Final[dict[int, tuple[Row6, Row6]]] = {  # IPv6, FastEthernet
    10: ((40, 81, 116, 162, 193, 242), (37, 74, 111, 148, 185, 222)),
    100: ((45, 82, 135, 193, 240, 283), (44, 88, 133, 177, 221, 265)),
    400: ((73, 143, 211, 292, 337, 421), (68, 136, 205, 273, 341, 409)),
    700: ((101, 193, 289, 381, 474, 545), (92, 184, 277, 369, 461, 553)),
    1000: ((124, 251, 317, 492, 599, 731), (116, 232, 349, 465, 581, 697)),
    1460: ((168, 331, 472, 645, 776, 937), (153, 306, 459, 612, 765, 918)),
}

# (table name, ip, rate name, table)
THROUGHPUT_TABLES: Final = (("Table I", 4, TABLE_I), ("Table II", 6, TABLE_II))
OWD_TABLES: Final = (
    ("Table III", 4, "ethernet", TABLE_III),
    ("Table IV", 4, "fastethernet", TABLE_IV),
    ("Table V", 6, "ethernet", TABLE_V),
    ("Table VI", 6, "fastethernet", TABLE_VI),
)
PROPAGATION_S: Final = 30e-6  # the paper's measured pi, used for its model rows


def gamess_figures(ds: Dataset, experiment: str = "gamess-morales") -> list[Figure]:
    figs: list[Figure] = []
    tput = select(ds, experiment, kinds=["rfc2544"])
    stats = grouped(ds, tput, metric("throughput_bps", 1e-6), "throughput_mbps")
    # a figure for every point measured, also where every trial failed (it says so)
    for rate in sorted({params_of(t).get("topology.rate") for t in tput},
                       key=lambda v: rate_of(v) or 0):
        sub = [s for s in stats if s.point.get("topology.rate") == rate]
        bps = rate_of(rate)

        def tp_model(series: str, x: Any, bps: float | None = bps) -> float | None:
            ip = 6 if series.startswith("IPv6") else 4
            return models.max_throughput_bps(int(x), bps, ip) / 1e6 if bps else None

        rows = rows_of(sub, lambda s: f"IPv{s.point.get('ip')}", lambda s: s.point.get(
            "ip_payload"), tp_model)
        curves = {}
        if bps:
            xs = sorted({int(r.x) for r in rows})
            hi = max(xs) if xs else 1500
            for ip in sorted({int(s.point.get("ip", 4)) for s in sub}):
                grid = range(max(1, min(xs) if xs else 1), hi + 1, max(1, hi // 400))
                curves[f"IPv{ip}"] = [(float(n), models.max_throughput_bps(n, bps, ip) / 1e6)
                                      for n in grid]
        figs.append(Figure(
            f"gm-throughput-{rate}", "gamess-morales",
            f"Zero-loss UDP throughput vs IP payload, {rate_label(rate)}, point-to-point "
            "(Tables I-II)", "IP payload (bytes)", "throughput (Mbit/s of IP payload)", "lines",
            rows, curves, note="points: RFC 2544 search, mean with 95 % CI; dashed: the model, "
            "equation (7); dotted: the gap"))
    owdt = select(ds, experiment, kinds=["pingpong"])
    ostats = grouped(ds, owdt, metric("owd_mean_us"), "owd_mean_us")
    keys = sorted({(int(params_of(t).get("ip", 4)), params_of(t).get("topology.rate"))
                   for t in owdt},
                  key=lambda k: (rate_of(k[1]) or 0, k[0]))
    for ip, rate in keys:
        sub = [s for s in ostats if int(s.point.get("ip", 4)) == ip
               and s.point.get("topology.rate") == rate]
        bps = rate_of(rate)

        def owd_model(series: str, x: Any, bps: float | None = bps, ip: int = ip
                      ) -> float | None:
            routers = int(series.split()[0])
            if not bps:
                return None
            return models.owd(int(x), bps, ip, routers, propagation_s=30e-6) * 1e6

        def routers_of(s: Stat) -> str:
            r = int(s.point.get("topology.routers", 0))
            return f"{r} router" + ("" if r == 1 else "s")

        rows = rows_of(sub, routers_of, lambda s: s.point.get("ip_payload"), owd_model)
        add_extra(ds, rows, owdt, metric("probe_overhead_mean_us"), "probe overhead (µs)")
        curves = {}
        mine = [params_of(t) for t in owdt if int(params_of(t).get("ip", 4)) == ip
                and params_of(t).get("topology.rate") == rate]
        if bps:  # the model over every payload and router count asked for, measured or not
            xs = sorted({int(p["ip_payload"]) for p in mine if p.get("ip_payload")}) or [10, 1480]
            for routers in sorted({int(p.get("topology.routers", 0)) for p in mine}):
                rs = f"{routers} router" + ("" if routers == 1 else "s")
                curves[rs] = [(float(n), models.owd(n, bps, ip, routers, 30e-6) * 1e6)
                              for n in range(min(xs), max(xs) + 1, max(1, max(xs) // 200))]
        figs.append(Figure(
            f"gm-owd-v{ip}-{rate}", "gamess-morales",
            f"One-way delay (RTT/2) vs IP payload, IPv{ip}, {rate_label(rate)}, per router count "
            "(Tables III-VI)", "IP payload (bytes)", "one-way delay (µs)", "lines", rows, curves,
            note="points: UDP ping-pong, mean OWD with 95 % CI over repetitions (probe overhead "
            "included); dashed: equation (9) with π = 30 µs; dotted: the gap"))
    return figs


def gamess_tables(ds: Dataset, experiment: str = "gamess-morales") -> list[PaperTable]:
    """Tables I-VI: every printed cell with the model (testbed.models) and ours where measured
    (one cell per environment the data was measured in)."""
    trials = [t for t in ds.trials if t.experiment == experiment]
    tput = group(ds, [t for t in trials if t.kind == "rfc2544"],
                 metric("throughput_bps", 1e-6), "throughput_mbps")
    owd = group(ds, [t for t in trials if t.kind == "pingpong"], metric("owd_mean_us"),
                "owd_mean_us")

    def tkey(s: Stat) -> tuple[Any, ...]:
        return (int(s.point.get("ip", 4)), int(s.point.get("ip_payload") or 0),
                rate_of(s.point.get("topology.rate")), int(s.point.get("topology.routers", 0)))

    tidx, oidx = index_by(tput, tkey), index_by(owd, tkey)
    out = []
    for name, ip, table in THROUGHPUT_TABLES:
        cells = []
        for n, row in table.items():
            for rname, (exp, _printed_max) in zip(RATE_NAMES, row, strict=True):
                bps = models.RATES[rname]
                model = models.max_throughput_bps(n, bps, ip) / 1e6
                found: list[Stat | None] = list(tidx.get((ip, n, bps, 0), [])) or [None]
                for s in found:
                    cells.append(Cell(name, n, rate_label(rname), exp, model, s, "Mbit/s"))
        out.append(PaperTable(name.lower().replace(" ", "-"), name, f"{name}: zero-loss UDP "
                              f"throughput, IPv{ip}, point-to-point (Mbit/s of IP payload)",
                              "Mbit/s", "link", cells))
    for name, ip, rname, otable in OWD_TABLES:
        bps = models.RATES[rname]
        cells = []
        for n, (measured, _model_row) in otable.items():
            for routers, exp in enumerate(measured):
                model = models.owd(n, bps, ip, routers, PROPAGATION_S) * 1e6
                ofound: list[Stat | None] = list(oidx.get((ip, n, bps, routers), [])) or [None]
                for s in ofound:
                    cells.append(Cell(name, n, str(routers), exp, model, s, "µs"))
        out.append(PaperTable(name.lower().replace(" ", "-"), name,
                              f"{name}: one-way delay, IPv{ip}, {rate_label(rname)}, "
                              "0-5 routers (µs)", "µs", "routers", cells))
    return out


def printed() -> list[TrialRow]:
    """Tables I-VI as trials: the measured (Exp) throughput of every printed cell (Tables I-II,
    kind rfc2544) and the measured OWD of every printed cell (Tables III-VI, kind pingpong)."""
    out = []
    for _name, ip, table in THROUGHPUT_TABLES:
        for n, row in table.items():
            for rname, (exp, _max) in zip(RATE_NAMES, row, strict=True):
                out.append(printed_trial(PAPER_ID, "rfc2544", {
                    "ip": ip, "ip_payload": n, "topology.rate": rname},
                    {"throughput_bps": exp * 1e6}))
    for _name, ip, rname, otable in OWD_TABLES:
        for n, (measured, _model) in otable.items():
            for routers, us in enumerate(measured):
                out.append(printed_trial(PAPER_ID, "pingpong", {
                    "ip": ip, "ip_payload": n, "topology.rate": rname,
                    "topology.routers": routers}, {"owd_median_us": float(us)}))
    return out


PAPER = Paper(
    id=PAPER_ID,
    title="Gamess & Morales: Modeling IPv4 and IPv6 performance in Ethernet networks",
    citation=(
        "E. Gamess, N. Morales: \"Modeling IPv4 and IPv6 Performance in Ethernet Networks\""),
    experiments=('gamess-morales',),
    claims=CLAIMS,
    figures=gamess_figures,
    tables=gamess_tables,
    printed=printed,
    order=1,
)
