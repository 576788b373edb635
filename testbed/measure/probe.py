"""What the built-in probes (pingpong, stackcost, udpprobe) share: their command line (role,
--host, --port), the argv that runs them, and writing their JSON document."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def parser(module: str, roles: Sequence[str], port: int) -> argparse.ArgumentParser:
    """The probe's argument parser with the shared arguments: role, --host, --port."""
    p = argparse.ArgumentParser(prog=f"python -m {module}")
    p.add_argument("role", choices=tuple(roles))
    p.add_argument("--host", required=True, help="address to listen on (server) or reach")
    p.add_argument("--port", type=int, default=port)
    return p


def argv(python: str, module: str, role: str, *, host: str, port: int,
         options: Mapping[str, Any] | None = None) -> list[str]:
    """argv that runs probe `module` as `role`; `options` become `--name value` (None: left
    out, True: a bare flag, False: left out; floats in their shortest exact form)."""
    a = [python, "-m", module, role, "--host", host, "--port", str(port)]
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
    tmp = Path(out + ".tmp")
    tmp.write_text(text)
    tmp.replace(out)
