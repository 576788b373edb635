"""Node features: the shipped topologies' features, option validation, their plan actions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testbed import capabilities, features
from testbed.actions import Command, Daemon, LoadModule, Sysctl, WriteFile
from testbed.daemons.jool import JoolConfig, listed
from testbed.daemons.radvd import radvd_config
from testbed.daemons.tayga import TaygaConfig, embed, tayga_addresses
from testbed.daemons.unbound import dns64_config, zone_config, zones_of
from testbed.errors import MissingCapability, SpecError
from testbed.features import isatap, sixtofour
from testbed.features._nat64 import Nat64
from testbed.features.nat64_tayga import Nat64Tayga
from testbed.plan import Plan, compile_plan
from testbed.testbed import check_needs
from testbed.topology import load_topology, topology_from_dict
from testbed.topology_model import Topology

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "topologies"
ALL = ("native4", "native6", "6to4", "isatap", "nat64-tayga", "nat64-jool")


def topo(name: str, **params: str) -> Topology:
    return load_topology(TOPO / f"{name}.toml", params)


def plan_of(t: Topology) -> Plan:
    return compile_plan(t, "t", netem_available=False)


def parse(t: Topology) -> list[features.Feature]:
    return list(plan_of(t).features)


def one(t: Topology) -> Any:
    (f,) = parse(t)
    return f


def three_nodes(
    feats: list[dict[str, Any]] | dict[str, Any], stacks: tuple[str, str, str], **extra: Any
) -> Topology:
    raw: dict[str, Any] = {
        "nodes": {
            "h1": {"stack": stacks[0]},
            "r1": {"role": "router", "stack": stacks[1]},
            "h2": {"stack": stacks[2]},
        },
        "links": [{"endpoints": ["h1", "r1"]}, {"endpoints": ["r1", "h2"], **extra}],
        "features": feats if isinstance(feats, list) else [feats],
    }
    return topology_from_dict(raw, file="t.toml")


# --- the topology files ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_every_topology_loads_with_the_experiment_rates(name: str) -> None:
    for rate in ("ethernet", "fastethernet"):
        t = topo(name, rate=rate)
        assert t.node_names == ("h1", "r1", "h2")
        assert all(
            lk.shape.rate_bps == {"ethernet": 10e6, "fastethernet": 100e6}[rate] for lk in t.links
        )
        kinds = [f.kind for f in parse(t)]
        if name.startswith("native"):
            assert kinds == []
        else:
            assert kinds and set(kinds) <= set(features.kinds())


def test_native_topologies_are_single_stack() -> None:
    assert {n.stack for n in topo("native4").nodes} == {"ipv4"}
    assert {n.stack for n in topo("native6").nodes} == {"ipv6"}


def test_registry_finds_every_module() -> None:
    assert {"6to4", "isatap", "nat64-tayga", "nat64-jool", "dns64"} <= set(features.kinds())
    for cls in features.classes():
        assert cls.summary and cls.__doc__, cls
        assert set(cls.kernel) <= set(capabilities.KERNEL_FEATURES), cls


# --- 6to4 -------------------------------------------------------------------------------------


def test_6to4_addresses() -> None:
    assert sixtofour.address_6to4("198.18.0.1") == "2002:c612:1::1"
    assert sixtofour.address_6to4("192.168.1.2") == "2002:c0a8:102::1"
    assert sixtofour.site_6to4("192.168.1.2") == "2002:c0a8:102::/48"


def test_6to4_plan() -> None:
    plan = plan_of(topo("6to4"))
    h1, h2 = plan.features
    assert isinstance(h1, sixtofour.SixToFour) and (h1.node, h1.v4) == ("h1", "198.18.0.1")
    assert (h2.node, h2.v4) == ("h2", "198.18.1.2")
    assert h1.needs() == ("sit",)
    first = h1.actions()[0]
    assert isinstance(first, Command)
    assert first.argv == (
        "ip", "link", "add", "tun6to4", "type", "sit", "remote", "any", "local", "198.18.0.1",
        "ttl", "64",
    )
    assert first.undo_argv == ("ip", "link", "del", "tun6to4")
    lines = plan.describe()
    assert "h1: ip -6 addr add 2002:c612:1::1/16 dev tun6to4" in lines
    assert any("routes 2002::/16 into tun6to4" in line for line in lines)
    assert plan.extra_address("h2", 6) is not None
    assert plan.extra_address("h2", 6).address == "2002:c612:102::1"  # type: ignore[union-attr]


def test_6to4_needs_dual_stack_hosts() -> None:
    t = three_nodes({"kind": "6to4", "node": "h1"}, ("ipv4", "ipv4", "dual"))
    with pytest.raises(SpecError) as err:
        parse(t)
    assert err.value.key == "nodes.h1.stack"


# --- ISATAP -----------------------------------------------------------------------------------


def test_isatap_interface_ids_follow_the_kernel() -> None:
    # private/benchmarking IPv4: u/l bit clear; a global address: 0200:5efe
    assert isatap.isatap_address("2001:db8:fea::/64", "198.18.0.1") == "2001:db8:fea::5efe:c612:1"
    assert isatap.isatap_address("2001:db8:fea::/64", "192.168.0.2") == "2001:db8:fea::5efe:c0a8:2"
    assert (
        isatap.isatap_address("2001:db8:fea::/64", "5.6.7.8") == "2001:db8:fea:0:200:5efe:506:708"
    )


def test_isatap_plan() -> None:
    m = one(topo("isatap"))
    assert isinstance(m, isatap.Isatap)
    assert (m.host, m.node, m.host_v4, m.router_v4) == ("h1", "r1", "198.18.0.1", "198.18.0.2")
    assert m.host_address == "2001:db8:fea::5efe:c612:1"
    assert m.needs() == ("sit", "isatapd", "radvd")
    acts = m.actions()
    first = acts[0]
    assert isinstance(first, Command)
    assert first.argv[:6] == ("ip", "link", "add", "is0", "type", "sit")
    assert first.argv[-1] == "isatap"
    sysctl = next(a for a in acts if isinstance(a, Sysctl))
    assert ("net.ipv6.conf.lo.disable_ipv6", "0") in sysctl.values and sysctl.node == "h1"
    isatapd = next(a for a in acts if isinstance(a, Daemon) and a.name == "isatapd")
    assert isatapd.argv[0] == "isatapd" and "--daemon" not in isatapd.argv
    assert isatapd.argv[isatapd.argv.index("--router") + 1] == "198.18.0.2"
    assert isatapd.after_stop == ("ip", "link", "del", "is0")


def test_isatap_refuses_a_link_that_carries_ipv6() -> None:
    t = three_nodes(
        {"kind": "isatap", "host": "h1", "node": "r1", "prefix": "2001:db8:fea::/64"},
        ("dual", "dual", "ipv6"),
    )
    with pytest.raises(SpecError) as err:
        parse(t)
    assert err.value.key == "nodes.h1.stack" and "ISATAP would not be used" in err.value.problem


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"prefix": "2001:db8:fea::/48"}, "features[0].prefix"),
        ({"prefix": "2001:2:0:1::/64"}, "features[0].prefix"),  # h2's link subnet
        ({"node": "h2"}, "features[0].node"),
        ({"host": "h9"}, "features[0].host"),
        ({"interval": 5}, "features[0].interval"),
    ],
)
def test_isatap_validation(change: dict[str, Any], key: str) -> None:
    table = {"kind": "isatap", "host": "h1", "node": "r1", "prefix": "2001:db8:fea::/64"}
    t = three_nodes({**table, **change}, ("ipv4", "dual", "ipv6"))
    with pytest.raises(SpecError) as err:
        parse(t)
    assert err.value.key == key


def test_radvd_config() -> None:
    text = radvd_config("is0", "2001:db8:fea::/64", unicast_only=True)
    assert "interface is0" in text and "UnicastOnly on;" in text
    assert "prefix 2001:db8:fea::/64" in text and "AdvAutonomous on;" in text
    assert "UnicastOnly" not in radvd_config("eth0", "2001:db8::/64")
    # unicast only: the route lives as long as the answer to the last solicitation says
    assert "AdvDefaultLifetime 9000;" in text
    assert "AdvDefaultLifetime" not in radvd_config("eth0", "2001:db8::/64")


# --- NAT64 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [  # RFC 6052, section 2.4, Table 1 (192.0.2.33)
        ("2001:db8::/32", "2001:db8:c000:221::"),
        ("2001:db8:100::/40", "2001:db8:1c0:2:21::"),
        ("2001:db8:122::/48", "2001:db8:122:c000:2:2100::"),
        ("2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"),
        ("2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"),
        ("2001:db8:122:344::/96", "2001:db8:122:344::c000:221"),
        ("64:ff9b::/96", "64:ff9b::c000:221"),
    ],
)
def test_rfc6052_embedding(prefix: str, expected: str) -> None:
    assert embed(prefix, "192.0.2.33") == expected


def test_nat64_defaults_are_the_papers() -> None:
    for kind in ("nat64-tayga", "nat64-jool"):
        m = one(topo(kind))
        assert isinstance(m, Nat64)
        assert (m.prefix, m.pool4) == ("2001:db8:ffff::/96", "192.168.255.0/24")
        assert m.servers == (("h2", "198.18.1.2"),) and m.clients == ("h1",)
        assert m.synthesized("198.18.1.2") == "2001:db8:ffff::c612:102"
        assert (m.router_v4, m.router_v6) == ("198.18.1.1", "2001:2::2")
    assert one(topo("nat64-tayga")).needs() == ("tun", "tayga")
    assert one(topo("nat64-jool")).needs() == ("jool", "jool-tools")
    plan = plan_of(topo("nat64-jool", dns64="true"))
    assert [f.kind for f in plan.features] == ["nat64-jool", "dns64"]
    assert plan.needs() == ["jool", "jool-tools", "unbound"]
    a = plan.extra_address("h2", 6)
    assert a is not None and (a.address, a.bind) == ("2001:db8:ffff::c612:102", "198.18.1.2")


def test_tayga_config_and_commands() -> None:
    m = one(topo("nat64-tayga"))
    assert isinstance(m, Nat64Tayga)
    text = m.config.text()
    assert "tun-device nat64\n" in text
    assert "ipv4-addr 192.168.255.1\n" in text
    assert "prefix 2001:db8:ffff::/96\n" in text
    assert "dynamic-pool 192.168.255.0/24\n" in text
    assert "ipv6-addr" not in text  # TAYGA derives it, and refuses one inside the prefix
    assert tayga_addresses("2001:db8:ffff::/96", "192.168.255.0/24") == (
        "192.168.255.1",
        "2001:db8:ffff::c0a8:ff01",
    )
    assert (
        "ipv6-addr 2001:db8::1"
        in TaygaConfig("t", "1.2.3.4", "2001:db8:ffff::/96", "1.2.3.0/24", "2001:db8::1").text()
    )
    acts = m.actions()
    assert isinstance(acts[0], WriteFile) and acts[0].text == text
    assert isinstance(acts[1], Daemon) and acts[1].argv[:3] == ("tayga", "-d", "--config")
    assert [a.argv for a in acts[2:] if isinstance(a, Command)] == [
        ("ip", "link", "set", "nat64", "up"),
        ("ip", "addr", "add", "198.18.1.1/32", "dev", "nat64"),
        ("ip", "-6", "addr", "add", "2001:2::2/128", "dev", "nat64"),
        ("ip", "route", "add", "192.168.255.0/24", "dev", "nat64"),
        ("ip", "-6", "route", "add", "2001:db8:ffff::/96", "dev", "nat64"),
    ]


def test_jool_argv() -> None:
    m = one(topo("nat64-jool"))
    c = m.config
    assert c == JoolConfig("testbed", "2001:db8:ffff::/96", "192.168.255.0/24")
    assert c.add_argv() == [
        "jool", "instance", "add", "testbed", "--netfilter", "--pool6", "2001:db8:ffff::/96",
    ]
    assert [a[5] for a in c.pool4_argvs()] == ["--tcp", "--udp", "--icmp"]
    assert c.remove_argv() == ["jool", "instance", "remove", "testbed"]
    csv = "Namespace,Name,Framework\n824db480,testbed,netfilter\n"
    assert listed(csv, "testbed") and not listed(csv, "other")
    acts = m.actions()
    assert isinstance(acts[0], LoadModule) and acts[0].module == "jool"
    assert isinstance(acts[1], Command) and acts[1].undo_argv == tuple(c.remove_argv())
    assert acts[1].always_undo  # the kernel frees an instance only after its namespace


def test_tayga_refuses_the_well_known_prefix_with_private_addresses() -> None:
    with pytest.raises(SpecError) as err:
        parse(topo("nat64-tayga", prefix="64:ff9b::/96"))
    assert err.value.file.endswith("nat64-tayga.toml")
    assert err.value.key == "features[0].pool4"  # 192.168.255.0/24 is private
    assert "RFC 6052" in err.value.problem and "nat64-jool" in str(err.value)
    # a global pool, but h2 still has a benchmarking address (198.18.1.2)
    with pytest.raises(SpecError) as err:
        parse(topo("nat64-tayga", prefix="64:ff9b::/96", pool4="5.6.7.0/24"))
    assert err.value.key == "features[0].prefix" and "198.18.1.2" in err.value.problem


def test_well_known_prefix_is_fine_with_global_addresses_or_with_jool() -> None:
    table = {"kind": "nat64-tayga", "node": "r1", "prefix": "64:ff9b::/96", "pool4": "5.6.7.0/24"}
    t = three_nodes(
        table,
        ("ipv6", "dual", "ipv4"),
        addresses={"r1": ["5.5.5.1/24"], "h2": ["5.5.5.2/24"]},
    )
    m = one(t)
    assert isinstance(m, Nat64) and m.synthesized("5.5.5.2") == "64:ff9b::505:502"
    jool = one(topo("nat64-jool", prefix="64:ff9b::/96"))
    assert isinstance(jool, Nat64) and jool.prefix == "64:ff9b::/96"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"prefix": "2001:db8:ffff::/80"}, "features[0].prefix"),
        ({"prefix": "2001:2::/96"}, "features[0].prefix"),  # h1's link subnet
        ({"prefix": "10.0.0.0/8"}, "features[0].prefix"),
        ({"pool4": "198.18.1.0/24"}, "features[0].pool4"),  # overlaps the r1 -- h2 link
        ({"pool4": "192.168.255.7/32"}, "features[0].pool4"),  # TAYGA's pool: /31 or wider
        ({"node": "h1"}, "features[0].node"),
        ({"enabled": "maybe"}, "features[0].enabled"),
        ({"instance": "x"}, "features[0].instance"),  # a Jool option on a TAYGA feature
        ({"device": "way-too-long-for-linux"}, "features[0].device"),
    ],
)
def test_nat64_validation(change: dict[str, Any], key: str) -> None:
    table = {"kind": "nat64-tayga", "node": "r1", **change}
    with pytest.raises(SpecError) as err:
        parse(three_nodes(table, ("ipv6", "dual", "ipv4")))
    assert err.value.key == key


def test_nat64_needs_both_sides() -> None:
    with pytest.raises(SpecError, match="IPv6-only clients to IPv4-only servers"):
        parse(three_nodes({"kind": "nat64-jool", "node": "r1"}, ("dual",) * 3))


def test_dns64_configs() -> None:
    records = {"h2.test": "198.18.1.2"}
    assert zones_of(records) == ["test"]
    zone = zone_config(records=records, workdir="/tmp/w")
    assert 'local-data: "h2.test. 300 IN A 198.18.1.2"' in zone
    assert "interface: 127.0.0.1" in zone and "dns64" not in zone
    res = dns64_config(
        listen=["2001:2::2"], prefix="2001:db8:ffff::/96", zones=["test"], workdir="/tmp/w"
    )
    assert 'module-config: "dns64 iterator"' in res
    assert "dns64-prefix: 2001:db8:ffff::/96" in res
    assert "interface: 2001:2::2" in res
    assert "stub-addr: 127.0.0.1@5353" in res
    assert "do-daemonize: no" in res


def test_dns64_is_its_own_feature_and_disabled_by_default() -> None:
    assert [f.kind for f in parse(topo("nat64-tayga"))] == ["nat64-tayga"]
    lines = plan_of(topo("nat64-tayga", dns64="true")).describe()
    assert any("start unbound-dns64" in line for line in lines)
    assert any("h1: /etc/resolv.conf" in line and "nameserver 2001:2::2" in line for line in lines)
    with pytest.raises(SpecError) as err:
        parse(
            three_nodes({"kind": "dns64", "node": "r1", "domain": "a b"}, ("ipv6", "dual", "ipv4"))
        )
    assert err.value.key == "features[0].domain"


# --- generic ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["6to4", "isatap", "nat64-tayga", "nat64-jool"])
def test_unknown_option_names_the_allowed_ones(name: str) -> None:
    t = topo(name)
    tables = t.features_list
    tables[0]["prefx"] = "x"
    bad = topology_from_dict({**_raw(t), "features": tables}, file="f.toml")
    with pytest.raises(SpecError) as err:
        parse(bad)
    assert err.value.key == "features[0].prefx" and err.value.file == "f.toml"
    assert err.value.allowed is not None and "kind" in err.value.allowed


def test_unknown_or_missing_kind() -> None:
    with pytest.raises(SpecError) as err:
        parse(three_nodes({"kind": "teredo", "node": "r1"}, ("dual",) * 3))
    assert err.value.key == "features[0].kind" and "nat64-jool" in str(err.value)
    with pytest.raises(SpecError) as err:
        three_nodes({"node": "r1"}, ("dual",) * 3)
    assert err.value.key == "features[0].kind"
    with pytest.raises(SpecError) as err:
        parse(three_nodes({"kind": "nat64-jool"}, ("ipv6", "dual", "ipv4")))
    assert err.value.key == "features[0].node"


def test_mechanism_table_is_refused_with_the_replacement() -> None:
    with pytest.raises(SpecError) as err:
        topology_from_dict({"nodes": {"h1": {}}, "mechanism": {"kind": "6to4"}}, file="m.toml")
    assert err.value.key == "mechanism" and "[[features]]" in str(err.value)


def test_missing_kernel_feature_points_to_the_vm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capabilities, "missing", lambda feats: [f for f in feats if f == "sit"])
    monkeypatch.setattr(capabilities, "probe", lambda wanted=None: {})
    with pytest.raises(MissingCapability) as err:
        check_needs(plan_of(topo("6to4")))
    assert err.value.feature == "sit"
    assert "6to4" in str(err.value) and "testbed vm" in str(err.value)
    assert "features[0]" in str(err.value)
    monkeypatch.setattr(capabilities, "missing", lambda feats: [])
    check_needs(plan_of(topo("6to4")))


def _raw(t: Topology) -> dict[str, Any]:
    """A topology back as a file body (enough for these three-node files)."""
    return {
        "nodes": {n.name: {"role": n.role, "stack": n.stack} for n in t.nodes},
        "links": [{"endpoints": [lk.a, lk.b]} for lk in t.links],
    }


# --- one option reader for every feature --------------------------------------------------------

ROUTED = {
    "nodes": {"h1": {"role": "host"}, "r1": {"role": "router"}, "h2": {"role": "host"}},
    "links": [{"endpoints": ["h1", "r1"]}, {"endpoints": ["r1", "h2"]}],
}


def _options(table: dict[str, Any]) -> features.Options:
    from testbed.addressing import plan_addresses
    from testbed.features.base import Option

    t = topology_from_dict(ROUTED, file="t.toml")
    declared = (Option("ip", "versions", "both"), Option("allow", "services", []))
    return features.Options(t, plan_addresses(t), 3, table, declared, "r1")


def test_the_option_reader_reads_versions_lists_services_and_links() -> None:
    o = _options({"ip": ["6", 4, 6], "allow": "tcp/5201"})
    assert o.versions() == (6, 4)
    assert _options({}).versions() == (4, 6)  # the declared default, "both"
    assert _options({}).versions(default=(4,)) == (4,)
    assert o.strings("allow") == ["tcp/5201"] and _options({}).strings("allow") == []
    assert o.proto_port("allow[0]", "udp/53") == ("udp", 53)
    assert o.link("r1", "towards", "h2").peer_node == "h2"
    with pytest.raises(SpecError) as err:
        _options({"ip": 5}).versions()
    assert err.value.key == "features[3].ip" and "not an IP version: 5" in err.value.problem
    with pytest.raises(SpecError) as err:
        o.proto_port("allow[0]", "icmp/1")
    assert err.value.key == "features[3].allow[0]" and "'icmp'" in err.value.problem
    with pytest.raises(SpecError) as err:
        o.link("r1", "towards", "h9")
    assert err.value.key == "features[3].towards" and "no link to 'h9'" in err.value.problem
    with pytest.raises(SpecError) as err:
        _options({"allow": [1]}).strings("allow")
    assert err.value.key == "features[3].allow" and "list of strings" in err.value.problem


def test_router_features_read_their_options_with_the_same_reader() -> None:
    from testbed.features import _router

    assert not hasattr(_router, "Where") and not hasattr(_router, "str_opt")
    with pytest.raises(SpecError) as err:
        compile_plan(topology_from_dict({**ROUTED, "features": [{"kind": "nat", "node": "r1"}]},
                                        file="t.toml"), "t", netem_available=False)
    assert err.value.key == "features[0].outside" and err.value.problem == "missing"
    assert "masqueraded" in str(err.value.allowed)  # the declared option's meaning


def test_dhcp_server_finds_its_clients_by_kind_without_importing_them() -> None:
    import ast

    from testbed.features import dhcp_client, dhcp_server

    assert dhcp_server.CLIENT_KIND == dhcp_client.KIND
    tree = ast.parse(Path(dhcp_server.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {f"{n.module}.{a.name}" for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not any("dhcp_client" in str(m) for m in imported)
