"""The accelerator of a boot: whether KVM really works here, a KVM hang remembered, or TCG."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from testbed import processes
from testbed.errors import TestbedError, UsageError
from testbed.vm.kernel import QEMU

# A KVM guest reaches its command in a few seconds; one that has not within this many seconds
# hangs (seen on nested, paravirtualised KVM: /dev/kvm works, the boot spins for ever).  It is
# killed, the verdict remembered, and the boot retried under TCG.
KVM_BOOT_DEADLINE_S = 60.0
ENV_ACCEL = "TESTBED_VM_ACCEL"
"""'kvm', 'tcg' or 'auto' (default): force or probe the accelerator of the full-kernel tier."""
KVM_VERDICT = "vm/kvm-verdict.json"  # under the state dir, outside the run records (*.json)


def _verdict_path() -> Path:
    from testbed.state import state_dir

    return state_dir() / KVM_VERDICT


def kvm_hang_recorded(kernel: Path | None = None) -> str | None:
    """Why KVM is not to be used here, if a KVM boot hung since the host booted, else None."""
    try:
        data = json.loads(_verdict_path().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("boot_id") != _host_boot_id():
        return None  # recorded before the host rebooted: probe again
    if kernel is not None and data.get("kernel") not in (None, str(kernel)):
        return None
    return str(data.get("reason", "a KVM boot hung"))


def record_kvm_hang(kernel: Path, reason: str) -> None:
    """Remember (until the host reboots) that KVM boots hang here, so later boots use TCG."""
    path = _verdict_path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps({"boot_id": _host_boot_id(), "kernel": str(kernel), "reason": reason})
        )


def _host_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def accel_choice(env: Mapping[str, str] | None = None) -> str:
    """$TESTBED_VM_ACCEL: 'kvm', 'tcg' or 'auto'; raise on anything else."""
    value = (env if env is not None else os.environ).get(ENV_ACCEL, "auto").strip().lower()
    if value not in ("kvm", "tcg", "auto", ""):
        raise UsageError(
            f"{ENV_ACCEL}={value!r}: expected kvm, tcg or auto",
            hint=f"unset {ENV_ACCEL} to let testbed probe KVM itself",
        )
    return value or "auto"


def kvm_works(qemu: Path | None = None) -> bool:
    """Whether QEMU can really use KVM here: /dev/kvm alone is not enough (MSR failures,
    boots that hang on nested KVM; $TESTBED_VM_ACCEL forces the choice)."""
    choice = accel_choice()
    if choice != "auto":
        return choice == "kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    if kvm_hang_recorded() is not None:
        return False
    qemu_bin = qemu or Path(shutil.which(QEMU) or QEMU)
    argv = [
        str(qemu_bin),
        "-accel",
        "kvm",
        "-cpu",
        "host",
        "-machine",
        "q35",
        "-display",
        "none",
        "-nodefaults",
        "-no-reboot",
        "-m",
        "64",
        "-S",
        "-monitor",
        "stdio",
    ]
    try:
        proc = processes.run(argv, input="quit\n", check=False, timeout=20)
    except (OSError, TestbedError):
        return False
    return proc.returncode == 0



def describe() -> str:
    """The accelerator the next boot uses, and why, in words (`testbed doctor`)."""
    if kvm_works():
        return (
            "KVM (falls back to TCG if the guest has not started within "
            f"{KVM_BOOT_DEADLINE_S:.0f} s)"
        )
    hung = kvm_hang_recorded()
    why = f"a KVM boot hung here: {hung}" if hung else "no usable KVM"
    return f"software emulation (TCG, {why}; slower)"


def kvm_boot_failed(kernel: Path, hung: bool) -> None:
    """Say that a KVM boot failed and TCG comes next; remember a hang for later boots."""
    if hung:
        record_kvm_hang(
            kernel,
            f"the guest had not started its command {KVM_BOOT_DEADLINE_S:.0f} s "
            "into a KVM boot",
        )
    print(
        "testbed vm: boot with KVM "
        + (f"did not start within {KVM_BOOT_DEADLINE_S:.0f} s" if hung else "failed")
        + "; retrying with software emulation (TCG)"
        + (f"; later boots use TCG until the host reboots (or {ENV_ACCEL}=kvm)"
           if hung else ""),
        file=sys.stderr,
    )
