"""A command in the full-kernel tier: whether it can boot here, one run, its trials merged back."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from testbed.errors import TestbedError, UsageError
from testbed.vm.accel import describe, kvm_boot_failed, kvm_works
from testbed.vm.boot import VmResult, boot
from testbed.vm.clock import DEFAULT_ICOUNT_SHIFT, HOST_CLOCK_FILE, check_clock, clock_env
from testbed.vm.guest import (
    ENV_IN_VM,
    GUEST_DB,
    GUEST_DB_DIR,
    PACKAGE_DIR,
    VmSpec,
    default_loose_dirs,
    guest_script,
)
from testbed.vm.kernel import direct_boot_image, find_kernel, find_qemu, find_vng
from testbed.vm.memory import DEFAULT_MEMORY, available_memory_mib, check_memory, parse_memory

# Environment handed through to the guest command when set on the host.
PASSTHROUGH_ENV = ("CI", "TERM", "LANG", "LC_ALL", "TZ", "PYTEST_ADDOPTS", "NO_COLOR")
HOST_TOOLS_FILE = "host-tools.json"  # results.ENV_HOST_TOOLS: the host's tool versions


def vm_available() -> tuple[bool, str]:
    """Whether the VM tier can boot here, and a sentence saying why (not)."""
    if os.environ.get(ENV_IN_VM) == "1":
        return False, "already inside the VM tier"
    try:
        kernel = find_kernel()
        vng = find_vng()
        find_qemu()
        check_memory(parse_memory(DEFAULT_MEMORY), available_memory_mib())
    except TestbedError as exc:
        return False, str(exc)
    return True, f"boots {kernel} with {vng} under {describe()}"


def run_in_vm(
    command: Sequence[str],
    *,
    kernel: Path | None = None,
    memory: str = DEFAULT_MEMORY,
    cpus: int | None = None,
    results: Path | None = None,
    env: Mapping[str, str] | None = None,
    keep_files: Sequence[str] = (),
    kvm: bool | None = None,
    cwd: Path | None = None,
    clock: str = "real",
    icount_shift: int = DEFAULT_ICOUNT_SHIFT,
    db: Path | None = None,
) -> VmResult:
    """Boot once, run `command` as root in the guest with live output, merge results back.

    `keep_files` names files the command writes into $TESTBED_SCRATCH that are returned in
    `VmResult.scratch_files` (the scratch dir itself is always removed). `clock="virtual"`
    boots one vCPU under TCG with QEMU's instruction counter as the guest's clock.
    `db` (a file) overrides where the trials are merged (default: `host_db(results)`).
    """
    cpus, kvm = _check_request(command, cpus, kvm, clock, icount_shift)
    memory_mib = parse_memory(memory)
    kernel_path = kernel or find_kernel()
    if not kernel_path.is_file():
        raise UsageError(f"--kernel {kernel_path}: no such file")
    vng = find_vng()
    qemu = find_qemu()
    check_memory(memory_mib, available_memory_mib())
    use_kvm = kvm_works(qemu) if kvm is None else kvm
    workdir = (cwd or Path.cwd()).resolve()
    dst = (db if db is not None else host_db(results)).resolve()
    dst.parent.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="tb-vm-") as tmp:
        scratch = Path(tmp)
        rwdirs = (dst.parent,)
        spec = VmSpec(
            kernel=kernel_path,
            command=tuple(command),
            scratch=scratch,
            cwd=workdir,
            memory_mib=memory_mib,
            cpus=cpus,
            kvm=use_kvm,
            rwdirs=rwdirs,
            env=_guest_env(scratch, dst, clock, icount_shift, env or {}),
            path_first=(Path(sys.executable).parent,),
            loose_dirs=default_loose_dirs([scratch, *rwdirs]),
            clock=clock,
            icount_shift=icount_shift,
            direct_image=direct_boot_image(kernel_path) if not use_kvm or kvm is None else None,
        )
        _prepare(spec)
        result = boot(spec, vng)
        if not result.booted and use_kvm and kvm is None:
            kvm_boot_failed(kernel_path, result.hung)
            result = boot(dataclasses.replace(spec, kvm=False), vng)
        _keep(scratch, keep_files, result)
        result.merged_trials = merge_results(scratch / GUEST_DB, dst, sys.stderr)
    return result


def _check_request(command: Sequence[str], cpus: int | None, kvm: bool | None, clock: str,
                   icount_shift: int) -> tuple[int, bool | None]:
    """Refuse what cannot run (nesting, no command, a bad clock or CPU count); return the vCPU
    count and the accelerator asked for (False: TCG, None: probe)."""
    if os.environ.get(ENV_IN_VM) == "1":
        raise UsageError("already inside the VM tier: run the command directly")
    if not command:
        raise UsageError("nothing to run: give a command after --, e.g. testbed vm -- lsmod")
    vcpus = check_clock(clock, cpus, icount_shift)
    if vcpus < 1:
        raise UsageError(f"--cpus {vcpus}: need at least 1")
    if clock == "virtual":
        if kvm:
            raise UsageError("the virtual clock needs software emulation (TCG): QEMU's "
                             "-icount does not work with KVM")
        kvm = False
    return vcpus, kvm


def _guest_env(scratch: Path, dst: Path, clock: str, icount_shift: int,
               extra: Mapping[str, str]) -> dict[str, str]:
    """The guest command's environment: the host's passthrough and TESTBED_ variables, where
    its database and scratch dir are, its clock, and `extra` last."""
    from testbed.results import ENV_HOST_TOOLS

    env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
    env.update(
        {k: v for k, v in os.environ.items() if k.startswith("TESTBED_") and k != "TESTBED_DB"}
    )
    env.update(
        {
            "TESTBED_DB": f"{GUEST_DB_DIR}/{GUEST_DB}",
            "TESTBED_SCRATCH": str(scratch),
            "TESTBED_HOST_DB": str(dst),
            **clock_env(clock, icount_shift, scratch),
            ENV_HOST_TOOLS: str(scratch / HOST_TOOLS_FILE),
        }
    )
    env.update(extra)
    return env


def _prepare(spec: VmSpec) -> None:
    """Write what the guest reads from the scratch dir, and precompile the package."""
    from testbed.results import tool_provenance

    spec.script.write_text(guest_script(spec))
    (spec.scratch / HOST_CLOCK_FILE).write_bytes(b"")
    (spec.scratch / HOST_TOOLS_FILE).write_text(json.dumps(tool_provenance()))
    precompile()


def _keep(scratch: Path, keep_files: Sequence[str], result: VmResult) -> None:
    """Copy the files named in `keep_files` that the command wrote into `result`."""
    for name in keep_files:
        p = scratch / name
        if p.is_file():
            result.scratch_files[name] = p.read_bytes()


def precompile(package: Path = PACKAGE_DIR) -> None:
    """Bring the package's bytecode up to date on the host before a boot: the guest runs with
    PYTHONDONTWRITEBYTECODE over a read-only root, so a stale .pyc is recompiled at every
    program start there (each probe start under emulation). Best effort (a read-only
    checkout keeps what it has)."""
    import compileall

    with contextlib.suppress(OSError), open(os.devnull, "w") as quiet, \
            contextlib.redirect_stdout(quiet):
        compileall.compile_dir(str(package), quiet=2, workers=1)


def host_db(results: Path | None) -> Path:
    """The host's results database: --results DIR, else $TESTBED_DB, else results/."""
    from testbed.results import default_db

    return results / GUEST_DB if results is not None else default_db()


def merge_results(guest_db: Path, dst: Path, out: IO[str]) -> int:
    """Bring the guest's trials into the host database; never lose them."""
    if not guest_db.exists():
        return 0
    dst.parent.mkdir(parents=True, exist_ok=True)
    from testbed.results import merge

    n = merge(guest_db, dst)
    print(f"testbed vm: merged {n} trial(s) from the VM into {dst}", file=out)
    return n
