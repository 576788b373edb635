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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every integration test needs root: tests/conftest.py's one rule skips it without root
    (and fails it under CI=true), instead of a skip of its own here."""
    for item in items:
        if "tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.root)


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    before = _ours()
    yield
    leaked = _ours() - before
    assert not leaked, f"namespaces left behind: {sorted(leaked)}"
