"""The lean boot's launcher: a program run in a private mount namespace, files bound over others.

The VM tier boots a guest this way with testbed's stand-ins for the host's udev and tmpfiles
(`testbed.vm.lean_boot`) without changing what the host itself sees.

    python -m testbed.vm.mountns --bind SRC DST [--bind SRC DST ...] -- PROGRAM [ARGS...]

Where the namespace or a bind cannot be made (no CAP_SYS_ADMIN), it says so on stderr and
runs PROGRAM anyway: the guest then boots with the system's programs, only slower.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Sequence

CLONE_NEWNS = 0x00020000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000


def parse(argv: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(binds, command) from `--bind SRC DST ... -- COMMAND...`; ValueError when malformed."""
    binds: list[tuple[str, str]] = []
    args = list(argv)
    while args and args[0] == "--bind":
        if len(args) < 3 or "--" in args[1:3]:
            raise ValueError(f"--bind wants SRC DST, got {args[1:3]}")
        binds.append((args[1], args[2]))
        args = args[3:]
    if not args or args[0] != "--" or len(args) < 2:
        raise ValueError("expected -- PROGRAM [ARGS...] after the --bind options")
    return binds, args[1:]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def enter(binds: Sequence[tuple[str, str]]) -> None:
    """Give this process a private mount namespace and bind each SRC over its DST in it."""
    libc = ctypes.CDLL(None, use_errno=True)
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # Nothing mounted here may propagate back to the host's namespace.
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    for src, dst in binds:
        _check(libc.mount(os.fsencode(src), os.fsencode(dst), None, MS_BIND, None),
               f"binding {src} over {dst}")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        binds, command = parse(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"testbed.vm.mountns: {exc}", file=sys.stderr)
        return 2
    try:
        enter(binds)
    except OSError as exc:
        print(f"testbed vm: {exc}; booting with the system's udev and tmpfiles (slower)",
              file=sys.stderr)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"testbed.vm.mountns: cannot run {command[0]}: {exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
