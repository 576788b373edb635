"""A downstream project's network tests, written against testbed's pytest plugin only."""

from __future__ import annotations

import pytest


@pytest.mark.topology("one-router")
def test_ipv4_and_ipv6_cross_a_router(testbed_net):  # type: ignore[no-untyped-def]
    for ip in (4, 6):
        dst = testbed_net.address("h2", ip)
        out = testbed_net.run("h1", ["ping", f"-{ip}", "-c", "1", "-W", "2", dst])
        assert "1 received" in out.stdout


@pytest.mark.kernel("tun", "tayga", "unbound")
@pytest.mark.topology("nat64-tayga", dns64="true")
def test_an_ipv6_only_host_reaches_an_ipv4_host_by_name(testbed_net):  # type: ignore[no-untyped-def]
    # two features composed on r1: TAYGA (NAT64) and unbound (DNS64)
    out = testbed_net.run("h1", ["getent", "ahostsv6", "h2.test"]).stdout
    synthesized = out.split()[0]
    assert synthesized.startswith("2001:db8:ffff::"), out
    ping = testbed_net.run("h1", ["ping", "-6", "-c", "1", "-W", "2", synthesized])
    assert "1 received" in ping.stdout


@pytest.mark.kernel("sit")
@pytest.mark.topology("6to4")
def test_6to4_where_the_kernel_has_sit(testbed_net):  # type: ignore[no-untyped-def]
    # this machine may lack the sit module: the plugin then runs this test in ONE boot of the
    # full-kernel VM (CI=true or --testbed-vm=run), never skipping it silently under CI
    dst = testbed_net.address("h2", 6)
    out = testbed_net.run("h1", ["ping", "-6", "-c", "1", "-W", "2", dst])
    assert "1 received" in out.stdout
