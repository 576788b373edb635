"""The analytic models against every model cell of Gamess & Morales' Tables I-VI, and beyond."""

from __future__ import annotations

import json

import pytest

from testbed import models, units
from testbed.cli import main
from testbed.models import (
    RATES,
    fragment_layout,
    frame_bytes,
    max_throughput_bps,
    owd,
    store_and_forward_owd,
    ttfs,
)

ETH, FAST, GIGA = 10e6, 100e6, 1e9

# Tables I and II, "Max" columns: payload -> (Ethernet, FastEthernet, GigabitEthernet) in Mbit/s.
TABLE_I = {
    10: (1.19, 11.90, 119.05),
    100: (6.33, 63.29, 632.91),
    500: (8.96, 89.61, 896.06),
    1000: (9.45, 94.52, 945.18),
    1480: (9.62, 96.23, 962.29),
    1481: (9.13, 91.31, 913.07),
    1500: (9.25, 92.48, 924.78),
    2000: (9.45, 94.52, 945.18),
    2960: (9.62, 96.23, 962.29),
    2961: (9.37, 93.70, 937.03),
}
TABLE_II = {
    10: (1.14, 11.36, 113.64),
    100: (5.62, 56.18, 561.80),
    500: (8.65, 86.51, 865.05),
    1000: (9.28, 92.76, 927.64),
    1460: (9.49, 94.93, 949.28),
    1461: (8.95, 89.47, 894.67),
    1500: (8.97, 89.71, 897.13),
    2000: (9.21, 92.08, 920.81),
    2900: (9.44, 94.40, 944.01),
    2901: (9.18, 91.83, 918.33),
}

# Tables III-VI, shaded (model) rows: payload -> OWD in µs for 0..5 routers, pi = 30 µs.
TABLE_III = {  # IPv4, Ethernet
    10: (97, 194, 292, 389, 486, 583),
    100: (156, 313, 469, 626, 782, 938),
    400: (396, 793, 1189, 1586, 1982, 2378),
    700: (636, 1273, 1909, 2546, 3182, 3818),
    1000: (876, 1753, 2629, 3506, 4382, 5258),
    1480: (1260, 2521, 3781, 5042, 6302, 7562),
}
TABLE_IV = {  # IPv4, FastEthernet
    10: (37, 73, 110, 147, 184, 220),
    100: (43, 85, 128, 171, 213, 256),
    400: (67, 133, 200, 267, 333, 400),
    700: (91, 181, 272, 363, 453, 544),
    1000: (115, 229, 344, 459, 573, 688),
    1480: (153, 306, 459, 612, 765, 918),
}
TABLE_V = {  # IPv6, Ethernet
    10: (100, 201, 301, 402, 502, 602),
    100: (172, 345, 517, 690, 862, 1034),
    400: (412, 825, 1237, 1650, 2062, 2474),
    700: (652, 1305, 1957, 2610, 3262, 3914),
    1000: (892, 1785, 2677, 3570, 4462, 5354),
    1460: (1260, 2521, 3781, 5042, 6302, 7562),
}
TABLE_VI = {  # IPv6, FastEthernet
    10: (37, 74, 111, 148, 185, 222),
    100: (44, 88, 133, 177, 221, 265),
    400: (68, 136, 205, 273, 341, 409),
    700: (92, 184, 277, 369, 461, 553),
    1000: (116, 232, 349, 465, 581, 697),
    1460: (153, 306, 459, 612, 765, 918),
}


def _throughput_cells() -> list[tuple[int, int, float, float]]:
    cells = []
    for ip, table in ((4, TABLE_I), (6, TABLE_II)):
        for n, row in table.items():
            for rate, expected in zip((ETH, FAST, GIGA), row, strict=True):
                cells.append((ip, n, rate, expected))
    return cells


def _owd_cells() -> list[tuple[int, float, int, int, int]]:
    cells = []
    for ip, rate, table in (
        (4, ETH, TABLE_III),
        (4, FAST, TABLE_IV),
        (6, ETH, TABLE_V),
        (6, FAST, TABLE_VI),
    ):
        for n, row in table.items():
            for routers, expected in enumerate(row):
                cells.append((ip, rate, n, routers, expected))
    return cells


