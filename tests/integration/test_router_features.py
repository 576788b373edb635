"""Router features (gometz-2015 go:6-go:9) built from their topologies and proved by traffic
on IPv4 and IPv6; nothing they start outlives the run."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testbed import netlink, state
from testbed.features import _router
from testbed.testbed import Testbed
from testbed.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]
TOPO = ROOT / "topologies"


def _checks(name: str, kind: str | None = None) -> dict[tuple[str, int], _router.CheckResult]:
    with Testbed(load_topology(TOPO / f"{name}.toml")) as tb:
        assert tb.plan is not None
        results = _router.run_checks(tb, tb.plan.features, kind)
    return {(r.feature, r.ip): r for r in results}


def _assert_works(res: _router.CheckResult) -> None:
    assert res.status == "works", f"{res.feature} IPv{res.ip}: {res.reason}\n{res.evidence}"


def test_nat_masquerade_and_port_forward_both_versions() -> None:
    got = _checks("router-nat")
    for ip in (4, 6):
        res = got[("nat", ip)]
        _assert_works(res)
        # the far side saw only the router's outside address, never h1's own
        translated, own = res.evidence["snat"]["arrived_from"].values()
        assert translated >= 3 and own == 0
        assert res.evidence["dnat0"]["received_bytes"] > 0
        assert res.evidence["router_counters"][f"masquerade-v{ip}"] >= 1


def test_nptv6_translates_the_prefix_keeping_the_host_part() -> None:
    got = _checks("router-nptv6")
    res = got[("nptv6", 6)]
    _assert_works(res)
    assert res.evidence["arrived_from"] == {
        "2001:db8:5::1": res.evidence["arrived_from"]["2001:db8:5::1"],
        "2001:2::1": 0,
    }
    assert res.evidence["inbound_ping"]["received"] == 3
    assert got[("nptv6", 4)].status == "not supported"


def test_firewall_allows_the_list_and_drops_the_rest_per_version() -> None:
    got = _checks("router-firewall")
    for ip in (4, 6):
        res = got[("firewall", ip)]
        _assert_works(res)
        assert res.evidence["denied"]["received_bytes"] == 0
        assert res.evidence["counters_delta"][f"deny-v{ip}"] >= 1
        assert res.evidence["counters_delta"][f"allow-v{ip}-tcp-5201"] >= 1
        other = 6 if ip == 4 else 4
        assert res.evidence["counters_delta"][f"deny-v{other}"] == 0


def test_dhcp_server_dhcpv6_and_slaac() -> None:
    with Testbed(load_topology(TOPO / "router-dhcp.toml")) as tb:
        assert tb.plan is not None
        results = _router.run_checks(tb, tb.plan.features, "dhcp-server")
    # h1: DHCPv4 and DHCPv6 leases from r1's dnsmasq; h2: a DHCPv4 lease and a SLAAC address
    by = {(r.evidence["client"], r.ip): r for r in results}
    assert set(by) == {("h1", 4), ("h1", 6), ("h2", 4), ("h2", 6)}
    assert by[("h2", 4)].status == "not supported"  # h2 asks no DHCPv4
    for key in (("h1", 4), ("h1", 6)):
        r = by[key]
        _assert_works(r)
        assert r.feature == "dhcp-server"
        assert r.evidence["lease"]["address"] == r.evidence["addresses"][0]["local"]
    slaac = by[("h2", 6)]
    assert slaac.feature == "slaac"
    _assert_works(slaac)
    assert slaac.evidence["addresses"][0]["dynamic"] is True
    assert slaac.evidence["addresses"][0]["local"].startswith("2001:2:0:1:")


def test_dhcp_relay_both_versions() -> None:
    got = _checks("router-dhcp-relay", "dhcp-relay")
    for ip in (4, 6):
        res = got[("dhcp-relay", ip)]
        _assert_works(res)
        assert res.evidence["relayed_by"] == "r1"
        assert res.evidence["lease"] is not None


def test_qos_htb_guarantees_the_gold_class_under_overload() -> None:
    got = _checks("router-qos")
    for ip in (4, 6):
        res = got[("qos", ip)]
        _assert_works(res)
        rx = res.evidence["received_bps"]
        assert rx["gold"] > 2 * rx["bulk"]  # 15 vs 5 Mbit/s guaranteed


@pytest.mark.kernel("hfsc", clock="virtual")  # rates exact, whatever the host load
def test_qos_hfsc_guarantees_the_gold_class_under_overload() -> None:
    got = _checks("router-qos-hfsc")
    for ip in (4, 6):
        res = got[("qos-hfsc", ip)]
        _assert_works(res)
        assert res.evidence["scheduler"] == "hfsc"
        assert res.evidence["received_bps"]["gold"] > 2 * res.evidence["received_bps"]["bulk"]


@pytest.mark.kernel("esp")
def test_ipsec_esp_on_the_wire_both_versions() -> None:
    got = _checks("router-ipsec")
    for ip in (4, 6):
        res = got[("ipsec", ip)]
        _assert_works(res)
        assert res.evidence["on_the_wire"]["esp"] >= 5
        assert res.evidence["on_the_wire"]["clear"] == 0


CHILD = """
import sys, time
from testbed.testbed import Testbed
from testbed.topology import load_topology
with Testbed(load_topology(sys.argv[1])) as tb:
    print(tb.name, flush=True)
    time.sleep(600)
