"""Unit tests: topology loading, parameters and validation errors (no root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed import units
from testbed.errors import SpecError
from testbed.topology import load_topology, topology_from_dict

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
CORE = ["p2p", "host-router", "one-router", "two-routers", "chain"]


def load(body: str, tmp_path: Path, **sets: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "t.toml"
    f.write_text(body)
    return load_topology(f, sets)


@pytest.mark.parametrize("name", CORE)
def test_shipped_topologies_load(name: str) -> None:
    topo = load_topology(TOPOLOGIES / f"{name}.toml")
    assert topo.nodes and topo.links
    assert {"h1"} <= set(topo.node_names)


@pytest.mark.parametrize("routers", [0, 1, 5, 50])
def test_chain_parameter(routers: int) -> None:
    topo = load_topology(TOPOLOGIES / "chain.toml", {"routers": str(routers)})
    assert len(topo.nodes) == routers + 2
    assert len(topo.links) == routers + 1
    assert [n.name for n in topo.nodes if n.role == "router"] == [
        f"r{i}" for i in range(1, routers + 1)
    ]


def parse_rate(value: object, file: str, key: str) -> float | None:
    return units.in_spec(units.rate, value, file, key)


def test_rate_presets_and_numbers() -> None:
    assert parse_rate("ethernet", "f", "k") == 10e6
    assert parse_rate("fastethernet", "f", "k") == 100e6
    assert parse_rate("gigabit", "f", "k") == 1e9
    assert parse_rate("unlimited", "f", "k") is None
    assert parse_rate(25, "f", "k") == 25e6
    assert parse_rate("1.5gbit", "f", "k") == 1.5e9
    assert parse_rate("500kbit", "f", "k") == 500e3


def test_set_overrides_typed_and_applied() -> None:
    topo = load_topology(TOPOLOGIES / "two-routers.toml", {"core_mtu": "1280", "rate": "ethernet"})
    core = next(lk for lk in topo.links if {lk.a, lk.b} == {"r1", "r2"})
    assert core.mtu == 1280
    assert all(lk.shape.rate_bps == 10e6 for lk in topo.links if lk is not core)
    assert core.shape.rate_bps is None


BASE = """
[nodes.a]
[nodes.b]
[[links]]
endpoints = ["a", "b"]
"""


@pytest.mark.parametrize(
    ("body", "key", "fragment"),
    [
        (BASE + "colour = 'red'\n", "links[0].colour", "unknown key"),
        ("bogus = 1\n" + BASE, "bogus", "unknown key"),
        ("[nodes.a]\n[[links]]\nendpoints = ['a', 'zz']\n", "links[0].endpoints", "unknown node"),
        (BASE + "rate = 0\n", "links[0].rate", "above zero"),
        (BASE + "rate = 'fast'\n", "links[0].rate", "not a rate"),
        (BASE + "mtu = 100\n", "links[0].mtu", "impossible MTU"),
        (BASE + "mtu = 70000\n", "links[0].mtu", "impossible MTU"),
        (
            BASE + "addresses = { a = ['10.0.0.300/24'] }\n",
            "links[0].addresses.a[0]",
            "bad address",
        ),
        (BASE + "addresses = { c = ['10.0.0.1/24'] }\n", "links[0].addresses.c", "not an endpoint"),
        ("[nodes.a]\nrole = 'switch'\n", "nodes.a.role", "unknown role"),
        ("[nodes.A]\n", "nodes.A", "bad node name"),
        (BASE + "[[links]]\nendpoints = ['b', 'a']\n", "links[1]", "second link"),
        (BASE + "loss = 150\n", "links[0].loss", "out of range"),
    ],
)
def test_validation_errors_name_file_and_key(
    tmp_path: Path, body: str, key: str, fragment: str
) -> None:
    with pytest.raises(SpecError) as err:
        load(body, tmp_path)
    assert err.value.key == key
    assert fragment in err.value.problem
    assert str(tmp_path / "t.toml") in str(err.value)
    assert err.value.exit_code == 2


def test_duplicate_node_name_is_reported(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        load("[nodes.a]\n[nodes.a]\n", tmp_path)
    assert "not valid TOML" in err.value.problem


def test_chain_router_name_collision(tmp_path: Path) -> None:
    body = "[nodes.h1]\n[nodes.r1]\n[[chains]]\nfrom='h1'\nto='r1'\nrouters=2\n"
    with pytest.raises(SpecError) as err:
        load(body, tmp_path)
    assert "already a node" in err.value.problem


def test_unknown_set_parameter() -> None:
    with pytest.raises(SpecError) as err:
        load_topology(TOPOLOGIES / "chain.toml", {"hops": "3"})
    assert err.value.key == "params.hops"
    assert "routers" in (err.value.allowed or "")


def test_set_parameter_wrong_type() -> None:
    with pytest.raises(SpecError) as err:
        load_topology(TOPOLOGIES / "chain.toml", {"routers": "many"})
    assert "not a int" in err.value.problem


def test_missing_file() -> None:
    with pytest.raises(SpecError) as err:
        load_topology("/nonexistent/x.toml")
    assert "no such topology file" in err.value.problem


def test_ipv6_mtu_floor(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        load(BASE + "mtu = 1000\n", tmp_path)
    assert "1280" in str(err.value)
    v4 = (
        "[nodes.a]\nstack='ipv4'\n[nodes.b]\nstack='ipv4'\n"
        "[[links]]\nendpoints=['a','b']\nmtu=576\n"
    )
    assert load(v4, tmp_path).links[0].mtu == 576


def test_delay_and_loss_parse() -> None:
    topo = topology_from_dict(
        {
            "nodes": {"a": {}, "b": {}},
            "links": [{"endpoints": ["a", "b"], "delay": "5ms", "jitter": "250us", "loss": "1%"}],
        }
    )
    s = topo.links[0].shape
    assert s.delay_s == pytest.approx(0.005)
    assert s.jitter_s == pytest.approx(250e-6)
    assert s.loss_pct == 1.0
    assert s.needs_netem
