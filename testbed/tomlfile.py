"""Reading a testbed TOML file (topology or experiment) safely: size, encoding, syntax and nesting
refused with one SpecError naming the file; unknown keys named with their key path."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from testbed.errors import SpecError

MAX_NESTING = 16  # tables/arrays deeper than this are refused (no testbed file needs more than 4)
MAX_FILE_BYTES = 1 << 20


def read_toml(path: Path, what: str, example: str) -> dict[str, Any]:
    """Read a TOML file, refusing cleanly what is missing, unreadable, too large, not UTF-8,
    not TOML or nested deeper than any testbed file needs (raises SpecError, exit 2)."""
    file = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise SpecError(file, "", f"no such {what} file", example) from None
    except IsADirectoryError:
        raise SpecError(file, "", f"is a directory, not a {what} file", example) from None
    except OSError as exc:
        raise SpecError(file, "", f"cannot read it: {exc.strerror or exc}", example) from None
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(file, "", f"larger than {MAX_FILE_BYTES} bytes", f"a {what} file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SpecError(
            file, "", f"not UTF-8 text (byte {exc.start}, line {line})", "a UTF-8 TOML file"
        ) from None
    if _bracket_depth(text) > 4 * MAX_NESTING:
        raise SpecError(file, "", f"nested deeper than {MAX_NESTING} levels", "flatter TOML")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(file, "", f"not valid TOML: {exc}", "TOML syntax") from None
    except RecursionError:
        raise SpecError(file, "", "nested too deeply to read", "flatter TOML") from None
    key = _too_deep(raw)
    if key is not None:
        raise SpecError(file, key, f"nested deeper than {MAX_NESTING} levels", "flatter TOML")
    return raw


def _bracket_depth(text: str) -> int:
    """The deepest run of opening brackets/braces (a cheap guard before the parser recurses)."""
    depth = best = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return best


def _too_deep(value: Any) -> str | None:
    """The key path of the first value nested deeper than MAX_NESTING, if any."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        v, key, depth = stack.pop()
        if depth > MAX_NESTING:
            return key or "(top level)"
        if isinstance(v, dict):
            stack.extend((x, f"{key}.{k}" if key else str(k), depth + 1) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, f"{key}[{i}]", depth + 1) for i, x in enumerate(v))
    return None


def check_keys(table: Mapping[str, Any], allowed: Iterable[str], file: str, key: str) -> None:
    """Refuse a key of `table` not in `allowed`, naming its key path and the allowed ones."""
    for k in table:
        if k not in allowed:
            where = f"{key}.{k}" if key else (k or '""')
            raise SpecError(file, where, f"unknown key '{k}'", ", ".join(sorted(allowed)))
