"""A fake TestbedLike (testbed.api) for measurement tests: canned outputs, every call recorded."""

from __future__ import annotations

import io
import itertools
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from testbed.api import Action, Undo
from testbed.measure import probe

DATA = Path(__file__).resolve().parent.parent / "data"

Answer = str | Callable[[list[str]], str]


def data(name: str) -> str:
    return (DATA / name).read_text()


def program(argv: list[str]) -> str:
    """What an argv runs, as the answers are keyed: "udpprobe recv", "pingpong_probe client",
    "iperf3 -c", "iperf3 -s", "ping"."""
    found = probe.program_of(argv)
    if found is not None:
        return f"{found[0].rsplit('.', 1)[-1]} {found[1]}"
    if argv[0] == "iperf3":
        return "iperf3 -c" if "-c" in argv else "iperf3 -s"
    return argv[0]


class FakePopen:
    """The subprocess.Popen a runner may reach through `proc.popen`."""

    def __init__(self, stdout: str, on_end: Callable[[], None] | None) -> None:
        self.stdout_text = stdout
        self.stdout = io.StringIO(stdout)  # a runner may read lines before communicate()
        self.stdin_text = ""
        self.on_end = on_end
        self.returncode: int | None = None
        self.signals: list[int] = []  # what the runner sent it (send_signal) while it ran

    def _end(self) -> int:
        if self.returncode is None:
            if self.on_end is not None:
                self.on_end()
            self.returncode = 0
        return self.returncode

    def communicate(self, input: str | None = None,
                    timeout: float | None = None) -> tuple[str, str]:
        self.stdin_text += input or ""
        self._end()
        return self.stdout.read(), ""

    def wait(self, timeout: float | None = None) -> int:
        return self._end()

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            self.signals.append(sig)


class FakeProc:
    """A process started by FakeTestbed.popen (like testbed.processes.ManagedProcess)."""

    _pids = itertools.count(4000)

    def __init__(self, node: str, argv: list[str], popen: FakePopen, dies: bool) -> None:
        self.node = node
        self.argv = argv
        self.popen = popen
        self.pid = next(self._pids)
        self.stopped = False
        self.dies = dies

    def alive(self) -> bool:
        return not (self.stopped or self.dies) and self.popen.returncode is None

    def stop(self, grace: float = 2.0) -> int | None:
        self.stopped = True
        return 0


class FakeJournal:
    """testbed.testbed.Testbed's undo journal in miniature: `defer`, nested `scope`s (each
    runs its undos in reverse when it ends), `apply` (an action applied to this testbed)."""

    def __init__(self) -> None:
        self.scopes: list[list[Undo]] = [[]]

    def netns(self, node: str) -> str:
        return f"tb-fake-{node}"

    def defer(self, undo: Undo) -> None:
        self.scopes[-1].append(undo)

    def add_cleanup(self, fn: Callable[[], object], what: str = "cleanup") -> None:
        self.defer(Undo(what, fn))

    @contextmanager
    def scope(self) -> Iterator[FakeJournal]:
        self.scopes.append([])
        try:
            yield self
        finally:
            for undo in reversed(self.scopes.pop()):
                undo.run()

    def apply(self, action: Action) -> None:
        action.apply(self)  # type: ignore[arg-type]  # a fake: what the action asks of it


class FakeTestbed(FakeJournal):
    """Nodes h1, r1, h2 (h1 10.0.0.1 / fd00::1 ...); `answers[program(argv)]` is what a client
    prints, or what a server started with `--out FILE` writes there when it ends."""

    def __init__(self, scratch: Path, answers: Mapping[str, Answer] | None = None, *,
                 rate_bps: float | None = None, listening: bool = True,
                 dies: bool = False) -> None:
        super().__init__()
        self.answers = dict(answers or {})
        self.scratch = scratch
        self.listening = listening
        self.dies = dies
        self.nodes = ["h1", "r1", "h2"]
        self.topology = SimpleNamespace(
            node_names=self.nodes,
            links=[SimpleNamespace(shape=SimpleNamespace(rate_bps=rate_bps))])
        self.calls: list[tuple[str, str, list[str]]] = []
        self.procs: list[FakeProc] = []

    def address(self, node: str, family: int, peer: str | None = None) -> str:
        i = self.nodes.index(node) + 1
        return f"10.0.0.{i}" if family == 4 else f"fd00::{i}"

    def bind_address(self, node: str, family: int) -> str:
        return self.address(node, family)

    def scratch_dir(self) -> Path:
        self.scratch.mkdir(parents=True, exist_ok=True)
        return self.scratch

    def qdiscs(self) -> list[dict[str, Any]]:
        return []

    def answer(self, argv: list[str]) -> str:
        a = self.answers.get(program(argv))
        if a is None:
            return ""
        return a(argv) if callable(a) else a

    def run(self, node: str, argv: list[str], *, check: bool = True,
            timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        if argv[0] == "ss":
            out = f"LISTEN 0 0 *:{argv[-1].lstrip(':')}" if self.listening else ""
            return subprocess.CompletedProcess(argv, 0, out, "")
        self.calls.append(("run", node, argv))
        return subprocess.CompletedProcess(argv, 0, self.answer(argv), "")

    def popen(self, node: str, argv: list[str], *, name: str = "", **popen_kw: Any) -> FakeProc:
        self.calls.append(("popen", node, argv))
        on_end = None
        if "--out" in argv:
            out = Path(argv[argv.index("--out") + 1])
            text = self.answer(argv)

            def on_end() -> None:
                if text:
                    out.write_text(text)

            popen = FakePopen("", on_end)
        else:
            popen = FakePopen(self.answer(argv), None)
        proc = FakeProc(node, argv, popen, self.dies)
        self.procs.append(proc)
        return proc

    def started(self, prog: str) -> list[list[str]]:
        """The argvs of every call that ran `prog` (see `program`)."""
        return [argv for _how, _node, argv in self.calls if program(argv) == prog]

    def leftovers(self) -> list[str]:
        """Processes still running and files left in the scratch folder."""
        left = [f"process {p.argv}" for p in self.procs if p.alive()]
        if self.scratch.exists():
            left += [f"file {f}" for f in self.scratch.rglob("*") if f.is_file()]
        return left
