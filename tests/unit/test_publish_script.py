"""scripts/publish-reproductions.sh: a run in sittings (--resume) adds up its wall time, and an
interrupted sitting says how to go on (the script run against a stand-in `testbed`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# A stand-in for .venv/bin/testbed: `reproduce PAPER [--resume] --db DB --out DIR` stores one
# trial a sitting; the first sitting is "interrupted" (exit 130, no report) unless --resume
FAKE = r"""#!/usr/bin/env python3
import json, sqlite3, sys, time
a = sys.argv[1:]
db, out = a[a.index("--db") + 1], a[a.index("--out") + 1]
c = sqlite3.connect(db)
c.execute("create table if not exists runs (run_id, started, finished, provenance)")
c.execute("create table if not exists trials (status)")
c.execute("insert into runs values ('r', ?, ?, '{}')", (time.time(), time.time()))
c.execute("insert into trials values ('ok')")
c.commit()
open(db + ".argv", "a").write(" ".join(a) + "\n")
if "--resume" not in a:
    sys.exit(130)
import os; os.makedirs(out, exist_ok=True)
json.dump({"counts": {"holds": 1, "does not hold": 0, "inconclusive": 0, "not measured": 0,
                      "not measurable here": 0}}, open(out + "/ledger.json", "w"))
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.fail("the publishing script runs as root (run the unit tests as root, as CI does)")
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "publish-reproductions.sh", tmp_path / "scripts")
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "testbed").write_text(FAKE)
    (venv / "testbed").chmod(0o755)
    (venv / "python").symlink_to(sys.executable)
    return tmp_path


def _publish(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "scripts/publish-reproductions.sh", *args, "zeadally-2004"],
                          cwd=repo, capture_output=True, text=True, timeout=60)


def test_a_run_in_two_sittings_is_published_with_their_sum(repo: Path) -> None:
    first = _publish(repo)
    assert first.returncode == 1
    assert "zeadally-2004 stopped after" in first.stderr
    assert "go on with: sudo scripts/publish-reproductions.sh --resume" in first.stderr
    db = repo / "results" / "reproductions" / "zeadally-2004.sqlite"
    sittings = db.with_suffix(".sittings").read_text().splitlines()
    assert len(sittings) == 1 and json.loads(sittings[0])["exit_status"] == 130

    second = _publish(repo, "--resume")
    assert second.returncode == 0, second.stderr
    argv = (db.parent / "zeadally-2004.sqlite.argv").read_text().splitlines()
    assert "--resume" not in argv[0] and "--resume" in argv[1]
    run = json.loads((repo / "docs" / "reproductions" / "zeadally-2004" / "run.json").read_text())
    assert [s["exit_status"] for s in run["sittings"]] == [130, 0]
    assert run["wall_s"] == sum(s["wall_s"] for s in run["sittings"])
    assert "2 sittings" in run["wall_note"] and run["trials_ok"] == 2  # the first one's kept
    index = (repo / "docs" / "reproductions" / "README.md").read_text()
    assert "[zeadally-2004](zeadally-2004/index.html)" in index

    # a fresh run (no --resume) starts from an empty database and forgets the sittings
    assert _publish(repo).returncode == 1
    assert len(db.with_suffix(".sittings").read_text().splitlines()) == 1


def test_resume_without_a_database_says_so(repo: Path) -> None:
    res = _publish(repo, "--resume")
    assert res.returncode == 1
    assert "--resume: no results/reproductions/zeadally-2004.sqlite" in res.stderr
