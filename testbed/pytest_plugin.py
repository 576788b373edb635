"""pytest plugin: the kernel(*features) marker, the one-boot VM pass, the testbed_net fixture."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from testbed.vm.guest import ENV_IN_VM
from testbed.waiting import CLOCKS

if TYPE_CHECKING:
    from testbed.testbed import Testbed

VM_SUMMARY = "pytest-vm.json"  # written by the guest's pytest into $TESTBED_SCRATCH
MODES = ("run", "off")


@dataclass
class _State:
    mode: str = "off"
    in_vm: bool = False
    deferred: list[pytest.Item] = field(default_factory=list)
    vm_features: set[str] = field(default_factory=set)
    host_ran: int = 0
    vm_counts: dict[str, int] | None = None
    vm_error: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    skipped_for_vm: int = 0
    strict: bool = False
    used: bool = False  # a kernel marker or testbed_net in this session: else the plugin is silent


_STATE = pytest.StashKey[_State]()
_MISSING = pytest.StashKey[list[str]]()


def _missing_probe() -> Callable[[tuple[str, ...]], list[str]]:
    """`testbed.capabilities.missing`, imported only when a kernel-marked test is collected."""
    from testbed.capabilities import missing

    return missing


# --- options and marker registration -------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("testbed", "testbed full-kernel tier")
    group.addoption(
        "--testbed-vm",
        choices=MODES,
        default=None,
        help=(
            "kernel-marked tests whose features this machine lacks: 'run' them afterwards in "
            "ONE boot of the full-kernel VM (testbed vm), or 'off': skip them. "
            "Default: run when CI=true, else off. In CI they are never skipped silently."
        ),
    )
    group.addoption(
        "--testbed-vm-memory", default="1G", help="guest memory for the VM pass (default 1G)"
    )
    group.addoption(
        "--testbed-strict",
        choices=("yes", "no"),
        default=None,
        help=(
            "yes: a kernel-marked test this machine cannot run, or testbed_net without root, "
            "fails instead of being skipped. Default: $TESTBED_STRICT (1/0) if set, else yes "
            "when CI=true (what hosted CI sets), else no"
        ),
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kernel(*features, clock=None): needs these testbed features (netem, sit, jool, tun, "
        "tayga, ...); where this machine lacks one, the test runs in the full-kernel VM "
        "instead; clock='virtual' runs it in a second boot on the virtual clock",
    )
    config.addinivalue_line(
        "markers",
        "topology(path, **params): the topology the testbed_net fixture builds for this test",
    )
    strict = _strict(config.getoption("--testbed-strict", default=None))
    mode = config.getoption("--testbed-vm", default=None)
    if mode is None:
        mode = "run" if strict else "off"
    config.stash[_STATE] = _State(mode=mode, in_vm=os.environ.get(ENV_IN_VM) == "1",
                                  strict=strict)


def _strict(option: str | None) -> bool:
    """Whether nothing may be skipped: --testbed-strict, else $TESTBED_STRICT, else CI=true."""
    if option is not None:
        return option == "yes"
    env = os.environ.get("TESTBED_STRICT")
    if env is not None and env.strip():
        return env.strip().lower() in ("1", "true", "yes")
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


VIRTUAL_CLOCK = "virtual-clock"
"""What a test marked `kernel(..., clock="virtual")` lacks outside a virtual-clock guest."""


def kernel_clock(item: pytest.Item) -> str | None:
    """The clock the item's kernel markers ask for ('virtual', 'real'), or None (any)."""
    for mark in item.iter_markers("kernel"):
        clock = mark.kwargs.get("clock")
        if clock is not None:
            if clock not in CLOCKS:
                raise pytest.UsageError(
                    f"{item.nodeid}: kernel(clock=...) is 'virtual' or 'real', got {clock!r}"
                )
            return str(clock)
    return None


def _lacks_clock(item: pytest.Item) -> list[str]:
    from testbed.waiting import clock_name

    return [VIRTUAL_CLOCK] if kernel_clock(item) == "virtual" != clock_name() else []


def kernel_features(item: pytest.Item) -> list[str]:
    """Every feature named by the item's kernel markers, in order, without repeats."""
    out: list[str] = []
    for mark in item.iter_markers("kernel"):
        for f in mark.args:
            if not isinstance(f, str):
                raise pytest.UsageError(f"{item.nodeid}: kernel() takes feature names, got {f!r}")
            if f not in out:
                out.append(f)
    return out


