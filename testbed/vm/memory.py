"""How much the guest gets: its memory (`--memory`), checked against what the host has free."""

from __future__ import annotations

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

