"""Fixtures for root integration tests: a leak check around each test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from testbed import netlink, state


def _ours() -> set[str]:
    """Namespaces of runs owned by this process, or by no live process (left behind)."""
    live_elsewhere = {
        ns
        for r in state.all_records()
        if r.pid not in (0, os.getpid()) and r.owner_alive()
        for ns in r.namespaces.values()
    }
    return {n for n in netlink.list_netns() if n.startswith("tb-")} - live_elsewhere


@pytest.fixture(autouse=True)
def _root_and_no_leaks() -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("integration tests need root (network namespaces)")
    before = _ours()
    yield
    leaked = _ours() - before
    assert not leaked, f"namespaces left behind: {sorted(leaked)}"
