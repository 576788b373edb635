"""Waits with deadlines that hold on a virtual-clock guest, and which clock a result was on.

Under `testbed vm --clock virtual` the guest's clock counts instructions: while the guest waits
on the host (every 9p read: starting a program, importing Python) it idles and its clock jumps
to the next timer, so "10 s" of guest time can pass in a few milliseconds of host time. A
deadline for something that waits on the host (a server starting, a sender being launched)
is therefore measured on the host's wall clock there, read through a file on the host's
filesystem (`$TESTBED_HOST_CLOCK`: the host stamps its modification time). On the host, and
in a real-clock guest, the local monotonic clock is used. Nothing here runs inside a measured
interval: reading the host clock is host I/O, which warps the guest clock.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV_CLOCK = "TESTBED_CLOCK"
ENV_ICOUNT_SHIFT = "TESTBED_ICOUNT_SHIFT"
ENV_HOST_CLOCK = "TESTBED_HOST_CLOCK"
ENV_SCALE = "TESTBED_DEADLINE_SCALE"
"""Multiply every readiness deadline (a slow or loaded machine); default 1, and `VM_SCALE` in
the full-kernel tier, whose emulated CPU starts programs tens of times slower than the host."""
VM_SCALE = 6.0


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


CLOCKS = ("real", "virtual")
"""The clocks a result can be measured on: the host's (or a KVM guest's) real clock, or the
full-kernel guest's virtual clock (QEMU's instruction counter; testbed.vm.clock starts it)."""


def clock_name(env: Mapping[str, str] | None = None) -> str:
    """'virtual' inside a virtual-clock guest, else 'real'."""
    return "virtual" if _env(env).get(ENV_CLOCK, "").strip() == "virtual" else "real"


def is_virtual(env: Mapping[str, str] | None = None) -> bool:
    return clock_name(env) == "virtual"


def clock_info(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What every result records about the clock it was measured on.

    `label` is what statistics are grouped by: 'virtual(icount shift=0)' or
    'real(<kernel release>)' — numbers measured on different clocks never share a statistic.
    """
    e = _env(env)
    kernel = platform.release()
    in_vm = e.get("TESTBED_IN_VM") == "1"
    if is_virtual(e):
        shift = int(e.get(ENV_ICOUNT_SHIFT, "0") or 0)
        return {
            "clock": "virtual",
            "icount_shift": shift,
            "ns_per_instruction": 2**shift,
            "kernel": kernel,
            "in_vm": True,
            "label": f"virtual(icount shift={shift})",
        }
    return {"clock": "real", "kernel": kernel, "in_vm": in_vm, "label": f"real({kernel})"}


def host_time(env: Mapping[str, str] | None = None) -> float:
    """The host's wall clock (seconds since the epoch), also inside a virtual-clock guest.

    There it stamps `$TESTBED_HOST_CLOCK` (a file on the host's filesystem over 9p: the host
    sets its modification time) and reads the stamp back; anywhere else it is `time.time()`.
    Falls back to `time.time()` if the file cannot be touched.
    """
    path = _env(env).get(ENV_HOST_CLOCK)
    if not path or not is_virtual(env):
        return time.time()
    try:
        os.utime(path, None)
        return os.stat(path).st_mtime_ns / 1e9
    except OSError:
        try:
            Path(path).write_bytes(b"")
            return os.stat(path).st_mtime_ns / 1e9
        except OSError:
            return time.time()


def scale(env: Mapping[str, str] | None = None) -> float:
    """$TESTBED_DEADLINE_SCALE (a positive number); default `VM_SCALE` in the VM tier, else 1."""
    e = _env(env)
    default = VM_SCALE if e.get("TESTBED_IN_VM") == "1" else 1.0
    text = e.get(ENV_SCALE, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass
class Deadline:
    """`seconds` from now, on the clock that things waiting on the host follow.

    `clock` is a function giving seconds; by default the host's wall clock in a virtual-clock
    guest (see the module docstring), else `time.monotonic`. `$TESTBED_DEADLINE_SCALE`
    stretches it.
    """

    seconds: float
    clock: Callable[[], float] | None = None
    env: Mapping[str, str] | None = None
    start: float = field(init=False)
    budget: float = field(init=False)

    def __post_init__(self) -> None:
        if self.clock is None:
            self.clock = (lambda: host_time(self.env)) if is_virtual(self.env) else time.monotonic
        self.budget = self.seconds * scale(self.env)
        self.start = self.clock()

    def elapsed(self) -> float:
        assert self.clock is not None
        return self.clock() - self.start

    def remaining(self) -> float:
        return self.budget - self.elapsed()

    def expired(self) -> bool:
        return self.remaining() <= 0


def wait_for(
    condition: Callable[[], bool],
    seconds: float,
    *,
    interval: float = 0.02,
    give_up: Callable[[], bool] | None = None,
    deadline: Deadline | None = None,
) -> bool:
    """Poll `condition` until it holds (True), `give_up` holds or the deadline passes (False).

    The deadline is a `Deadline(seconds)`: host wall time in a virtual-clock guest. The
    condition is always tried once more after the deadline, so a slow first poll never
    turns a success into a timeout.
    """
    dl = deadline or Deadline(seconds)
    while True:
        if condition():
            return True
        if give_up is not None and give_up():
            return False
        if dl.expired():
            return condition()
        time.sleep(interval)


def process_timeout(seconds: float, env: Mapping[str, str] | None = None) -> float | None:
    """A timeout for a process the caller waits on with the local clock (subprocess.run).

    In a virtual-clock guest it is None: a guest-time timeout fires early whenever the process
    waits on the host (the guest clock leaps), so only host-time deadlines (`Deadline`) and the
    processes' own ends bound it there. Elsewhere `seconds` scaled by $TESTBED_DEADLINE_SCALE.
    """
    if is_virtual(env):
        return None
    return seconds * scale(env)


def wait_process(popen: subprocess.Popen[Any], seconds: float) -> int:
    """`popen.wait(timeout=seconds)`, the timeout on the host's clock in a virtual-clock guest.

    A process exiting there closes its files over 9p (host I/O): the guest clock leaps and a
    guest-time grace period would run out before the process is gone. Raises
    subprocess.TimeoutExpired like Popen.wait.
    """
    if not is_virtual():
        return popen.wait(timeout=seconds)
    deadline = Deadline(seconds)
    while True:
        try:
            return popen.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            if deadline.expired():
                raise
