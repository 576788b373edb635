"""CPU during a trial: machine softirq/system time (/proc/stat), a process's (/proc/PID/stat and,
exact to the nanosecond, the scheduler's run time of its threads: /proc/PID/task/*/schedstat), and
the host's headroom over a whole trial (idle share, CPU pressure stall time: `HostSample`, and
what processes not of the trial took: `census`) and how late a sleeping thread wakes meanwhile
(`WakeProbe`)."""

from __future__ import annotations

import os
import threading
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


PF_KTHREAD = 0x00200000
"""/proc/PID/stat `flags` bit of a kernel thread."""


@dataclass(frozen=True)
class ProcEntry:
    """One process in a `census`: CPU ticks so far (user + system), parent, start time (ticks
    after boot: with the pid, who it is), network namespace inode, name, kernel thread or not."""

    ticks: int
    ppid: int
    start: int
    netns: int | None
    comm: str
    kthread: bool


def parse_census_stat(text: str) -> tuple[str, int, int, int, int]:
    """(comm, ppid, flags, utime + stime, starttime) from one /proc/PID/stat."""
    comm = text[text.index("(") + 1 : text.rindex(")")]
    rest = text[text.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state): ppid 4, flags 9, utime 14, stime 15, starttime 22
    return comm, int(rest[1]), int(rest[6]), int(rest[11]) + int(rest[12]), int(rest[19])


