"""What a command needs before it touches anything — root, the run registry, a writable results
database — checked up front, each missing one said in one line (UsageError, exit 2)."""

from __future__ import annotations

import os
from pathlib import Path

from testbed import state
from testbed.errors import UsageError


def is_root() -> bool:
    return os.geteuid() == 0


def require_root(command: str, why: str = "it builds network namespaces") -> None:
    """`testbed COMMAND` runs only as root: say so, and why, before anything is created."""
    if not is_root():
        raise UsageError(
            f"`testbed {command}` needs root: {why}",
            hint=f"run it as root (e.g. sudo {_program()} {command} ...)",
        )


def _program() -> str:
    """The testbed program by its full path: sudo resets PATH, so a bare `testbed` may not be
    found there."""
    import shutil
    import sys

    here = Path(sys.executable).parent / "testbed"
    return str(here) if here.exists() else shutil.which("testbed") or "testbed"


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _writable_place(path: Path) -> str | None:
    """Why `path` (a file, maybe not there yet) cannot be created or written, or None."""
    try:
        return _why_not_writable(path)
    except OSError as exc:  # e.g. a folder on the way this user may not enter
        return f"cannot reach it: {exc.strerror or exc}"


def _why_not_writable(path: Path) -> str | None:
    if path.exists():
        if path.is_dir():
            return "is a directory"
        if not os.access(path, os.R_OK | os.W_OK):
            return "not writable by this user"
        # SQLite writes its journal (-wal, -shm) beside the file
        if not os.access(path.parent, os.W_OK | os.X_OK):
            return f"its folder {path.parent} is not writable by this user"
        return None
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        return f"{base} is not a folder"
    if not os.access(base, os.W_OK | os.X_OK):
        return f"cannot create it: {base} is not writable by this user"
    return None


def require_registry() -> None:
    """The run registry (/run/testbed, or $TESTBED_STATE_DIR) must be writable: every run is
    recorded there before anything exists, so that `testbed clean` can find it after a crash."""
    d = state.state_dir()
    if _writable_place(d / "x") is not None:
        raise UsageError(
            f"the run registry {d} is not writable by this user",
            hint="run as root, or point TESTBED_STATE_DIR at a writable folder",
        )


def require_database(db: Path) -> None:
    """The results database must be writable (or creatable) — checked without creating it."""
    problem = _writable_place(db)
    if problem is not None:
        raise UsageError(
            f"results database {db}: {problem}",
            hint="pass --db with a writable file path, e.g. --db results/mine.sqlite",
        )


def require_folder(path: Path, option: str) -> None:
    """An output folder (maybe not there yet) that this user can create and write into."""
    problem = _writable_place(path / "x")
    if problem is not None:
        raise UsageError(f"{option} {path}: {problem}",
                         hint=f"pass {option} with a folder this user can write")
