"""Seeded fuzzing of topology and experiment files: no traceback, no hang, exit 2 with file+key.

CI runs a few hundred cases; TESTBED_RELIABILITY_LONG=1 runs the acceptance numbers (1,100
topology and 220 experiment files, with a larger CLI sample). TESTBED_RELIABILITY_SEED picks
another seed; a failure prints the seed and case number, and the file is kept for reproduction.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from testbed.cli import CLOSED_PIPE_STATUS
from tests.reliability.fuzz import (
    LONG,
    ROOT,
    SEED,
    Outcome,
    cli,
    mutate_doc,
    mutate_text,
    run_case,
    to_toml,
)

TOPO_CASES = 1100 if LONG else 300
EXP_CASES = 220 if LONG else 200
CLI_SAMPLE = 100 if LONG else 12

TOPO_KEYS = ["name", "description", "params", "defaults", "addressing", "nodes", "links",
             "chains", "routes", "features", "kind", "node", "role", "stack", "endpoints",
             "rate", "mtu", "delay", "jitter", "loss", "shaping", "from", "to", "routers",
             "prefix", "via"]
EXP_KEYS = ["name", "topology", "params", "sweep", "repetitions", "measurements", "quick",
            "kind", "ip", "size", "count", "duration", "client", "server", "ip_payload",
            "frame_size", "rate", "where", "topology.routers", "topology.rate", "ratio"]


def _seeds(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for p in sorted(folder.glob("*.toml")):
        out.append((p.name, tomllib.loads(p.read_text())))
    return out


def _cases(n: int, seeds: list[tuple[str, dict[str, Any]]], keys: list[str], salt: str
           ) -> list[tuple[int, str, bytes]]:
    rng = random.Random(f"{SEED}-{salt}")
    out = []
    for i in range(n):
        name, doc = seeds[i % len(seeds)]
        text = to_toml(mutate_doc(doc, rng, keys))
        data = mutate_text(text, rng) if rng.random() < 0.2 else text.encode()
        out.append((i, name, data))
    return out


def check_topology(path: Path) -> None:
    from testbed.plan import compile_plan
    from testbed.topology import load_topology

    topo = load_topology(path)
    if len(topo.nodes) <= 64:
        compile_plan(topo, "fuzz", netem_available=True).describe()


def check_experiment(path: Path, profile: str = "full") -> None:
    from testbed.experiment_spec import check_topologies, iter_plan, load_experiment

    exp = load_experiment(path, profile)
    check_topologies(exp)
    for _ in itertools.islice(iter_plan(exp), 5000):
        pass


def _report(kind: str, outcomes: list[Outcome], cli_checked: int) -> dict[str, Any]:
    rep = {
        "kind": kind,
        "seed": SEED,
        "cases": len(outcomes),
        "valid": sum(o.valid for o in outcomes),
        "refused_exit2": sum(not o.valid and not o.crash for o in outcomes),
        "crashes_or_hangs": sum(o.crash for o in outcomes),
        "slowest_s": round(max(o.seconds for o in outcomes), 3),
        "cli_checked": cli_checked,
    }
    print(json.dumps(rep))
    out = os.environ.get("TESTBED_RELIABILITY_REPORT")
    if out:
        with open(out, "a") as fh:
            fh.write(json.dumps(rep) + "\n")
    return rep


def test_fuzz_topology_files(tmp_path: Path) -> None:
    cases = _cases(TOPO_CASES, _seeds(ROOT / "topologies"), TOPO_KEYS, "topology")
    outcomes: list[Outcome] = []
    crashes: list[str] = []
    sample: list[tuple[Path, Outcome]] = []
    for i, name, data in cases:
        path = tmp_path / f"t{i:04d}-{name}"
        path.write_bytes(data)
        o = run_case(check_topology, path)
        outcomes.append(o)
        if o.crash:
            crashes.append(f"seed {SEED} case {i} ({path}):\n{o.error}")
        if i % max(1, TOPO_CASES // CLI_SAMPLE) == 0:
            sample.append((path, o))
    assert not crashes, "\n\n".join(crashes[:5])
    for path, o in sample:  # end to end: the CLI agrees, exit 0 or 2, never a traceback
        p = cli(["plan", str(path)])
        assert "Traceback" not in p.stderr, p.stderr
        assert p.returncode == (0 if o.valid else 2), (path, p.returncode, p.stderr)
        if not o.valid:
            assert p.stderr.startswith(f"testbed: error: {path}"), p.stderr
        # its reader gone before the plan is printed: quiet, like `head`'s other writers
        closed = cli(["plan", str(path)], close_stdout=True)
        assert closed.returncode == (CLOSED_PIPE_STATUS if o.valid else 2), closed.stderr
        assert closed.stderr == ("" if o.valid else p.stderr)
    rep = _report("topology", outcomes, len(sample))
    assert rep["valid"] > 0 and rep["refused_exit2"] > 0  # the fuzzer reaches both sides


def test_fuzz_experiment_files(tmp_path: Path) -> None:
    seeds = _seeds(ROOT / "experiments") + _seeds(ROOT / "tests" / "data" / "experiments")
    cases = _cases(EXP_CASES, seeds, EXP_KEYS, "experiment")
    outcomes: list[Outcome] = []
    crashes: list[str] = []
    sample: list[tuple[Path, Outcome, str]] = []
    rng = random.Random(f"{SEED}-profile")
    for i, name, data in cases:
        path = tmp_path / f"e{i:04d}-{name}"
        path.write_bytes(data)
        profile = rng.choice(["full", "quick"])
        o = run_case(lambda p, prof=profile: check_experiment(p, prof), path)  # type: ignore[misc]
        outcomes.append(o)
        if o.crash:
            crashes.append(f"seed {SEED} case {i} ({path}, {profile}):\n{o.error}")
        if i % max(1, EXP_CASES // CLI_SAMPLE) == 0:
            sample.append((path, o, profile))
    assert not crashes, "\n\n".join(crashes[:5])
    not_a_db = tmp_path / "a-directory"
    not_a_db.mkdir()
    shared = Path(tempfile.mkdtemp(prefix="tb-fuzz-"))  # readable and writable by nobody too
    shared.chmod(0o777)
    try:
        _check_cli_sample(sample, not_a_db, shared)
    finally:
        shutil.rmtree(shared)
    rep = _report("experiment", outcomes, len(sample))
    assert rep["valid"] > 0 and rep["refused_exit2"] > 0


def _check_cli_sample(sample: list[tuple[Path, Outcome, str]], not_a_db: Path,
                      shared: Path) -> None:
    for path, o, profile in sample:
        quick = ["--quick"] if profile == "quick" else []
        dry = cli(["run", str(path), *quick, "--dry-run"])
        assert "Traceback" not in dry.stderr, dry.stderr
        assert dry.returncode == (0 if o.valid else 2), (path, dry.returncode, dry.stderr)
        # the real run validates the same way before it opens the database (a directory
        # here, so that nothing is ever built): the same error, or the database's
        real = cli(["run", str(path), *quick, "--db", str(not_a_db)])
        assert real.returncode == 2 and "Traceback" not in real.stderr, real.stderr
        if o.valid:
            assert "is a directory" in real.stderr, real.stderr
        else:
            assert real.stderr == dry.stderr
            assert dry.stderr.startswith(f"testbed: error: {path}"), dry.stderr
        # a user who is not root, with a database it may write: the file's mistakes, else one
        # line saying root is needed; nothing written (--clock real: never a guest's boot)
        mine = shared / f"{path.name}.sqlite"
        shutil.copy(path, shared / path.name)
        nonroot = cli(["run", str(shared / path.name), *quick, "--clock", "real", "--db",
                       str(mine)], user="nobody")
        assert nonroot.returncode == 2 and "Traceback" not in nonroot.stderr, nonroot.stderr
        assert not mine.exists()
        if o.valid:
            assert "needs root" in nonroot.stderr, nonroot.stderr
        else:
            assert nonroot.stderr == dry.stderr.replace(str(path), str(shared / path.name))
        closed = cli(["run", str(path), *quick, "--dry-run"], close_stdout=True)
        assert "Traceback" not in closed.stderr, closed.stderr
        assert closed.returncode == (CLOSED_PIPE_STATUS if o.valid else 2), closed.stderr
