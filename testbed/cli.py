"""The `testbed` command: parses arguments and hands each subcommand to its module."""

from __future__ import annotations

import sys

# First, before the heavy imports: a Ctrl-C or SIGTERM while the command starts exits at
# once with one line (nothing exists yet), instead of a KeyboardInterrupt traceback.
from testbed import signals

if __name__ == "__main__" or sys.argv[0].rsplit("/", 1)[-1] == "testbed":
    signals.install("exit")

import argparse
import importlib
from collections.abc import Sequence

from testbed.errors import TestbedError

# Each module exposes `register(subparsers)`, which adds its subcommands and sets
# `func(args) -> int` on each of them.
COMMAND_MODULES = (
    "testbed.commands.core",
    "testbed.commands.model",
    "testbed.commands.vm",
    "testbed.commands.experiment",
    "testbed.commands.report",
    "testbed.commands.lab",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="testbed",
        description="Rebuild published IPv4/IPv6 network experiments in network namespaces.",
    )
    from testbed import __version__

    parser.add_argument("--version", action="version", version=f"testbed {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def interrupted_message(signum: int) -> str:
    import signal

    return (
        f"testbed: interrupted by {signal.Signals(signum).name}; "
        "nothing this command created is left (exit "
        f"{signals.exit_status(signum)})"
    )


# A reader that closed our output (`testbed features | head -1`): stop quietly with the status
# a shell reports for a program ended by SIGPIPE, as `cat` or `grep` would (128 + 13).
CLOSED_PIPE_STATUS = 141


def _output_closed() -> bool:
    """Whether stdout or stderr is a pipe whose reader has gone; if so, point both at
    /dev/null so that nothing more (not the interpreter's flush at exit) writes to it."""
    import contextlib
    import os
    import select

    fds = []
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            fds.append(stream.fileno())
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLOUT)
    # the write end of a pipe whose read end is closed polls as POLLERR (Linux pipe(7))
    closed = any(ev & select.POLLERR for _, ev in poller.poll(0))
    if closed:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in fds:
            os.dup2(devnull, fd)
        os.close(devnull)
    return closed


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; output into a closed pipe ends it quietly (CLOSED_PIPE_STATUS)."""
    try:
        return _main(argv)
    except BrokenPipeError:
        if not _output_closed():
            raise
        return CLOSED_PIPE_STATUS


def _main(argv: Sequence[str] | None) -> int:
    """The command line. SIGINT/SIGTERM at any moment: one line and exit 130/143, with
    everything the command created removed (or, for `up`, the run not kept)."""
    whole_process = argv is None  # the `testbed` program itself, not a caller in Python
    guard = signals.Guard()
    if whole_process:
        signals.install("exit")
        old_mode = "exit"
    else:
        guard.open()
        old_mode = signals.set_mode("exit")
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        signals.set_mode("raise")
        try:
            rc: int = args.func(args)
            signals.check()  # a signal noted in a deferred stretch that nobody acted on
            sys.stdout.flush()  # output still buffered meets a closed pipe here, not at exit
        except TestbedError as exc:
            signum = signals.pending()
            if signum is not None:  # e.g. a child killed by the same Ctrl-C
                print(interrupted_message(signum), file=sys.stderr)
                return signals.exit_status(signum)
            print(f"testbed: error: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt as exc:
            signals.set_mode("defer")
            signum = int(getattr(exc, "signum", 2))  # signals.Interrupted: SIGINT or SIGTERM
            print(interrupted_message(signum), file=sys.stderr)
            return signals.exit_status(signum)
        return rc
    finally:
        if whole_process:
            # done: a signal now changes nothing, exit as decided — also while the interpreter
            # shuts down, where Python puts the default handlers back (a SIGTERM then killed a
            # `testbed up` whose run was already up: -15, the run kept)
            signals.set_mode("defer")
            signals.hold()
        else:
            signals.set_mode(old_mode)
            guard.close()


if __name__ == "__main__":
    sys.exit(main())
