"""Each measurement runner on a real topology in namespaces of the host kernel."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.measure import kinds

pytestmark = pytest.mark.root


def measure(tb: Any, kind: str, **params: Any) -> kinds.Measured:
    p = kinds.validate_params(kind, params, "test", "m")
    return kinds.measure(kind, tb, p, kinds.Context())


@pytest.mark.topology("topologies/one-router.toml", rate="fastethernet")
@pytest.mark.parametrize("ip", [4, 6])
def test_pingpong_owd_and_overhead(testbed_net: Any, ip: int) -> None:
    m = measure(testbed_net, "pingpong", ip=ip, ip_payload=100, count=100)
    assert m.metrics["lost"] == 0
    assert m.metrics["owd_min_us"] <= m.metrics["owd_median_us"] <= m.metrics["owd_p999_us"]
    assert m.metrics["probe_overhead_median_us"] > 0
    assert m.result["probe"]["owd"]["n"] == 100 and len(m.result["probe"]["rtts_ns"]) == 100


@pytest.mark.topology("topologies/one-router.toml", rate="fastethernet")
def test_pingpong_tcp(testbed_net: Any) -> None:
    m = measure(testbed_net, "pingpong", ip=6, protocol="tcp", size=64, count=50,
                overhead=False)
    assert m.metrics["owd_median_us"] > 0 and "probe_overhead_median_us" not in m.metrics


@pytest.mark.topology("topologies/one-router.toml", rate="fastethernet")
def test_iperf3_ratio_flows_share_the_rate(testbed_net: Any) -> None:
    m = measure(testbed_net, "iperf3", protocol="udp", ratio="90/10", rate="20mbit",
                frame_size=1518, duration=1)
    v4, v6 = m.metrics["v4_receiver_bps"], m.metrics["v6_receiver_bps"]
    assert v4 > 5 * v6 > 0
    assert "cpu_machine_softirq_pct" in m.metrics
    assert m.result["flows"]["v4"]["length"] == 1472 and m.result["flows"]["v6"]["length"] == 1452


@pytest.mark.topology("topologies/p2p.toml")
def test_iperf3_tcp_bidir(testbed_net: Any) -> None:
    m = measure(testbed_net, "iperf3", protocol="tcp", direction="bidir", duration=1, ip=6)
    assert len(m.result["flows"]["v6"]["flows"]) == 2 and m.metrics["receiver_bps"] > 0


@pytest.mark.topology("topologies/host-router.toml")
def test_ping_frame_sizes(testbed_net: Any) -> None:
    m = measure(testbed_net, "ping", server="r1", ip=6, frame_size=1518, count=5, interval=0.01)
    assert m.metrics["loss_percent"] == 0 and m.metrics["icmp_data"] == 1452
    assert m.result["reply_bytes"] == 1452 + 8


@pytest.mark.topology("topologies/p2p.toml")
def test_stackcost(testbed_net: Any) -> None:
    m = measure(testbed_net, "stackcost", ip=6, count=50)
    assert m.metrics["connections_per_s"] > 0 and m.metrics["tcp_connect_us"] > 0


@pytest.mark.topology("topologies/one-router.toml", rate="fastethernet")
def test_receiver_inter_packet_delay(testbed_net: Any) -> None:
    m = measure(testbed_net, "receiver", ip=4, rate="10mbit", duration=1)
    # 1518-byte frames at 10 Mbit/s of IP payload: one every ~1.2 ms
    assert m.metrics["lost"] == 0
    assert 800 < m.metrics["ipd_median_us"] < 1600


@pytest.mark.topology("topologies/one-router.toml", rate="ethernet")
def test_rfc2544_search_on_a_shaped_link(testbed_net: Any) -> None:
    from testbed.models import max_throughput_bps

    m = measure(testbed_net, "rfc2544", ip=4, ip_payload=1000, duration=1, resolution=0.01)
    model = max_throughput_bps(1000, 10e6, 4)
    res = m.result["throughput"]
    if m.metrics["generator_limited"]:  # a busy machine: it must say so, not blame the device
        assert res["limited_by"] == "generator" and "generator" in res["note"]
        return
    # the search is bounded by the model + 2%, and found a zero-loss rate near it
    assert 0.9 * model < m.metrics["throughput_bps"] <= 1.02 * model
    assert res["limited_by"] in ("device", "max_rate")


@pytest.mark.topology("topologies/one-router.toml", rate="ethernet")
def test_rfc2544_frame_loss_starts_at_line_rate(testbed_net: Any) -> None:
    from testbed.models import max_throughput_bps

    m = measure(testbed_net, "rfc2544", ip=4, ip_payload=1000, duration=1, test="frame_loss")
    steps = m.result["frame_loss"]
    line = max_throughput_bps(1000, 10e6, 4)
    assert m.result["line_rate_bps"] == pytest.approx(line)
    assert steps[0]["offered"] == pytest.approx(line)  # RFC 2544 §26.3: 100 % of the medium
    assert [round(s["offered"] / line, 1) for s in steps] == [1.0 - k / 10 for k in
                                                               range(len(steps))]
    assert steps[-1]["loss_percent"] == steps[-2]["loss_percent"] == 0.0
    assert m.metrics["frame_loss_steps"] == len(steps)


@pytest.mark.topology("topologies/one-router.toml", rate="fastethernet")
def test_pingpong_stores_the_round_trip(testbed_net: Any) -> None:
    m = measure(testbed_net, "pingpong", ip=4, protocol="tcp", size=64, count=50,
                overhead=False)
    assert m.metrics["rtt_median_us"] == pytest.approx(2 * m.metrics["owd_median_us"])
    assert m.metrics["rtt_min_us"] <= m.metrics["rtt_median_us"] <= m.metrics["rtt_max_us"]


@pytest.mark.topology("topologies/nat64-tayga.toml", rate="fastethernet")
def test_cpu_of_the_features_programs_without_naming_them(testbed_net: Any) -> None:
    m = measure(testbed_net, "iperf3", protocol="udp", ip=6, rate="10mbit", duration=1)
    assert list(m.result["cpu"]["processes"]) == ["tayga@r1"]  # not iperf3, not ss
    assert m.metrics["cpu_tayga_pct"] > 0


@pytest.mark.topology("topologies/one-router.toml")
def test_receiver_leaves_no_file_in_the_runs_scratch_folder(testbed_net: Any) -> None:
    m = measure(testbed_net, "receiver", ip=4, frame_size=1518, rate="5mbit", duration=0.5)
    assert m.metrics["received"] > 0
    folder = testbed_net.scratch_dir() / "measure"
    assert folder.is_dir() and list(folder.iterdir()) == []
