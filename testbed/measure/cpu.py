"""CPU during a trial: machine softirq/system time (/proc/stat) and a process's (/proc/PID/stat)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuTimes:
    """Aggregate jiffies of all CPUs (first line of /proc/stat)."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        return sum(getattr(self, f) for f in CPU_FIELDS)


def parse_proc_stat(text: str) -> CpuTimes:
    """The aggregate `cpu` line of /proc/stat (guest time is already inside user)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            nums = [int(v) for v in parts[1:9]]
            nums += [0] * (8 - len(nums))
            return CpuTimes(*nums)
    raise ValueError("no aggregate 'cpu' line in /proc/stat text")


def parse_pid_stat(text: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks from /proc/PID/stat (the command name may contain spaces)."""
    rest = text[text.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state); utime and stime are fields 14 and 15.
    return int(rest[11]), int(rest[12])


def machine_share(before: CpuTimes, after: CpuTimes) -> dict[str, float]:
    """Percent of all CPU time, over the interval, spent in each state (100 = every CPU busy)."""
    total = after.total - before.total
    if total <= 0:
        return {f: 0.0 for f in CPU_FIELDS}
    return {f: 100.0 * (getattr(after, f) - getattr(before, f)) / total for f in CPU_FIELDS}


def process_percent(
    before: tuple[int, int], after: tuple[int, int], seconds: float, hz: int
) -> dict[str, float]:
    """A process's CPU use over `seconds`, in percent of one CPU (user, system, total)."""
    if seconds <= 0:
        return {"user": 0.0, "system": 0.0, "total": 0.0}
    u = 100.0 * (after[0] - before[0]) / hz / seconds
    s = 100.0 * (after[1] - before[1]) / hz / seconds
    return {"user": u, "system": s, "total": u + s}


class CpuSampler:
    """Samples the machine's /proc/stat and chosen processes at start and stop of a trial.

    Kernel forwarding has no process: its cost shows as softirq (and system) time of the whole
    machine, which is what `machine` reports. `processes` reports userspace translators (e.g.
    TAYGA) by pid, separately, in percent of one CPU.
    """

    def __init__(self, pids: dict[str, int] | None = None, proc: Path = Path("/proc")) -> None:
        self.pids = dict(pids or {})
        self.proc = proc
        self.hz = os.sysconf("SC_CLK_TCK")
        self._t0 = 0.0
        self._m0: CpuTimes | None = None
        self._p0: dict[str, tuple[int, int]] = {}

    def _read_pid(self, pid: int) -> tuple[int, int] | None:
        try:
            return parse_pid_stat((self.proc / str(pid) / "stat").read_text())
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            return None

    def start(self) -> None:
        import time

        self._t0 = time.monotonic()
        self._m0 = parse_proc_stat((self.proc / "stat").read_text())
        self._p0 = {}
        for name, pid in self.pids.items():
            got = self._read_pid(pid)
            if got is not None:
                self._p0[name] = got

    def stop(self) -> dict[str, Any]:
        import time

        if self._m0 is None:
            raise RuntimeError("CpuSampler.stop() before start()")
        seconds = time.monotonic() - self._t0
        m1 = parse_proc_stat((self.proc / "stat").read_text())
        share = machine_share(self._m0, m1)
        procs: dict[str, Any] = {}
        for name, pid in self.pids.items():
            a, b = self._p0.get(name), self._read_pid(pid)
            if a is not None and b is not None:
                procs[name] = {"pid": pid, **process_percent(a, b, seconds, self.hz)}
            else:
                procs[name] = {"pid": pid, "error": "process not readable (exited?)"}
        return {
            "seconds": seconds,
            "ncpu": os.cpu_count() or 1,
            "machine_percent": share,
            "machine_note": "whole machine, % of all CPUs: kernel forwarding shows as softirq "
            "and system",
            "processes": procs,
            "processes_note": "userspace processes by pid, % of one CPU",
        }
