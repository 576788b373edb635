"""The registry of measurement kinds: every module of this package (but base) is one kind."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

from testbed.api import TestbedLike
from testbed.errors import SpecError
from testbed.measure.kinds.base import (
    Context,
    Kind,
    Measured,
    Metric,
    Param,
    check_value,
    declared,
    validate,
)

__all__ = ["KINDS", "Context", "Kind", "Measured", "Metric", "Param", "TestbedLike",
           "UndeclaredMetric", "check_value", "declared", "discover", "get", "measure",
           "units_of", "validate", "validate_params"]


def _names(path: Sequence[str]) -> list[str]:
    """The kind modules of a package: all but base and _private ones."""
    return sorted(i.name for i in pkgutil.iter_modules(path)
                  if i.name != "base" and not i.name.startswith("_"))


def _load(package: str, name: str) -> Kind:
    """Import `package.name` and take its `KIND`, whose name must be the module's name."""
    module = importlib.import_module(f"{package}.{name}")
    kind = getattr(module, "KIND", None)
    if not isinstance(kind, Kind):
        raise TypeError(f"{module.__name__} has no KIND = Kind(...)")
    if kind.name != name:
        raise TypeError(f"{module.__name__}: KIND.name {kind.name!r} is not the module name")
    return kind


def discover(path: Sequence[str], package: str) -> dict[str, Kind]:
    """Import each module of a package (but base and _private ones) and take its `KIND`,
    whose name must be the module's name."""
    return {name: _load(package, name) for name in _names(path)}


class LazyKinds(MutableMapping[str, Kind]):
    """The kinds of a package by name, each module imported when its kind is first looked up.

    A run imports only the kinds its experiment uses: importing all of them took ~1.2 s of a
    start in a TCG guest (on a loaded host). Listing the names imports nothing; `values()`
    imports every one."""

    def __init__(self, path: Sequence[str], package: str) -> None:
        self._package = package
        self._names = _names(path)
        self._kinds: dict[str, Kind] = {}

    def __getitem__(self, name: str) -> Kind:
        if name not in self._kinds:
            if name not in self._names:
                raise KeyError(name)
            self._kinds[name] = _load(self._package, name)
        return self._kinds[name]

    def __setitem__(self, name: str, kind: Kind) -> None:
        self._kinds[name] = kind
        if name not in self._names:
            self._names = sorted([*self._names, name])

    def __delitem__(self, name: str) -> None:
        if name not in self._names:
            raise KeyError(name)
        self._names = [n for n in self._names if n != name]
        self._kinds.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)  # replaced, never changed in place: safe to iterate

    def __len__(self) -> int:
        return len(self._names)


KINDS: MutableMapping[str, Kind] = LazyKinds(__path__, __name__)


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
