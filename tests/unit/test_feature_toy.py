"""A feature written in a test (nothing else touched): registry, options, plan, undo order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed import features
from testbed.actions import Check, Command, Succeeds, Sysctl, WriteFile
from testbed.api import Action, Undo
from testbed.errors import SpecError
from testbed.features.base import REGISTRY, Feature, NodeAddress, Option, Options
from testbed.plan import compile_plan
from testbed.topology import topology_from_dict
from testbed.topology_model import Topology


class ToyTtl(Feature):
    """Sets the IPv4 default TTL of a node, and (optionally) claims an extra address."""

    kind = "toy-ttl"
    summary = "test feature: net.ipv4.ip_default_ttl"
    options = (
        Option("ttl", "the TTL (1-255)"),
        Option("address", "an extra IPv6 address the node is reached at", ""),
    )

    def configure(self, opts: Options) -> None:
        self.ttl = opts.integer("ttl", 1, 255)
        self.extra = str(opts.raw("address"))

    def actions(self) -> list[Action]:
        return [
            Sysctl(self.node, (("net.ipv4.ip_default_ttl", str(self.ttl)),)),
            WriteFile(f"toy-{self.node}/ttl", f"{self.ttl}\n"),
            Command(self.node, ("true",), undo_argv=("false",)),
        ]

    def addresses(self) -> list[NodeAddress]:
        return [NodeAddress(self.node, 6, self.extra)] if self.extra else []

    def ready(self) -> list[Check]:
        return [Succeeds(self.node, ("sysctl", "-n", "net.ipv4.ip_default_ttl"), str(self.ttl))]


REGISTRY.pop(ToyTtl.kind)  # defining it registered it; each test here puts it back


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    REGISTRY[ToyTtl.kind] = ToyTtl
    yield
    REGISTRY.pop(ToyTtl.kind, None)


def two_nodes(*tables: dict[str, Any]) -> Topology:
    return topology_from_dict(
        {
            "params": {"ttl": 42},
            "nodes": {"h1": {}, "h2": {}},
            "links": [{"endpoints": ["h1", "h2"]}],
            "features": list(tables),
        },
        file="toy.toml",
    )


def test_defining_the_class_registers_it() -> None:
    class Another(Feature):
        kind = "toy-another"

    try:
        assert features.registry()["toy-another"] is Another
    finally:
        REGISTRY.pop("toy-another")
    assert features.registry()["toy-ttl"] is ToyTtl
    assert "toy-ttl" in features.kinds()


def test_a_second_class_with_the_same_kind_is_refused() -> None:
    with pytest.raises(TypeError, match="defined twice"):

        class Other(Feature):
            kind = "toy-ttl"


def test_its_actions_and_readiness_join_the_plan_in_order() -> None:
    t = two_nodes({"kind": "toy-ttl", "node": "h2", "ttl": "${ttl}"})
    plan = compile_plan(t, "toy", netem_available=False)
    lines = plan.describe()
    at = lines.index("h2: sysctl net.ipv4.ip_default_ttl=42")
    assert lines[at + 1] == "write {scratch}/toy-h2/ttl (1 lines)"
    assert lines[at + 2] == "h2: true  [undo: false]"
    assert lines[at + 3].startswith("wait until toy-ttl on h2 (features[0]) is ready")
    assert at == len(lines) - 4  # after every core action
    assert lines[at - 1].startswith("wait until 2 interfaces are up")


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        ({"node": "h2"}, "features[0].ttl", "missing"),
        ({"node": "h2", "ttl": 300}, "features[0].ttl", "bad value"),
        ({"node": "h2", "ttl": 1, "tll": 2}, "features[0].tll", "unknown option"),
        ({"node": "h9", "ttl": 1}, "features[0].node", "unknown node"),
        ({"ttl": 1}, "features[0].node", "missing"),
    ],
)
def test_its_options_are_validated_with_file_and_key(
    table: dict[str, Any], key: str, problem: str
) -> None:
    with pytest.raises(SpecError) as err:
        compile_plan(two_nodes({"kind": "toy-ttl", **table}), "toy", netem_available=False)
    assert (err.value.file, err.value.key) == ("toy.toml", key)
    assert problem in err.value.problem


def test_enabled_false_leaves_it_out() -> None:
    t = two_nodes({"kind": "toy-ttl", "node": "h2", "ttl": 5, "enabled": "false"})
    assert compile_plan(t, "toy", netem_available=False).features == ()


def test_addresses_are_data_and_clashes_are_refused() -> None:
    t = two_nodes({"kind": "toy-ttl", "node": "h2", "ttl": 5, "address": "2001:db8::9"})
    plan = compile_plan(t, "toy", netem_available=False)
    assert plan.extra_address("h2", 6) == NodeAddress("h2", 6, "2001:db8::9")
    clash = two_nodes(
        {"kind": "toy-ttl", "node": "h2", "ttl": 5, "address": "2001:db8::9"},
        {"kind": "toy-ttl", "node": "h2", "ttl": 6, "address": "2001:db8::a"},
    )
    with pytest.raises(SpecError, match="gives h2 the IPv6 address 2001:db8::a") as err:
        compile_plan(clash, "toy", netem_available=False)
    assert err.value.key == "features[1]"


class FakeEnv:
    """Records what actions do, without a kernel: WriteFile really writes, into tmp_path."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.undos: list[Undo] = []

    def netns(self, node: str) -> str:
        return f"tb-toy-{node}"

    def handle(self, ns: str) -> Any:
        raise AssertionError("no netlink here")

    def scratch_dir(self) -> Path:
        return self.tmp

    def defer(self, undo: Undo) -> None:
        self.undos.append(undo)


def test_write_file_expands_placeholders_and_undoes(tmp_path: Path) -> None:
    env = FakeEnv(tmp_path)
    WriteFile("d/conf", "dir {scratch}/d\n").apply(env)
    path = tmp_path / "d" / "conf"
    assert path.read_text() == f"dir {tmp_path}/d\n"
    (undo,) = env.undos
    undo.run()
    assert not path.exists()


def test_docs_list_every_shipped_feature_as_declared() -> None:
    REGISTRY.pop(ToyTtl.kind, None)  # the test's own feature is not shipped
    text = (Path(__file__).resolve().parents[2] / "docs" / "features.md").read_text()
    start = text.index("<!-- generated from the declarations")
    block = text[text.index("\n", start) + 1 : text.index("<!-- end generated -->")]
    assert block == features.reference_markdown(), (
        "docs/features.md is stale: paste testbed.features.reference_markdown() between markers"
    )


def test_cli_lists_the_features_and_their_options() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "testbed.cli", "features"], capture_output=True, text=True,
        check=True,
    ).stdout
    for cls in features.classes():
        if cls is ToyTtl:
            continue
        assert f"{cls.kind}: {cls.summary}" in out
        for o in cls.options:
            assert f"    {o.name}: {o.help}" in out
    assert "toy-ttl" not in out  # the test's own feature is not shipped
