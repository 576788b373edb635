"""Network kernel threads: NAPI threads by interface, their run time, cgroup v2 CPU budgets.

With threaded NAPI (`/sys/class/net/IF/threaded` = 1) the kernel receives an interface's packets
in a kernel thread named `napi/IF-ID`; for a router that thread runs the whole forwarding path.
`measure/routercpu.py` times those threads; `actions.CpuBudget` puts a router's into a cgroup v2
group whose `cpu.max` caps them (`features/cpu_budget.py`). Thread names carry no namespace and
every node has an `eth0`, so a thread is found by difference: the one `napi/IF-*` thread that
appeared when IF was switched to threaded (`new_napi_thread`), or, once it is in a node's budget
group, the one `napi/IF-*` thread of that group (`group_napi_thread`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from testbed import processes
from testbed.errors import KernelError
from testbed.measure import probe

PROC = Path("/proc")
# where testbed mounts the cgroup v2 hierarchy when the machine has none mounted (a guest)
OWN_CGROUP2 = Path("/run/testbed/cgroup2")
NEEDS_CPU = "needs cgroup v2 cpu controller: use the full-kernel tier (testbed vm)"


def parse_schedstat(text: str) -> int:
    """Nanoseconds a task has run (first field of /proc/PID/schedstat)."""
    fields = text.split()
    if not fields:
        raise ValueError("empty schedstat")
    return int(fields[0])


def run_ns(pid: int, proc: Path = PROC) -> int | None:
    """Run time (ns) of `pid`, or None when it is gone."""
    fields = probe.schedstat(pid, str(proc))
    return fields[0] if fields else None


def napi_threads(proc: Path = PROC) -> dict[int, str]:
    """pid -> name of every NAPI kernel thread (`napi/IF-ID`) on the machine."""
    out: dict[int, str] = {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            comm = (d / "comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith("napi/"):
            out[int(d.name)] = comm
    return out


def of_interface(threads: Mapping[int, str], ifname: str) -> list[int]:
    """The pids of `threads` named `napi/IFNAME-ID`."""
    return sorted(pid for pid, name in threads.items() if name.startswith(f"napi/{ifname}-"))


def write_argv(path: str, value: str) -> tuple[str, ...]:
    """argv that writes `value` into the file `path` (a sysfs knob) inside a node."""
    return ("sh", "-c", 'echo "$1" > "$2"', "sh", value, path)


def threaded_path(ifname: str) -> str:
    return f"/sys/class/net/{ifname}/threaded"


def new_napi_thread(before: Mapping[int, str], after: Mapping[int, str], ifname: str,
                    where: str) -> int:
    """The one `napi/IFNAME-*` thread of `after` that `before` lacks, or a KernelError."""
    new = [pid for pid in of_interface(after, ifname) if pid not in before]
    if len(new) != 1:
        raise KernelError(
            "start one threaded-NAPI kernel thread for", f"{ifname} on {where}", 0,
            f"found {len(new)} new napi/{ifname}-* threads (needs veth NAPI: "
            "Linux >= 5.13; another tool toggling NAPI at the same moment?)")
    return new[0]


# --- cgroup v2 ------------------------------------------------------------------------------


def budget_group(netns: str) -> str:
    """The cgroup of a node's CPU budget: `testbed-<run>-<node>` for namespace tb-<run>-<node>."""
    return "testbed-" + netns.removeprefix("tb-")


def budget_period_s(netns: Iterable[str], proc: Path = PROC) -> float | None:
    """The cpu.max period in seconds of the first of these namespaces' budget groups that
    exists (None without one). The kernel's CFS bandwidth timer refills a group's quota at
    whole multiples of its period on the monotonic clock, so senders that start on that grid
    meet the same refills in every run (`measure/router_stress.py`)."""
    root, _ = cpu_root(proc)
    if root is None:
        return None
    for ns in netns:
        try:
            fields = (root / budget_group(ns) / "cpu.max").read_text().split()
        except OSError:
            continue
        if len(fields) == 2 and fields[1].isdigit():
            return int(fields[1]) / 1e6
    return None


def cgroup2_mounts(mounts: str) -> list[Path]:
    """The mount points of the cgroup v2 hierarchy in /proc/mounts' text."""
    return [Path(f[1]) for f in (ln.split() for ln in mounts.splitlines())
            if len(f) >= 3 and f[2] == "cgroup2"]


def cpu_on_v1(cgroups: str) -> bool:
    """Whether /proc/cgroups' text shows the cpu controller bound to a cgroup v1 hierarchy."""
    for line in cgroups.splitlines():
        f = line.split()
        if len(f) >= 4 and f[0] == "cpu":
            return f[1] != "0"
    return False


