"""Shared test setup: pytester for plugin tests; root-only tests skip without root (fail in CI)."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ("pytester",)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("root") is None or os.geteuid() == 0:
        return
    why = "needs root (real network namespaces)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true forbids skipping: {why}", pytrace=False)
    pytest.skip(why)