"""


def _pids_in(namespaces: list[str]) -> dict[int, str]:
    found = {}
    for ns in namespaces:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        for p in out.stdout.split():
            with contextlib.suppress(OSError):  # exited meanwhile
                found[int(p)] = Path(f"/proc/{p}/comm").read_text().strip()
    return found


@pytest.mark.kernel("esp")
def test_ipsec_ipv6_inside_ipv4_outer() -> None:
    with Testbed(load_topology(TOPO / "router-ipsec.toml", {"outer": "4"})) as tb:
        assert tb.plan is not None
        (res,) = _router.run_checks(tb, tb.plan.features, "ipsec", (6,))
    _assert_works(res)
    assert res.evidence["outer"] == "IPv4 198.18.1.1 -> 198.18.1.2"
    assert res.evidence["on_the_wire"]["esp"] >= 5


def test_dhcp_daemons_gone_after_sigkill_and_clean() -> None:
    """A run killed with SIGKILL leaves dnsmasq and dhclient running in its namespaces;
    `testbed clean` removes them with the namespaces and the scratch folder."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(TOPO / "router-dhcp.toml")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        name = child.stdout.readline().strip()
        rec = state.load(name)
        assert rec is not None
        namespaces = list(rec.namespaces.values())
        deadline = time.monotonic() + 30  # `ip netns exec` is still `ip` until it execs
        while True:
            daemons = _pids_in(namespaces)
            if {"dnsmasq", "dhclient"} <= set(daemons.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert {"dnsmasq", "dhclient"} <= set(daemons.values())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        subprocess.run([sys.executable, "-m", "testbed.cli", "clean"], check=True,
                       capture_output=True)  # also when the test failed: nothing left behind
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = [p for p in daemons if Path(f"/proc/{p}").exists()]
        if not alive:
            break
        time.sleep(0.1)
    assert not alive, f"still running after clean: {alive}"
    assert not set(namespaces) & set(netlink.list_netns())
    assert not state.scratch_dir(name).exists()
    assert state.load(name) is None


def test_featurecheck_kind_works_and_says_why_not() -> None:
    from testbed import capabilities
    from testbed.measure import kinds
    from testbed.measure.kinds.base import Context

    def measure(feature: str, ip: int) -> dict[str, Any]:
        p = kinds.validate_params("featurecheck", {"feature": feature, "ip": ip}, "t", "m")
        return kinds.measure("featurecheck", None, p, Context()).result  # type: ignore[arg-type]

    nat = measure("nat", 4)
    assert nat["status"] == "works" and nat["topology"] == "router-nat"
    assert nat["checks"][0]["evidence"]["snat"]["ping"]["received"] == 3
    npt = measure("nptv6", 4)
    assert npt["status"] == "not supported" and "IPv6" in npt["checks"][0]["reason"]
    if not capabilities.has("esp"):
        esp = measure("ipsec", 6)
        assert esp["status"] == "not supported" and "'esp'" in esp["checks"][0]["reason"]
