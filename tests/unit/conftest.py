"""Unit-test setup: fake trials take no time, and their fidelity record is only the test
machine's load — so no suspect trial is measured again here (test_fidelity tests the reruns)."""

from __future__ import annotations

import pytest

from testbed import fidelity


@pytest.fixture(autouse=True)
def _no_fidelity_reruns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fidelity.ENV_RERUNS, "0")  # worker processes of the tests too
