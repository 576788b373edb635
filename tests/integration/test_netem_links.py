"""Kernel-tier tests (netem): delay, loss and per-packet serialization on shaped links."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from testbed.testbed import Testbed as Testbed_
from testbed.topology import load_topology

TOPO = Path(__file__).resolve().parents[2] / "topologies"


def _rtts(out: str) -> list[float]:
    return [float(x) for x in re.findall(r"time=([0-9.]+) ms", out)]


@pytest.mark.kernel("netem")
def test_delay_uses_netem_and_adds_it_per_direction() -> None:
    topo = load_topology(TOPO / "p2p.toml", {"delay": "5ms"})
    with Testbed_(topo) as tb:
        kinds = {q["kind"] for q in tb.qdiscs()}
        assert "netem" in kinds
        out = tb.run("h1", ["ping", "-c", "5", "-i", "0.2", tb.address("h2", 6)]).stdout
        rtts = _rtts(out)
        assert len(rtts) == 5
        assert min(rtts) >= 10.0  # 5 ms each way


@pytest.mark.kernel("netem")
def test_rate_on_netem_serializes_each_packet() -> None:
    # A 1472-byte ICMP payload makes a 1514-byte frame: 1538 bytes on the wire, 1230.4 us at
    # 10 Mbit/s, once per direction. tbf would let a lone packet through at once.
    topo = load_topology(TOPO / "p2p.toml", {"rate": "ethernet"})
    with Testbed_(topo) as tb:
        q = [x for x in tb.qdiscs() if x["kind"] == "netem"]
        assert q, tb.qdiscs()
        text = json.dumps(q)
        assert "packetoverhead" in text or "24" in text
        out = tb.run(
            "h1", ["ping", "-c", "5", "-i", "0.2", "-s", "1472", tb.address("h2", 4)]
        ).stdout
        assert min(_rtts(out)) >= 2 * 1.2304


@pytest.mark.kernel("netem")
def test_loss_drops_packets() -> None:
    topo = load_topology(TOPO / "p2p.toml", {"loss": "50"})
    with Testbed_(topo) as tb:
        out = tb.run(
            "h1", ["ping", "-c", "40", "-i", "0.01", "-W", "1", tb.address("h2", 4)], check=False
        ).stdout
        m = re.search(r"(\d+) received", out)
        assert m is not None
        assert int(m.group(1)) < 35  # ~75% of echoes lose a packet one way or the other
