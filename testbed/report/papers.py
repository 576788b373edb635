"""The papers' printed numbers (Gamess & Morales Tables I-VI, numbers quoted in the other papers'
text) and which experiment files reproduce each paper."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# paper id -> the experiment names (experiments/NAME.toml) that reproduce it
PAPER_EXPERIMENTS: Final[dict[str, tuple[str, ...]]] = {
    "gamess-morales": ("gamess-morales",),
    "quintero-2016": ("transition",),
    "gometz-2015": ("gometz-2015", "gometz-2015-kernel"),
    "dobrinov-2016": ("dobrinov-2016",),
    "zeadally-2004": ("zeadally-2004",),
}

PAPER_TITLES: Final[dict[str, str]] = {
    "gamess-morales": "Gamess & Morales: Modeling IPv4 and IPv6 performance in Ethernet networks",
    "quintero-2016": "Quintero et al. 2016: IPv6 transition mechanisms (6to4, ISATAP, NAT64)",
    "gometz-2015": "Gometz 2015: IPv4 and IPv6 in open source routers (RFC 2544)",
    "dobrinov-2016": "Dobrinov et al. 2016: Router performance with IPv4/IPv6 traffic",
    "zeadally-2004": "Zeadally & Raicu 2004: End-system IPv6 stacks (Linux)",
}


def paper_of(experiment: str) -> str | None:
    """The paper an experiment reproduces (None for e.g. smoke)."""
    for paper, exps in PAPER_EXPERIMENTS.items():
        if experiment in exps:
            return paper
    return None


# --- Gamess & Morales, Tables I-II: payload -> ((Exp, Max) Ethernet, FastEthernet, Gigabit) -----
# Mbit/s of IP payload, as printed.
RATE_NAMES: Final = ("ethernet", "fastethernet", "gigabit")
Cell = tuple[float, float]
TABLE_I: Final[dict[int, tuple[Cell, Cell, Cell]]] = {
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
TABLE_II: Final[dict[int, tuple[Cell, Cell, Cell]]] = {
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


# --- numbers quoted in the other papers' text ------------------------------------------------


@dataclass(frozen=True)
class Quote:
    """One number a paper prints, and how to find ours in the data (None: no measurement)."""

    paper: str
    what: str
    value: str  # as the paper states it
    where: str  # section / table in the paper
    ours: str | None = None  # key of an evaluator in testbed.report.tables.QUOTE_VALUES


QUOTES: Final[tuple[Quote, ...]] = (
    Quote("dobrinov-2016", "software reset time, mean of 5", "67.3 s", "Table 7",
          "do_reset_sw"),
    Quote("dobrinov-2016", "hardware reset time, mean of 5", "66.86 s", "Table 7",
          "do_reset_hw"),
    Quote("dobrinov-2016", "one-way ANOVA, reset mode", "F = 2.29, p = 0.1684 (df 1, 8)",
          "Table 8", "do_reset_anova"),
    Quote("dobrinov-2016", "inter-packet delay, 1518 B at 10 Mbit/s", "1.2 ms", "sec. 4.1",
          "do_ipd_10"),
    Quote("dobrinov-2016", "inter-packet delay, 1518 B at 95 Mbit/s", "0.12 ms", "sec. 4.1",
          "do_ipd_95"),
    Quote("dobrinov-2016", "max traffic drop 1518 → 1522 B, 100/0 and 0/100",
          "5.31 % and 33.33 %", "sec. 4.1, Fig. 3"),
    Quote("dobrinov-2016", "IPv4 vs IPv6 CPU cost (below 95 % CPU)", "≈ 10 % (9.84 %)",
          "sec. 4.1, Fig. 7"),
    Quote("zeadally-2004", "connections per second, Linux IPv4", "450", "sec. 4.4", "ze_cps_4"),
    Quote("zeadally-2004", "connections per second, Linux IPv6", "426", "sec. 4.4", "ze_cps_6"),
    Quote("zeadally-2004", "IPv6 connections/s degradation, Linux", "5 %", "sec. 4.4",
          "ze_cps_drop"),
    Quote("zeadally-2004", "TCP/IPv6 socket creation vs IPv4, Linux", "+12 %", "sec. 4.3",
          "ze_socket"),
    Quote("zeadally-2004", "TCP connect time IPv6 vs IPv4, Linux", "≈ +50 %", "sec. 4.3",
          "ze_connect"),
    Quote("zeadally-2004", "TCP throughput, Linux, all message sizes", "≈ 93 Mbit/s",
          "sec. 4.1, Fig. 1", "ze_tcp"),
    Quote("zeadally-2004", "round-trip latency IPv6 vs IPv4, Linux", "7-15 % lower",
          "sec. 4.2", "ze_rtt"),
    Quote("gometz-2015", "frame loss rate, every test", "0 %", "sec. 7", "go_loss"),
    Quote("gometz-2015", "IPv6 throughput spread at 1518 B (VyOS)", "90 Mbit/s", "sec. 8",
          "go_spread"),
)
