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
import tomllib
from pathlib import Path
from typing import Any

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
    from testbed.experiment import check_topologies, iter_plan, load_experiment

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
    rep = _report("experiment", outcomes, len(sample))
    assert rep["valid"] > 0 and rep["refused_exit2"] > 0
