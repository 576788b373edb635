"""The rules docs/architecture.md states about the code, checked on the code itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "testbed"
MODULES = sorted(PACKAGE.rglob("*.py"))

# module -> the one module allowed to do it
PROCESS_CALLS = {
    ("subprocess", name)
    for name in ("run", "Popen", "call", "check_call", "check_output", "getoutput",
                 "getstatusoutput")
} | {("os", name) for name in ("system", "popen", "execv", "execvp", "execve", "execvpe",
                                "execl", "execlp", "spawnv", "spawnvp", "posix_spawn",
                                "posix_spawnp", "fork", "forkpty")}


# a probe (a program run in a node) may fork a copy of itself — it starts no program
PROBE_FORKS = {
    "testbed/measure/pingpong.py": (("os", "fork"),),  # its loopback server
    # the launcher vm/boot.py spawns (through processes.spawn) becomes QEMU's vng: no new process
    "testbed/vm/mountns.py": (("os", "execvp"),),
}


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _calls(tree: ast.Module) -> list[tuple[str, str, int]]:
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and (node.func.value.id, node.func.attr) in PROCESS_CALLS
        ):
            found.append((node.func.value.id, node.func.attr, node.lineno))
        if isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "os"):
            for alias in node.names:
                if (node.module, alias.name) in PROCESS_CALLS:
                    found.append((node.module, alias.name, node.lineno))
    return found


def _imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_rules_see_modules() -> None:
    assert len(MODULES) > 30
    assert _calls(_tree(PACKAGE / "processes.py")), "the checker must see processes.py's calls"


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_only_processes_starts_processes(path: Path) -> None:
    if path.name == "processes.py" and path.parent == PACKAGE:
        return
    allowed = PROBE_FORKS.get(_rel(path), ())
    found = ", ".join(f"{m}.{n} line {ln}" for m, n, ln in _calls(_tree(path))
                      if (m, n) not in allowed)
    assert not found, (
        f"{_rel(path)} starts processes itself ({found}): "
        "use testbed.processes (run, spawn, interactive, ManagedProcess)"
    )


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_only_netlink_imports_pyroute2(path: Path) -> None:
    if path.name == "netlink.py" and path.parent == PACKAGE:
        return
    assert "pyroute2" not in _imports(_tree(path)), (
        f"{_rel(path)} imports pyroute2: netlink goes through testbed.netlink"
    )


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_every_module_says_what_it_owns(path: Path) -> None:
    doc = ast.get_docstring(_tree(path))
    assert doc, f"{_rel(path)} has no module docstring"
    assert len(doc.splitlines()[0]) <= 100, f"{_rel(path)}: the first docstring line is too long"