# --- host: decide what runs where ----------------------------------------------------------


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    state = config.stash[_STATE]
    marked = [(item, kernel_features(item)) for item in items]
    marked = [(item, feats) for item, feats in marked if feats or kernel_clock(item)]
    if not marked:
        return
    state.used = True
    missing_of = _missing_probe()
    cache: dict[tuple[str, ...], list[str]] = {}
    for item, feats in marked:
        key = tuple(sorted(feats))
        if key not in cache:
            cache[key] = list(missing_of(key)) if key else []
        item.stash[_MISSING] = cache[key] + _lacks_clock(item)
    if state.in_vm:
        return  # checked again at setup, where a missing feature fails the test
    deferred = [item for item, _ in marked if item.stash[_MISSING]]
    if state.mode != "run" or not deferred:
        return
    state.deferred = deferred
    for item in deferred:
        lacking: list[str] = item.stash[_MISSING]
        state.vm_features.update(lacking)
    keep = set(map(id, deferred))
    items[:] = [i for i in items if id(i) not in keep]
    config.hook.pytest_deselected(items=deferred)


def pytest_runtest_setup(item: pytest.Item) -> None:
    missing = item.stash.get(_MISSING, [])
    if not missing:
        return
    state = item.config.stash[_STATE]
    if state.in_vm:
        pytest.fail(
            f"inside the full-kernel VM but still missing: {', '.join(missing)} "
            + (
                "(the virtual clock: run it under `testbed vm --clock virtual`)"
                if VIRTUAL_CLOCK in missing
                else "(scripts/provision.sh installs the modules and programs)"
            ),
            pytrace=False,
        )
    why = (
        f"needs {', '.join(missing)}, which this machine lacks; "
        "run it in the full-kernel VM: scripts/test, or pytest --testbed-vm=run"
    )
    if state.strict:
        pytest.fail(f"strict (CI=true, TESTBED_STRICT or --testbed-strict) forbids skipping: "
                    f"{why}", pytrace=False)
    state.skipped_for_vm += 1
    pytest.skip(why)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    state = _state_of_report()
    if state is None:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = "error" if report.when == "setup" and report.failed else report.outcome
        state.counts[outcome] = state.counts.get(outcome, 0) + 1
        if outcome != "skipped":
            state.host_ran += 1


_CURRENT: list[_State] = []


def _state_of_report() -> _State | None:
    return _CURRENT[-1] if _CURRENT else None


def pytest_sessionstart(session: pytest.Session) -> None:
    _CURRENT.append(session.config.stash[_STATE])  # a stack: pytester nests sessions


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and _CURRENT and _CURRENT[-1] is state:
        _CURRENT.pop()


# --- host: the VM pass; guest: its summary -------------------------------------------------


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash[_STATE]
    if state.in_vm:
        _write_vm_summary(state)
        return
    if not state.deferred or session.config.option.collectonly:
        return
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        state.vm_error = "interrupted before the VM pass"
        return
    capman = session.config.pluginmanager.getplugin("capturemanager")
    reporter = session.config.pluginmanager.getplugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep(
            "=",
            f"testbed: {len(state.deferred)} test(s) need "
            f"{', '.join(sorted(state.vm_features))}: running them in the full-kernel VM",
        )
    try:
        if capman is not None:
            with capman.global_and_fixture_disabled():
                _run_vm_pass(session, state)
        else:
            _run_vm_pass(session, state)
    except KeyboardInterrupt:
        state.vm_error = "interrupted"
        raise
    if state.vm_error is not None or (state.vm_counts or {}).get("failed_total", 0):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _run_vm_pass(session: pytest.Session, state: _State) -> None:
    from testbed.errors import TestbedError
    from testbed.vm import run as vm_run

    config = session.config
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(config.rootpath),
    ]
    argv += ["-v"] * max(config.option.verbose, 0)
    if config.option.verbose < 0:
        argv.append("-q")
    # One boot per clock: the real-clock VM for what lacks kernel features, a second,
    # virtual-clock boot for the tests marked kernel(..., clock="virtual").
    by_clock: dict[str, list[pytest.Item]] = {}
    for item in state.deferred:
        clock = "virtual" if VIRTUAL_CLOCK in item.stash.get(_MISSING, []) else "real"
        by_clock.setdefault(clock, []).append(item)
    total: dict[str, int] = {}
    for clock, items in sorted(by_clock.items()):
        try:
            result = vm_run.run_in_vm(
                argv + [item.nodeid for item in items],
                memory=config.getoption("--testbed-vm-memory"),
                keep_files=[VM_SUMMARY],
                cwd=config.rootpath,
                clock=clock,
            )
        except TestbedError as exc:
            state.vm_error = f"the {clock}-clock VM could not run the tests: {exc}"
            return
        raw = result.scratch_files.get(VM_SUMMARY)
        if raw is None:
            state.vm_error = (
                f"the {clock}-clock VM pass ended (exit {result.returncode}) without a summary"
            )
            return
        counts: dict[str, int] = json.loads(raw)
        failed = counts.get("failed", 0) + counts.get("error", 0)
        if result.returncode != 0 and failed == 0:
            state.vm_error = f"pytest in the {clock}-clock VM exited {result.returncode}"
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
    total["failed_total"] = total.get("failed", 0) + total.get("error", 0)
    state.vm_counts = total


