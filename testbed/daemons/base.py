"""The managed-daemon skeleton: write config to a scratch folder, start, poll ready, stop."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from testbed.errors import DaemonError
from testbed.waiting import Deadline

if TYPE_CHECKING:
    from testbed.processes import ManagedProcess

POLL_S = 0.05


class Node(Protocol):
    """What a daemon needs of a built Testbed (testbed.testbed.Testbed satisfies it)."""

    @property
    def name(self) -> str | None: ...

    def run(
        self, node: str, argv: Any, *, check: bool = True, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]: ...

    def popen(self, node: str, argv: Any, *, name: str = "", **popen_kw: Any) -> ManagedProcess: ...

    def add_cleanup(self, fn: Callable[[], object], what: str = "cleanup") -> None: ...

    def scratch_dir(self) -> Path: ...


def scratch_dir(tb: Node, what: str) -> Path:
    """A private folder for config files and logs inside the run's scratch folder, which the
    Testbed removes on teardown and `testbed clean` removes after a crash."""
    path = Path(tempfile.mkdtemp(prefix=f"{what}-", dir=tb.scratch_dir()))
    tb.add_cleanup(lambda: shutil.rmtree(path, ignore_errors=True), f"remove {path}")
    return path


def poll(
    check: Callable[[], str | None],
    *,
    deadline_s: float,
    alive: Callable[[], bool] | None = None,
) -> str | None:
    """Call `check` until it returns None (ready) or the deadline passes; returns the last
    reason it was not ready (None when ready). Stops early when `alive` says the daemon died.
    The deadline is a `waiting.Deadline` (host wall time in a virtual-clock guest)."""
    end = Deadline(deadline_s)
    reason: str | None = "not checked yet"
    while True:
        reason = check()
        if reason is None:
            return None
        if alive is not None and not alive():
            return reason
        if end.expired():
            return reason
        time.sleep(POLL_S)


class Daemon:
    """A long-running program in one node, in the foreground, with its output in a log file.

    Subclasses give `program`, `config_files()` (name -> text, pure), `argv()` (pure) and
    `ready()` (None when ready, else what is still missing).
    """

    program = ""
    deadline_s = 10.0

    def __init__(self, node: str, workdir: Path) -> None:
        self.node = node
        self.workdir = workdir
        self.proc: ManagedProcess | None = None

    # --- pure parts -------------------------------------------------------------------------

    def config_files(self) -> dict[str, str]:
        return {}

    def argv(self) -> list[str]:
        raise NotImplementedError

    def path(self, name: str) -> Path:
        return self.workdir / name

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.program}-{self.node}.log"

    # --- kernel-facing parts ----------------------------------------------------------------

    def ready(self, tb: Node) -> str | None:
        return None

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self, tb: Node) -> None:
        """Write the config, start the program (stopped on teardown), wait until ready."""
        for name, text in self.config_files().items():
            p = self.path(name)
            p.write_text(text)
            p.chmod(0o644)
        with open(self.log_path, "w") as log:
            self.proc = tb.popen(
                self.node, self.argv(), name=self.program, stdout=log, stderr=subprocess.STDOUT
            )
        proc = self.proc
        reason = poll(lambda: self.ready(tb), deadline_s=self.deadline_s, alive=proc.alive)
        if reason is None:
            return
        if not proc.alive():
            code = proc.popen.wait()
            # give it a moment: its last words may still be on their way to the log
            raise DaemonError(
                self.program,
                self.node,
                f"exited with code {code} before it was ready ({reason})",
                self.output(),
            )
        raise DaemonError(
            self.program,
            self.node,
            f"not ready after {self.deadline_s:g} s: {reason}",
            self.output(),
        )

    def stop(self) -> int | None:
        return self.proc.stop() if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()
