"""Transition mechanisms built for real: traffic both ways, packets really take the mechanism,
broken daemons fail clearly, and nothing is left behind (root; sit/jool tests run in the VM)."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testbed import capabilities, netlink, state
from testbed.api import Action
from testbed.errors import DaemonError, MissingCapability, SpecError
from testbed.testbed import Testbed
from testbed.topology import load_topology

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "topologies"
DAEMONS = ("tayga", "radvd", "isatapd", "unbound", "iperf3", "tcpdump")


# --- helpers ---------------------------------------------------------------------------------


def build(name: str, **params: str) -> Testbed:
    return Testbed(load_topology(TOPO / f"{name}.toml", params))


def daemon_pids(tb: Testbed) -> dict[int, str]:
    found = {}
    for node in tb.topology.node_names:
        for pid in netlink.netns_pids(tb.netns(node)):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm in DAEMONS:
                found[pid] = comm
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def assert_gone(run: str, pids: dict[int, str]) -> None:
    """Nothing of run `run` is left: namespaces, daemons, scratch folders, /etc/netns files."""
    left = [ns for ns in netlink.list_netns() if ns.startswith(f"tb-{run}-")]
    assert left == [], f"namespaces left behind: {left}"
    live = {pid: comm for pid, comm in pids.items() if alive(pid)}
    assert live == {}, f"processes left behind: {live}"
    assert not state.scratch_dir(run).exists()
    assert glob.glob(f"/etc/netns/tb-{run}-*") == []


def wait_listening(tb: Testbed, node: str, port: int, deadline_s: float = 10) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if tb.run(node, ["ss", "-Hltn", "sport", "=", f":{port}"], check=False).stdout.strip():
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {node}:{port}")


def iperf3(
    tb: Testbed, client: str, server: str, dst: str, *, udp: bool, reverse: bool = False
) -> dict[str, Any]:
    """A short iperf3 run; returns the end summary (bits per second, lost packets)."""
    port = 5201 + int(udp) + 2 * int(reverse)
    srv = tb.popen(server, ["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL)
    wait_listening(tb, server, port)
    argv = ["iperf3", "-c", dst, "-p", str(port), "-t", "1", "-J"]
    if udp:
        argv += ["-u", "-b", "5M", "-l", "1000"]  # functional: a rate a loaded host keeps up with
    if reverse:
        argv.append("-R")
    out = tb.run(client, argv, timeout=30)
    srv.stop()
    doc = json.loads(out.stdout)
    end: dict[str, Any] = doc["end"]["sum" if udp else "sum_received"]
    assert end["bits_per_second"] > 1e6, end
    if udp:
        assert end["lost_percent"] < 5, end
    return end


def ping(tb: Testbed, node: str, dst: str, count: int = 3) -> float:
    """Ping and return the mean RTT in ms (all replies must arrive)."""
    out = tb.run(node, ["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "2", dst], timeout=30)
    assert f"{count} received" in out.stdout, out.stdout
    return float(out.stdout.rsplit("=", 1)[1].split("/")[1])


class Capture:
    """tcpdump -c N in a node, started (and listening) before the traffic it should see."""

    def __init__(self, tb: Testbed, node: str, dev: str, expr: list[str], count: int = 3):
        self.proc = tb.popen(
            node,
            ["tcpdump", "-n", "-l", "-U", "-i", dev, "-c", str(count), *expr],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.popen.stderr is not None
        lines = [self.proc.popen.stderr.readline() for _ in range(2)]
        assert any("listening on" in line for line in lines), lines

    def packets(self, timeout: float = 15) -> list[str]:
        try:
            out, _ = self.proc.popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.stop()
            out = ""
        return [line for line in out.splitlines() if line.strip()]


# --- native reference rows (host) --------------------------------------------------------------


@pytest.mark.parametrize("family", [4, 6])
def test_native(family: int) -> None:
    with build(f"native{family}") as tb:
        run = str(tb.name)
        h1, h2 = tb.address("h1", family), tb.address("h2", family)
        ping(tb, "h1", h2)
        ping(tb, "h2", h1)
        iperf3(tb, "h1", "h2", h2, udp=True)
        iperf3(tb, "h1", "h2", h2, udp=False, reverse=True)
        other = 6 if family == 4 else 4
        out = tb.run("h1", ["ip", f"-{other}", "-o", "addr", "show", "scope", "global"])
        assert out.stdout.strip() == "", f"native{family} has IPv{other} addresses"
        pids = daemon_pids(tb)
    assert_gone(run, pids)


# --- NAT64 with TAYGA (host: tun) --------------------------------------------------------------


@pytest.mark.kernel("tun", "tayga")
def test_nat64_tayga() -> None:
    with build("nat64-tayga") as tb:
        run = str(tb.name)
        dst = tb.address("h2", 6)
        assert dst == "2001:db8:ffff::c612:102"
        assert tb.bind_address("h2", 6) == "198.18.1.2"
        # packets leave r1 towards h2 as IPv4 from the dynamic pool
        cap = Capture(tb, "r1", "eth1", ["src", "net", "192.168.255.0/24"])
        ping(tb, "h1", dst)
        assert len(cap.packets()) == 3
        iperf3(tb, "h1", "h2", dst, udp=True)
        iperf3(tb, "h1", "h2", dst, udp=False)
        iperf3(tb, "h1", "h2", dst, udp=False, reverse=True)  # data from the IPv4 side
        pids = daemon_pids(tb)
        assert "tayga" in pids.values()
    assert_gone(run, pids)


@pytest.mark.kernel("tun", "tayga", "unbound")
def test_nat64_tayga_dns64_by_name() -> None:
    with build("nat64-tayga", dns64="true") as tb:
        run = str(tb.name)
        out = tb.run("h1", ["getent", "ahostsv6", "h2.test"]).stdout
        assert out.split()[0] == "2001:db8:ffff::c612:102", out
        ping(tb, "h1", "h2.test")
        iperf3(tb, "h1", "h2", "h2.test", udp=False)
        assert Path("/etc/netns", tb.netns("h1"), "resolv.conf").exists()
        pids = daemon_pids(tb)
        assert list(pids.values()).count("unbound") == 2
    assert_gone(run, pids)


def test_tayga_well_known_prefix_refused_before_building() -> None:
    topo = load_topology(TOPO / "nat64-tayga.toml", {"prefix": "64:ff9b::/96"})
    before = set(netlink.list_netns())
    with pytest.raises(SpecError) as err, Testbed(topo, name="wkpcheck"):
        pass
    assert err.value.key == "features[0].pool4"
    assert err.value.file.endswith("nat64-tayga.toml")
    assert not [ns for ns in set(netlink.list_netns()) - before if ns.startswith("tb-wkpcheck")]


@pytest.mark.kernel("tun", "tayga")
def test_tayga_well_known_prefix_with_global_addresses(tmp_path: Path) -> None:
    """With global IPv4 addresses TAYGA accepts 64:ff9b::/96 (the rule is about the addresses)."""
    text = (TOPO / "nat64-tayga.toml").read_text()
    text = text.replace(
        'endpoints = ["r1", "h2"]',
        'endpoints = ["r1", "h2"]\naddresses = { r1 = ["5.5.5.1/24"], h2 = ["5.5.5.2/24"] }',
    )
    path = tmp_path / "nat64-tayga-wkp.toml"
    path.write_text(text)
    topo = load_topology(path, {"prefix": "64:ff9b::/96", "pool4": "5.6.7.0/24"})
    with Testbed(topo) as tb:
        assert tb.address("h2", 6) == "64:ff9b::505:502"
        ping(tb, "h1", "64:ff9b::505:502")


@pytest.mark.kernel("tun", "tayga")
def test_broken_tayga_is_a_daemon_error_and_the_testbed_is_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from testbed.daemons.tayga import TaygaConfig
    from testbed.features.base import Options
    from testbed.features.nat64_tayga import Nat64Tayga

    orig = Nat64Tayga.configure

    def bad(self: Nat64Tayga, opts: Options) -> None:
        orig(self, opts)  # then an ipv6-addr inside the prefix: TAYGA refuses it
        self.config = TaygaConfig(
            "nat64", "192.168.255.1", self.prefix, self.pool4, "2001:db8:ffff::1"
        )

    monkeypatch.setattr(Nat64Tayga, "configure", bad)
    before = set(netlink.list_netns())
    with pytest.raises(DaemonError) as err, Testbed(load_topology(TOPO / "nat64-tayga.toml")):
        pass
    assert err.value.daemon == "tayga" and err.value.node == "r1"
    assert "ipv6-addr cannot reside within configured prefix" in str(err.value)
    assert not [ns for ns in set(netlink.list_netns()) - before]


@pytest.mark.kernel("tun", "tayga")
def test_crashed_run_with_tayga_is_cleaned(tmp_path: Path) -> None:
    """SIGKILL the process holding a TAYGA testbed; `testbed clean` removes it all."""
    run = f"crash{os.getpid() % 10000}"
    _crash_and_clean(run, "nat64-tayga")


# --- composed features (issue 12): NAT64 + DNS64 on r1, a sysctl feature on h2 ----------------

COMPOSED = REPO / "tests" / "data" / "topologies" / "nat64-composed.toml"


def _composed(translator: str) -> None:
    from testbed.plan import plan_for

    topo = load_topology(COMPOSED, {"translator": translator})
    with Testbed(topo) as tb:
        run = str(tb.name)
        assert tb.plan is not None
        assert [f.kind for f in tb.plan.features] == [translator, "dns64", "sysctl"]
        # `testbed plan` prints the very actions that were applied (but for the run's name)
        printed = plan_for(topo, "RUN").describe()
        applied = [line.replace(run, "RUN") for line in tb.plan.describe()]
        assert printed == applied
        out = tb.run("h1", ["getent", "ahostsv6", "h2.test"]).stdout
        assert out.split()[0] == "2001:db8:ffff::c612:102", out
        assert tb.run("h2", ["sysctl", "-n", "net.ipv4.ip_default_ttl"]).stdout.strip() == "40"
        reply = tb.run("h1", ["ping", "-n", "-c", "2", "-W", "2", "h2.test"], timeout=30).stdout
        assert "2 received" in reply, reply
        # h2 answers with TTL 40: what reaches h1 is below 40, not near the default of 255
        hlims = [int(w.split("=")[1]) for w in reply.split() if w.startswith(("ttl=", "hlim="))]
        assert hlims and all(30 <= h < 40 for h in hlims), reply
        iperf3(tb, "h1", "h2", "h2.test", udp=False)
        pids = daemon_pids(tb)
        assert list(pids.values()).count("unbound") == 2
    assert_gone(run, pids)


@pytest.mark.kernel("tun", "tayga", "unbound")
def test_composed_features_with_tayga() -> None:
    _composed("nat64-tayga")


@pytest.mark.kernel("jool", "unbound")
def test_composed_features_with_jool() -> None:
    _composed("nat64-jool")
    assert ",testbed," not in _jool_instances()


# --- kernel tier: sit (6to4, ISATAP) and jool --------------------------------------------------


@pytest.mark.kernel("sit")
def test_6to4() -> None:
    with build("6to4") as tb:
        run = str(tb.name)
        h1, h2 = tb.address("h1", 6), tb.address("h2", 6)
        assert (h1, h2) == ("2002:c612:1::1", "2002:c612:102::1")
        cap = Capture(tb, "r1", "eth0", ["ip", "proto", "41"], count=6)
        ping(tb, "h1", h2)
        assert len(cap.packets()) == 6  # requests and replies, each inside IPv4
        ping(tb, "h2", h1)
        iperf3(tb, "h1", "h2", h2, udp=True)
        iperf3(tb, "h2", "h1", h1, udp=False)
        assert tb.run("r1", ["ip", "-6", "addr", "show"]).stdout.strip() == ""  # IPv4-only
        pids = daemon_pids(tb)
    assert_gone(run, pids)


@pytest.mark.kernel("sit", "isatapd", "radvd")
def test_isatap() -> None:
    with build("isatap") as tb:
        run = str(tb.name)
        h1, h2 = tb.address("h1", 6), tb.address("h2", 6)
        assert h1 == "2001:db8:fea::5efe:c612:1"  # autoconfigured from r1's advert
        cap = Capture(tb, "r1", "eth0", ["ip", "proto", "41"], count=6)
        ping(tb, "h1", h2)
        assert len(cap.packets()) == 6
        ping(tb, "h2", h1)
        iperf3(tb, "h1", "h2", h2, udp=True)
        iperf3(tb, "h2", "h1", h1, udp=False)
        out = tb.run("h1", ["ip", "-6", "-o", "addr", "show", "dev", "eth0"]).stdout
        assert out.strip() == "", "the h1 -- r1 link must stay IPv4-only"
        out = tb.run("h1", ["ip", "-6", "-o", "addr", "show", "dev", "lo"]).stdout
        assert "::1/128" in out, "IPv6 loopback (the probes' overhead runs use it)"
        pids = daemon_pids(tb)
        assert {"radvd", "isatapd"} <= set(pids.values())
    assert_gone(run, pids)


@pytest.mark.kernel("sit", "isatapd", "radvd")
def test_isatapd_without_router_is_a_daemon_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from testbed.actions import Daemon
    from testbed.features.isatap import Isatap

    orig = Isatap.actions

    def no_router(self: Isatap) -> list[Action]:
        out = []
        for a in orig(self):
            if isinstance(a, Daemon) and a.name == "isatapd":
                i = a.argv.index("--router")  # falls back to the DNS name 'isatap': none here
                a = dataclasses.replace(a, argv=a.argv[:i] + a.argv[i + 2 :], deadline_s=4.0)
            out.append(a)
        return out

    monkeypatch.setattr(Isatap, "actions", no_router)
    before = set(netlink.list_netns())
    with pytest.raises(DaemonError) as err, build("isatap"):
        pass
    assert err.value.daemon == "isatapd" and err.value.node == "h1"
    assert "PRL" in str(err.value) or "isatap" in str(err.value)
    assert not [ns for ns in set(netlink.list_netns()) - before]


@pytest.mark.kernel("jool")
@pytest.mark.parametrize("prefix", ["2001:db8:ffff::/96", "64:ff9b::/96"])
def test_nat64_jool(prefix: str) -> None:
    with build("nat64-jool", prefix=prefix) as tb:
        run = str(tb.name)
        dst = tb.address("h2", 6)
        assert dst.endswith("c612:102") and dst.startswith(prefix.split("::")[0])
        listed = tb.run("r1", ["jool", "instance", "display", "--csv"]).stdout
        assert ",testbed,netfilter" in listed
        cap = Capture(tb, "r1", "eth1", ["src", "net", "192.168.255.0/24"])
        ping(tb, "h1", dst)
        assert len(cap.packets()) == 3
        iperf3(tb, "h1", "h2", dst, udp=True)
        iperf3(tb, "h1", "h2", dst, udp=False, reverse=True)
        pids = daemon_pids(tb)
    assert_gone(run, pids)
    assert ",testbed," not in _jool_instances()


@pytest.mark.kernel("jool", "unbound")
def test_nat64_jool_dns64_by_name() -> None:
    with build("nat64-jool", dns64="true") as tb:
        out = tb.run("h1", ["getent", "ahostsv6", "h2.test"]).stdout
        assert out.split()[0] == "2001:db8:ffff::c612:102", out
        iperf3(tb, "h1", "h2", "h2.test", udp=False)


@pytest.mark.kernel("jool")
def test_crashed_run_with_jool_is_cleaned() -> None:
    """A Jool instance lives in r1's namespace: it goes when `testbed clean` removes that."""
    run = f"crashj{os.getpid() % 1000}"
    _crash_and_clean(run, "nat64-jool")
    assert ",testbed," not in _jool_instances()


