"""The registry of papers: every module (or package) of this package is one paper, declared as
`PAPER = Paper(...)`; a user's own papers come from the `testbed.papers` entry point group and
from the folders named in `$TESTBED_PAPERS` (one module per paper, `*.py`)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.errors import UsageError

if TYPE_CHECKING:  # imported when asked for (__getattr__): listing papers stays light
    from testbed.report.claims import Claim, ClaimResult, Data, Outcome, Variant
    from testbed.report.data import Dataset
    from testbed.report.figures import Figure
    from testbed.report.tables import PaperTable, Quote
    from testbed.results import TrialRow

__all__ = ["ENV", "GROUP", "Claim", "ClaimResult", "Data", "Outcome", "Paper", "Quote",
           "Variant", "all_papers", "builtin_ids", "get", "names", "paper_of", "resolve"]

_LAZY = {"Claim": "testbed.report.claims", "ClaimResult": "testbed.report.claims",
         "Data": "testbed.report.claims", "Outcome": "testbed.report.claims",
         "Quote": "testbed.report.tables", "Variant": "testbed.report.claims"}


def __getattr__(name: str) -> Any:
    """The engine's types a paper module declares itself with (`from testbed.papers import
    Claim, Paper`), imported on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


GROUP = "testbed.papers"  # entry point group of papers installed as packages
ENV = "TESTBED_PAPERS"  # folders (os.pathsep-separated) of a user's own paper modules


@dataclass(frozen=True)
class Paper:
    """One paper: its citation, the experiment files that reproduce it, its claims, the figures
    and tables in its own form, and the numbers it prints (quotes, and as trials for calibration).
    """

    id: str
    title: str
    citation: str
    experiments: tuple[str, ...]  # experiments/NAME.toml
    claims: tuple[Claim, ...]
    aliases: tuple[str, ...] = ()  # other names `reproduce` accepts
    figures: Callable[[Dataset], list[Figure]] | None = None
    tables: Callable[[Dataset], list[PaperTable]] | None = None
    quotes: tuple[Quote, ...] = ()  # numbers the text prints, each with where
    printed: Callable[[], list[TrialRow]] | None = None  # the paper's own numbers, as trials
    extras: Callable[[Dataset, Sequence[TrialRow]], dict[str, list[Any]]] | None = None
    order: int = 100  # position in a report of several papers
    # other systems its claims are also judged on, side by side (their experiments are in
    # `experiments` too; their trials never enter the main verdict)
    variants: tuple[Variant, ...] = ()


def _take(module: Any) -> Paper:
    paper = getattr(module, "PAPER", None)
    if not isinstance(paper, Paper):
        raise TypeError(f"{module.__name__} has no PAPER = Paper(...)")
    return paper


def builtin_ids() -> list[str]:
    """The ids of the papers shipped in this package, without importing them (a module's
    name with "-" for "_")."""
    return [i.name.replace("_", "-") for i in pkgutil.iter_modules(__path__)
            if not i.name.startswith("_")]


def _builtin() -> list[Paper]:
    out = []
    for i in pkgutil.iter_modules(__path__):
        if not i.name.startswith("_"):
            paper = _take(importlib.import_module(f"{__name__}.{i.name}"))
            if paper.id != i.name.replace("_", "-"):
                raise TypeError(f"{__name__}.{i.name}: PAPER.id {paper.id!r} is not the "
                                "module's name with - for _")
            out.append(paper)
    return out


def _from_folder(folder: Path) -> list[Paper]:
    """Each `*.py` of a user's papers folder (not _private ones) is one paper module."""
    out = []
    for f in sorted(folder.glob("*.py")):
        if f.name.startswith("_"):
            continue
        name = f"testbed_user_paper_{f.stem}"
        spec = importlib.util.spec_from_file_location(name, f)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        out.append(_take(module))
    return out


def _user() -> list[Paper]:
    out = [_take(ep.load()) for ep in entry_points(group=GROUP)]
    for folder in os.environ.get(ENV, "").split(os.pathsep):
        if folder and Path(folder).is_dir():
            out += _from_folder(Path(folder))
    return out


_CACHE: dict[str, tuple[Paper, ...]] = {}


def all_papers() -> tuple[Paper, ...]:
    """Every paper: the built-in ones, then a user's (entry points, $TESTBED_PAPERS), by order."""
    key = os.environ.get(ENV, "")
    if key not in _CACHE:
        found: dict[str, Paper] = {}
        for p in _builtin() + _user():
            if p.id in found:
                raise TypeError(f"two papers have the id {p.id!r}")
            found[p.id] = p
        _CACHE[key] = tuple(sorted(found.values(), key=lambda p: (p.order, p.id)))
    return _CACHE[key]


def names() -> list[str]:
    return [p.id for p in all_papers()]


def get(paper_id: str) -> Paper:
    """A paper by id (ValueError when there is none)."""
    for p in all_papers():
        if p.id == paper_id:
            return p
    raise ValueError(f"unknown paper {paper_id!r}: one of {', '.join(names())}")


def paper_of(experiment: str) -> Paper | None:
    """The paper an experiment reproduces (None for e.g. smoke)."""
    return next((p for p in all_papers() if experiment in p.experiments), None)


def resolve(name: str) -> Paper:
    """A paper by id, alias or one of its experiments' names; else a usage error."""
    for p in all_papers():
        if name == p.id or name in p.aliases:
            return p
    found = paper_of(name)
    if found is not None:
        return found
    raise UsageError(f"unknown paper {name!r}", hint="known papers: " + ", ".join(names()))