@pytest.mark.parametrize(("ip", "n", "rate", "expected"), _throughput_cells())
def test_tables_i_ii_max_throughput(ip: int, n: int, rate: float, expected: float) -> None:
    assert round(max_throughput_bps(n, rate, ip) / 1e6, 2) == expected


@pytest.mark.parametrize(("ip", "rate", "n", "routers", "expected"), _owd_cells())
def test_tables_iii_to_vi_owd(ip: int, rate: float, n: int, routers: int, expected: int) -> None:
    us = owd(n, rate, ip, routers, propagation_s=30e-6) * 1e6
    assert round(us) == expected
    assert abs(us - round(us)) < 0.49  # never near a rounding tie: the match is not luck


def test_cell_counts() -> None:
    assert len(_throughput_cells()) == 60
    assert len(_owd_cells()) == 144


# --- the paper's closed forms, literally, for every payload ------------------------------------


def _paper_ipv4_bytes(n: int) -> int:
    """Equations (1) and (2), times B/8."""
    if 1 <= (n - 1) % 1480 + 1 <= 26:
        return 1538 * ((n - 1) // 1480) + 84
    return 58 * ((n - 26) // 1480) + n + 58


def _paper_ipv6_bytes(n: int) -> int:
    """Equations (3)-(6), times B/8."""
    if n <= 6:
        return 84
    if n <= 1460:
        return n + 78
    if n <= 2900:
        return n + 172
    return 86 * ((n - 5) // 1448) + n + 86


def test_ipv4_matches_equations_1_2_for_every_payload() -> None:
    bad = [n for n in range(1, 65516) if sum(frame_bytes(n, 4)) != _paper_ipv4_bytes(n)]
    assert bad == []


def test_ipv6_matches_equations_3_6_for_every_payload() -> None:
    bad = [n for n in range(1, 65536) if sum(frame_bytes(n, 6)) != _paper_ipv6_bytes(n)]
    assert bad == []


def test_ttfs_units() -> None:
    assert ttfs(10, ETH, 4) == pytest.approx(84 * 8 / 10e6)
    assert ttfs(1480, 1e9, 4) == pytest.approx(1538 * 8 / 1e9)
    assert ttfs(1460, 1e9, 6) == pytest.approx(1538 * 8 / 1e9)
    # The maxima the paper quotes in section IV.D.
    assert round(max_throughput_bps(4440, ETH, 4) / 1e6, 2) == 9.62
    assert max_throughput_bps(1460, ETH, 6) == pytest.approx(1460 / 1538 * 1e7)


# --- fragmentation boundaries ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ip", "n", "count", "size", "last"),
    [
        (4, 1480, 1, 1480, 1480),
        (4, 1481, 2, 1480, 1),
        (4, 2960, 2, 1480, 1480),
        (4, 2961, 3, 1480, 1),
        (4, 65515, 45, 1480, 395),
        (6, 1460, 1, 1460, 1460),
        (6, 1461, 2, 1448, 13),
        (6, 2896, 2, 1448, 1448),
        (6, 2900, 2, 1448, 1452),  # the last fragment may fill the MTU: 40 + 8 + 1452 = 1500
        (6, 2901, 3, 1448, 5),
        (6, 4348, 3, 1448, 1452),
        (6, 4349, 4, 1448, 5),
        (6, 65535, 46, 1448, 375),
    ],
)
def test_fragment_layout(ip: int, n: int, count: int, size: int, last: int) -> None:
    layout = fragment_layout(n, ip)
    assert (layout.count, layout.size, layout.last) == (count, size, last)
    assert sum(layout.chunks) == n


@pytest.mark.parametrize(("ip", "below", "above"), [(4, 1480, 1481), (4, 2960, 2961)])
def test_ipv4_boundaries(ip: int, below: int, above: int) -> None:
    assert frame_bytes(below, ip)[-1] == below - 1480 * (len(frame_bytes(below, ip)) - 1) + 58
    assert len(frame_bytes(above, ip)) == len(frame_bytes(below, ip)) + 1
    assert frame_bytes(above, ip)[-1] == 84  # 1 byte in the last fragment: padded to 64 + 20
    assert max_throughput_bps(above, ETH, ip) < max_throughput_bps(below, ETH, ip)


def test_ipv6_boundaries() -> None:
    assert frame_bytes(1460, 6) == (1538,)
    assert frame_bytes(1461, 6) == (1534, 99)  # 38 + 48 + 1448; 38 + 48 + 13, no padding
    assert frame_bytes(2900, 6) == (1534, 1538)
    assert frame_bytes(2901, 6) == (1534, 1534, 91)
    assert max_throughput_bps(1461, ETH, 6) < max_throughput_bps(1460, ETH, 6)
    assert max_throughput_bps(2901, ETH, 6) < max_throughput_bps(2900, ETH, 6)


def test_linux_fragmenter_cuts_the_last_fragment_like_the_others() -> None:
    # ip6_append_data: every fragment a multiple of 8 bytes, so 2897-2900 B take three frames
    assert frame_bytes(2900, 6, fragmenter="linux") == (1534, 1534, 90)
    assert frame_bytes(2896, 6, fragmenter="linux") == frame_bytes(2896, 6) == (1534, 1534)
    assert max_throughput_bps(2900, ETH, 6, fragmenter="linux") == pytest.approx(
        2900 * 8 / (3158 * 8 / ETH))
    differs = [n for n in range(1, 6000) if fragment_layout(n, 6, fragmenter="linux")
               != fragment_layout(n, 6)]
    assert differs == [*range(2897, 2901), *range(4345, 4349), *range(5793, 5797)]
    for n in range(1, 6000):  # IPv4 and the tunnels: the same either way
        assert fragment_layout(n, 4, fragmenter="linux") == fragment_layout(n, 4)
        assert fragment_layout(n, 6, "6to4", "linux") == fragment_layout(n, 6, "6to4")
    with pytest.raises(ValueError, match="fragmenter"):
        fragment_layout(3000, 6, fragmenter="bsd")


def test_padding_small_payloads() -> None:
    assert frame_bytes(1, 4) == frame_bytes(26, 4) == (84,)
    assert frame_bytes(27, 4) == (85,)
    assert frame_bytes(1, 6) == frame_bytes(6, 6) == (84,)
    assert frame_bytes(7, 6) == (85,)


def test_owd_equation_9_with_fragments() -> None:
    # 2961 bytes IPv4 at 10 Mbit/s through 2 routers: TTFS(n) + 2 TTFS(1) + 3 pi.
    expected = (3160 * 8 / ETH) + 2 * (84 * 8 / ETH) + 3 * 30e-6
    assert owd(2961, ETH, 4, 2) == pytest.approx(expected)
    # IPv6: the last fragment's frame keeps its fragment header (5 + 48 + 38 = 91 bytes).
    expected6 = (3159 * 8 / ETH) + 2 * (91 * 8 / ETH) + 3 * 30e-6
    assert owd(2901, ETH, 6, 2) == pytest.approx(expected6)


def test_owd_unfragmented_is_equation_10() -> None:
    for ip, n in ((4, 1480), (6, 1460), (6, 7)):
        for p in range(6):
            assert owd(n, FAST, ip, p) == pytest.approx((ttfs(n, FAST, ip) + 30e-6) * (p + 1))


def test_store_and_forward_owd() -> None:
    # Unfragmented: the same as equation (10).
    assert store_and_forward_owd(1000, ETH, 4, 3) == pytest.approx(owd(1000, ETH, 4, 3))
    # Fragmented: each router adds its largest fragment's frame, not the last one's.
    frames = frame_bytes(2961, 4)
    expected = (sum(frames) + 2 * max(frames)) * 8 / ETH + 3 * 30e-6
    assert store_and_forward_owd(2961, ETH, 4, 2) == pytest.approx(expected)
    assert store_and_forward_owd(2961, ETH, 4, 0) == pytest.approx(owd(2961, ETH, 4, 0))


# --- transition mechanisms, hand-derived (docs/models.md) --------------------------------------


def test_6to4_unfragmented() -> None:
    # 38 + 20 (IPv4) + 40 (IPv6) + 1000 = 1098 bytes on every link.
    assert frame_bytes(1000, 6, "6to4") == (1098,)
    assert max_throughput_bps(1000, ETH, 6, "6to4") == pytest.approx(1000 / 1098 * 1e7)
    assert owd(1000, ETH, 6, 1, mechanism="6to4") * 1e6 == pytest.approx(2 * 878.4 + 60)
    assert frame_bytes(1, 6, "6to4") == (99,)  # 60 bytes of headers: never padded


def test_tunnel_fragmentation() -> None:
    # IPv6 MTU 1480 on the tunnel: 1440 bytes unfragmented, then 1432 per fragment.
    for mech in ("6to4", "isatap"):
        assert frame_bytes(1440, 6, mech) == (1538,)
        assert frame_bytes(1441, 6, mech) == (1538, 115)  # 38+68+1432, 38+68+9
        layout = fragment_layout(2864, 6, mech)
        assert (layout.count, layout.size, layout.last) == (2, 1432, 1432)
        assert fragment_layout(2865, 6, mech).count == 3
    assert round(max_throughput_bps(1440, ETH, 6, "6to4") / 1e6, 2) == 9.36


def test_isatap() -> None:
    # PC1 -(6in4)- R1 (ISATAP router) -(IPv6)- PC2: 1098 then 1078 bytes, 0.8 µs per byte.
    assert owd(1000, ETH, 6, 1, mechanism="isatap") * 1e6 == pytest.approx(878.4 + 862.4 + 60)
    # Throughput is set by the tunnelled side: the same as 6to4.
    assert max_throughput_bps(1000, ETH, 6, "isatap") == max_throughput_bps(1000, ETH, 6, "6to4")
    # Fragments made for the tunnel cross the native side as they are (48 + 1432 + 38).
    assert frame_bytes(1441, 6, "isatap", side=1) == (1518, 95)
    # Host-to-host ISATAP: every link tunnelled, as 6to4.
    assert owd(1000, ETH, 6, 2, mechanism="isatap", first_side_links=3) == pytest.approx(
        owd(1000, ETH, 6, 2, mechanism="6to4")
    )
    assert owd(1000, ETH, 6, 0, mechanism="isatap") == owd(1000, ETH, 6, 0, mechanism="6to4")


def test_nat64() -> None:
    # PC1 -(IPv6)- R1 (translator) -(IPv4)- PC2: 1078 then 1058 bytes.
    assert owd(1000, ETH, 6, 1, mechanism="nat64") * 1e6 == pytest.approx(862.4 + 846.4 + 60)
    # Below native IPv6 (1784.8 µs), as Quintero et al. measured.
    assert owd(1000, ETH, 6, 1, mechanism="nat64") < owd(1000, ETH, 6, 1)
    # Throughput: the IPv6 side is the bottleneck, so it equals native IPv6.
    assert max_throughput_bps(1000, ETH, 6, "nat64") == max_throughput_bps(1000, ETH, 6)
    # The IPv6 sender fragments; each fragment becomes an IPv4 fragment without the 8-byte header.
    assert frame_bytes(2901, 6, "nat64", side=0) == (1534, 1534, 91)
    assert frame_bytes(2901, 6, "nat64", side=1) == (1506, 1506, 84)  # 5 + 20 padded to 46
    # With the translator at R2 of 3: two IPv6 links, then two IPv4 links.
    expected = (1078 + 1078 + 1058 + 1058) * 0.8 + 4 * 30
    assert owd(1000, ETH, 6, 3, mechanism="nat64", first_side_links=2) * 1e6 == pytest.approx(
        expected
    )


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "ip", "mechanism"),
    [
        (0, 4, "native"),
        (65516, 4, "native"),
        (0, 6, "native"),
        (65536, 6, "native"),
        (65536, 6, "6to4"),
        (65516, 6, "nat64"),
        (-5, 6, "isatap"),
    ],
)
def test_payload_out_of_range(n: int, ip: int, mechanism: str) -> None:
    with pytest.raises(ValueError, match="out of range"):
        ttfs(n, ETH, ip, mechanism)


