"""Units in one place: rates (bit/s), sizes (bytes), durations (s) and percentages."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar, overload

from testbed.errors import SpecError

RATE_PRESETS: Final[dict[str, float | None]] = {
    "ethernet": 10e6,
    "fastethernet": 100e6,
    "gigabit": 1000e6,
    "unlimited": None,
}
# A rate outside this range rounds to 0 bit/s or overflows the kernel's tbf/netem fields.
RATE_MIN_BPS: Final = 1e3
RATE_MAX_BPS: Final = 100e9
# A delay beyond a minute is not a network path this testbed models; below 1 us tc rounds to 0.
DURATION_MIN_S: Final = 1e-6
DURATION_MAX_S: Final = 60.0

RATE_HELP: Final = (
    "a preset (" + ", ".join(RATE_PRESETS) + "), a number of Mbit/s, or a number with a unit: "
    "'500kbit', '10mbit', '10 Mbit/s', '10mbps', '1.5gbit'"
)
DURATION_HELP: Final = "a number of milliseconds, or a number with a unit: '5ms', '250us', '1s'"
SIZE_HELP: Final = "a whole number of bytes, or with a unit: '1500', '1500B', '9kB', '64KiB'"
PERCENT_HELP: Final = "a percentage from 0 to 100: a number, or a string like '1%'"

_PREFIX: Final = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_RATE_RE = re.compile(
    r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmgt]?)(bit/s|bits/s|bit|bps|b/s)?", re.IGNORECASE
)
_DURATION_RE = re.compile(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(s|ms|us|µs|ns)?", re.IGNORECASE)
_DURATION_MULT: Final = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_SIZE_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(b|kb|kib|mb|mib)?", re.IGNORECASE)
_SIZE_MULT: Final = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 10**6, "mib": 1 << 20}

T = TypeVar("T")


class UnitError(ValueError):
    """A value that is not what its unit allows; `allowed` says what would be."""

    def __init__(self, what: str, allowed: str) -> None:
        super().__init__(f"{what}; use {allowed}")
        self.what = what
        self.allowed = allowed


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


@overload
def rate(value: Any, *, unlimited: Literal[False]) -> float: ...


@overload
def rate(value: Any, *, unlimited: bool = True, zero: bool = False) -> float | None: ...


def rate(value: Any, *, unlimited: bool = True, zero: bool = False) -> float | None:
    """Bit/s from a preset, a plain number of Mbit/s, or a number with a unit: the one rate
    parser (topologies, experiments, measurement parameters, models, features, the CLI).

    'unlimited' and 'max' mean no limit and give None (refused unless `unlimited`); with
    `zero` (a measurement's rate parameter), 0, "0" and None (unset) mean no limit too.
    Errors are UnitError (a ValueError); `in_spec` turns them into a SpecError.
    """
    if zero and unlimited and value in (None, 0, "0"):
        return None
    allowed = RATE_HELP if unlimited else RATE_HELP.replace("unlimited, ", "")
    number = _number(value)
    bps: float | None = None
    if isinstance(value, bool):
        raise UnitError(f"a rate must not be a boolean ({value!r})", allowed)
    if number is not None:
        if not math.isfinite(number) or number <= 0:
            raise UnitError(f"a rate must be a finite number above zero, got {value!r}", allowed)
        bps = number * 1e6
    elif isinstance(value, str):
        text = value.strip().lower().replace("-", "").replace("_", "")
        if text in RATE_PRESETS or text == "max":
            found = RATE_PRESETS.get(text)
            if found is None and not unlimited:
                raise UnitError(f"{value!r} is not a rate here (a limit is needed)", allowed)
            return found
        m = _RATE_RE.fullmatch(value.strip())
        if m:
            number = float(m.group(1))
            prefix, unit = m.group(2).lower(), m.group(3)
            if unit is None and prefix == "":
                bps = number * 1e6  # a bare number in a string: Mbit/s, as for a number
            elif unit is None:
                raise UnitError(f"{value!r} has no unit after {prefix!r}", allowed)
            else:
                bps = number * _PREFIX[prefix]
            if bps <= 0:
                raise UnitError(f"a rate must be above zero, got {value!r}", allowed)
    if bps is None:
        raise UnitError(f"not a rate: {value!r}", allowed)
    if not RATE_MIN_BPS <= bps <= RATE_MAX_BPS:
        raise UnitError(
            f"rate {value!r} is {bps:.6g} bit/s, outside what the kernel's shapers take",
            f"{RATE_MIN_BPS:.0f} bit/s (1kbit) to {RATE_MAX_BPS:.0f} bit/s (100gbit); {allowed}",
        )
    return bps


def duration(value: Any, *, default_unit: str = "ms", zero: bool = True) -> float:
    """Seconds from a number of `default_unit` or a number with a unit (s, ms, us, ns)."""
    allowed = DURATION_HELP.replace("milliseconds", {"s": "seconds", "ms": "milliseconds",
                                                     "us": "microseconds"}[default_unit])
    allowed = ("0, or " if zero else "") + "from 1 us to 60 s: " + allowed
    number = _number(value)
    seconds: float | None = None
    if isinstance(value, bool):
        raise UnitError(f"not a duration: {value!r}", allowed)
    if number is not None:
        if not math.isfinite(number) or number < 0:
            raise UnitError(f"a duration must be a finite number >= 0, got {value!r}", allowed)
        seconds = number * _DURATION_MULT[default_unit]
    elif isinstance(value, str):
        m = _DURATION_RE.fullmatch(value.strip())
        if m:
            seconds = float(m.group(1)) * _DURATION_MULT[(m.group(2) or default_unit).lower()]
    if seconds is None:
        raise UnitError(f"not a duration: {value!r}", allowed)
    if seconds == 0 and zero:
        return 0.0
    if not DURATION_MIN_S <= seconds <= DURATION_MAX_S:
        raise UnitError(f"duration {value!r} is out of range", allowed)
    return seconds


def size(value: Any, *, lo: int = 1, hi: int = 65535) -> int:
    """Bytes from a whole number or a number with a unit (B, kB, KiB, MB, MiB)."""
    allowed = f"{SIZE_HELP}, from {lo} to {hi}"
    n: float | None = None
    if isinstance(value, bool):
        raise UnitError(f"not a size: {value!r}", allowed)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        n = value
    elif isinstance(value, str):
        m = _SIZE_RE.fullmatch(value.strip())
        if m:
            n = float(m.group(1)) * _SIZE_MULT[(m.group(2) or "").lower()]
    if n is None or not float(n).is_integer():
        raise UnitError(f"not a whole number of bytes: {value!r}", allowed)
    if not lo <= n <= hi:
        raise UnitError(f"size {value!r} is out of range", allowed)
    return int(n)


def percent(value: Any) -> float:
    """A percentage from 0 to 100 (a number, or a string like '1%')."""
    if isinstance(value, str) and value.strip().endswith("%"):
        value = value.strip()[:-1]
    try:
        if isinstance(value, bool):
            raise ValueError
        pct = float(value)
    except (TypeError, ValueError):
        raise UnitError(f"not a percentage: {value!r}", PERCENT_HELP) from None
    if not 0 <= pct <= 100:
        raise UnitError(f"percentage out of range: {value!r}", PERCENT_HELP)
    return pct


def in_spec(parse: Callable[[Any], T], value: Any, file: str, key: str) -> T:
    """parse(value), with a UnitError turned into a SpecError naming the file and key."""
    try:
        return parse(value)
    except UnitError as exc:
        raise SpecError(file, key, exc.what, exc.allowed) from None


def format_rate(bps: float | None) -> str:
    """'10 Mbit/s', '1.5 Gbit/s', 'unlimited'."""
    if bps is None:
        return "unlimited"
    for div, name in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bps >= div:
            return f"{bps / div:g} {name}"
    return f"{bps:g} bit/s"
