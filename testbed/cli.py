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
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="testbed",
        description="Rebuild published IPv4/IPv6 network experiments in network namespaces.",
    )
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


def main(argv: Sequence[str] | None = None) -> int:
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
