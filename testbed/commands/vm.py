"""The `testbed vm` command: run one command inside the full-kernel tier."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from testbed.errors import UsageError
from testbed.vm import run as vm_run
from testbed.vm.clock import DEFAULT_CPUS, DEFAULT_ICOUNT_SHIFT
from testbed.vm.memory import DEFAULT_MEMORY
from testbed.waiting import CLOCKS


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "vm",
        help="run a command in a stock Debian kernel under QEMU (netem, sit, Jool, ...)",
        description=(
            "Boot the newest stock kernel in /boot with virtme-ng, sharing this machine's files "
            "read-only, load every network module, run COMMAND as root with live output, and "
            "exit with its exit code. Results written by `testbed run` inside land in the "
            "host's results database. Uses KVM where it works, else software emulation."
        ),
        epilog="examples: testbed vm -- testbed run experiments/transition.toml --quick\n"
        "          testbed vm --clock virtual -- testbed run gamess-morales --quick",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--kernel", type=Path, help="kernel image (default: newest /boot/vmlinuz-*-amd64)"
    )
    p.add_argument("--memory", default=DEFAULT_MEMORY, help="guest memory (default %(default)s)")
    p.add_argument(
        "--cpus",
        type=int,
        default=None,
        help=f"guest CPUs (default {DEFAULT_CPUS}; always 1 with --clock virtual)",
    )
    p.add_argument(
        "--clock",
        choices=CLOCKS,
        default="real",
        help="real: the guest's clock follows the host's (fast, noisy under emulation); "
        "virtual: QEMU counts instructions (-icount), one vCPU, software emulation — "
        "timing is deterministic and independent of the host (default %(default)s)",
    )
    p.add_argument(
        "--icount-shift",
        type=int,
        default=DEFAULT_ICOUNT_SHIFT,
        metavar="N",
        help="with --clock virtual: 2**N ns of guest time per instruction (default %(default)s)",
    )
    p.add_argument(
        "--results",
        type=Path,
        metavar="DIR",
        help="host results directory (default: $TESTBED_DB's, else ./results)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if any(a == "--db" or a.startswith("--db=") for a in command):
        raise UsageError(
            "`--db` inside `testbed vm` would write SQLite over the read-only 9p root",
            hint="the guest writes to its own database and the VM tier merges it into the "
            "host's: choose that with `testbed vm --results DIR` or TESTBED_DB=PATH",
        )
    result = vm_run.run_in_vm(
        command,
        kernel=args.kernel,
        memory=args.memory,
        cpus=args.cpus,
        results=args.results,
        clock=args.clock,
        icount_shift=args.icount_shift,
    )
    return result.returncode
