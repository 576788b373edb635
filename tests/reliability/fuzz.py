"""Seeded mutation fuzzer over topology and experiment files (TOML writer, mutators, checks)."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TESTBED = [sys.executable, "-m", "testbed.cli"]
LONG = os.environ.get("TESTBED_RELIABILITY_LONG", "") not in ("", "0")
SEED = int(os.environ.get("TESTBED_RELIABILITY_SEED", "16"))
CASE_LIMIT_S = 5.0  # one in-process case longer than this counts as a hang

# SpecErrors with no key are file-level: these are the only problems allowed to have none.
FILE_LEVEL = ("not valid TOML", "not UTF-8", "nested", "no such", "larger than", "directory")


# ---------------------------------------------------------------------------- TOML writer


def _key(k: str) -> str:
    return json.dumps(k, ensure_ascii=False)


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def to_toml(doc: dict[str, Any]) -> str:
    return "".join(f"{_key(str(k))} = {toml_value(v)}\n" for k, v in doc.items())


# ---------------------------------------------------------------------------- mutators

ODD_VALUES: list[Any] = [
    0, -1, 1, 2, 250, 251, 10**30, -(10**18), 0.0, -0.5, 1e-9, 1e308, math.inf, -math.inf,
    math.nan, True, False, "", " ", "h1", "h2", "r1", "ghost", "x" * 300, "ÿ\u202e", "${routers}",
    "${nope}", "10mbit", "0bit", "0.0000001bit", "99999999999999gbit", "1e9mbit", "inf",
    "nan", "-5ms", "5ms", "99999999s", "0.0001ns", "1%", "101%", "dual", "ipv4", "ipv6",
    "router", "host", "tbf", "netem", "198.18.0.0/15", "198.18.0.1/24", "2001:2::/48",
    "2001:2::1/64", "::/0", "0.0.0.0/0", "default", "10/90", "100/0", "0/0", [], [1], ["h1"],
    ["h1", "h2"], ["h1", "h1"], [["h1"]], {}, {"a": 1}, {"role": "router"}, [{"x": 1}],
    "ethernet", "unlimited", "udp", "tcp", 4, 6, 1500, 64, 65535, 65536, 1279, 67,
]


def odd_value(rng: random.Random) -> Any:
    v = rng.choice(ODD_VALUES)
    if rng.random() < 0.1:
        for _ in range(rng.randint(2, 40)):  # deep nesting
            v = [v] if rng.random() < 0.5 else {"k": v}
    return copy.deepcopy(v)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def mutate_doc(doc: dict[str, Any], rng: random.Random, known_keys: list[str]) -> dict[str, Any]:
    """1-3 structural mutations: replace a value, drop or add a key, duplicate a list item."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent = _get(doc, path[:-1])
        last = path[-1]
        op = rng.random()
        if op < 0.55:
            parent[last] = odd_value(rng)
        elif op < 0.7:
            del parent[last]
        elif op < 0.85 and isinstance(parent, dict):
            parent[rng.choice([*known_keys, "bogus", "x y", ""])] = odd_value(rng)
        elif isinstance(parent, list):
            parent.append(copy.deepcopy(parent[last]))
        else:
            parent[last] = str(parent[last])
    return doc


def mutate_text(text: str, rng: random.Random) -> bytes:
    """Byte-level damage: flip bytes, truncate, insert non-UTF-8 or brackets."""
    data = bytearray(text.encode())
    op = rng.random()
    if op < 0.3 and data:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif op < 0.5 and data:
        del data[rng.randrange(len(data)) :]
    elif op < 0.7:
        pos = rng.randrange(len(data) + 1)
        data[pos:pos] = rng.choice([b"\xff\xfe", b"\xc3", b"[" * 700, b"{a=" * 300, b"\x00"])
    else:
        data += rng.choice([b"\n[[links]]\n", b"\nnodes = 3\n", b"\n[params]\nrouters = 9\n"])
    return bytes(data)


# ---------------------------------------------------------------------------- running cases


@dataclass
class Outcome:
    """What one case did: valid, refused (SpecError with file and key), or a crash."""

    valid: bool
    error: str = ""  # the SpecError text (refused) or the traceback (crash)
    crash: bool = False
    seconds: float = 0.0


class Hang(Exception):
    pass


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def fire(signum: int, frame: object) -> None:
        raise Hang(f"longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_case(check: Callable[[Path], None], path: Path) -> Outcome:
    """Run the in-process check; a SpecError must name the file and (unless file-level) a key."""
    import traceback

    from testbed.errors import SpecError

    start = time.monotonic()
    try:
        with time_limit(CASE_LIMIT_S):
            check(path)
    except SpecError as exc:
        took = time.monotonic() - start
        where_ok = exc.file == str(path) and (
            bool(exc.key) or any(w in exc.problem for w in FILE_LEVEL)
        )
        if not where_ok or exc.exit_code != 2:
            return Outcome(False, f"SpecError without file/key: {exc!r}", crash=True,
                           seconds=took)
        return Outcome(False, str(exc), seconds=took)
    except Hang as exc:
        return Outcome(False, f"hang: {exc}", crash=True, seconds=time.monotonic() - start)
    except Exception:
        return Outcome(False, traceback.format_exc(), crash=True,
                       seconds=time.monotonic() - start)
    return Outcome(True, seconds=time.monotonic() - start)


def cli(args: list[str], timeout: float = 60.0, *, user: str | None = None,
        close_stdout: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the CLI; past `timeout` its whole process group is killed (a VM it booted too).

    `user`: as that user (`nobody`; see `as_nobody`); `close_stdout`: its reader goes away
    before it writes anything, as `testbed ... | head -0` would."""
    argv = [*TESTBED, *args]
    if user is not None and os.geteuid() == 0 and not nobody_can_run():
        # this checkout is not readable by that user (e.g. under /root): the same CLI with
        # only its notion of who it is changed
        argv = [sys.executable, "-c", _AS_USER, *args]
        user = None
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True, user=user,
    )
    if close_stdout:
        assert proc.stdout is not None
        proc.stdout.close()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # testbed stops what it started on SIGTERM
        try:
            proc.communicate(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out or "", err)


_AS_USER = ("import os, sys; os.geteuid = lambda: 65534; sys.argv[0] = 'testbed'; "
            "from testbed.cli import main; sys.exit(main())")


@functools.cache
def nobody_can_run() -> bool:
    """Whether user nobody can start this checkout's CLI (its interpreter and tree readable)."""
    if os.geteuid() != 0:
        return False
    try:
        p = subprocess.run([*TESTBED, "--help"], capture_output=True, user="nobody", cwd="/",
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0
