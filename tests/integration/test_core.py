"""Integration tests (root): every shipped topology, shaping accuracy, cleanup, host untouched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from testbed import netlink, state
from testbed.testbed import Testbed as Testbed_
from testbed.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]
TOPO = ROOT / "topologies"
TESTBED = [sys.executable, "-m", "testbed.cli"]


def far_end(name: str) -> str:
    return "r1" if name == "host-router" else "h2"


@pytest.mark.parametrize(
    ("name", "sets"),
    [
        ("p2p", {}),
        ("host-router", {}),
        ("one-router", {}),
        ("two-routers", {"core_mtu": "1280"}),
        ("chain", {"routers": "0"}),
        ("chain", {"routers": "5"}),
    ],
)
def test_topology_pings_end_to_end_both_families(name: str, sets: dict[str, str]) -> None:
    topo = load_topology(TOPO / f"{name}.toml", sets)
    with Testbed_(topo) as tb:
        for fam in (4, 6):
            dst = tb.address(far_end(name), fam)
            out = tb.run("h1", ["ping", "-c", "2", "-i", "0.2", "-W", "2", dst])
            assert " 0% packet loss" in out.stdout
            back = tb.run(far_end(name), ["ping", "-c", "1", "-W", "2", tb.address("h1", fam)])
            assert back.returncode == 0


def test_small_mtu_core_fragments_big_packets() -> None:
    topo = load_topology(TOPO / "two-routers.toml", {"core_mtu": "1280"})
    with Testbed_(topo) as tb:
        # 1400 bytes with DF set cannot cross a 1280-byte link; without DF it is fragmented.
        df = tb.run(
            "h1", ["ping", "-c1", "-W2", "-M", "do", "-s", "1400", tb.address("h2", 4)], check=False
        )
        assert df.returncode != 0
        frag = tb.run("h1", ["ping", "-c1", "-W2", "-M", "dont", "-s", "1400", tb.address("h2", 4)])
        assert frag.returncode == 0
        mtu = json.loads(tb.run("r1", ["ip", "-j", "link", "show", "eth1"]).stdout)[0]["mtu"]
        assert mtu == 1280


def _rx_packets(tb: Testbed_, node: str) -> tuple[float, int]:
    t0 = time.monotonic()
    out = tb.run(node, ["ip", "-j", "-s", "link", "show", "eth0"]).stdout
    t1 = time.monotonic()
    return (t0 + t1) / 2, int(json.loads(out)[0]["stats64"]["rx"]["packets"])


def _udp_goodput(payload: int, offered: str) -> tuple[float, dict[str, Any]]:
    topo = load_topology(TOPO / "p2p.toml", {"rate": "ethernet"})
    with Testbed_(topo) as tb:
        server = tb.popen(
            "h2",
            ["iperf3", "-s", "-1", "-B", tb.address("h2", 4)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(100):
            if tb.run("h2", ["ss", "-Htln", "sport = :5201"]).stdout.strip():
                break
            time.sleep(0.05)
        client = tb.popen(
            "h1",
            [
                "iperf3",
                "-c",
                tb.address("h2", 4),
                "-u",
                "-b",
                offered,
                "-l",
                str(payload),
                "-t",
                "6",
                "-J",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        time.sleep(1.5)
        t0, p0 = _rx_packets(tb, "h2")
        time.sleep(3.0)
        t1, p1 = _rx_packets(tb, "h2")
        out, _ = client.popen.communicate(timeout=30)
        server.popen.wait(timeout=10)
        qdiscs = tb.qdiscs()
    goodput = (p1 - p0) * payload * 8 / (t1 - t0)
    return goodput, {"client": json.loads(out), "qdiscs": qdiscs}


@pytest.mark.parametrize(("payload", "offered"), [(1472, "12M"), (18, "3M")])
def test_ethernet_link_carries_line_rate_goodput(payload: int, offered: str) -> None:
    # Every frame costs max(payload + 8 + 20 + 14 + 24, 84) bytes on a 10 Mbit/s wire.
    wire = max(payload + 66, 84)
    expected = payload / wire * 10e6
    # A shaper cannot deliver more than its rate, but a busy machine can make it (or the
    # sender) deliver less for a moment: up to five tries, and the best one is judged. A wrong
    # rate or missing per-frame overhead (1.6 % at 1472 bytes) fails every try. (CI once saw
    # three tries in a row 2.7 % short while another job loaded both cores.)
    tries: list[float] = []
    for _ in range(5):
        goodput, extra = _udp_goodput(payload, offered)
        kinds = {q["kind"] for q in extra["qdiscs"]}
        assert kinds & {"tbf", "netem"}
        tries.append(goodput)
        if goodput == pytest.approx(expected, rel=0.01) or goodput > expected:
            break
    best = max(tries)
    assert best == pytest.approx(expected, rel=0.01), (tries, expected)


def test_cleanup_after_exception() -> None:
    topo = load_topology(TOPO / "chain.toml", {"routers": "3", "rate": "ethernet"})
    names: list[str] = []
    with pytest.raises(RuntimeError), Testbed_(topo) as tb:
        names = list(tb.plan.namespaces.values())  # type: ignore[union-attr]
        tb.popen("r2", ["sleep", "61.2345"])
        assert all(netlink.netns_exists(n) for n in names)
        raise RuntimeError("boom")
    assert names and not any(netlink.netns_exists(n) for n in names)
    assert state.load(tb.name or "") is None
    assert not subprocess.run(["pgrep", "-f", "^sleep 61.2345$"], capture_output=True).stdout


HOLDER = textwrap.dedent("""
    import sys, time
    from testbed.testbed import Testbed as Testbed_
    from testbed.topology import load_topology
    topo = load_topology(sys.argv[1], {"routers": "3"})
    with Testbed_(topo, sys.argv[2]) as tb:
        tb.popen("h2", ["sleep", "301.2345"])
        (tb.scratch_dir() / "daemon.conf").write_text("x")
        print("READY", flush=True)
        time.sleep(60)
