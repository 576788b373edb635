"""Feature actions for real (root, host kernel): a feature written in this test builds, its
actions apply and undo (whole-run teardown and a per-trial scope), nothing is left behind."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from testbed import netlink
from testbed.actions import (
    Check,
    Command,
    EtcFile,
    NftRuleset,
    Succeeds,
    Sysctl,
    Tc,
    WriteFile,
    scratch,
)
from testbed.api import Action
from testbed.features.base import REGISTRY, Feature, Options
from testbed.testbed import Testbed
from testbed.topology import topology_from_dict

pytestmark = pytest.mark.root


class Masquerade(Feature):
    """The contract's NAT44 example: masquerade what leaves a router towards `outside`."""

    kind = "test-masquerade"
    summary = "test feature: nftables masquerade"
    node_role = "router"
    options = ()
    kernel = ("nftables",)

    def configure(self, opts: Options) -> None:
        self.dev = next(i.name for i in opts.addresses.of(self.node) if i.peer_node == "h2")

    def actions(self) -> list[Action]:
        rules = (
            "table ip tb_nat44 {\n  chain post {\n    type nat hook postrouting priority srcnat;\n"
            f'    oifname "{self.dev}" masquerade\n  }}\n}}\n'
        )
        return [NftRuleset(self.node, rules, "ip tb_nat44")]

    def ready(self) -> list[Check]:
        return [Succeeds(self.node, ("nft", "list", "table", "ip", "tb_nat44"))]


REGISTRY.pop(Masquerade.kind)


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    REGISTRY[Masquerade.kind] = Masquerade
    yield
    REGISTRY.pop(Masquerade.kind, None)


def topo() -> object:
    return topology_from_dict(
        {
            "nodes": {"h1": {"stack": "ipv4"}, "r1": {"role": "router", "stack": "ipv4"},
                      "h2": {"stack": "ipv4"}},
            "links": [{"endpoints": ["h1", "r1"]}, {"endpoints": ["r1", "h2"]}],
            "features": [{"kind": "test-masquerade", "node": "r1"}],
        },
        file="masq.toml",
    )


def test_a_feature_from_a_test_builds_and_its_undo_runs_per_scope() -> None:
    with Testbed(topo()) as tb:  # type: ignore[arg-type]
        run = str(tb.name)
        r1_v4 = tb.address("r1", 4, "h2")
        # masquerade: h2 sees h1's ping coming from r1's address
        cap = tb.popen("h2", ["tcpdump", "-n", "-l", "-U", "-c", "1", "-i", "eth0", "icmp"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert cap.popen.stderr is not None
        lines = [cap.popen.stderr.readline() for _ in range(2)]
        assert any("listening on" in line for line in lines), lines
        tb.run("h1", ["ping", "-c", "1", "-W", "2", tb.address("h2", 4)])
        out, _ = cap.popen.communicate(timeout=10)
        assert f"{r1_v4} > " in out, out
        before = tb.run("h2", ["sysctl", "-n", "net.ipv4.ip_default_ttl"]).stdout.strip()
        with tb.scope():
            tb.apply(Sysctl("h2", (("net.ipv4.ip_default_ttl", "33"),)))
            tb.apply(WriteFile("trial/x.conf", "dir {scratch}\n"))
            tb.apply(EtcFile("h1", "hosts", "198.18.1.2 server\n"))
            tb.apply(Tc("h2", ("qdisc", "add", "dev", "eth0", "root", "htb"),
                        ("qdisc", "del", "dev", "eth0", "root")))
            tb.apply(Command("h2", ("ip", "link", "add", "d0", "type", "bridge"),
                             ("ip", "link", "del", "d0")))
            tb.apply(NftRuleset("h2", "table inet tb_acl {\n}\n", "inet tb_acl"))
            assert tb.run("h2", ["sysctl", "-n", "net.ipv4.ip_default_ttl"]).stdout.strip() == "33"
            conf = tb.scratch_dir() / "trial" / "x.conf"
            assert conf.read_text() == f"dir {tb.scratch_dir()}\n"
            assert "server" in tb.run("h1", ["getent", "hosts", "server"]).stdout
            assert "htb" in tb.run("h2", ["tc", "qdisc", "show", "dev", "eth0"]).stdout
            assert tb.run("h2", ["ip", "link", "show", "d0"], check=False).returncode == 0
        # the trial's actions are undone, the build's stay
        assert tb.run("h2", ["sysctl", "-n", "net.ipv4.ip_default_ttl"]).stdout.strip() == before
        assert not conf.exists()
        assert tb.run("h1", ["getent", "hosts", "server"], check=False).returncode != 0
        assert "htb" not in tb.run("h2", ["tc", "qdisc", "show", "dev", "eth0"]).stdout
        assert tb.run("h2", ["ip", "link", "show", "d0"], check=False).returncode != 0
        assert tb.run("h2", ["nft", "list", "tables"]).stdout.strip() == ""
        assert "tb_nat44" in tb.run("r1", ["nft", "list", "tables"]).stdout
        assert scratch("a") == "{scratch}/a"
    assert [ns for ns in netlink.list_netns() if ns.startswith(f"tb-{run}-")] == []
