"""Every shipped lab runs as written and agrees with its own answer key: `testbed lab check LAB`
for each sheet in testbed/labs/ (found by listing the folder, so a new lab is checked too) — host
labs here as root, vm labs in the one guest that `lab check` boots (issue 28)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed import lab as labs
from testbed.vm.guest import ENV_IN_VM
from testbed.vm.run import vm_available

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
# the longest lab may take 6 minutes in a virtual-clock guest (docs/labs.md); a loaded CI
# machine gets 2.5 times that
TIMEOUT_S = 900


def _guest_or_skip(lab: str) -> None:
    ok, why = vm_available()
    if ok:
        return
    if os.environ.get(ENV_IN_VM) == "1":
        pytest.skip(f"{lab} boots a guest of its own: checked on the host, not in the VM pass")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true: lab {lab} needs the full-kernel tier, which cannot boot: {why}")
    pytest.skip(f"lab {lab} needs the full-kernel tier, which cannot boot here: {why}")


@pytest.mark.parametrize("lab", [p.stem for p in labs.shipped_labs()])
def test_lab_runs_and_agrees_with_its_key(lab: str, tmp_path: Path) -> None:
    sheet = labs.parse_lab(labs.find_lab(lab))
    if sheet.tier != "host":
        _guest_or_skip(lab)
    keep = tmp_path / "lab"
    env = dict(os.environ)
    env.pop("TESTBED_DB", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "testbed.cli", "lab", "check", lab, "--keep", str(keep)],
        capture_output=True, text=True, timeout=TIMEOUT_S, env=env, cwd=tmp_path, check=False,
    )
    tail = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, tail
    key = json.loads((keep / "answer-key.json").read_text())
    assert key["lab"] == lab and key["answers"], tail
    out_of_range = [a for a in key["answers"] if not a["ok"]]
    assert not out_of_range, json.dumps(out_of_range, indent=1, ensure_ascii=False)
    assert (keep / "answer-key.md").is_file()
