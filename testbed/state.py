"""The run registry: one JSON record per run under /run/testbed, written before anything exists."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from testbed.errors import UsageError

RUN_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789")


def state_dir() -> Path:
    return Path(os.environ.get("TESTBED_STATE_DIR", "/run/testbed"))


@dataclass
class RunRecord:
    """What one run created (or is about to create), and who owns it."""

    name: str
    pid: int
    state: str  # "building", "active" (a process holds it), "up" (kept by `testbed up`)
    namespaces: dict[str, str]  # node -> namespace
    source: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    created: float = field(default_factory=time.time)
    interfaces: list[dict[str, Any]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return state_dir() / f"{self.name}.json"

    def save(self) -> None:
        d = state_dir()
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{self.name}.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=1, sort_keys=True))
        os.replace(tmp, self.path)

    def owner_alive(self) -> bool:
        return pid_alive(self.pid)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def scratch_dir(name: str) -> Path:
    """Where a run keeps its files; removed with the run."""
    return state_dir() / f"{name}.d"


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def check_run_name(name: str) -> str:
    if not name or len(name) > 12 or not set(name) <= RUN_NAME_CHARS or not name[0].isalpha():
        raise UsageError(
            f"bad run name {name!r}",
            hint="1-12 lower-case letters and digits, starting with a letter (e.g. lab1)",
        )
    return name


def new_run_name() -> str:
    taken = {r.name for r in all_records()}
    while True:
        name = "r" + secrets.token_hex(3)
        if name not in taken:
            return name


def load(name: str) -> RunRecord | None:
    path = state_dir() / f"{name}.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError:
        return None
    try:
        return RunRecord(**data)
    except TypeError:  # another file of the state folder (e.g. vm.py's kvm-verdict.json)
        return None


def all_records() -> list[RunRecord]:
    d = state_dir()
    if not d.exists():
        return []
    out = []
    for p in sorted(d.glob("*.json")):
        rec = load(p.stem)
        if rec is not None:
            out.append(rec)
    return out
