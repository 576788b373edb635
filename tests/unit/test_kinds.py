"""Measurement kinds: declarations, validation, every runner over a fake testbed with canned
tool outputs, the server/client lifecycle, CPU sampling, the registry and the docs."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sqlite3
import statistics
import sys
from collections.abc import Mapping
from contextlib import closing, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from testbed import netlink, results
from testbed.errors import CommandError, DaemonError, SpecError
from testbed.measure import docs, iperf, ping_tool, udpprobe
from testbed.measure import kinds as kinds_pkg
from testbed.measure.kinds import KINDS, Context, Measured, base, measure, validate_params
from testbed.measure.kinds.base import UNITS, Metric, serve
from tests.unit.fake_testbed import DATA, FakeTestbed, data, program


def ctx() -> Context:
    return Context(python="python3")


def params(kind: str, **given: Any) -> dict[str, Any]:
    return validate_params(kind, {"cpu": False, **given} if KINDS[kind].param("cpu") else given,
                           "x.toml", "measurements.m")


# --- declarations and validation ------------------------------------------------------------


def test_every_kind_declares_units_from_the_vocabulary_and_unique_names() -> None:
    assert {"iperf3", "rfc2544", "ping", "pingpong", "stackcost", "receiver"} <= set(KINDS)
    for k in KINDS.values():
        assert len(set(k.param_names)) == len(k.param_names), k.name
        names = [m.name for m in k.metrics]
        assert len(set(names)) == len(names), k.name
        assert all(m.unit in UNITS and m.doc for m in k.metrics), k.name
        assert all(p.doc for p in k.params), k.name
        assert "cpu_processes" not in k.param_names or k.param("cpu_processes").default is None


def test_a_metric_needs_a_known_unit_and_a_family_matches_its_members() -> None:
    with pytest.raises(ValueError, match="unit 'Mbit'"):
        Metric("x_bps", "Mbit", "bad unit")
    fam = Metric("v{ip}_receiver_bps", "bit/s", "per family")
    assert fam.matches("v4_receiver_bps") and fam.matches("v6_receiver_bps")
    assert not fam.matches("receiver_bps") and not fam.matches("v4_receiver_bps_x")
    assert KINDS["iperf3"].metric("cpu_tayga_pct") is not None
    assert KINDS["iperf3"].metric("cpu_tayga") is None


@pytest.mark.parametrize(("kind", "given", "key", "text"), [
    ("ping", {"zap": 1}, "measurements.m.zap", "unknown parameter of ping"),
    ("ping", {"ip": 5}, "measurements.m.ip", "5 is not allowed"),
    ("ping", {"count": 0}, "measurements.m.count", "bad value 0"),
    ("ping", {"count": True}, "measurements.m.count", "bad value True"),
    ("ping", {"interval": float("nan")}, "measurements.m.interval", "bad value nan"),
    ("iperf3", {"rate": "fast"}, "measurements.m.rate", "fast"),
    ("iperf3", {"ratio": "90-10"}, "measurements.m.ratio", "bad value"),
    ("iperf3", {"cpu_processes": "tayga"}, "measurements.m.cpu_processes", "bad value"),
    ("iperf3", {"client": 1}, "measurements.m.client", "bad value 1"),
    ("rfc2544", {"frame_size": 64, "ip_payload": 100}, "measurements.m",
     "give only one of frame_size, ip_payload"),
    ("rfc2544", {"frame_size": 64, "ip": 6}, "measurements.m.frame_size",
     "cannot carry one byte of UDP data over IPv6"),
    ("ping", {"frame_size": 60, "ip": 6}, "measurements.m.frame_size", "ICMP echo request"),
    ("pingpong", {"ip_payload": 20, "protocol": "tcp"}, "measurements.m.ip_payload",
     "no message bytes"),
    ("receiver", {"ip": 6, "frame_size": 66}, "measurements.m.frame_size", "over IPv6"),
    ("rfc2544", {"test": "latency"}, "measurements.m.test", "'latency' is not allowed"),
    ("nosuch", {}, "measurements.m.kind", "unknown measurement kind"),
])
def test_validation_names_the_parameter(kind: str, given: dict[str, Any], key: str,
                                        text: str) -> None:
    with pytest.raises(SpecError) as err:
        validate_params(kind, given, "x.toml", "measurements.m")
    assert err.value.file == "x.toml" and err.value.key == key
    assert text in str(err.value)


def test_validation_merges_defaults_and_a_given_size_replaces_the_default_one() -> None:
    p = validate_params("receiver", {"ip_payload": 100}, "x", "m")
    assert p["frame_size"] is None and p["ip_payload"] == 100 and p["rate"] == "10mbit"
    assert validate_params("receiver", {}, "x", "m")["frame_size"] == 1518
    assert validate_params("iperf3", {"ratio": "90/10", "cpu_processes": ["tayga"]}, "x",
                           "m")["cpu_processes"] == ["tayga"]


# --- the runners over canned outputs --------------------------------------------------------


def check_clean(tb: FakeTestbed, m: Measured, kind: str) -> None:
    """Declared metrics only, nothing left running, no file left in the scratch folder."""
    assert KINDS[kind].undeclared(m.metrics) == []
    assert tb.leftovers() == []
    json.dumps(m.result)  # storable


def test_iperf3_tcp(tmp_path: Path) -> None:
    tb = FakeTestbed(tmp_path, {"iperf3 -c": data("iperf3_tcp_v4.json")})
    m = measure("iperf3", tb, params("iperf3", duration=3, length=1000), ctx())
    want = iperf.parse_iperf3(data("iperf3_tcp_v4.json"))
    assert m.metrics["receiver_bps"] == m.metrics["v4_receiver_bps"] == want.receiver_bps
    assert m.metrics["v4_retransmits"] == 45.0
    (client,) = tb.started("iperf3 -c")
    assert client[client.index("-c") + 1] == "10.0.0.3" and "-4" in client
    assert client[client.index("-l") + 1] == "1000" and client[client.index("-t") + 1] == "3"
    (server,) = tb.started("iperf3 -s")
    assert server[server.index("-p") + 1] == client[client.index("-p") + 1]
    check_clean(tb, m, "iperf3")


def test_iperf3_ratio_runs_a_v4_and_a_v6_flow_sharing_the_rate(tmp_path: Path) -> None:
    tb = FakeTestbed(tmp_path, {"iperf3 -c": lambda argv: data(
        "iperf3_udp_v6.json" if "-6" in argv else "iperf3_udp_v4_loss.json")})
    m = measure("iperf3", tb, params("iperf3", protocol="udp", ratio="75/25", rate="100mbit"),
                ctx())
    v4 = iperf.parse_iperf3(data("iperf3_udp_v4_loss.json"))
    v6 = iperf.parse_iperf3(data("iperf3_udp_v6.json"))
    assert m.metrics["receiver_bps"] == pytest.approx(v4.receiver_bps + v6.receiver_bps)
    assert m.metrics["v4_lost_percent"] == pytest.approx(100.0 * 1294 / 2498)
    assert m.metrics["v6_lost_percent"] == 0.0
    rates = {("-6" in a): a[a.index("-b") + 1] for a in tb.started("iperf3 -c")}
    assert rates == {False: "75000000", True: "25000000"}
    ports = {a[a.index("-p") + 1] for a in tb.started("iperf3 -s")}
    assert len(ports) == 2
    check_clean(tb, m, "iperf3")


def test_iperf3_stops_its_servers_when_the_client_fails(tmp_path: Path) -> None:
    tb = FakeTestbed(tmp_path, {"iperf3 -c": data("iperf3_error.json")})
    with pytest.raises(CommandError):
        measure("iperf3", tb, params("iperf3"), ctx())
    assert tb.leftovers() == []


def test_ping(tmp_path: Path) -> None:
    tb = FakeTestbed(tmp_path, {"ping": data("ping_v4.txt")})
    m = measure("ping", tb, params("ping", frame_size=1518, count=5), ctx())
    rtts = ping_tool.parse_ping(data("ping_v4.txt")).rtts_ms
    assert m.metrics["rtt_median_ms"] == statistics.median(rtts)
    assert m.metrics["icmp_data"] == 1518 - 18 - 20 - 8
    (argv,) = tb.started("ping")
    assert "10.0.0.3" in argv
    check_clean(tb, m, "ping")


def test_pingpong_with_its_loopback_overhead(tmp_path: Path) -> None:
    """By default the loopback run is a second exchange: its own server and client."""
    doc = json.loads(data("pingpong_udp_v6.json"))
    tb = FakeTestbed(tmp_path, {"pingpong_probe client": json.dumps(doc)})
    m = measure("pingpong", tb, params("pingpong", ip=6, ip_payload=108, count=200), ctx())
    assert m.metrics["owd_median_us"] == doc["owd"]["median_us"]
    assert m.metrics["rtt_median_us"] == 2 * doc["owd"]["median_us"]
    assert m.metrics["message_bytes"] == 100.0
    assert m.metrics["probe_overhead_median_us"] == doc["owd"]["median_us"]
    main, loop = tb.started("pingpong_probe client")
    assert main[main.index("--host") + 1] == "fd00::3" and "--count" in main
    assert loop[loop.index("--host") + 1] == "::1"
    assert "--overhead" not in main and "--overhead" not in loop
    servers = tb.started("pingpong_probe server")
    assert len(servers) == 2 and all(p.stopped for p in tb.procs)
    check_clean(tb, m, "pingpong")


def test_pingpong_with_its_loopback_overhead_forked(tmp_path: Path) -> None:
    """overhead_fork: one client start does both runs: it prints the network document, waits
    for the go-ahead, then measures the loopback overhead with forked processes."""
    doc = json.loads(data("pingpong_udp_v6.json"))
    loop = dict(doc, owd=dict(doc["owd"], median_us=3.25, mean_us=3.5), host="::1")
    tb = FakeTestbed(tmp_path, {"pingpong_probe client": json.dumps(doc) + "\n" + json.dumps(loop)})
    m = measure("pingpong", tb, params("pingpong", ip=6, ip_payload=108, count=200,
                                       overhead_fork=True), ctx())
    assert m.metrics["owd_median_us"] == doc["owd"]["median_us"]
    assert m.metrics["probe_overhead_median_us"] == 3.25
    assert m.metrics["probe_overhead_mean_us"] == 3.5
    (main,) = tb.started("pingpong_probe client")
    assert main[main.index("--host") + 1] == "fd00::3" and "--count" in main
    assert main[main.index("--overhead") + 1] == "::1"
    (client,) = [p for p in tb.procs if p.argv is main]
    assert client.popen.stdin_text == "go\n"
    assert len(tb.started("pingpong_probe server")) == 1 and all(p.stopped for p in tb.procs)
    assert m.result["probe_overhead_loopback"]["host"] == "::1"
    assert "rtts_ns" not in m.result["probe_overhead_loopback"]
    assert "overhead" not in m.result["probe"]
    check_clean(tb, m, "pingpong")


def test_pingpong_network_server_stopped_before_the_loopback_run(tmp_path: Path) -> None:
    """The runner's CPU window (`between`) closes, and the network server is stopped, before
    the client is told to run over loopback."""
    doc = json.loads(data("pingpong_udp_v6.json"))
    tb = FakeTestbed(tmp_path, {"pingpong_probe client": json.dumps(doc) + "\n" + json.dumps(doc)})
    seen: list[tuple[bool, str]] = []

    def between() -> None:
        server, client = tb.procs
        seen.append((server.stopped, client.popen.stdin_text))

    p = params("pingpong", ip=4, count=10)
    out = kinds_pkg.pingpong.exchange(tb, "h2", "h1", "10.0.0.3", p, ctx(), 64,
                                      overhead="127.0.0.1", between=between)
    assert seen == [(True, "")]
    assert out["overhead"]["owd"] == doc["owd"] and tb.leftovers() == []


def test_pingpong_overhead_from_an_older_probe(tmp_path: Path) -> None:
    """A client that printed only its network document: the loopback run is a second
    exchange (its own server and client), as before."""
    doc = json.loads(data("pingpong_udp_v6.json"))
    tb = FakeTestbed(tmp_path, {"pingpong_probe client": json.dumps(doc)})
    m = measure("pingpong", tb, params("pingpong", ip=6, ip_payload=108, count=200,
                                       overhead_fork=True), ctx())
    assert m.metrics["probe_overhead_median_us"] == doc["owd"]["median_us"]
    main, loop = tb.started("pingpong_probe client")
    assert main[main.index("--overhead") + 1] == "::1"  # asked, but it did not
    assert loop[loop.index("--host") + 1] == "::1" and "--overhead" not in loop
    assert len(tb.started("pingpong_probe server")) == 2 and all(p.stopped for p in tb.procs)
    check_clean(tb, m, "pingpong")


def test_pingpong_client_that_fails_says_what_it_printed(tmp_path: Path) -> None:
    tb = FakeTestbed(tmp_path, {"pingpong_probe client": ""})
    with pytest.raises(CommandError, match="no JSON document"):
        measure("pingpong", tb, params("pingpong", ip=4, count=10, overhead_fork=True), ctx())
    assert tb.leftovers() == []


def test_pingpong_without_overhead_runs_one_plain_client(tmp_path: Path) -> None:
    doc = json.loads(data("pingpong_udp_v6.json"))
    tb = FakeTestbed(tmp_path, {"pingpong_probe client": json.dumps(doc)})
    m = measure("pingpong", tb, params("pingpong", ip=4, count=10, overhead=False), ctx())
    (main,) = tb.started("pingpong_probe client")
    assert "--overhead" not in main and "probe_overhead_median_us" not in m.metrics
    check_clean(tb, m, "pingpong")


def test_stackcost(tmp_path: Path) -> None:
    doc = json.loads(data("stackcost_v4.json"))
    tb = FakeTestbed(tmp_path, {"stackcost_probe client": json.dumps(doc)})
    m = measure("stackcost", tb, params("stackcost", count=200), ctx())
    assert m.metrics["tcp_connect_us"] == doc["tcp_connect"]["median_us"]
    assert m.metrics["connections_per_s"] == doc["connections_per_s"]
    check_clean(tb, m, "stackcost")


def told_senders_done(tb: FakeTestbed) -> list[bool]:
    """Per receiver started: whether it was told its senders ended before it was read (it
    waits with no timer of its own on the virtual clock)."""
    return [udpprobe.SENDERS_DONE in p.popen.signals for p in tb.procs
            if program(p.argv) == "udpprobe recv"]


def test_receiver_reads_the_receivers_file_and_removes_it(tmp_path: Path) -> None:
    recv = json.loads(data("udpprobe_recv_timestamps.json"))
    tb = FakeTestbed(tmp_path / "scratch", {
        "udpprobe recv": json.dumps(recv), "udpprobe send": data("udpprobe_send_paced.json")})
    m = measure("receiver", tb, params("receiver", ip_payload=1480, rate="5.92mbit",
                                       duration=0.4), ctx())
    assert m.metrics["pps"] == recv["timing"]["pps"]
    assert m.metrics["ipd_median_us"] == recv["timing"]["ipd"]["median_us"]
    assert m.metrics["lost"] == 0.0 and m.metrics["received"] == 200.0
    assert m.metrics["offered_pps"] == pytest.approx(500.0)
    (rx,) = tb.started("udpprobe recv")
    out = Path(rx[rx.index("--out") + 1])
    assert out.parent == tmp_path / "scratch" / "measure"  # the run's scratch folder
    assert told_senders_done(tb) == [True]
    assert not out.exists()
    check_clean(tb, m, "receiver")


def test_receiver_runs_longer_where_its_rate_needs_it_for_packets(tmp_path: Path) -> None:
    def sent_for(**given: object) -> float:
        tb = FakeTestbed(tmp_path / str(len(given)), {
            "udpprobe recv": data("udpprobe_recv_timestamps.json"),
            "udpprobe send": data("udpprobe_send_paced.json")})
        m = measure("receiver", tb, params("receiver", ip_payload=1480, rate="5.92mbit",
                                           **given), ctx())
        (tx,) = tb.started("udpprobe send")
        duration = float(tx[tx.index("--duration") + 1])
        assert m.result["duration_s"] == duration
        return duration

    assert sent_for(duration=0.4) == 0.4  # 500 datagrams/s
    assert sent_for(duration=0.4, packets=1000) == pytest.approx(2.0)  # 1000 at 500/s
    assert sent_for(duration=3, packets=1000) == 3.0  # the duration already carries them
    assert udpprobe.lasting(1.0, 10000, 812.7) == pytest.approx(12.305, abs=1e-3)
    assert udpprobe.lasting(1.0, None, 812.7) == 1.0 and udpprobe.lasting(1.0, 5, 0) == 1.0


def test_rfc2544_search_over_canned_trials(tmp_path: Path) -> None:
    sent = json.loads(data("udpprobe_send_trial.json"))
    tb = FakeTestbed(tmp_path, {"udpprobe recv": data("udpprobe_recv_trial.json"),
                                "udpprobe send": json.dumps(sent)}, rate_bps=10e6)
    p = params("rfc2544", ip_payload=1480, duration=0.5, resolution=0.1, max_late_ms=5.0,
               max_rate="12mbit")
    m = measure("rfc2544", tb, p, ctx())
    # every canned trial delivers everything, on time, at the sender's achieved rate (within
    # 2% of any offered rate up to 12 Mbit/s): the search climbs to the top
    assert sent["achieved_pps"] * 8 * 1480 > 0.98 * 12e6
    assert m.metrics["throughput_bps"] == pytest.approx(12e6, rel=0.02)
    assert m.metrics["generator_limited"] == 0.0
    assert m.metrics["ip_payload"] == 1480 and m.metrics["udp_data"] == 1472
    assert m.metrics["search_trials"] == len(tb.started("udpprobe recv"))
    assert told_senders_done(tb) == [True] * int(m.metrics["search_trials"])
    check_clean(tb, m, "rfc2544")


def test_a_trial_whose_receiver_writes_nothing_says_so(tmp_path: Path) -> None:
    tb = FakeTestbed(tmp_path, {"udpprobe send": data("udpprobe_send_paced.json")})
    with pytest.raises(DaemonError, match="ended without writing its result"):
        measure("receiver", tb, params("receiver", duration=0.4), ctx())
    assert tb.leftovers() == []


def test_a_runner_returning_an_undeclared_metric_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def sloppy(tb: Any, p: Mapping[str, Any], c: Context) -> Measured:
        return Measured({"loss_percent": 0.0, "rtt_p42_ms": 1.0}, {})

    monkeypatch.setitem(KINDS, "ping", dataclasses.replace(KINDS["ping"], runner=sloppy))
    with pytest.raises(kinds_pkg.UndeclaredMetric, match=r"rtt_p42_ms.*kinds/ping\.py"):
        measure("ping", FakeTestbed(tmp_path), params("ping"), ctx())


# --- the lifecycle helper -------------------------------------------------------------------


def test_serve_stops_the_server_and_removes_its_file_when_the_block_fails(
        tmp_path: Path) -> None:
    tb = FakeTestbed(tmp_path)
    c = ctx()
    with pytest.raises(RuntimeError), serve(tb, c, "h2", lambda port, out: [
            "python3", "-m", "testbed.measure.udpprobe", "recv", "--port", str(port),
            "--out", str(out)], proto="udp", what="receiver", name="rx", output=True) as srv:
        assert srv.output is not None and srv.output.parent == tmp_path / "measure"
        srv.output.write_text("{}")  # as if it had written something
        raise RuntimeError("the client failed")
    assert tb.procs[0].stopped and tb.leftovers() == []


def test_serve_fails_at_once_when_the_server_dies(tmp_path: Path) -> None:
    tb = FakeTestbed(tmp_path, listening=False, dies=True)
    with pytest.raises(DaemonError, match="did not listen on tcp port 20000"), serve(
            tb, ctx(), "h2", lambda port, out: ["iperf3", "-s", "-p", str(port)], proto="tcp",
            what="iperf3 server", name="srv"):
        pytest.fail("a dead server is never handed over")
    assert tb.procs[0].stopped


def test_serve_gives_each_server_a_fresh_port(tmp_path: Path) -> None:
    tb, c = FakeTestbed(tmp_path), ctx()
    ports = []
    for _ in range(3):
        with serve(tb, c, "h2", lambda port, out: ["iperf3", "-s", "-p", str(port)],
                   proto="tcp", what="s", name="s") as srv:
            ports.append(srv.port)
    assert len(set(ports)) == 3


def test_run_client_names_a_client_that_printed_no_json(tmp_path: Path) -> None:
    tb = FakeTestbed(tmp_path, {"pingpong_probe client": "Traceback: boom"})
    with pytest.raises(CommandError, match=r"ping-pong client printed no JSON.*boom"):
        base.run_client(tb, "h1", ["python3", "-m", "testbed.measure.pingpong_probe", "client"],
                        timeout_s=5, what="ping-pong client")


# --- CPU sampling ---------------------------------------------------------------------------


def _own_comm() -> str:
    return Path(f"/proc/{os.getpid()}/comm").read_text().strip()


def test_feature_pids_by_name_or_everything_but_the_measurement(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    me = os.getpid()
    monkeypatch.setattr(netlink, "netns_pids", lambda ns: [me] if ns == "tb-fake-r1" else [])
    tb = FakeTestbed(tmp_path)
    comm = _own_comm()
    assert base.feature_pids(tb, [comm]) == {f"{comm}@r1": me}
    assert base.feature_pids(tb, ["tayga"]) == {}
    assert base.feature_pids(tb, []) == {}
    assert base.feature_pids(tb, None) == {f"{comm}@r1": me}
    assert base.feature_pids(tb, None, exclude=[comm]) == {}


def test_cpu_window_samples_the_programs_asked_for(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []

    def pids(tb: Any, names: Any, exclude: Any = ()) -> dict[str, int]:
        asked.append((names, tuple(exclude)))
        return {"tayga@r1": os.getpid()}

    monkeypatch.setattr(base, "feature_pids", pids)
    tb = FakeTestbed(tmp_path, {"iperf3 -c": data("iperf3_tcp_v4.json")})
    p = validate_params("iperf3", {"duration": 1}, "x", "m")
    m = measure("iperf3", tb, p, ctx())
    assert asked == [(None, ("python3", "python", "iperf3"))]  # unset: the features' programs
    assert {"cpu_machine_softirq_pct", "cpu_tayga_pct"} <= set(m.metrics)
    assert m.result["cpu"]["processes"]["tayga@r1"]["pid"] == os.getpid()
    off = measure("iperf3", tb, params("iperf3"), ctx())
    assert not any(k.startswith("cpu_") for k in off.metrics) and off.result["cpu"] is None


# --- the registry: adding a kind is adding a module -----------------------------------------


def test_a_new_kind_is_one_module(tmp_path: Path) -> None:
    sys.path.insert(0, str(DATA))
    try:
        found = kinds_pkg.discover([str(DATA / "kinds_example")], "kinds_example")
    finally:
        sys.path.remove(str(DATA))
    kind = found["tcprtt"]
    doc = json.loads(data("pingpong_udp_v6.json"))
    tb = FakeTestbed(tmp_path, {"pingpong_probe client": json.dumps(doc)})
    p = base.validate(kind, {"ip": 6, "cpu": False, "count": 200}, "x", "m")
    m = kind.runner(tb, p, ctx())
    assert kind.undeclared(m.metrics) == [] and tb.leftovers() == []
    assert m.metrics["rtt_median_us"] == 2 * doc["owd"]["median_us"]
    (cli,) = tb.started("pingpong_probe client")
    assert cli[cli.index("--protocol") + 1] == "tcp"
    with pytest.raises(SpecError) as err:
        base.validate(kind, {"size": 1400, "count": 20_000}, "x.toml", "measurements.m")
    assert err.value.key == "measurements.m.count"


def test_the_registry_refuses_a_module_without_its_kind(tmp_path: Path) -> None:
    pkg = tmp_path / "badkinds"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "zap.py").write_text("X = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(TypeError, match=r"badkinds\.zap has no KIND"):
            kinds_pkg.discover([str(pkg)], "badkinds")
    finally:
        sys.path.remove(str(tmp_path))


def test_docs_measurements_md_is_generated_from_the_declarations() -> None:
    text = docs.DOC.read_text()
    assert docs.render(text) == text, "run: .venv/bin/python -m testbed.measure.docs --write"
    for k in KINDS.values():
        assert f"### `{k.name}`" in text
        for m in k.metrics:
            assert f"| `{m.name}` | {m.unit} |" in text


# --- units in the results database ----------------------------------------------------------


def _row(run: str, metrics: dict[str, float], result: dict[str, Any]) -> results.TrialRow:
    return results.TrialRow(f"{run}/m/p/0", run, "e", "full", "m", "ping", {"ip": 4}, "p", 0,
                            1.0, 2.0, "ok", None, metrics, result, {}, [])


def _show(db: Path, *extra: str) -> str:
    from testbed.cli import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["results", "--db", str(db), "show", *extra]) == 0
    return buf.getvalue()


def test_results_show_prints_units_stored_or_declared(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with closing(results.connect(db)) as con:
        results.start_run(con, "e", "full", {"name": "e", "paper": "gometz-2015",
                                             "description": "d"}, {}, 2, run_id="new")
        results.write_trial(con, _row("new", {"rtt_mean_ms": 0.5}, {
            "units": {"rtt_mean_ms": "ms"}, "description": "ICMP latency"}))
        results.start_run(con, "e", "full", {"name": "e"}, {}, 1, run_id="old")
        # a trial stored before units were: no `units` in its result
        results.write_trial(con, _row("old", {"loss_percent": 0.0}, {}))
    out = _show(db)
    assert "paper: gometz-2015" in out and "ICMP latency" in out
    line = {ln.split()[0]: ln.split()[1] for ln in out.splitlines() if ln.startswith("    ")
            and ln.split()[0] in ("rtt_mean_ms", "loss_percent")}
    assert line == {"rtt_mean_ms": "ms", "loss_percent": "%"}
    doc = json.loads(_show(db, "--json"))
    (group,) = doc["groups"]  # one group: same measurement and point
    assert group["units"] == {"rtt_mean_ms": "ms", "loss_percent": "%"}
    assert {r["paper"] for r in doc["runs"]} == {"gometz-2015", None}


def test_an_old_database_opens_and_shows(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with closing(results.connect(db)) as con:
        results.write_trial(con, _row("r", {"rtt_median_ms": 1.0}, {"params": {}}))
    with closing(sqlite3.connect(db)) as raw:
        assert raw.execute("SELECT result FROM trials").fetchone()[0] == '{"params":{}}'
    assert "rtt_median_ms                  ms" in _show(db)


def test_declarations_refuse_unknown_types_and_units() -> None:
    with pytest.raises(ValueError, match="type 'integer'"):
        base.Param("x", "integer", 1, "a number")
    with pytest.raises(ValueError, match="unit 'Mbit/s'"):
        base.Metric("x", "Mbit/s", "a rate")


def test_the_report_reads_paper_description_and_units(tmp_path: Path) -> None:
    from testbed.report import data as report_data

    db = tmp_path / "r.sqlite"
    with closing(results.connect(db)) as con:
        results.start_run(con, "e", "full", {"name": "e", "paper": "zeadally-2004"}, {}, 1,
                          run_id="r1")
        results.write_trial(con, _row("r1", {"rtt_mean_ms": 0.5}, {
            "units": {"rtt_mean_ms": "ms"}, "description": "ICMP latency"}))
        results.start_run(con, "e", "full", {"name": "e"}, {}, 1, run_id="r0")
        (new,) = results.trials(con, run_id="r1")
        assert [r["paper"] for r in results.runs(con)] == ["zeadally-2004", None]
    assert report_data.description(new) == "ICMP latency"
    assert report_data.unit(new, "rtt_mean_ms") == "ms"
    old = _row("r0", {"rtt_mean_ms": 0.5}, {})
    assert report_data.description(old) == "" and report_data.unit(old, "rtt_mean_ms") is None


def test_the_registry_imports_a_kind_only_when_it_is_looked_up() -> None:
    import subprocess

    code = ("import sys\nfrom testbed.measure.kinds import KINDS\n"
            "pre = 'testbed.measure.kinds.'\n"
            "loaded = lambda: sorted(m[len(pre):] for m in sys.modules\n"
            "                        if m.startswith(pre) and m[len(pre):] in KINDS)\n"
            "print(loaded(), 'pingpong' in KINDS, 'nope' in KINDS, len(KINDS) > 5)\n"
            "print(KINDS['pingpong'].name, KINDS.get('nope'), loaded())\n"
            "print(len(list(KINDS.values())) == len(KINDS) == len(loaded()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[] True False True", "pingpong None ['pingpong']", "True"]


def test_a_kind_set_in_the_registry_replaces_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    ping = KINDS["ping"]
    monkeypatch.setitem(KINDS, "ping", dataclasses.replace(ping, doc="x"))
    monkeypatch.setitem(KINDS, "extra", ping)
    assert KINDS["ping"].doc == "x" and "extra" in KINDS
    monkeypatch.undo()
    assert KINDS["ping"] is ping and "extra" not in KINDS