def _write_vm_summary(state: _State) -> None:
    scratch = os.environ.get("TESTBED_SCRATCH")
    if not scratch:
        return
    counts = dict(state.counts)
    counts["ran"] = state.host_ran
    Path(scratch, VM_SUMMARY).write_text(json.dumps(counts))


def summary_line(host_ran: int, vm_ran: int | None, features: Iterable[str]) -> str:
    """The closing count line of the test command."""
    feats = ", ".join(sorted(features))
    if vm_ran is None:
        return f"testbed: {host_ran} tests ran on the host, 0 in the VM"
    return f"testbed: {host_ran} tests ran on the host, {vm_ran} in the VM (features: {feats})"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash[_STATE]
    if state.in_vm or not state.used:
        return
    tr = terminalreporter
    # pytest's own tally of this session (nested pytester sessions do not leak into it)
    stats = getattr(tr, "stats", {})
    state.host_ran = sum(
        1
        for key in ("passed", "failed", "error", "xfailed", "xpassed")
        for rep in stats.get(key, [])
        if getattr(rep, "when", "call") in ("call", "setup")
    )
    if state.vm_counts is not None:
        c = state.vm_counts
        detail = ", ".join(
            f"{c[k]} {k}" for k in ("passed", "failed", "error", "skipped") if c.get(k)
        )
        tr.write_line(f"testbed: VM pass: {detail or 'nothing ran'}")
    if state.vm_error:
        tr.write_line(f"testbed: VM pass FAILED: {state.vm_error}", red=True, bold=True)
    if state.vm_counts is not None:
        vm_ran = state.vm_counts.get("ran", 0)
        tr.write_line(summary_line(state.host_ran, vm_ran, state.vm_features), bold=True)
    elif state.deferred:
        line = summary_line(state.host_ran, None, ())
        tr.write_line(f"{line} ({len(state.deferred)} could not run there: see above)", red=True)
    else:
        line = summary_line(state.host_ran, None, ())
        if state.skipped_for_vm:
            line += f" ({state.skipped_for_vm} skipped that need the VM: scripts/test runs them)"
        tr.write_line(line)


# --- the testbed_net fixture ---------------------------------------------------------------


def _topology_request(request: pytest.FixtureRequest) -> tuple[str, Mapping[str, Any]]:
    param = getattr(request, "param", None)
    if param is not None:
        if isinstance(param, str | Path):
            return str(param), {}
        if isinstance(param, tuple) and len(param) == 2:
            return str(param[0]), dict(param[1])
        raise pytest.UsageError(
            f"testbed_net: indirect parameter must be a path or (path, overrides), got {param!r}"
        )
    mark = request.node.get_closest_marker("topology")
    if mark is None or not mark.args:
        raise pytest.UsageError(
            f"{request.node.nodeid}: testbed_net needs @pytest.mark.topology('topologies/x.toml')"
        )
    return str(mark.args[0]), dict(mark.kwargs)


@pytest.fixture
def testbed_net(request: pytest.FixtureRequest) -> Iterator[Testbed]:
    """A built Testbed for the test's topology; everything it created is removed afterwards.

    Use `@pytest.mark.topology("chain", routers=2)` (a shipped topology by name, or a path such as
    "topologies/p2p.toml"), or indirect parametrization with a name/path or (it, {"key": value}).
    """
    state = request.config.stash[_STATE]
    state.used = True
    if os.geteuid() != 0:
        why = "testbed_net needs root (network namespaces)"
        if state.strict:
            pytest.fail(f"{why}; strict (CI=true): run as root, or set TESTBED_STRICT=0 or "
                        "--testbed-strict=no to skip instead", pytrace=False)
        pytest.skip(why)
    from testbed.testbed import Testbed
    from testbed.topology import find_topology, load_topology

    path, params = _topology_request(request)
    p = Path(path)
    if not path.endswith(".toml") and "/" not in path:
        p = find_topology(path)  # a shipped topology by name (chain, one-router, nat64-tayga)
    elif not p.is_absolute() and not p.exists():
        p = request.config.rootpath / p
    topo = load_topology(p, {k: str(v) for k, v in params.items()})
    with Testbed(topo) as tb:
        yield tb
