"""The full-kernel tier provides netem, sit and Jool: `testbed doctor --json` says so there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

TESTBED = str(Path(sys.executable).parent / "testbed")


@pytest.mark.kernel("netem", "sit", "jool")
def test_doctor_reports_full_kernel_features() -> None:
    out = subprocess.run(
        [TESTBED, "doctor", "--json"], capture_output=True, text=True, check=True
    ).stdout
    report = json.loads(out)
    for feature in ("netem", "sit", "jool"):
        assert report["features"][feature], report["details"][feature]
    if os.environ.get("TESTBED_IN_VM") == "1":
        assert report["in_vm"] is True
        assert report["vm_tier"]["available"] is False  # no nested VM


@pytest.mark.kernel("netem", "sit", "jool")
def test_in_vm_environment_is_the_projects() -> None:
    if os.environ.get("TESTBED_IN_VM") != "1":
        pytest.skip("checks the guest's environment; this machine runs it natively")
    assert os.geteuid() == 0
    first = os.environ["PATH"].split(":")[0]
    assert Path(first) == Path(sys.executable).parent
    assert os.environ["TESTBED_DB"].startswith("/run/")
    assert Path(os.environ["TESTBED_SCRATCH"]).is_dir()
