"""The registry of measurement kinds: every module of this package (but base) is one kind."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping, Sequence
from typing import Any

from testbed.errors import SpecError
from testbed.measure.kinds.base import (
    Context,
    Kind,
    Measured,
    Metric,
    Param,
    TestbedLike,
    check_value,
    declared,
    validate,
)

__all__ = ["KINDS", "Context", "Kind", "Measured", "Metric", "Param", "TestbedLike",
           "UndeclaredMetric", "check_value", "declared", "discover", "get", "measure",
           "units_of", "validate", "validate_params"]


def discover(path: Sequence[str], package: str) -> dict[str, Kind]:
    """Import each module of a package (but base and _private ones) and take its `KIND`,
    whose name must be the module's name."""
    found: dict[str, Kind] = {}
    for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
        if info.name == "base" or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        kind = getattr(module, "KIND", None)
        if not isinstance(kind, Kind):
            raise TypeError(f"{module.__name__} has no KIND = Kind(...)")
        if kind.name != info.name:
            raise TypeError(f"{module.__name__}: KIND.name {kind.name!r} is not the module name")
        found[kind.name] = kind
    return found


KINDS: dict[str, Kind] = discover(__path__, __name__)


def get(name: str, file: str = "measurement", key: str = "kind") -> Kind:
    """The kind called `name`, or a SpecError listing the kinds there are."""
    if name not in KINDS:
        raise SpecError(file, key, f"unknown measurement kind {name!r}", ", ".join(KINDS))
    return KINDS[name]


def validate_params(kind: str, params: Mapping[str, Any], file: str, key: str) -> dict[str, Any]:
    """Defaults merged and every value checked; SpecError(file, key.param, what, fix)."""
    return validate(get(kind, file, f"{key}.kind"), params, file, key)


class UndeclaredMetric(Exception):
    """A runner returned a metric its kind does not declare (a bug in the kind's module)."""


def measure(kind: str, tb: TestbedLike, params: Mapping[str, Any], ctx: Context) -> Measured:
    """Run one trial of `kind` with validated `params`; its metrics must all be declared."""
    k = get(kind)
    m = k.runner(tb, params, ctx)
    bad = k.undeclared(m.metrics)
    if bad:
        raise UndeclaredMetric(
            f"measurement kind {kind} returned undeclared metrics {', '.join(sorted(bad))}: "
            f"declare them (name, unit, meaning) in testbed/measure/kinds/{kind}.py")
    return m


def units_of(kind: str, metrics: Mapping[str, Any]) -> dict[str, str]:
    """metric -> unit, from the declarations of `kind` (empty for an unknown kind)."""
    k = KINDS.get(kind)
    return k.units(metrics) if k is not None else {}
