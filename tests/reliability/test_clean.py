"""`testbed clean`: a dead run's namespaces go even when only the run's name prefix shows them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed import netlink, state
from testbed.plan import run_namespaces

TESTBED = str(Path(sys.executable).parent / "testbed")


def test_run_namespaces_match_only_that_runs_nodes() -> None:
    names = ["tb-ab-h1", "tb-ab-r12", "tb-abc-h1", "tb-ab-", "tb-ab-1x", "tb-probe-123",
             "tb-ab-H1", "other-ab-h1", "tb-ab-h1-x"]
    assert run_namespaces("ab", names) == ["tb-ab-h1", "tb-ab-r12"]
    assert run_namespaces("probe", names) == []  # probe namespaces end in a pid


@pytest.mark.root
def test_clean_removes_an_unrecorded_namespace_of_a_dead_run() -> None:
    name = f"cl{os.getpid() % 100000}"
    listed, unlisted, foreign = f"tb-{name}-h1", f"tb-{name}-r14", f"tb-{name}x-h1"
    dead = subprocess.Popen(["true"])
    dead.wait()
    rec = state.RunRecord(name=name, pid=dead.pid, state="building", namespaces={"h1": listed})
    rec.save()
    try:
        for ns in (listed, unlisted, foreign):
            netlink.create_netns(ns)
        out = subprocess.run([TESTBED, "clean"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert f"run {name}: removed 2 namespaces" in out.stdout, out.stdout
        assert not netlink.netns_exists(listed) and not netlink.netns_exists(unlisted)
        assert netlink.netns_exists(foreign)  # another run's prefix: left alone, and named
        assert f"namespace {foreign} looks like testbed's" in out.stdout
        assert state.load(name) is None
    finally:
        for ns in (listed, unlisted, foreign):
            netlink.remove_netns(ns)
        rec.remove()


@pytest.mark.root
def test_clean_leaves_a_kept_run_and_names_it() -> None:
    """A run saved as "up" (even by an `up` killed while it exited) is kept: `clean` names it
    and how to remove it; `clean --all` removes it."""
    name = f"ck{os.getpid() % 100000}"
    ns = f"tb-{name}-h1"
    rec = state.RunRecord(name=name, pid=0, state="up", namespaces={"h1": ns})
    rec.save()
    try:
        netlink.create_netns(ns)
        out = subprocess.run([TESTBED, "clean"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert f"run {name}: up (kept by `testbed up`); left alone" in out.stdout, out.stdout
        assert f"testbed down --name {name}" in out.stdout
        assert netlink.netns_exists(ns) and state.load(name) is not None
        out = subprocess.run([TESTBED, "clean", "--all"], capture_output=True, text=True)
        assert f"run {name}: removed 1 namespaces" in out.stdout, out.stdout
        assert not netlink.netns_exists(ns) and state.load(name) is None
    finally:
        netlink.remove_netns(ns)
        rec.remove()
