"""Seeded signal injection into real `testbed up` and `testbed run` under CPU load.

SIGINT to the process group, SIGTERM, or SIGKILL followed by `testbed clean`, at a random
moment; afterwards nothing of the run may be left (namespaces, run record) and the host's
addresses, routes, nft ruleset and forwarding sysctls must be as before. CI runs a handful;
TESTBED_RELIABILITY_LONG=1 runs the 100 of the acceptance numbers (TESTBED_RELIABILITY_SEED
picks the seed; TESTBED_RELIABILITY_REPORT appends a JSON summary line to that file).
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed import netlink, state
from tests.reliability.fuzz import LONG, ROOT, SEED

pytestmark = pytest.mark.root
TESTBED = str(Path(sys.executable).parent / "testbed")
INJECTIONS = 100 if LONG else 8
EXPERIMENT = ROOT / "tests" / "data" / "experiments" / "signals.toml"
SIGNALS = ("INT-group", "TERM", "KILL+clean")


def host_state() -> dict[str, Any]:
    """What a run must never change on the host."""
    def out(argv: list[str]) -> str:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout

    addrs = json.loads(out(["ip", "-j", "addr"]) or "[]")
    snap: dict[str, Any] = {
        "addresses": sorted(
            (a["ifname"], i["local"], i["prefixlen"]) for a in addrs for i in a.get("addr_info", [])
        ),
        "links": sorted(a["ifname"] for a in addrs),
        "route4": out(["ip", "-4", "route", "show", "table", "all"]),
        "route6": sorted(
            line for line in out(["ip", "-6", "route", "show", "table", "all"]).splitlines()
            if " expires " not in line  # router-advertised routes age on their own
        ),
        "nft": out(["nft", "list", "ruleset"]),
    }
    for key in ("ipv4/ip_forward", "ipv6/conf/all/forwarding"):
        snap[key] = Path(f"/proc/sys/net/{key}").read_text().strip()
    return snap


def leftovers(before: set[str], names: set[str], child: int) -> list[str]:
    """Namespaces and records that the injected command left: its named runs' namespaces,
    and new namespaces that no live process of another session holds."""
    recs = {r.name: r for r in state.all_records()}
    present = set(netlink.list_netns())
    left = [f"record {n}" for n in names if n in recs]
    left += [f"record {r.name} of pid {child}" for r in recs.values() if r.pid == child]
    others = {
        ns for r in recs.values() if r.name not in names and (r.pid == 0 or r.owner_alive())
        for ns in r.namespaces.values()
    }
    for ns in sorted(present - before - others):
        if ns.startswith("tb-") and not ns.startswith("tb-probe-"):
            left.append(ns)
    return left


@pytest.fixture
def cpu_load() -> Iterator[None]:
    """One busy process (started and stopped here, by pid): builds under CPU contention."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def _inject(rng: random.Random, i: int, tmp: Path) -> dict[str, Any]:
    what = "up" if rng.random() < 0.7 else "run"
    how = rng.choice(SIGNALS)
    name = f"si{SEED % 1000}x{i}"
    if what == "up":
        routers = rng.randint(20, 40)
        argv = [TESTBED, "up", str(ROOT / "topologies" / "chain.toml"), "--set",
                f"routers={routers}", "--name", name]
        delay = rng.uniform(0.0, 2.0)
    else:
        routers = 3
        argv = [TESTBED, "run", str(EXPERIMENT), "--db", str(tmp / f"r{i}.sqlite")]
        delay = rng.uniform(0.0, 7.0)
    before_ns = set(netlink.list_netns())
    # stderr to a file, not a pipe: after a SIGKILL the run's own processes (servers in its
    # namespaces) keep the pipe open until `testbed clean` removes them
    err_path = tmp / f"stderr-{i}.txt"
    with open(err_path, "w") as err_file:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err_file,
                                start_new_session=True, cwd=ROOT)
    time.sleep(delay)
    if how == "INT-group":
        os.killpg(proc.pid, signal.SIGINT)
    elif how == "TERM":
        proc.send_signal(signal.SIGTERM)
    else:
        proc.kill()
    try:
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        subprocess.run([TESTBED, "clean"], capture_output=True, cwd=ROOT)
        return {"what": what, "how": how, "rc": "hang", "ok": False,
                "err": err_path.read_text()[-500:]}
    rc = proc.returncode
    err = err_path.read_text()
    ok = "Traceback" not in err
    outcome = "interrupted"
    clean_out: list[str] = []
    if how == "KILL+clean":
        clean = subprocess.run([TESTBED, "clean"], capture_output=True, text=True, cwd=ROOT)
        ok = ok and clean.returncode == 0 and "Traceback" not in clean.stderr
        clean_out = clean.stdout.strip().splitlines()
        outcome = "killed+cleaned" if rc == -9 else f"rc {rc}"
        ok = ok and rc in (-9, 0)
    else:
        sig = signal.SIGINT if how == "INT-group" else signal.SIGTERM
        lines = err.strip().splitlines()
        if rc == 128 + sig:
            ok = ok and bool(lines) and lines[-1].startswith("testbed: interrupted")
        elif rc == -sig and f'File "{ROOT / "testbed"}' not in err:
            # the signal came while the interpreter itself started (site, the entry
            # script's own imports), before any line of testbed ran: Python's default
            # action; nothing can exist yet (checked below like every other case)
            ok = True
            outcome = "before testbed code ran"
        else:
            ok = ok and rc == 0  # it finished before the signal came
            outcome = f"rc {rc}"
    kept = state.load(name) if what == "up" else None
    if rc == -signal.SIGKILL and kept is not None and kept.state == "up":
        # killed after `up` had saved its run as "up" (its last ~40 ms: printing, exiting):
        # a kept run, which `testbed clean` rightly leaves alone; it must be whole (below)
        outcome = "killed after the run was up"
        ok = ok and any(line.startswith(f"run {name}: up (kept") for line in clean_out)
    elif rc == 0:
        outcome = "finished first"
    if what == "up" and outcome in ("finished first", "killed after the run was up"):
        # a finished `up` keeps its run: it must be whole, then removed
        rec = state.load(name)
        ok = ok and rec is not None and rec.state == "up" and all(
            netlink.netns_exists(ns) for ns in rec.namespaces.values())
        subprocess.run([TESTBED, "down", "--name", name], capture_output=True, cwd=ROOT)
    left = leftovers(before_ns, {name}, proc.pid)
    return {"what": what, "how": how, "routers": routers, "delay": round(delay, 2), "rc": rc,
            "outcome": outcome, "left": left, "ok": ok and not left,
            "err": err.strip().splitlines()[-1:] if err.strip() else [], "clean": clean_out[:2]}


def test_signal_injection_leaves_nothing(cpu_load: None, tmp_path: Path) -> None:
    rng = random.Random(f"{SEED}-signals")
    host_before = host_state()
    rows = []
    for i in range(INJECTIONS):
        rows.append(_inject(rng, i, tmp_path))
        print(json.dumps(rows[-1]), flush=True)
    host_after = host_state()
    bad = [r for r in rows if not r["ok"]]
    counts = collections.Counter((r["what"], r["how"], r["outcome"]) for r in rows)
    summary = {
        "seed": SEED,
        "injections": len(rows),
        "failures": len(bad),
        "orphaned": sum(len(r["left"]) for r in rows),
        "outcomes": {" / ".join(k): v for k, v in sorted(counts.items())},
        "host_unchanged": host_before == host_after,
    }
    print(json.dumps(summary, indent=1))
    out = os.environ.get("TESTBED_RELIABILITY_REPORT")
    if out:
        with open(out, "a") as fh:
            fh.write(json.dumps(summary) + "\n")
    assert not bad, bad[:5]
    changed = [k for k in host_before if host_before[k] != host_after[k]]
    assert not changed, f"host state changed: {changed}"
