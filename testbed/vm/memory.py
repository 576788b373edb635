"""How much the guest gets: its memory (`--memory`), checked against what the host has free, and
how many workers (`--workers auto`) the host's cores and free memory allow."""

from __future__ import annotations

import os
import re
from pathlib import Path

from testbed.errors import UsageError

DEFAULT_MEMORY = "1G"


def parse_memory(text: str) -> int:
    """'1G', '512M', '1536' (MiB) -> MiB."""
    m = re.fullmatch(r"\s*(\d+)\s*([mMgG]?)(?:i?[bB])?\s*", text)
    if not m:
        raise UsageError(f"--memory {text!r}: expected a size such as 512M or 1G")
    value = int(m.group(1))
    mib = value * 1024 if m.group(2).lower() == "g" else value
    if mib < 256:
        raise UsageError(f"--memory {text!r}: the guest needs at least 256M")
    return mib


def available_memory_mib(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The host's MemAvailable in MiB, None where /proc/meminfo does not say."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def check_memory(wanted_mib: int, available_mib: int | None) -> None:
    """Raise when the host cannot give the guest `wanted_mib` plus QEMU's own ~200 MiB."""
    if available_mib is None:
        return
    need = wanted_mib + 200
    if available_mib < need:
        raise UsageError(
            f"not enough free memory for the VM: it needs ~{need} MiB "
            f"({wanted_mib} MiB guest + QEMU) and {available_mib} MiB are available",
            hint="give the guest less with --memory 512M, or stop other programs",
        )


GUEST_MIB = 1536  # a virtual-clock guest (1 GiB) and its QEMU around it


def worker_count(spec: str, ncpu: int | None = None, free_mib: int | None = None) -> int:
    """`--workers` of `run` and `reproduce`: a number, or auto = one worker per host core (at
    most 4), as free memory allows a guest each. Virtual-clock guests give the same numbers
    side by side (docs/parallel.md)."""
    if spec != "auto":
        try:
            n = int(spec)
        except ValueError:
            n = 0
        if n < 1:
            raise UsageError(f"--workers {spec!r}: expected auto or a number of workers >= 1")
        return n
    cores = ncpu if ncpu is not None else (os.cpu_count() or 1)
    mib = free_mib if free_mib is not None else available_memory_mib()
    by_memory = max(1, mib // GUEST_MIB) if mib is not None else 1
    return max(1, min(cores, 4, by_memory))
