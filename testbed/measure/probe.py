"""What the built-in probes (pingpong, stackcost, udpprobe, the raw-socket senders) share: their
command line (role, --host, --port), the argv that runs them, writing their JSON document, a
start on a grid of the monotonic clock, and reading a thread's schedstat."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # typing costs a probe start milliseconds (seconds emulated)
if TYPE_CHECKING:
    from typing import Any


def parser(module: str, roles: Sequence[str], port: int) -> argparse.ArgumentParser:
    """The probe's argument parser with the shared arguments: role, --host, --port."""
    p = argparse.ArgumentParser(prog=f"python -m {module}")
    p.add_argument("role", choices=tuple(roles))
    p.add_argument("--host", required=True, help="address to listen on (server) or reach")
    p.add_argument("--port", type=int, default=port)
    return p


# The folder holding the `testbed` package: first on a probe's sys.path (see `start`).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START = "import sys; sys.path.insert(0, {root!r}); import {module} as m; sys.exit(m.main())"


def start(python: str, module: str) -> list[str]:
    """The start of a probe's argv: `python -S -c START` (then its arguments), the same as
    `python -m module` but without the `site` module (a venv's site-packages and .pth files,
    an editable install's import finder), which the probes (standard library only) do not
    need and which costs half a second a start under the full-kernel tier's emulation."""
    return [python, "-S", "-c", START.format(root=ROOT, module=module)]


def program_of(argv: Sequence[str]) -> tuple[str, str] | None:
    """(module, role) of a probe argv built by `argv` (or `python -m module role`), else None."""
    if len(argv) > 3 and argv[1] == "-m":
        return argv[2], argv[3]
    if len(argv) > 4 and list(argv[1:3]) == ["-S", "-c"] and " import " in argv[3]:
        module = argv[3].split(" import ")[1].split(" as m;")[0]
        return module, argv[4]
    return None


def argv(python: str, module: str, role: str, *, host: str, port: int,
         options: Mapping[str, Any] | None = None) -> list[str]:
    """argv that runs probe `module` as `role` (see `start`); `options` become `--name value`
    (None: left out, True: a bare flag, False: left out; floats in their shortest exact
    form)."""
    a = [*start(python, module), role, "--host", host, "--port", str(port)]
    for name, value in (options or {}).items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            a.append(flag)
        elif isinstance(value, float):
            a += [flag, f"{value:.9g}"]
        else:
            a += [flag, str(value)]
    return a


def emit(doc: Mapping[str, Any], out: str = "-") -> None:
    """Write the probe's JSON document to stdout ("-") or, atomically, to the file `out`."""
    text = json.dumps(doc) + "\n"
    if out == "-":
        sys.stdout.write(text)
        return
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, out)


def sleep_to_grid(step_s: float) -> None:
    """Sleep to the next whole multiple of `step_s` seconds on the monotonic clock (the clock
    of the guest's tick and of cgroup bandwidth refills), so a schedule starts at one phase to
    them in every trial."""
    grid = round(step_s * 1e9)
    if grid > 0:
        time.sleep((grid - time.monotonic_ns() % grid) / 1e9)


def schedstat(pid: int, proc: str = "/proc") -> list[int] | None:
    """[run ns, wait ns, timeslices] of `pid` (`/proc/PID/schedstat`), None once it is gone."""
    try:
        with open(f"{proc}/{pid}/schedstat", encoding="ascii") as f:
            fields = [int(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None
    return fields if fields else None
