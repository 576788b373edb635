"""One boot of the guest: vng/QEMU started in its own process group, output teed, stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

from testbed import processes
from testbed.errors import CommandError
from testbed.vm.accel import KVM_BOOT_DEADLINE_S
from testbed.vm.guest import BOOT_MARKER, VmSpec, vng_argv
from testbed.vm.kernel import PROVISION_HINT
from testbed.vm.lean_boot import ENV_GUEST_INIT, lean_argv, standin_binds


@dataclass
class VmResult:
    """What one boot did: the command's exit code, whether it started, and merged trials."""

    returncode: int
    booted: bool
    merged_trials: int = 0
    hung: bool = False  # a KVM boot killed because the guest had not started by its deadline
    scratch_files: dict[str, bytes] = field(default_factory=dict)


class _Terminated(Exception):
    """SIGTERM arrived while the VM ran."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Terminated()

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop vng, its shell, virtme-run and QEMU: they share the process group we gave them."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)
    # QEMU may outlive the leader for a moment; the group id is still the leader's pid.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _binary(stream: IO[str]) -> IO[bytes]:
    """The byte stream under a text stream (pytest's capture may give one without .buffer)."""
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        return buffer  # type: ignore[no-any-return]
    return os.fdopen(os.dup(stream.fileno()), "wb", buffering=0)


def _tee(stream: IO[bytes], sink: IO[bytes], tail: deque[bytes] | None) -> None:
    """Copy the VM's output line by line as it comes, keeping the last lines for errors."""
    for line in iter(stream.readline, b""):
        try:
            sink.write(line)
            sink.flush()
        except (OSError, ValueError):
            pass  # our own output closed: keep draining so QEMU never blocks
        if tail is not None:
            tail.append(line)


def _wait_for_boot(proc: subprocess.Popen[bytes], marker: Path, deadline_s: float) -> bool:
    """Wait until the guest writes its boot marker or exits; False if neither by the deadline.

    Host wall time is right here: the guest has not started, so no guest clock exists yet.
    """
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if marker.exists() or proc.poll() is not None:
            return True
        time.sleep(0.2)
    return marker.exists() or proc.poll() is not None


def boot(spec: VmSpec, vng: Path) -> VmResult:
    """Boot `spec` once with live output; a KVM guest that has not started its command by
    KVM_BOOT_DEADLINE_S is killed (`hung`). Raise when a TCG guest never started it."""
    argv = lean_argv(vng_argv(spec, vng), standin_binds(spec.scratch))
    tail: deque[bytes] = deque(maxlen=40)
    with _sigterm_raises():
        proc = _spawn(argv, spec)
        rc, hung = _wait(proc, spec, _start_tees(proc, tail))
    if (spec.scratch / BOOT_MARKER).exists():
        return VmResult(rc, True)
    if spec.kvm:
        return VmResult(rc, False, hung=hung)
    raise _never_started(argv, rc, tail, spec, vng)


def _spawn(argv: list[str], spec: VmSpec) -> subprocess.Popen[bytes]:
    """Start vng in a process group of its own, both output streams piped to us."""
    host_tmp = spec.scratch / "host-tmp"
    host_tmp.mkdir(exist_ok=True)
    # Both streams go through pipes we copy from: QEMU reopens /proc/self/fd/1 with
    # O_TRUNC, which would truncate a file the caller redirected our output into.
    return processes.spawn(
        argv,
        what="booting the full-kernel tier (vng)",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=spec.cwd,
        # vng's own temp files (its exit-code file) die with our scratch dir, even when
        # it is killed before its atexit cleanup
        # vng starts `virtme-run` (and QEMU) through PATH: the venv's bin/ goes first, so
        # a venv that was never activated works.
        env={**processes.program_env(), "TMPDIR": str(host_tmp)},
    )


def _start_tees(proc: subprocess.Popen[bytes], tail: deque[bytes]) -> list[threading.Thread]:
    """Copy the boot's stdout and stderr to ours as they come (stderr's last lines to `tail`)."""
    assert proc.stdout is not None and proc.stderr is not None
    sys.stdout.flush()
    sys.stderr.flush()
    readers = [
        threading.Thread(target=_tee, args=(proc.stdout, _binary(sys.stdout), None)),
        threading.Thread(target=_tee, args=(proc.stderr, _binary(sys.stderr), tail)),
    ]
    for r in readers:
        r.daemon = True
        r.start()
    return readers


def _wait(proc: subprocess.Popen[bytes], spec: VmSpec,
          readers: list[threading.Thread]) -> tuple[int, bool]:
    """(exit code, whether a KVM boot hung) once the boot ended; nothing of it outlives us."""
    hung = False
    try:
        if spec.kvm:
            hung = not _wait_for_boot(proc, spec.scratch / BOOT_MARKER, KVM_BOOT_DEADLINE_S)
            if hung:
                _kill_group(proc)
        rc = proc.wait()
    except (KeyboardInterrupt, _Terminated):
        _kill_group(proc)
        for r in readers:
            r.join(5)
        raise KeyboardInterrupt() from None
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    for r in readers:
        r.join(5)
    # leftovers in the group (QEMU after vng died) must not outlive us
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    return rc, hung


def _never_started(argv: list[str], rc: int, tail: deque[bytes], spec: VmSpec,
                   vng: Path) -> CommandError:
    """The error of a guest that never started its command: QEMU's last lines, what to try."""
    err = CommandError(
        argv,
        rc,
        b"".join(tail).decode(errors="replace"),
        where="the VM boot (the guest never started the command)",
    )
    err.hint = (
        f"see QEMU's own messages with: {vng} --run {spec.kernel} --disable-kvm "
        f"--verbose --exec true ; a broken install is fixed by {PROVISION_HINT}; "
        f"{ENV_GUEST_INIT}=system boots with the system's udev instead of testbed's stand-in"
    )
    return err