def test_edges_in_range() -> None:
    assert ttfs(65515, ETH, 4) > 0
    assert ttfs(65535, ETH, 6) > 0
    assert ttfs(65535, ETH, 6, "6to4") > 0
    assert ttfs(65515, ETH, 6, "nat64") > 0


def test_other_bad_inputs() -> None:
    with pytest.raises(ValueError, match="ip must be 4 or 6"):
        ttfs(100, ETH, 5)
    with pytest.raises(ValueError, match="use ip=6"):
        ttfs(100, ETH, 4, "6to4")
    with pytest.raises(ValueError, match="unknown mechanism"):
        ttfs(100, ETH, 6, "teredo")
    with pytest.raises(ValueError, match="bit rate"):
        ttfs(100, 0.0, 4)
    with pytest.raises(ValueError, match="routers"):
        owd(100, ETH, 4, -1)
    with pytest.raises(ValueError, match="translator"):
        owd(100, ETH, 6, 0, mechanism="nat64")
    with pytest.raises(ValueError, match="first_side_links"):
        owd(100, ETH, 6, 2, mechanism="nat64", first_side_links=3)
    with pytest.raises(ValueError, match="first_side_links"):
        owd(100, ETH, 4, 2, first_side_links=1)
    with pytest.raises(ValueError, match="propagation"):
        owd(100, ETH, 4, 2, propagation_s=-1.0)


