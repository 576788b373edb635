"""`testbed lab list|show|check`: the teaching labs, and each one's answer key from its own run."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from testbed import lab as labs
from testbed.errors import UsageError


def register(subparsers: Any) -> None:
    """Add `testbed lab list`, `testbed lab show` and `testbed lab check`."""
    p = subparsers.add_parser(
        "lab",
        help="teaching labs: list them, show a sheet, check one (run it, print its answer key)",
        description="Teaching labs (predict, measure, explain). See docs/labs.md.",
    )
    sub = p.add_subparsers(dest="lab_command", metavar="ACTION")
    sub.required = True
    ls = sub.add_parser("list", help="every shipped lab: id, tier, title")
    ls.add_argument("--json", action="store_true", help="one JSON object per lab, as a list")
    ls.set_defaults(func=_list)
    show = sub.add_parser("show", help="where a lab's sheet is (or the sheet itself)")
    show.add_argument("lab", help="a lab id (see `testbed lab list`) or a path to a sheet")
    show.add_argument("--text", action="store_true", help="print the sheet, not its path")
    show.set_defaults(func=_show)
    check = sub.add_parser(
        "check",
        help="run a lab's commands on its tier and compare its answer key with the sheet",
        description="Run every ```sh block of the sheet in order as one bash script "
        "(set -euo pipefail) in a fresh folder — on this machine as root (tier host) or in one "
        "full-kernel guest (tier vm) — then evaluate the ```toml key block and print each "
        "answer with the range the sheet expects. Exit 0: all in range; 1: a command failed "
        "or an answer is out of range; 2: the lab cannot run here.",
    )
    check.add_argument("lab", help="a lab id (see `testbed lab list`) or a path to a sheet")
    check.add_argument("--keep", type=Path, metavar="DIR",
                       help="work in DIR and keep it (results/, answer-key.json, answer-key.md);"
                       " default: a temporary folder, removed")
    check.add_argument("--json", action="store_true", help="print the key as JSON, not a table")
    check.set_defaults(func=_check)


def _list(args: argparse.Namespace) -> int:
    parsed = [labs.parse_lab(p) for p in labs.shipped_labs()]
    if args.json:
        print(json.dumps([{"id": x.id, "tier": x.tier, "title": x.title, "path": str(x.path)}
                          for x in parsed], indent=2, ensure_ascii=False))
        return 0
    width = max((len(x.id) for x in parsed), default=0)
    for x in parsed:
        print(f"{x.id.ljust(width)}  {(x.tier or '?').ljust(10)}  {x.title}")
    return 0


def _show(args: argparse.Namespace) -> int:
    path = labs.find_lab(args.lab)
    print(path.read_text(encoding="utf-8") if args.text else path.resolve())
    return 0


def _check(args: argparse.Namespace) -> int:
    lab = labs.load(args.lab)
    labs.preflight(lab)
    if args.keep is not None:
        if args.keep.exists() and any(args.keep.iterdir()):
            raise UsageError(f"--keep {args.keep}: not an empty folder",
                             hint="name a new or empty folder")
        args.keep.mkdir(parents=True, exist_ok=True)
        workdir = args.keep.resolve()
    else:
        workdir = Path(tempfile.mkdtemp(prefix=f"tb-lab-{lab.id}-"))
    try:
        done = labs.check(lab, workdir)
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    if done.returncode != 0:
        print(f"testbed lab: {lab.id}: the script failed (exit {done.returncode}) after "
              f"{done.wall_s:.0f} s; the failing block is named above")
        return 1
    if args.json:
        print(json.dumps(labs.key_rows(done.measured), indent=2, ensure_ascii=False))
    else:
        print(f"\n{lab.id} ({lab.tier}): script {done.wall_s:.0f} s")
        print(labs.table(done.measured))
        if labs.not_judged(done.measured):
            print(labs.NOT_JUDGED)
        if args.keep is not None:
            print(f"answer key: {workdir / 'answer-key.md'}")
    return 0 if all(m.ok for m in done.measured) else 1
