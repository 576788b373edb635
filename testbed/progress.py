"""Progress of a run on stderr: what runs, how many left, time remaining; plain lines off a TTY."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def format_duration(seconds: float) -> str:
    """Short human duration: 45s, 3m05s, 1h02m."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Progress:
    """Counts trials; the estimate is the mean duration of trials finished in this session."""

    def __init__(self, total: int, done: int = 0, stream: TextIO | None = None,
                 tty: bool | None = None, width: int = 24) -> None:
        self.total = total
        self.done = done
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.width = width
        self._session = 0
        self._spent = 0.0
        self._t0: float | None = None
        self._label = ""

    def eta_s(self) -> float | None:
        if self._session == 0:
            return None
        return (self._spent / self._session) * (self.total - self.done)

    def line(self) -> str:
        eta = self.eta_s()
        left = self.total - self.done
        est = f", ~{format_duration(eta)} left" if eta is not None else ""
        if self.tty:
            filled = int(self.width * self.done / self.total) if self.total else self.width
            bar = "#" * filled + "-" * (self.width - filled)
            return f"[{bar}] {self.done}/{self.total} ({left} left{est}) {self._label}"
        return f"trial {self.done + 1}/{self.total} ({left} left{est}): {self._label}"

    def _emit(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K" + text[:200])
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def start(self, label: str) -> None:
        self._label = label
        self._t0 = time.monotonic()
        self._emit(self.line())

    def finish(self, ok: bool = True) -> None:
        if self._t0 is not None:
            self._spent += time.monotonic() - self._t0
            self._session += 1
        self._t0 = None
        self.done += 1
        if not ok and not self.tty:
            self._emit(f"  failed: {self._label}")

    def drop(self, n: int) -> None:
        """`n` trials counted in the total will not run after all (their cell is precise)."""
        self.total = max(self.done, self.total - n)

    def note(self, text: str) -> None:
        """A message above the bar (kept on its own line)."""
        if self.tty:
            self.stream.write("\r\x1b[K" + text + "\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line() + "\n")
            self.stream.flush()