# --- rates -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("ethernet", 10e6),
        ("FastEthernet", 100e6),
        ("gigabit", 1e9),
        ("100", 100e6),
        ("2.5", 2.5e6),
        ("10mbit", 10e6),
        ("1gbit", 1e9),
        ("500kbit", 500e3),
        ("10 Mbit/s", 10e6),
    ],
)
def test_parse_rate(text: str, bps: float) -> None:
    assert units.rate(text, unlimited=False) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["", "fast", "10mb", "-5", "0", "abc", "1e6", "unlimited"])
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="rate"):
        units.rate(text, unlimited=False)


def test_rate_presets() -> None:
    assert RATES == {"ethernet": 10e6, "fastethernet": 100e6, "gigabit": 1e9}
    assert models.MECHANISMS == ("native", "6to4", "isatap", "nat64")


# --- the command line --------------------------------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(list(argv)) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    result: dict[str, object] = json.loads(out[0])
    return result


def test_cli_throughput(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys, "model", "throughput", "--ip", "4", "--payload", "1481", "--rate", "gigabit")
    assert round(float(str(out["mbps"])), 2) == 913.07
    assert out["ip"] == 4
    assert out["payload"] == 1481
    assert out["rate"] == "gigabit"
    assert out["rate_bps"] == 1e9
    assert out["mechanism"] == "native"
    assert out["fragments"] == 2
    assert out["last_fragment_payload"] == 1
    assert out["frame_bytes"] == [1538, 84]
    assert out["wire_bytes"] == 1622
    linux = _run(capsys, "model", "throughput", "--ip", "6", "--payload", "2900", "--rate",
                 "ethernet", "--fragmenter", "linux")
    assert linux["fragments"] == 3 and linux["wire_bytes"] == 3158
    assert linux["fragmenter"] == "linux"