""")


def _start_holder(name: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(TOPO / "chain.toml"), name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "READY", proc.stderr.read() if proc.stderr else ""
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cleanup_on_signal(sig: signal.Signals) -> None:
    name = f"sig{int(sig)}"
    proc = _start_holder(name)
    rec = state.load(name)
    assert rec is not None and all(netlink.netns_exists(n) for n in rec.namespaces.values())
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert not any(netlink.netns_exists(n) for n in rec.namespaces.values())
    assert state.load(name) is None
    assert not subprocess.run(["pgrep", "-f", "^sleep 301.2345$"], capture_output=True).stdout


def test_kill9_then_clean_recovers() -> None:
    name = "kill9"
    proc = _start_holder(name)
    rec = state.load(name)
    assert rec is not None
    proc.kill()
    proc.wait(timeout=10)
    assert all(netlink.netns_exists(n) for n in rec.namespaces.values())  # really left behind
    out = subprocess.run([*TESTBED, "clean"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert f"run {name}: removed" in out.stdout
    assert not any(netlink.netns_exists(n) for n in rec.namespaces.values())
    assert not subprocess.run(["pgrep", "-f", "^sleep 301.2345$"], capture_output=True).stdout
    assert state.load(name) is None
    assert not state.scratch_dir(name).exists()


def test_clean_leaves_live_and_kept_runs_alone() -> None:
    proc = _start_holder("alive")
    try:
        up = subprocess.run(
            [*TESTBED, "up", str(TOPO / "p2p.toml"), "--name", "kept"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert up.returncode == 0, up.stderr
        out = subprocess.run([*TESTBED, "clean"], capture_output=True, text=True, cwd=ROOT)
        assert "still held" in out.stdout
        assert state.load("alive") is not None and state.load("kept") is not None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        down = subprocess.run([*TESTBED, "down", "--name", "kept"], capture_output=True, text=True,
                              cwd=ROOT)
        assert down.returncode == 0, down.stderr


def _host_snapshot() -> dict[str, str]:
    cmds = {
        "addr": ["ip", "-j", "addr"],
        "route4": ["ip", "-j", "-4", "route", "show", "table", "all"],
        "route6": ["ip", "-j", "-6", "route", "show", "table", "all"],
        "rules": ["ip", "-j", "rule"],
        "nft": ["nft", "list", "ruleset"],
        "qdisc": ["tc", "-j", "qdisc"],
    }
    snap = {k: subprocess.run(v, capture_output=True, text=True).stdout for k, v in cmds.items()}
    link = json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True, text=True).stdout)
    snap["links"] = json.dumps(sorted((x["ifname"], x.get("mtu")) for x in link))
    for key in (
        "net/ipv4/ip_forward",
        "net/ipv6/conf/all/forwarding",
        "net/ipv6/conf/default/accept_dad",
        "net/ipv4/icmp_ratelimit",
    ):
        snap[key] = Path(f"/proc/sys/{key}").read_text()
    return snap


def test_host_namespace_untouched() -> None:
    before = _host_snapshot()
    topo = load_topology(TOPO / "two-routers.toml", {"rate": "fastethernet"})
    with Testbed_(topo) as tb:
        during = _host_snapshot()
        tb.run("h1", ["ping", "-c1", "-W2", tb.address("h2", 6)])
    after = _host_snapshot()
    assert before == during == after


def test_cli_up_exec_down(tmp_path: Path) -> None:
    before = set(netlink.list_netns())
    up = subprocess.run(
        [*TESTBED, "up", str(TOPO / "chain.toml"), "--set", "routers=5", "--name", "cli", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)
    h2v6 = next(
        a for i in info["interfaces"] if i["node"] == "h2" for a in i["addresses"] if ":" in a
    ).split("/")[0]
    ok = subprocess.run(
        [*TESTBED, "exec", "--name", "cli", "h1", "--", "ping", "-c1", "-W2", h2v6],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    rc = subprocess.run(
        [*TESTBED, "exec", "--name", "cli", "h1", "--", "sh", "-c", "exit 7"], cwd=ROOT
    )
    assert rc.returncode == 7
    show = subprocess.run([*TESTBED, "show"], capture_output=True, text=True, cwd=ROOT)
    assert "tb-cli-r5" in show.stdout
    down = subprocess.run([*TESTBED, "down", "--name", "cli"], capture_output=True, text=True,
                          cwd=ROOT)
    assert down.returncode == 0, down.stderr
    assert not {n for n in netlink.list_netns() if n.startswith("tb-cli-")}
    assert {n for n in before if not n.startswith("tb-")} <= set(netlink.list_netns())


def test_bad_topology_exits_2_without_traceback_and_creates_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[nodes.h1]\n[nodes.h2]\n[[links]]\nendpoints = ['h1', 'h3']\n")
    before = set(netlink.list_netns())
    out = subprocess.run([*TESTBED, "up", str(bad)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert str(bad) in out.stderr and "links[0].endpoints" in out.stderr
    assert "unknown node 'h3'" in out.stderr
    assert set(netlink.list_netns()) == before


def test_doctor_json_reports_features() -> None:
    out = subprocess.run([*TESTBED, "doctor", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    feats = data["features"]
    for key in (
        "netns",
        "veth",
        "tbf",
        "netem",
        "sit",
        "tun",
        "jool",
        "iperf3",
        "tayga",
        "isatapd",
        "radvd",
        "jool-tools",
        "qemu",
        "virtme-ng",
    ):
        assert isinstance(feats[key], bool), key
    assert feats["netns"] and feats["veth"] and feats["tbf"]
    assert data["details"]["netem"]["fix"] or feats["netem"]


@pytest.mark.skipif(os.environ.get("TESTBED_IN_VM") == "1", reason="host-only check")
def test_delay_on_host_without_netem_fails_clearly() -> None:
    from testbed import capabilities

    if capabilities.has("netem"):
        pytest.skip("this kernel has netem; the VM-tier test covers delay")
    out = subprocess.run(
        [*TESTBED, "up", str(TOPO / "p2p.toml"), "--set", "delay=5ms"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 1
    assert "sch_netem" in out.stderr and "testbed vm" in out.stderr
