"""Running programs: argv in a namespace, checked runs, and managed background processes."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed import netlink
from testbed.errors import CommandError, MissingCapability
from testbed.waiting import wait_process

IP = "ip"


def venv_bin() -> Path:
    """The folder of the Python running testbed (a venv's bin/): programs installed with it."""
    return Path(sys.executable).parent


def find_program(name: str) -> Path | None:
    """Where `name` is: beside this Python first (a venv never activated), then on PATH."""
    local = venv_bin() / name
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which(name)
    return Path(found) if found else None


def program_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with this Python's bin/ first on PATH.

    Programs shipped in the venv (virtme-ng's `vng` starts `virtme-run` through PATH) must be
    found by their children too, whether or not the user activated the venv.
    """
    env = dict(os.environ if base is None else base)
    first = str(venv_bin())
    parts = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != first]
    env["PATH"] = os.pathsep.join([first, *parts])
    return env


def ns_argv(netns: str, argv: Sequence[str]) -> list[str]:
    """The argv that runs `argv` inside the named network namespace."""
    return [IP, "netns", "exec", netns, *argv]


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float | None = None,
    where: str = "",
    env: Mapping[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv to completion, capturing text output; raise CommandError when check fails."""
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(env) if env is not None else None,
            input=input,
        )
    except FileNotFoundError:
        raise MissingCapability(
            argv[0],
            f"running {' '.join(argv)}",
            f"install the program that provides '{argv[0]}' "
            "(scripts/provision.sh installs everything)",
        ) from None
    except subprocess.TimeoutExpired as exc:
        raise CommandError(
            argv, -1, f"timed out after {timeout} s; output so far: {(exc.stderr or b'')!r}", where
        ) from None
    if check and proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stderr or proc.stdout, where)
    return proc


def spawn(argv: Sequence[str], *, what: str = "", **popen_kw: Any) -> subprocess.Popen[Any]:
    """Start argv in the background (the one place testbed starts a process); the caller owns
    its lifetime. A missing program is a MissingCapability naming it."""
    try:
        return subprocess.Popen(list(argv), **popen_kw)
    except FileNotFoundError:
        raise MissingCapability(
            argv[0],
            what or f"starting {os.path.basename(argv[0])}",
            f"install the program that provides '{argv[0]}' "
            "(scripts/provision.sh installs everything)",
        ) from None


def interactive(argv: Sequence[str]) -> int:
    """Run argv attached to this terminal (stdin/stdout/stderr inherited); its exit code."""
    try:
        return subprocess.call(list(argv))
    except FileNotFoundError:
        raise MissingCapability(
            argv[0], f"running {' '.join(argv)}", f"install the program that provides '{argv[0]}'"
        ) from None


class ManagedProcess:
    """A background process that is always stopped: terminate, wait, kill, reap."""

    def __init__(self, argv: Sequence[str], *, name: str = "", **popen_kw: Any) -> None:
        self.argv = list(argv)
        self.name = name or os.path.basename(argv[0])
        popen_kw.setdefault("stdin", subprocess.DEVNULL)
        popen_kw.setdefault("start_new_session", True)
        self.popen: subprocess.Popen[Any] = spawn(
            self.argv, what=f"starting {self.name}", **popen_kw
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 2.0) -> int | None:
        """Stop the process (and its process group); returns its exit code."""
        if self.popen.poll() is None:
            _signal_group(self.popen.pid, signal.SIGTERM)
            try:
                wait_process(self.popen, grace)
            except subprocess.TimeoutExpired:
                _signal_group(self.popen.pid, signal.SIGKILL)
                wait_process(self.popen, 5)
        else:
            _signal_group(self.popen.pid, signal.SIGKILL)  # stragglers of its group
        for stream in (self.popen.stdout, self.popen.stderr):
            if stream is not None:
                stream.close()
        return self.popen.returncode


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def kill_netns_processes(netns: str, grace: float = 1.0) -> list[int]:
    """SIGTERM every process inside `netns`, then SIGKILL what is left; returns their pids."""
    pids = [p for p in netlink.netns_pids(netns) if p != os.getpid()]
    if not pids:
        return []
    for pid in pids:
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not [p for p in pids if _exists(p)]:
            return pids
        time.sleep(0.02)
    for pid in pids:
        _kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and [p for p in pids if _exists(p)]:
        time.sleep(0.02)
    return pids


def _kill(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _exists(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
