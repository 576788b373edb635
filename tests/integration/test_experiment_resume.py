"""`testbed run` on the host kernel: interrupted midway, resumed, nothing lost or duplicated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from testbed import results
from testbed.experiment_spec import find_experiment, load_experiment, plan

pytestmark = pytest.mark.root
TESTBED = str(Path(sys.executable).parent / "testbed")


@pytest.mark.root
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_run_resumes_without_loss_or_duplicates(tmp_path: Path, sig: int) -> None:
    db = tmp_path / "r.sqlite"
    env = {**os.environ, "TESTBED_DB": str(db)}
    total = len(plan(load_experiment(find_experiment("smoke"), "quick")))
    proc = subprocess.Popen([TESTBED, "run", "smoke", "--quick"], env=env,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait on state: the first trials are stored
            if db.exists():
                with closing(results.connect(db)) as con:
                    if len(list(results.trials(con))) >= 1:
                        break
            assert proc.poll() is None, "the run ended before it could be interrupted"
            time.sleep(0.05)
        os.kill(proc.pid, sig)
    finally:
        proc.wait(timeout=60)
    with closing(results.connect(db)) as con:
        stored = len(list(results.trials(con)))
    assert 1 <= stored < total
    if sig == signal.SIGKILL:  # nothing was cleaned up: remove the orphaned namespaces
        subprocess.run([TESTBED, "clean"], check=False, capture_output=True)
    subprocess.run([TESTBED, "run", "smoke", "--quick", "--resume"], env=env, check=True,
                   stderr=subprocess.DEVNULL)
    with closing(results.connect(db)) as con:
        rows = list(results.trials(con))
        keys = [r.trial_key for r in rows]
        assert len(keys) == total == len(set(keys))
        assert all(r.status == "ok" for r in rows)
        assert len(results.runs(con)) == 1 and results.runs(con)[0]["finished"] is not None