def cpu_root(proc: Path = PROC) -> tuple[Path | None, str]:
    """(the mounted cgroup v2 root that offers the cpu controller, or None; why). None with
    why "" means: no cgroup v2 is mounted and cpu is free for it (`ensure_cpu_root` mounts)."""
    try:
        mounts = (proc / "mounts").read_text()
        cgroups = (proc / "cgroups").read_text()
    except OSError as exc:
        return None, f"cannot read {proc}/mounts or {proc}/cgroups: {exc}"
    roots = cgroup2_mounts(mounts)
    for root in roots:
        with contextlib.suppress(OSError):
            if "cpu" in (root / "cgroup.controllers").read_text().split():
                return root, f"cgroup v2 at {root} offers the cpu controller"
    if cpu_on_v1(cgroups):
        where = f" (cgroup v2 at {roots[0]} has no cpu)" if roots else ""
        return None, f"the cpu controller is bound to a cgroup v1 hierarchy{where}"
    if roots:
        return None, f"cgroup v2 at {roots[0]} offers no cpu controller"
    with contextlib.suppress(OSError):
        if "cgroup2" not in (proc / "filesystems").read_text():
            return None, "this kernel has no cgroup2 file system"
    return None, ""


def has_cpu_controller(proc: Path = PROC) -> tuple[bool, str]:
    """(whether a CPU budget can be set here, why): testbed.capabilities' `cgroup2-cpu`."""
    root, why = cpu_root(proc)
    if root is not None:
        return True, why
    if not why:
        return True, "the cpu controller is free for cgroup v2 (testbed mounts it)"
    return False, why


def ensure_cpu_root() -> Path:
    """The cgroup v2 root with the cpu controller, mounted at OWN_CGROUP2 if none is (it stays
    mounted: the same hierarchy, harmless); a KernelError when the machine has none to give."""
    root, why = cpu_root()
    if root is not None:
        return root
    if why:
        raise KernelError("set a CPU budget", "cgroup v2", 0, f"{why}; {NEEDS_CPU}")
    OWN_CGROUP2.mkdir(parents=True, exist_ok=True)
    processes.run(["mount", "-t", "cgroup2", "none", str(OWN_CGROUP2)])
    return OWN_CGROUP2


def cpu_max(quota_us: int | None, period_us: int) -> str:
    """The line written to cpu.max: "QUOTA PERIOD" (microseconds), "max PERIOD" for no limit."""
    return f"{'max' if quota_us is None else quota_us} {period_us}"


class CpuGroup:
    """One cgroup v2 group directly under the root, with the cpu controller: create, add
    threads, remove (its threads back to the root group first)."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name
        self.path = root / name
        self.enabled_cpu = False  # whether create() had to enable cpu in the root

    def create(self, quota_us: int | None, period_us: int) -> None:
        control = self.root / "cgroup.subtree_control"
        if "cpu" not in control.read_text().split():
            control.write_text("+cpu")
            self.enabled_cpu = True
        self.path.mkdir(exist_ok=True)
        (self.path / "cpu.max").write_text(cpu_max(quota_us, period_us))

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def threads(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.threads").read_text().split()]
        except OSError:
            return []

    def stat(self) -> dict[str, int]:
        """cpu.stat: usage_usec, nr_periods, nr_throttled, throttled_usec, ..."""
        try:
            f = (self.path / "cpu.stat").read_text().split()
        except OSError:
            return {}
        return {k: int(v) for k, v in zip(f[::2], f[1::2], strict=False) if v.isdigit()}

    def remove(self) -> None:
        """Threads back to the root group, the group removed (a no-op when it is gone)."""
        if not self.path.exists():
            return
        for pid in self.threads():
            with contextlib.suppress(OSError):  # gone meanwhile (its interface removed)
                (self.root / "cgroup.procs").write_text(str(pid))
        os.rmdir(self.path)
        if self.enabled_cpu:
            with contextlib.suppress(OSError):  # another group uses it now: leave it on
                (self.root / "cgroup.subtree_control").write_text("-cpu")


def group_napi_thread(netns: str, ifname: str, proc: Path = PROC) -> int | None:
    """The NAPI thread of `ifname` in the budget group of the node whose namespace is `netns`
    (testbed's CPU budget), or None when there is no such group or thread."""
    root, _why = cpu_root(proc)
    if root is None:
        return None
    pids = set(CpuGroup(root, budget_group(netns)).threads())
    found = [p for p in of_interface(napi_threads(proc), ifname) if p in pids]
    return found[0] if len(found) == 1 else None
