"""The error kinds of testbed: each says what went wrong, where, and how to fix it."""

from __future__ import annotations

from collections.abc import Sequence


class TestbedError(Exception):
    """Base of every error testbed reports to a user (printed without a traceback)."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class SpecError(TestbedError):
    """A topology or experiment file is malformed or inconsistent."""

    exit_code = 2

    def __init__(self, file: str, key: str, problem: str, allowed: str | None = None) -> None:
        where = f"{file}: {key}" if key else file
        msg = f"{where}: {problem}"
        super().__init__(msg, hint=f"allowed: {allowed}" if allowed else None)
        self.file = file
        self.key = key
        self.problem = problem
        self.allowed = allowed


class UsageError(TestbedError):
    """The command line asks for something that cannot be done."""

    exit_code = 2


class KernelError(TestbedError):
    """The kernel refused an operation (netlink errno) on a named object."""

    def __init__(self, operation: str, obj: str, errno: int, detail: str = "") -> None:
        import os

        reason = os.strerror(errno) if errno else detail
        super().__init__(f"kernel refused to {operation} {obj}: {reason} (errno {errno})")
        self.operation = operation
        self.obj = obj
        self.errno = errno


class CommandError(TestbedError):
    """An external command failed."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str, where: str = "") -> None:
        shown = " ".join(argv)
        loc = f" in {where}" if where else ""
        tail = stderr.strip().splitlines()[-5:] if stderr else []
        detail = ("\n    " + "\n    ".join(tail)) if tail else ""
        super().__init__(f"command failed{loc} (exit {returncode}): {shown}{detail}")
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr


class MissingCapability(TestbedError):
    """This machine lacks a kernel feature or program that the request needs."""

    def __init__(self, feature: str, needed_for: str, fix: str | None = None) -> None:
        fix = fix or (
            "run it in the full-kernel tier, which has every module: "
            "`testbed vm -- testbed ...` (see README, 'Full-kernel tier')"
        )
        super().__init__(
            f"this kernel lacks '{feature}', needed for {needed_for}",
            hint=fix,
        )
        self.feature = feature


class DaemonError(TestbedError):
    """A managed daemon failed to start or become ready."""

    def __init__(self, daemon: str, node: str, problem: str, output: str = "") -> None:
        out = output.strip()
        detail = (
            ("\n  its own message:\n    " + "\n    ".join(out.splitlines()[-8:])) if out else ""
        )
        super().__init__(f"{daemon} on {node}: {problem}{detail}")
        self.daemon = daemon
        self.node = node
