"""Issue 30's escapes, one by one: a non-root run with a writable database, output into a closed
pipe, address pools that cannot address a link, `--resume` with nothing to resume, selections
that yield no trials — each one clear line, the documented exit code, nothing left behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from testbed import results
from testbed.cli import CLOSED_PIPE_STATUS
from testbed.cli import main as cli_main
from testbed.errors import SpecError
from testbed.experiment_spec import load_experiment
from tests.reliability.fuzz import ROOT, cli

SMOKE = ROOT / "experiments" / "smoke.toml"


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder any user may write (mode 777, as in the issue's `mkdir -m 777 D`)."""
    d = Path(tempfile.mkdtemp(prefix="tb-preflight-"))
    d.chmod(0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d)


def one_error(stderr: str) -> str:
    """The error line of a refusal: `testbed: error: ...` plus at most one hint line."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert lines and lines[0].startswith("testbed: error: "), stderr
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("  hint: ")), stderr
    return lines[0]


@pytest.mark.parametrize("args", [
    ["run", str(SMOKE), "--quick"],
    ["reproduce", "zeadally-2004", "--quick"],
])
def test_non_root_run_with_a_writable_database_is_one_line_and_touches_nothing(
        open_dir: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    state = open_dir / "state"
    monkeypatch.setenv("TESTBED_STATE_DIR", str(state))
    db = open_dir / "n.sqlite"
    p = cli([*args, "--db", str(db)], user="nobody")
    assert p.returncode == 2
    line = one_error(p.stderr)
    assert "needs root" in line and "network namespaces" in line
    assert not db.exists() and not state.exists()  # neither database nor registry touched
    assert sorted(os.listdir(open_dir)) == []


def test_non_root_guest_run_checks_its_database_first(open_dir: Path) -> None:
    # the virtual clock runs the trials in a guest, which needs no root here; a database
    # this user cannot write is said before a minute's boot
    p = cli(["run", str(SMOKE), "--quick", "--clock", "virtual", "--db", "/proc/x/y.sqlite"],
            user="nobody")
    assert p.returncode == 2
    assert "results database /proc/x/y.sqlite" in one_error(p.stderr)


@pytest.mark.parametrize("args", [
    ["features"],
    ["plan", "topologies/chain.toml", "--set", "routers=50"],
    ["run", str(SMOKE), "--dry-run"],
    ["results", "--db", "/nonexistent/x.sqlite", "list"],  # an error: stderr still open
])
def test_output_into_a_closed_pipe_exits_quietly(args: list[str]) -> None:
    p = cli(args, close_stdout=True)
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
    if args[0] == "results":
        assert p.returncode == 2
        one_error(p.stderr)
    elif args[0] == "run":  # the plan goes to stdout, its count to stderr
        assert p.returncode == CLOSED_PIPE_STATUS, p.stderr
    else:
        assert (p.returncode, p.stderr) == (CLOSED_PIPE_STATUS, "")


def test_a_closed_stderr_is_quiet_too() -> None:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "plan", "/nonexistent.toml"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stderr is not None
    proc.stderr.close()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == CLOSED_PIPE_STATUS and out == b""


NODES = '[nodes.h1]\n[nodes.h2]\n[[links]]\nendpoints = ["h1", "h2"]\n'


@pytest.mark.parametrize(("text", "key"), [
    (NODES + '[addressing]\nipv6 = "::/0"\n', "addressing.ipv6"),
    (NODES + '[addressing]\nipv4 = "0.0.0.0/0"\n', "addressing.ipv4"),
    (NODES + '[addressing]\nipv4 = "127.0.0.0/16"\n', "addressing.ipv4"),
    (NODES + '[addressing]\nipv4 = "224.0.0.0/16"\n', "addressing.ipv4"),
    (NODES + '[addressing]\nipv4 = "169.254.0.0/16"\n', "addressing.ipv4"),
    (NODES + '[addressing]\nipv6 = "fe80::/48"\n', "addressing.ipv6"),
    (NODES + '[addressing]\nipv6 = "ff02::/48"\n', "addressing.ipv6"),
    (NODES + 'ipv6 = "::/64"\n', "links[0].ipv6"),
    (NODES + 'ipv4 = "240.0.0.0/30"\n', "links[0].ipv4"),
    (NODES + 'addresses = { h1 = ["127.0.0.1/8"], h2 = ["127.0.0.2/8"] }\n',
     "links[0].addresses.h1[0]"),
])
def test_pools_that_cannot_address_a_link_are_refused_by_plan(tmp_path: Path, text: str,
                                                               key: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(text)
    p = cli(["plan", str(path)])
    assert p.returncode == 2
    line = one_error(p.stderr)
    assert line.startswith(f"testbed: error: {path}: {key}: "), line
    assert "cannot" in line


def test_a_pool_too_small_for_the_topology_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[nodes.a]\n[nodes.b]\n[nodes.c]\n[[links]]\nendpoints = ["a", "b"]\n'
                    '[[links]]\nendpoints = ["b", "c"]\n'
                    '[addressing]\nipv4 = "198.18.0.0/24"\nipv4_prefixlen = 24\n')
    p = cli(["plan", str(path)])
    assert p.returncode == 2
    assert "addressing: the IPv4 pool has room for only 1 links" in one_error(p.stderr)


def _in_process(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = cli_main(args)
    return rc, capsys.readouterr().err


def test_resume_with_nothing_to_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # past the root check, whoever runs this
    monkeypatch.setenv("TESTBED_STATE_DIR", str(tmp_path / "state"))
    db = tmp_path / "r.sqlite"
    rc, err = _in_process(["run", str(SMOKE), "--quick", "--resume", "--db", str(db)], capsys)
    assert rc == 2 and "--resume: no results database at" in one_error(err)
    assert "without --resume" in err and not db.exists()
    # a database with a finished run of it, and one with another profile's unfinished run
    with closing(results.connect(db)) as con:
        rid = results.start_run(con, "smoke", "quick", {}, {}, 0)
        results.finish_run(con, rid)
        results.start_run(con, "smoke", "full", {}, {}, 3)
    before = db.read_bytes()
    rc, err = _in_process(["run", str(SMOKE), "--quick", "--resume", "--db", str(db)], capsys)
    assert rc == 2
    assert f"--resume: {db} holds no unfinished quick run of smoke" in one_error(err)
    assert db.read_bytes() == before and not (tmp_path / "state").exists()
    for workers in (["--workers", "2"], ["--cluster", "tcp://127.0.0.1:1"]):
        rc, err = _in_process(["run", str(SMOKE), "--quick", "--resume", "--db", str(db),
                               *workers], capsys)
        assert rc == 2 and "holds no unfinished quick run" in one_error(err), err


EXP = 'topology = "chain"\n[params]\nrouters = 1\n'


@pytest.mark.parametrize(("text", "profile", "key", "words"), [
    (EXP + '[measurements.a]\nkind = "ping"\nwhere = { "topology.routers" = [3] }\n',
     "full", "measurements.a.where", "selects none"),
    (EXP + '[measurements.a]\nkind = "ping"\nwhere = { "topology.rate" = ["ethernet"] }\n',
     "full", "measurements.a.where.topology.rate", "no topology point has this key"),
    (EXP + '[sweep]\n"topology.routers" = [1, 2]\n[measurements.a]\nkind = "ping"\n'
     'where = { "topology.routers" = [2] }\n[quick.sweep]\n"topology.routers" = [1]\n',
     "quick", "measurements.a.where", "selects none of the quick profile's"),
    (EXP + '[measurements.a]\nkind = "ping"\n', "quick", "quick", "no quick profile"),
])
def test_selections_that_yield_no_trials_name_the_key(tmp_path: Path, text: str, profile: str,
                                                      key: str, words: str) -> None:
    path = tmp_path / "e.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_experiment(path, profile)
    assert err.value.key == key and words in err.value.problem, err.value
    p = cli(["run", str(path), "--dry-run", *(["--quick"] if profile == "quick" else [])])
    assert p.returncode == 2
    assert one_error(p.stderr).startswith(f"testbed: error: {path}: {key}: ")
