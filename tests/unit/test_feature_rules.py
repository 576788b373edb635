"""Import rules of the build side (docs/architecture.md): nothing outside testbed/features/
names a feature module, features never import the Testbed, no per-kind lists elsewhere."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from testbed import features

PKG = Path(__file__).resolve().parents[2] / "testbed"
FEATURE_MODULES = {
    f"testbed.features.{p.stem}"
    for p in (PKG / "features").glob("*.py")
    if p.stem not in ("__init__", "base")
}
OUTSIDE = sorted(p for p in PKG.rglob("*.py") if "features" not in p.relative_to(PKG).parts)


def imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("path", OUTSIDE, ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_outside_the_package_names_a_feature_module(path: Path) -> None:
    assert not imports(path) & FEATURE_MODULES


@pytest.mark.parametrize("path", sorted((PKG / "features").glob("*.py")), ids=lambda p: p.name)
def test_features_never_import_the_testbed(path: Path) -> None:
    assert not {i for i in imports(path) if i.startswith(("testbed.testbed", "testbed.plan"))}


# the analytic models, the papers and the report name the papers' mechanisms and topology files,
# not features
NOT_BUILD_SIDE = ("models.py", "report", "papers")


@pytest.mark.parametrize(
    "path",
    [p for p in OUTSIDE if p.relative_to(PKG).parts[0] not in NOT_BUILD_SIDE],
    ids=lambda p: str(p.relative_to(PKG)),
)
def test_no_list_of_feature_kinds_outside_the_package(path: Path) -> None:
    """A tuple/list/set/dict literal holding two or more feature kinds is a per-kind list."""
    kinds = set(features.kinds())
    for node in ast.walk(ast.parse(path.read_text())):
        items: list[ast.expr] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        named = {i.value for i in items if isinstance(i, ast.Constant) and i.value in kinds}
        assert len(named) < 2, f"{path.name}:{node.lineno} lists feature kinds {sorted(named)}"
