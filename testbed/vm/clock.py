"""The guest's clock: real or virtual (QEMU's -icount), what the guest is told of it, vCPUs."""

from __future__ import annotations

from pathlib import Path

from testbed.errors import UsageError
from testbed.waiting import CLOCKS, ENV_CLOCK, ENV_HOST_CLOCK, ENV_ICOUNT_SHIFT

"""`testbed vm --clock`: the guest's clock follows the host's (real) or counts instructions."""
DEFAULT_ICOUNT_SHIFT = 0
"""Virtual clock: 2**shift ns of guest time per instruction (0: a 1 GHz one-instruction CPU)."""
# In the guest: $TESTBED_CLOCK ('virtual' or 'real'), $TESTBED_ICOUNT_SHIFT, and
# $TESTBED_HOST_CLOCK, a file on the host whose modification time gives host wall time.
HOST_CLOCK_FILE = "host-clock"
DEFAULT_CPUS = 2
"""vCPUs of a real-clock guest unless `--cpus` says otherwise (a virtual-clock one has one)."""

VIRTUAL_KERNEL_OPTIONS = ("nokaslr", "norandmaps")
"""Kernel options of a virtual-clock guest: the same addresses in every boot, kernel and
processes. With randomized addresses one boot's probe ran every exchange of a cell ~300
instructions (0.15 µs) cheaper than three others did; what a copy costs in instructions can
depend on its buffers' alignment, which randomized addresses change from boot to boot."""


def icount_option(shift: int) -> str:
    """QEMU's -icount value: fixed shift (deterministic), no sleeping while the guest idles."""
    return f"shift={shift},sleep=off"


def clock_env(clock: str, shift: int, scratch: Path) -> dict[str, str]:
    """What the guest is told about its clock (testbed.waiting and the results read it)."""
    env = {ENV_CLOCK: clock, ENV_HOST_CLOCK: str(scratch / HOST_CLOCK_FILE)}
    if clock == "virtual":
        env[ENV_ICOUNT_SHIFT] = str(shift)
        env["PYTHONHASHSEED"] = "0"  # the probes' dicts and sets laid out alike in every boot
    return env


def check_clock(clock: str, cpus: int | None, shift: int) -> int:
    """Validate `--clock` with `--cpus` and the shift; return the vCPU count to boot with."""
    if clock not in CLOCKS:
        raise UsageError(f"--clock {clock!r}: expected one of {', '.join(CLOCKS)}")
    if not 0 <= shift <= 10:
        raise UsageError(f"--icount-shift {shift}: expected 0..10 (2**shift ns an instruction)")
    if clock == "real":
        return DEFAULT_CPUS if cpus is None else cpus
    if cpus not in (None, 1):
        raise UsageError(
            f"--cpus {cpus} with --clock virtual: the virtual clock runs one vCPU "
            "(QEMU's instruction counting is single-threaded)",
            hint="drop --cpus, or use --clock real for more CPUs",
        )
    return 1