def census(proc: Path = Path("/proc")) -> dict[int, ProcEntry]:
    """Every process now (those that vanish while read are left out)."""
    out: dict[int, ProcEntry] = {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            comm, ppid, flags, ticks, start = parse_census_stat((d / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue
        try:
            netns: int | None = os.stat(d / "ns" / "net").st_ino
        except OSError:
            netns = None
        out[int(d.name)] = ProcEntry(ticks, ppid, start, netns, comm,
                                     bool(flags & PF_KTHREAD) or ppid == 2 or int(d.name) == 2)
    return out


def others_share(before: dict[int, ProcEntry], after: dict[int, ProcEntry], seconds: float,
                 ncpu: int, root: int, netns: frozenset[int], hz: int | None = None,
                 top: int = 3) -> dict[str, Any]:
    """The CPU that user-space processes not of the trial took between two censuses, percent
    of all CPUs, and the `top` takers by name. The trial's: `root` (this process) and its
    descendants, and anything in one of its network namespaces (`netns`: daemons that left
    their parent). Kernel threads are not counted (the trial's forwarding runs in them). A
    process that ended between the censuses is missed: this is a lower bound."""
    hz = hz or os.sysconf("SC_CLK_TCK")

    def ours(pid: int, table: dict[int, ProcEntry]) -> bool:
        seen = 0
        while pid > 1 and seen < 64:
            if pid == root:
                return True
            e = table.get(pid)
            if e is None:
                return False
            if e.netns is not None and e.netns in netns:
                return True
            pid, seen = e.ppid, seen + 1
        return False

    taken: dict[str, float] = {}
    for pid, e in after.items():
        if e.kthread or ours(pid, after):
            continue
        b = before.get(pid)
        used = e.ticks - b.ticks if b is not None and b.start == e.start else e.ticks
        if used > 0:
            taken[e.comm] = taken.get(e.comm, 0.0) + used
    span = seconds * max(ncpu, 1) * hz
    pct = {k: 100.0 * v / span for k, v in taken.items()} if span > 0 else {}
    return {"others_percent": sum(pct.values()),
            "others_top": [[k, round(v, 2)] for k, v in
                           sorted(pct.items(), key=lambda kv: -kv[1])[:top]]}


def machine_share(before: CpuTimes, after: CpuTimes) -> dict[str, float]:
    """Percent of all CPU time, over the interval, spent in each state (100 = every CPU busy)."""
    total = after.total - before.total
    if total <= 0:
        return {f: 0.0 for f in CPU_FIELDS}
    return {f: 100.0 * (getattr(after, f) - getattr(before, f)) / total for f in CPU_FIELDS}


def process_percent(
    before: tuple[int, int], after: tuple[int, int], seconds: float, hz: int,
    ran_ns: int | None = None,
) -> dict[str, float]:
    """A process's CPU use over `seconds`, in percent of one CPU (user, system, total). The
    user/system split is from clock ticks (1/hz s: a process using less than a tick a second
    reads 0 in most intervals); `ran_ns`, the scheduler's exact run time over the interval
    where known, gives the total instead of their sum."""
    if seconds <= 0:
        return {"user": 0.0, "system": 0.0, "total": 0.0}
    u = 100.0 * (after[0] - before[0]) / hz / seconds
    s = 100.0 * (after[1] - before[1]) / hz / seconds
    total = u + s if ran_ns is None else 100.0 * ran_ns / 1e9 / seconds
    return {"user": u, "system": s, "total": total}


def run_ns(pid: int, proc: Path = Path("/proc")) -> int | None:
    """Nanoseconds the scheduler ran all of `pid`'s present threads so far (the first field of
    each /proc/PID/task/TID/schedstat); None when the process is gone or the kernel lacks
    schedstat. A thread that ended in between is missed."""
    from testbed.measure.probe import schedstat

    folder = proc / str(pid) / "task"
    try:
        tids = [t.name for t in folder.iterdir()]
    except OSError:
        return None
    runs = [got[0] for tid in tids if (got := schedstat(int(tid), str(folder))) is not None]
    return sum(runs) if runs else None


class CpuSampler:
    """Samples the machine's /proc/stat and chosen processes at start and stop of a trial.

    Kernel forwarding has no process: its cost shows as softirq (and system) time of the whole
    machine, which is what `machine` reports. `processes` reports userspace translators (e.g.
    TAYGA) by pid, separately, in percent of one CPU: the total from the scheduler's run time
    (`run_ns`) where the kernel has it, else from clock ticks.
    """

    def __init__(self, pids: dict[str, int] | None = None, proc: Path = Path("/proc")) -> None:
        self.pids = dict(pids or {})
        self.proc = proc
        self.hz = os.sysconf("SC_CLK_TCK")
        self._t0 = 0.0
        self._m0: CpuTimes | None = None
        self._p0: dict[str, tuple[int, int]] = {}
        self._r0: dict[str, int] = {}

    def _read_pid(self, pid: int) -> tuple[int, int] | None:
        try:
            return parse_pid_stat((self.proc / str(pid) / "stat").read_text())
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            return None

    def start(self) -> None:
        import time

        self._t0 = time.monotonic()
        self._m0 = parse_proc_stat((self.proc / "stat").read_text())
        self._p0, self._r0 = {}, {}
        for name, pid in self.pids.items():
            got = self._read_pid(pid)
            if got is not None:
                self._p0[name] = got
            ran = run_ns(pid, self.proc)
            if ran is not None:
                self._r0[name] = ran

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
            r0, r1 = self._r0.get(name), run_ns(pid, self.proc)
            ran = r1 - r0 if r0 is not None and r1 is not None and r1 >= r0 else None
            if a is not None and b is not None:
                procs[name] = {"pid": pid, **process_percent(a, b, seconds, self.hz, ran),
                               "total_from": "ticks" if ran is None else "schedstat"}
            else:
                procs[name] = {"pid": pid, "error": "process not readable (exited?)"}
        return {
            "seconds": seconds,
            "ncpu": os.cpu_count() or 1,
            "machine_percent": share,
            "machine_note": "whole machine, % of all CPUs: kernel forwarding shows as softirq "
            "and system",
            "processes": procs,
            "processes_note": "userspace processes by pid, % of one CPU; total from the "
            "scheduler's run time in ns (schedstat) where known, user/system from clock ticks",
        }


def parse_cpu_pressure(text: str) -> int | None:
    """Microseconds some task waited for a CPU (`some ... total=` of /proc/pressure/cpu, PSI)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "some":
            for field in parts[1:]:
                if field.startswith("total="):
                    return int(field[len("total="):])
    return None


@dataclass(frozen=True)
class HostSample:
    """The machine's CPU counters at one moment: /proc/stat's aggregate line and, where the
    kernel has PSI, the CPU pressure stall total."""

    monotonic: float
    times: CpuTimes
    pressure_us: int | None
    ncpu: int
    own_s: float  # CPU seconds of this process and its children reaped so far


def sample_host(proc: Path = Path("/proc")) -> HostSample:
    """Read the machine's CPU counters now (what a trial's fidelity record compares)."""
    import time

    try:
        pressure = parse_cpu_pressure((proc / "pressure" / "cpu").read_text())
    except (OSError, ValueError):
        pressure = None
    t = os.times()
    return HostSample(time.monotonic(), parse_proc_stat((proc / "stat").read_text()), pressure,
                      os.cpu_count() or 1,
                      t.user + t.system + t.children_user + t.children_system)


def host_window(before: HostSample, after: HostSample) -> dict[str, Any]:
    """The machine between two samples, in percent of all CPUs: idle (idle + iowait: nothing to
    run), this process's own with its reaped children (`own`: a trial's processes), headroom
    (idle + own: what nothing else took), stolen by a hypervisor; and how much of the interval
    some task waited for a CPU (PSI `some`, percent of the interval; None without PSI)."""
    seconds = max(after.monotonic - before.monotonic, 0.0)
    share = machine_share(before.times, after.times)
    idle = share["idle"] + share["iowait"]
    own = 100.0 * (after.own_s - before.own_s) / (seconds * after.ncpu) if seconds > 0 else 0.0
    waited = None
    if before.pressure_us is not None and after.pressure_us is not None and seconds > 0:
        waited = 100.0 * (after.pressure_us - before.pressure_us) / 1e6 / seconds
    return {
        "seconds": seconds,
        "ncpu": after.ncpu,
        "idle_percent": idle,
        "own_percent": own,
        "headroom_percent": min(100.0, idle + own),
        "steal_percent": share["steal"],
        "cpu_wait_percent": waited,
    }


def percentile_us(sorted_s: list[float], q: float) -> float:
    """The `q` quantile (0..1, nearest rank) of sorted seconds, in microseconds."""
    i = min(len(sorted_s) - 1, max(0, round(q * (len(sorted_s) - 1))))
    return 1e6 * sorted_s[i]


def lateness_summary(lates_s: list[float], period_s: float) -> dict[str, Any]:
    """How late a thread sleeping `period_s` at a time woke (seconds past its due time each):
    count, median, 90th and 99th percentile and maximum, in µs (None without wakeups)."""
    s = sorted(max(v, 0.0) for v in lates_s)
    if not s:
        return {"period_us": 1e6 * period_s, "wakeups": 0, "median_us": None, "p90_us": None,
                "p99_us": None, "max_us": None}
    return {"period_us": 1e6 * period_s, "wakeups": len(s), "median_us": percentile_us(s, 0.5),
            "p90_us": percentile_us(s, 0.9), "p99_us": percentile_us(s, 0.99),
            "max_us": 1e6 * s[-1]}


class WakeProbe:
    """A thread that sleeps `period_s` again and again and notes how late it woke: what any
    process of the trial waking to send or answer waits for a CPU (a small cyclictest)."""

    def __init__(self, period_s: float = 0.002) -> None:
        self.period_s = period_s
        self.lates: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="wake-probe", daemon=True)

    def _loop(self) -> None:
        import time

        clock, period = time.monotonic, self.period_s
        while not self._stop.is_set():
            t = clock()
            time.sleep(period)
            self.lates.append(clock() - t - period)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return lateness_summary(self.lates, self.period_s)