def test_cli_throughput_mechanism(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(
        capsys, "model", "throughput", "--ip", "6", "--payload", "1000", "--rate", "10mbit",
        "--mechanism", "6to4",
    )  # fmt: skip
    assert out["mbps"] == pytest.approx(1000 / 1098 * 10, abs=1e-6)
    assert out["frame_bytes"] == [1098]


def test_cli_owd(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(
        capsys, "model", "owd", "--ip", "6", "--payload", "700", "--rate", "fastethernet",
        "--routers", "3",
    )  # fmt: skip
    assert round(float(str(out["owd_us"]))) == 369  # Table VI
    assert out["routers"] == 3
    assert out["propagation_us"] == 30.0
    assert out["fragments"] == 1
    assert out["hop_formats"] == ["IPv6"] * 4


def test_cli_owd_options(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(
        capsys, "model", "owd", "--ip", "6", "--payload", "1000", "--rate", "10",
        "--routers", "1", "--propagation-us", "0", "--mechanism", "nat64",
    )  # fmt: skip
    assert out["owd_us"] == pytest.approx(862.4 + 846.4)
    assert out["hop_formats"] == ["IPv6", "IPv4"]
    assert out["propagation_us"] == 0.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["throughput", "--ip", "4", "--payload", "65516", "--rate", "ethernet"], "out of range"),
        (["throughput", "--ip", "6", "--payload", "0", "--rate", "ethernet"], "out of range"),
        (["throughput", "--ip", "4", "--payload", "100", "--rate", "fast"], "not a rate"),
        (["owd", "--ip", "4", "--payload", "100", "--rate", "10", "--routers", "-1"], "routers"),
        (
            ["owd", "--ip", "4", "--payload", "9", "--rate", "1", "--routers", "0", "--mechanism",
             "nat64"],
            "use ip=6",
        ),
    ],
)  # fmt: skip
def test_cli_usage_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["model", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err
    assert captured.err.startswith("testbed: error: ")
