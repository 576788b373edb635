"""Router features (gometz-2015 go:6-go:10), pure parts: option validation (errors name the
file and key before anything is built), rendered nftables/dnsmasq/tc/xfrm, the report tables."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from testbed import results
from testbed.errors import SpecError
from testbed.features import dhcp_client, dhcp_server, ipsec, qos
from testbed.measure.kinds import featurecheck
from testbed.papers.gometz_2015 import feature_matrix as report
from testbed.plan import Plan, compile_plan
from testbed.topology import load_topology, topology_from_dict

TOPO = Path(__file__).resolve().parents[2] / "topologies"
ONE = {
    "nodes": {"h1": {"role": "host"}, "r1": {"role": "router"}, "h2": {"role": "host"}},
    "links": [{"endpoints": ["h1", "r1"]}, {"endpoints": ["r1", "h2"]}],
}
TWO = {
    "nodes": {"h1": {"role": "host"}, "r1": {"role": "router"}, "r2": {"role": "router"},
              "h2": {"role": "host"}},
    "links": [{"endpoints": ["h1", "r1"]}, {"endpoints": ["r1", "r2"]},
              {"endpoints": ["r2", "h2"]}],
}  # fmt: skip


def plan(features: list[dict[str, Any]], base: dict[str, Any] = ONE) -> Plan:
    topo = topology_from_dict({**base, "features": features}, file="t.toml")
    return compile_plan(topo, "t", netem_available=False)


def error(features: list[dict[str, Any]], base: dict[str, Any] = ONE) -> SpecError:
    with pytest.raises(SpecError) as exc:
        plan(features, base)
    assert exc.value.file == "t.toml"
    return exc.value


def text(p: Plan) -> str:
    return "\n".join(p.describe())


# --- misconfigurations are errors before anything is built -----------------------------------


def test_nptv6_prefix_of_the_wrong_length() -> None:
    e = error([{"kind": "nptv6", "node": "r1", "inside": "h1", "outside": "h2",
                "prefix": "2001:db8:5::/56"}])  # fmt: skip
    assert e.key == "features[0].prefix"
    assert "/56" in e.problem and "/64" in e.problem


def test_nptv6_prefix_overlapping_a_link() -> None:
    e = error([{"kind": "nptv6", "node": "r1", "inside": "h1", "outside": "h2",
                "prefix": "2001:2:0:1::/64"}])  # fmt: skip
    assert e.key == "features[0].prefix" and "overlaps" in e.problem


def test_dhcp_pool_outside_the_link() -> None:
    e = error([{"kind": "dhcp-server", "node": "r1", "link": ["r1", "h1"],
                "pool4": ["198.18.1.10", "198.18.1.20"]}])  # fmt: skip
    assert e.key == "features[0].pool4"
    assert "outside the link 198.18.0.0/24" in e.problem


def test_dhcp_pool_holding_the_router() -> None:
    e = error([{"kind": "dhcp-server", "node": "r1", "link": ["r1", "h1"],
                "pool4": ["198.18.0.2", "198.18.0.20"]}])  # fmt: skip
    assert e.key == "features[0].pool4" and "router" in e.problem


def test_ra_from_a_server_off_the_link() -> None:
    e = error([{"kind": "dhcp-server", "node": "r2", "link": ["r1", "h1"], "ra": "slaac"}], TWO)
    assert e.key == "features[0].ra"


@pytest.mark.parametrize(
    ("feature", "key"),
    [
        ({"kind": "nat", "node": "r1", "outside": "h9"}, "features[0].outside"),
        ({"kind": "nat", "node": "r1", "outside": "h2", "forwards": ["tcp/80"]},
         "features[0].forwards[0]"),
        ({"kind": "nat", "node": "r1", "outside": "h2", "forwards": ["icmp/80=h1"]},
         "features[0].forwards[0]"),
        ({"kind": "firewall", "node": "r1", "allow4": ["tcp/70000"]}, "features[0].allow4[0]"),
        ({"kind": "firewall", "node": "r1", "ip": 4, "allow6": ["tcp/22"]}, "features[0].allow6"),
        ({"kind": "qos", "node": "r1", "towards": "h2", "rate": "10mbit",
          "classes": ["a:8mbit:udp/1", "b:5mbit"]}, "features[0].classes"),
        ({"kind": "qos", "node": "r1", "towards": "h2", "rate": "10mbit",
          "classes": ["a:1mbit", "b:5mbit"]}, "features[0].classes"),
        ({"kind": "ipsec", "node": "r1", "peer": "r1"}, "features[0].peer"),
        ({"kind": "dhcp-client", "node": "h1", "link": "r1", "ip": "none"}, "features[0].ip"),
    ],
)  # fmt: skip
def test_bad_options_name_their_key(feature: dict[str, Any], key: str) -> None:
    base = TWO if feature["kind"] == "ipsec" else ONE
    assert error([feature], base).key == key


# --- rendering ----------------------------------------------------------------------------------


def test_nat_ruleset_masquerades_and_forwards_per_version() -> None:
    (f,) = plan([{"kind": "nat", "node": "r1", "outside": "h2",
                  "forwards": ["tcp/8080=h1:5201"]}]).features  # fmt: skip
    rules = f.actions()[0].ruleset  # type: ignore[attr-defined]
    assert 'meta nfproto ipv4 oifname "eth1" counter masquerade' in rules
    assert "dnat ip to 198.18.0.1:5201" in rules and "dnat ip6 to [2001:2::1]:5201" in rules


def test_firewall_policy_drops_by_default_with_counted_denies() -> None:
    (f,) = plan([{"kind": "firewall", "node": "r1", "allow4": ["tcp/5201"],
                  "allow6": ["udp/53"]}]).features  # fmt: skip
    rules = f.actions()[0].ruleset  # type: ignore[attr-defined]
    assert "policy drop;" in rules
    assert "meta nfproto ipv4 tcp dport 5201 ct state new counter accept" in rules
    assert "meta nfproto ipv6 udp dport 53" in rules and "ipv6 tcp dport 5201" not in rules
    assert rules.index("allow-v4-tcp-5201") < rules.index('"deny-v4"')


def test_qos_htb_and_hfsc_classes() -> None:
    opts = {"node": "r1", "towards": "h2", "rate": "20mbit",
            "classes": ["gold:15mbit:udp/5001", "bulk:5mbit"]}  # fmt: skip
    (htb,) = plan([{"kind": "qos", **opts}]).features
    (hfsc,) = plan([{"kind": "qos-hfsc", **opts}]).features
    assert isinstance(htb, qos.Qos) and isinstance(hfsc, qos.QosHfsc)
    a = qos.tc_argvs(htb.o)
    assert a[0][-4:] == ["1:", "htb", "default", "11"]
    assert a[2][9:13] == ["rate", "15000000", "ceil", "20000000"]
    b = qos.tc_argvs(hfsc.o)
    assert "hfsc" in b[0] and b[2][9:15] == ["sc", "rate", "15000000", "ul", "rate", "20000000"]
    assert "meta priority set 1:10" in qos.ruleset(htb.o)
    assert hfsc.needs() == ("hfsc", "nftables")


def test_ipsec_commands_on_both_routers_both_versions() -> None:
    (f,) = plan([{"kind": "ipsec", "node": "r1", "peer": "r2"}], TWO).features
    assert isinstance(f, ipsec.Ipsec)
    cmds = ipsec.commands(f.o)
    assert len(cmds) == 2 * 2 * 5  # 2 versions x 2 routers x (2 SAs + out/in/fwd policy)
    assert {n for n, _a, _u in cmds} == {"r1", "r2"}
    t4, t6 = f.o.tunnels
    assert (t4.a, t4.b, t4.net_a, t4.net_b) == ("198.18.1.1", "198.18.1.2", "198.18.0.0/24",
                                                "198.18.2.0/24")  # fmt: skip
    assert t6.outer == 6 and t4.key_ab != t4.key_ba and len(t4.key_ab) == 42
    (mixed,) = plan([{"kind": "ipsec", "node": "r1", "peer": "r2", "outer": "4"}], TWO).features
    assert isinstance(mixed, ipsec.Ipsec) and mixed.o.tunnels[1].a == "198.18.1.1"


def test_dhcp_server_argv_and_leases() -> None:
    (f,) = plan([{"kind": "dhcp-server", "node": "r1", "link": ["r1", "h1"]}]).features
    assert isinstance(f, dhcp_server.DhcpServer)
    argv = dhcp_server.argv(f.o, "/x/leases")
    assert "--dhcp-range=set:v4,198.18.0.100,198.18.0.199,255.255.255.0,3600" in argv
    assert "--dhcp-range=set:v6,2001:2::100,2001:2::1ff,64,3600" in argv
    assert "--port=0" in argv and "--conf-file=/dev/null" in argv and "--enable-ra" in argv
    lease = (
        "1795359159 be:07:b5:76:d6:aa 198.18.0.182 * 01:be\nduid 00:01\n"
        "17 3044 2001:2::1a4 * 00:01\n"
    )
    assert [x["address"] for x in dhcp_server.leases(lease)] == ["198.18.0.182", "2001:2::1a4"]


def test_dhcp_client_drops_planned_addresses_and_uses_its_own_files() -> None:
    p = plan([{"kind": "dhcp-client", "node": "h1", "link": "r1"}])
    (f,) = p.features
    assert isinstance(f, dhcp_client.DhcpClient)
    argv = dhcp_client.client_argv(f.o, 6, "/s", "/s/hook")
    assert argv[:4] == ["dhclient", "-6", "-d", "-sf"] and "/s/dhclient-h1-v6.leases" in argv
    assert [a for a, _u in dhcp_client.drop_argvs(f.o)] == [
        ["ip", "addr", "del", "198.18.0.1/24", "dev", "eth0"],
        ["ip", "addr", "del", "2001:2::1/64", "dev", "eth0"],
    ]
    assert "resolv.conf" in dhcp_client.hook_script()  # says why it touches nothing else
    assert "dhclient2" not in text(p) and "dhclient6" in text(p)


def test_shipped_router_topologies_plan() -> None:
    for name in ("router-nat", "router-nptv6", "router-firewall", "router-dhcp",
                 "router-dhcp-relay", "router-qos", "router-qos-hfsc", "router-ipsec",
                 "router-profile"):  # fmt: skip
        p = compile_plan(load_topology(TOPO / f"{name}.toml"), "t", netem_available=False)
        assert p.features or name == "router-profile"


# --- the measurement kind and the report ---------------------------------------------------------


def test_featurecheck_outcome() -> None:
    w, f, n = ({"status": s} for s in ("works", "fails", "not supported"))
    assert featurecheck.outcome([w, n]) == "works"
    assert featurecheck.outcome([w, f]) == "fails"
    assert featurecheck.outcome([n, n]) == "not supported"
    assert set(featurecheck.checkable()) | {"slaac"} == set(report.PAPER_FEATURES)
    assert featurecheck.checkable()["qos-hfsc"] == "router-qos-hfsc"


def _trial(kind: str, point: dict[str, Any], metrics: dict[str, float],
           result: dict[str, Any]) -> results.TrialRow:  # fmt: skip
    return results.TrialRow("k", "run", "gometz-2015", "quick", "m", kind, point, "g", 0, 0.0,
                            1.0, "ok", None, metrics, result, None, None)  # fmt: skip


def test_feature_matrix_and_profile_table() -> None:
    ok = {
        "feature": "nat",
        "status": "works",
        "evidence": {
            "snat": {
                "arrived_from": {"198.18.1.1": 3, "198.18.0.1": 0},
                "ping": {"sent": 3, "received": 3},
            }
        },
    }
    trials = [
        _trial("featurecheck", {"feature": "nat", "ip": 4}, {"works": 1.0},
               {"feature": "nat", "ip": 4, "status": "works", "checks": [ok]}),
        _trial("featurecheck", {"feature": "nat", "ip": 6}, {"works": 0.0},
               {"feature": "nat", "ip": 6, "status": "fails",
                "checks": [{"feature": "nat", "status": "fails", "reason": "no replies"}]}),
        _trial("featurecheck", {"feature": "ipsec", "ip": 4}, {"works": 0.0},
               {"feature": "ipsec", "ip": 4, "status": "not supported",
                "checks": [{"feature": "ipsec", "status": "not supported",
                           "reason": "this kernel lacks 'esp'"}]}),
        _trial("routerprofile", {"profile": "plain", "ip": 4}, {"throughput_bps": 8e9,
               "owd_ms": 0.03, "cpu_machine_softirq_pct": 10, "cpu_machine_system_pct": 20}, {}),
        _trial("routerprofile", {"profile": "nat", "ip": 4}, {"throughput_bps": 6e9,
               "owd_ms": 0.04}, {}),
    ]  # fmt: skip
    rows = {r.check: r for r in report.feature_matrix(trials)}
    assert rows["nat"].cells[4].status == "works" and "198.18.1.1" in rows["nat"].cells[4].evidence
    assert rows["nat"].cells[6].evidence == "no replies"
    assert (
        rows["ipsec"].cells[4].status == "not supported"
        and "esp" in rows["ipsec"].cells[4].evidence
    )
    assert rows["ipsec"].cells[6].status == "not measured"
    assert rows["nptv6"].vyos == "yes" and rows["nptv6"].pfsense == "not mentioned"
    prof = report.profile_table(trials)
    assert [(r.profile, r.ip) for r in prof] == [("plain", 4), ("nat", 4)]
    assert prof[1].vs_plain == pytest.approx(0.75) and prof[0].cpu_softirq_system_pct == 30
    assert "| NPTv6" in report.matrix_text(list(rows.values()))
    assert "| nat | IPv4 | 1 | 6000 | 0.750 |" in report.profile_text(prof)


def test_claims_go6_to_go10_from_feature_checks() -> None:
    from testbed.papers.gometz_2015.claims import CLAIMS
    from testbed.report import claims

    checks = {c.id: c.check for c in CLAIMS}

    def fc(feature: str, ip: int, status: str) -> results.TrialRow:
        return _trial("featurecheck", {"feature": feature, "ip": ip}, {},
                      {"feature": feature, "ip": ip, "status": status})  # fmt: skip

    rows = [fc("nat", 4, "works"), fc("nat", 6, "works"), fc("nptv6", 6, "works"),
            fc("firewall", 4, "works"), fc("firewall", 6, "fails"),
            fc("qos", 4, "works"), fc("qos", 6, "works"), fc("ipsec", 4, "not supported"),
            _trial("routerprofile", {"profile": "plain", "ip": 4}, {"throughput_bps": 8e9}, {}),
            _trial("routerprofile", {"profile": "nat", "ip": 4}, {"throughput_bps": 6e9},
                   {})]  # fmt: skip
    d = claims.Data(rows)
    go6 = checks["go:6"](d)
    assert go6.status == "holds" and "nptv6 IPv6: 1/1 work" in go6.evidence
    go8 = checks["go:8"](d)
    assert go8.status == "does not hold" and "firewall IPv6" in go8.reason
    go9 = checks["go:9"](d)
    assert go9.status == "not measured" and "ipsec IPv4" in go9.reason
    assert checks["go:7"](d).status == "not measured"
    go10 = checks["go:10"](d)
    assert (
        go10.status == "not measurable here" and "IPv4 nat/plain throughput 0.75" in go10.evidence
    )


def test_feature_matrix_splits_a_dhcp_trial_into_dhcp_and_slaac_rows() -> None:
    checks = [{"feature": "dhcp-server", "status": "works", "evidence": {}},
              {"feature": "slaac", "status": "works", "evidence": {}}]  # fmt: skip
    v4 = [{"feature": "dhcp-server", "status": "works", "evidence": {}},
          {"feature": "dhcp-server", "status": "not supported", "reason": "no IPv4"}]  # fmt: skip
    trials = [
        _trial("featurecheck", {"feature": "dhcp-server", "ip": 6}, {},
               {"feature": "dhcp-server", "ip": 6, "status": "works", "checks": checks}),
        _trial("featurecheck", {"feature": "dhcp-server", "ip": 4}, {},
               {"feature": "dhcp-server", "ip": 4, "status": "works", "checks": v4}),
    ]  # fmt: skip
    rows = {r.check: r for r in report.feature_matrix(trials)}
    assert rows["dhcp-server"].cells[4].status == "works"
    assert rows["dhcp-server"].cells[6].status == "works"
    assert rows["slaac"].cells[6].status == "works"
    assert rows["slaac"].cells[4].status == "not supported"


def test_feature_matrix_cell_names_the_tier_that_could_build_it() -> None:
    def t(status: str, tier: str) -> results.TrialRow:
        row = _trial("featurecheck", {"feature": "ipsec", "ip": 4}, {},
                     {"feature": "ipsec", "ip": 4, "status": status,
                      "checks": [{"feature": "ipsec", "status": status, "evidence": {},
                                  "reason": "no esp" if status != "works" else ""}]})  # fmt: skip
        return dataclasses.replace(row, run_id=tier)

    rows = report.feature_matrix([t("not supported", "host"), t("works", "vm")],
                                 lambda r: r.run_id)  # fmt: skip
    cell = {r.check: r for r in rows}["ipsec"].cells[4]
    assert cell.status == "works (vm)" and cell.n == 1
    assert cell.evidence.endswith("[not supported on host]")
    only_host = report.feature_matrix([t("not supported", "host")], lambda r: r.run_id)
    assert {r.check: r for r in only_host}["ipsec"].cells[4].status == "not supported (host)"


def test_claim_counts_a_tier_that_could_build_the_feature() -> None:
    from testbed.papers.gometz_2015.claims import CLAIMS
    from testbed.report import claims

    checks = {c.id: c.check for c in CLAIMS}

    def fc(feature: str, ip: int, status: str) -> results.TrialRow:
        return _trial("featurecheck", {"feature": feature, "ip": ip}, {},
                      {"feature": feature, "ip": ip, "status": status})  # fmt: skip

    host = [fc(f, ip, "not supported") for f in ("ipsec", "qos-hfsc") for ip in (4, 6)]
    vm = [fc(f, ip, "works") for f in ("ipsec", "qos-hfsc", "qos") for ip in (4, 6)]
    out = checks["go:9"](claims.Data(host + vm))
    assert out.status == "holds" and "ipsec IPv4: 1/1 work" in out.evidence


def test_an_nft_router_feature_without_parse_or_check_is_refused_at_definition() -> None:
    from testbed.features import firewall
    from testbed.features._nft import NftRouterFeature, NftTable
    from testbed.features.base import REGISTRY

    with pytest.raises(TypeError, match="needs `parse` and `check`"):

        class Broken(NftRouterFeature):  # a check without parse
            kind = "test-nft-broken"
            nft = NftTable("tb_x", firewall.ruleset, check=firewall.check)

    assert "test-nft-broken" not in REGISTRY
    # the shipped ones: one table each, named by their module's TABLE and family
    p = text(plan([{"kind": "firewall", "node": "r1", "allow4": ["tcp/5201"]},
                   {"kind": "conntrack", "node": "r1"}]))
    assert "table inet tb_firewall" in p and "table inet tb_conntrack" in p
    assert "`nft list table inet tb_firewall` succeeds on r1" in p
