"""The `testbed` command: parses arguments and hands each subcommand to its module."""

from __future__ import annotations

import argparse
import importlib
import sys
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
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # a command module not written yet
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc: int = args.func(args)
    except TestbedError as exc:
        print(f"testbed: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        signum = int(getattr(exc, "signum", 2))  # testbed.Interrupted carries SIGINT or SIGTERM
        print(f"testbed: interrupted (signal {signum}); what this run created was removed",
              file=sys.stderr)
        return 128 + signum
    return rc


if __name__ == "__main__":
    sys.exit(main())