def _jool_instances() -> str:
    """Every Jool instance of the machine (display from the host namespace lists them all)."""
    return subprocess.run(
        ["jool", "instance", "display", "--csv"], capture_output=True, text=True, check=False
    ).stdout


def _crash_and_clean(run: str, topology: str) -> None:
    code = (
        "import sys, time\n"
        "from testbed.testbed import Testbed\n"
        "from testbed.topology import load_topology\n"
        f"with Testbed(load_topology({str(TOPO / (topology + '.toml'))!r}), name={run!r}):\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(300)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        pids: dict[int, str] = {}
        for ns in netlink.list_netns():
            if ns.startswith(f"tb-{run}-"):
                for pid in netlink.netns_pids(ns):
                    pids[pid] = Path(f"/proc/{pid}/comm").read_text().strip()
        if topology == "nat64-jool":
            assert ",testbed," in _jool_instances()  # Jool is no process: the kernel does it
        else:
            assert "tayga" in pids.values()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    clean = subprocess.run(
        [sys.executable, "-m", "testbed.cli", "clean"], capture_output=True, text=True, cwd=REPO
    )
    assert clean.returncode == 0, clean.stderr
    left = [ns for ns in netlink.list_netns() if ns.startswith(f"tb-{run}-")]
    assert left == []
    assert {p: c for p, c in pids.items() if alive(p)} == {}
    assert not state.scratch_dir(run).exists()  # daemon configs and logs


# --- missing kernel features (host) ------------------------------------------------------------


@pytest.mark.parametrize(("topology", "feature"), [("6to4", "sit"), ("isatap", "sit")])
def test_missing_sit_is_reported_before_building(topology: str, feature: str) -> None:
    if capabilities.has(feature):
        pytest.skip(f"this kernel has {feature}")
    before = set(netlink.list_netns())
    with pytest.raises(MissingCapability) as err, build(topology):
        pass
    assert err.value.feature == feature
    assert "testbed vm" in str(err.value)
    assert set(netlink.list_netns()) - before == set()


def test_missing_jool_is_reported_before_building() -> None:
    if capabilities.has("jool"):
        pytest.skip("this kernel has the jool module")
    with pytest.raises(MissingCapability) as err, build("nat64-jool"):
        pass
    assert err.value.feature == "jool"
    assert "testbed vm" in str(err.value)
