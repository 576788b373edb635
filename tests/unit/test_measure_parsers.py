"""Pure parsers of measurement tools, on outputs captured in tests/data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.errors import CommandError
from testbed.measure import cpu, iperf, ping_tool, pingpong_probe, probe, stackcost_probe, udpprobe

DATA = Path(__file__).resolve().parents[1] / "data"


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_iperf3_tcp() -> None:
    r = iperf.parse_iperf3(text("iperf3_tcp_v4.json"))
    assert r.protocol == "tcp"
    assert r.length == 1400
    assert len(r.flows) == 1
    f = r.flows[0]
    assert f.direction == "forward"
    assert f.retransmits == 45
    assert f.receiver_bps == pytest.approx(745010343.7102764)
    assert r.receiver_bps == f.receiver_bps
    assert r.to_dict()["flows"][0]["sent_bytes"] == 93548000


def test_iperf3_udp_v6() -> None:
    r = iperf.parse_iperf3(text("iperf3_udp_v6.json"))
    assert r.protocol == "udp" and r.target_bps == 50_000_000 and r.length == 1000
    f = r.flows[0]
    assert f.packets == 6245 and f.lost_packets == 0
    assert f.jitter_ms is not None and f.jitter_ms > 0


def test_iperf3_udp_loss() -> None:
    f = iperf.parse_iperf3(text("iperf3_udp_v4_loss.json")).flows[0]
    assert f.packets == 2498 and f.lost_packets == 1294
    assert f.lost_percent == pytest.approx(51.8, abs=0.01)
    assert f.received_bytes == 1204000


def test_iperf3_bidir_has_two_flows() -> None:
    r = iperf.parse_iperf3(text("iperf3_udp_bidir_v4.json"))
    assert [f.direction for f in r.flows] == ["forward", "reverse"]
    assert r.receiver_bps == pytest.approx(2 * 19979708.90778948)


def test_iperf3_error_becomes_command_error() -> None:
    with pytest.raises(CommandError, match="No route to host"):
        iperf.parse_iperf3(text("iperf3_error.json"), argv=["iperf3", "-c", "x"])
    with pytest.raises(CommandError, match="not JSON"):
        iperf.parse_iperf3("iperf3: error - something")


def test_iperf3_client_argv() -> None:
    a = iperf.client_argv("10.0.0.2", protocol="udp", bitrate_bps=10_000_000, length=100,
                          duration_s=2, direction="bidir", ip=4, port=5202)
    assert a[:3] == ["iperf3", "-c", "10.0.0.2"]
    assert "-J" in a and "--bidir" in a and "-4" in a
    assert a[a.index("-b") + 1] == "10000000" and a[a.index("-l") + 1] == "100"
    assert a[a.index("-t") + 1] == "2"
    assert "-R" in iperf.client_argv("h", direction="reverse")
    assert "-N" in iperf.client_argv("h", nodelay=True)
    with pytest.raises(ValueError):
        iperf.client_argv("h", direction="sideways")  # type: ignore[arg-type]
    assert iperf.server_argv(5201) == ["iperf3", "-s", "-p", "5201", "-1"]


def test_ping_v4() -> None:
    r = ping_tool.parse_ping(text("ping_v4.txt"))
    assert r.transmitted == 10 and r.received == 10 and r.loss_percent == 0
    assert len(r.rtts_ms) == 10
    assert r.min_ms is not None and r.min_ms <= min(r.rtts_ms) + 1e-9
    assert r.reply_bytes == 64


def test_ping_v6_sizes() -> None:
    r = ping_tool.parse_ping(text("ping_v6.txt"))
    assert r.reply_bytes == 1240 and len(r.rtts_ms) == 10
    assert r.max_ms == pytest.approx(0.064)


def test_ping_all_lost() -> None:
    r = ping_tool.parse_ping(text("ping_v4_loss.txt"))
    assert r.received == 0 and r.loss_percent == 100 and r.rtts_ms == ()
    assert r.avg_ms is None


def test_ping_garbage() -> None:
    with pytest.raises(ValueError):
        ping_tool.parse_ping("ping: connect: Network is unreachable")


def test_sizes_from_frame_sizes() -> None:
    # gometz-2015: ping -s framesize-8 was theirs; we fill the Ethernet frame exactly
    assert ping_tool.icmp_data_size(64, 4) == 18
    assert ping_tool.icmp_data_size(1518, 4) == 1472
    assert ping_tool.icmp_data_size(1518, 6) == 1452
    assert ping_tool.udp_data_size(1518, 4) == 1472
    assert ping_tool.udp_data_size(1518, 6) == 1452
    with pytest.raises(ValueError):
        ping_tool.udp_data_size(64, 6)
    a = ping_tool.ping_argv("::1", ip=6, size=56)
    assert a[:2] == ["ping", "-6"] and a[-1] == "::1" and "120" in a


def test_summarize_owd() -> None:
    s = pingpong_probe.summarize_owd([2000 * v for v in range(1, 101)])  # OWDs 1..100 us
    assert s["n"] == 100 and s["min_us"] == 1 and s["max_us"] == 100
    assert s["median_us"] == pytest.approx(50.5)
    assert s["typical_latency_us"] == s["median_us"]
    assert s["worst_case_latency_us"] == s["p999_us"]
    assert s["p99_us"] == pytest.approx(99.01)
    assert s["pdv_p99_us"] == pytest.approx(98.01)
    assert s["ipdv_mean_us"] == pytest.approx(1.0)
    assert pingpong_probe.summarize_owd([]) == {"n": 0}


def test_pingpong_seq_packing_small_messages() -> None:
    for size in (1, 2, 8, 100):
        m = pingpong_probe.pack_seq(300, size)
        assert len(m) == size
        assert pingpong_probe.unpack_seq(m, size) == 300 % (1 << (8 * min(size, 8)))


def test_pingpong_captured_output() -> None:
    d = json.loads(text("pingpong_udp_v6.json"))
    assert d["owd"]["n"] == d["count"] == len(d["rtts_ns"])
    assert d["owd"] == pingpong_probe.summarize_owd(d["rtts_ns"])


def test_pingpong_argv() -> None:
    a = pingpong_probe.argv("/py", "client", host="::1", port=1, protocol="tcp", size=10, count=5)
    assert a[:3] == ["/py", "-S", "-c"] and "--busy-poll" in a
    assert probe.program_of(a) == ("testbed.measure.pingpong_probe", "client")


def test_stackcost_captured_output() -> None:
    d = json.loads(text("stackcost_v4.json"))
    for key in ("tcp_socket_create", "udp_socket_create", "tcp_connect", "connection_cycle"):
        assert d[key]["n"] == d["count"]
        assert d[key]["min_us"] <= d[key]["median_us"] <= d[key]["max_us"]
    assert d["connections_per_s"] > 0
    s = stackcost_probe.summarize_us([1000, 2000, 3000])
    assert s["mean_us"] == pytest.approx(2.0)


def test_snmp_counters() -> None:
    c = udpprobe.parse_snmp_udp(text("proc_net_snmp.txt"), text("proc_net_snmp6.txt"))
    assert "UdpInDatagrams" in c and "UdpRcvbufErrors" in c and "Udp6RcvbufErrors" in c
    assert udpprobe.rcvbuf_errors({"UdpRcvbufErrors": 2, "Udp6RcvbufErrors": 3}) == 5


def test_interarrival_summary() -> None:
    arr = [i * 1_000_000 for i in range(11)]  # every 1 ms
    s = udpprobe.interarrival_summary(arr)
    assert s["packets"] == 11 and s["pps"] == pytest.approx(1000.0)
    assert s["ipd"]["median_us"] == pytest.approx(1000.0)
    assert sum(s["ipd"]["histogram"]["counts"]) == 10
    assert udpprobe.interarrival_summary([5])["pps"] == 0.0
    h = udpprobe.histogram([0.0, 1.0, 2.0, 3.0], bins=2)
    assert h["counts"] == [2.0, 2.0]


def test_udpprobe_captured_outputs() -> None:
    s = json.loads(text("udpprobe_send.json"))
    r = json.loads(text("udpprobe_recv.json"))
    assert s["attempted"] == s["sent"] + s["eagain"] + s["refused"]
    assert r["received"] == r["received_by_socket"] + r["rcvbuf_drops"]
    assert r["last_ns"] >= r["first_ns"]


def test_cpu_parsers() -> None:
    a = cpu.parse_proc_stat(text("proc_stat_before.txt"))
    b = cpu.parse_proc_stat(text("proc_stat_after.txt"))
    share = cpu.machine_share(a, b)
    assert sum(share.values()) == pytest.approx(100.0)
    assert cpu.machine_share(a, a)["softirq"] == 0.0
    ut = cpu.parse_pid_stat(text("proc_pid_stat.txt"))
    assert all(v >= 0 for v in ut)
    odd = "42 (my prog) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"
    assert cpu.parse_pid_stat(odd) == (11, 12)
    p = cpu.process_percent((0, 0), (50, 50), 1.0, 100)
    assert p == {"user": 50.0, "system": 50.0, "total": 100.0}
    with pytest.raises(ValueError):
        cpu.parse_proc_stat("intr 1 2 3")


def test_cpu_sampler_on_this_machine() -> None:
    import os

    s = cpu.CpuSampler({"self": os.getpid(), "gone": 2**22 + 12345})
    s.start()
    sum(range(100000))
    doc = s.stop()
    assert "softirq" in doc["machine_percent"]
    assert doc["processes"]["self"]["pid"] == os.getpid()
    assert doc["processes"]["self"]["total_from"] == "schedstat"
    assert doc["processes"]["self"]["total"] > 0  # sum(range(100000)) is far below a tick
    assert "error" in doc["processes"]["gone"]


def test_stackcost_probe_on_loopback_times_every_operation() -> None:
    """The probe's server and client over the loopback: every operation timed `count` times,
    the per-packet ones (UDP send to the server's discard socket, TCP echo) included."""
    import socket
    import threading

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    threading.Thread(target=stackcost_probe.serve, args=("127.0.0.1", port), daemon=True).start()
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            import time

            time.sleep(0.02)
    doc = stackcost_probe.client("127.0.0.1", port, 50)
    for op in ("tcp_socket_create", "udp_socket_create", "tcp_connect", "connection_cycle",
               "udp_send", "tcp_echo"):
        assert doc[op]["n"] == 50 and doc[op]["median_us"] > 0, op
    assert doc["tcp_echo"]["median_us"] > doc["udp_send"]["median_us"]


def test_a_process_total_is_the_schedulers_run_time_where_known(tmp_path: Path) -> None:
    """Clock ticks read 0 for a process using a few ms a second (the CI failure of 28 Nov:
    TAYGA at 10 Mbit/s for 1 s read 0 %); the run time of its threads is exact."""
    for tid, ns in (("7", 3_000_000), ("8", 1_000_000)):
        d = tmp_path / "7" / "task" / tid
        d.mkdir(parents=True)
        (d / "schedstat").write_text(f"{ns} 0 1\n")
    assert cpu.run_ns(7, tmp_path) == 4_000_000
    assert cpu.run_ns(9, tmp_path) is None
    p = cpu.process_percent((0, 0), (0, 0), 1.0, 100, ran_ns=4_000_000)
    assert p == {"user": 0.0, "system": 0.0, "total": pytest.approx(0.4)}
