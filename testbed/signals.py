"""The process's SIGINT/SIGTERM policy: exit while starting, raise once, or defer to a flag."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM)

# Modes:
#   "exit"  - the CLI is still importing: nothing exists yet, so print one line and _exit.
#   "raise" - raise Interrupted once (later signals only note themselves while it unwinds).
#   "defer" - only note the signal; code that creates things calls check() between steps,
#             so a signal never lands inside a library's callbacks or its fork hooks.
_mode = "raise"
_pending: int | None = None
_raised = False
_owner = os.getpid()
_installed = False


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; raised where it is safe, so that every undo runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_status(signum: int) -> int:
    return 128 + signum


def _handler(signum: int, frame: FrameType | None) -> None:
    global _pending, _raised
    if os.getpid() != _owner:  # a forked child (a library's helper): die as asked
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if _mode == "exit":
        name = signal.Signals(signum).name
        os.write(2, f"testbed: interrupted ({name}) while starting; nothing was created\n".encode())
        os._exit(exit_status(signum))
    if _pending is None:
        _pending = signum
    if _mode == "raise" and not _raised:
        _raised = True
        raise Interrupted(signum)


def install(mode: str = "raise") -> None:
    """Handle SIGINT and SIGTERM for the rest of the process (the CLI calls this first)."""
    global _installed, _owner, _mode
    if threading.current_thread() is not threading.main_thread():
        return
    _owner = os.getpid()
    _mode = mode
    for sig in HANDLED:
        signal.signal(sig, _handler)
    _installed = True


def hold() -> None:
    """Block SIGINT and SIGTERM for the rest of the process (its last moments: what it decided
    stands; a blocked signal dies with the process)."""
    if threading.current_thread() is threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)


def set_mode(mode: str) -> str:
    """Switch the mode; returns the previous one (only the main thread, which alone runs
    signal handlers, changes it)."""
    global _mode
    if threading.current_thread() is not threading.main_thread():
        return _mode
    old, _mode = _mode, mode
    return old


def pending() -> int | None:
    """The first signal that arrived and was not yet acted on, if any."""
    return _pending


def check() -> None:
    """Raise Interrupted if a signal arrived (call it between steps that create things)."""
    global _raised
    if threading.current_thread() is not threading.main_thread():
        return
    if _pending is not None and not _raised:
        _raised = True
        raise Interrupted(_pending)


def reset() -> None:
    """Forget a handled signal (for a caller that caught Interrupted and goes on)."""
    global _pending, _raised
    _pending = None
    _raised = False


@contextmanager
def deferred() -> Iterator[None]:
    """Inside the block a signal only sets the flag; callers act on it with check()."""
    old = set_mode("defer")
    try:
        yield
    finally:
        set_mode(old)


class Guard:
    """For library use (pytest, scripts): installs the handlers when the process has none
    of testbed's, and puts the previous ones back on close()."""

    def __init__(self) -> None:
        self._old: dict[int, Any] = {}
        self._own = False

    def open(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if _installed and os.getpid() == _owner:
            return
        self._old = {sig: signal.getsignal(sig) for sig in HANDLED}
        reset()
        install("raise")
        self._own = True

    def close(self) -> None:
        global _installed
        if not self._own:
            return
        for sig, h in self._old.items():
            signal.signal(sig, h if h is not None else signal.SIG_DFL)
        _installed = False
        set_mode("raise")
        reset()
        self._own = False
