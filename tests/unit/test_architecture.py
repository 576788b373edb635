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
    "testbed/measure/pingpong_probe.py": (("os", "fork"),),  # its loopback server
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


# --- no module touches another's private names ---------------------------------------------
# `x._name` is private to the module (or class) that defines it; a private module `pkg._mod` to
# the modules of its package `pkg`. Justified exceptions: names of other projects that have no
# public spelling.
PRIVATE_ALLOWED = {
    # os._exit is the documented way to end a process without cleanup (a forked child, the
    # signal handler's "exit" mode): the underscore is the standard library's, not a secret
    "testbed/__init__.py": {"_os._exit"},
    "testbed/signals.py": {"os._exit"},
    "testbed/measure/pingpong_probe.py": {"os._exit"},
    # argparse has no public name for the type add_subparsers() returns (annotations only)
    "testbed/commands/model.py": {"argparse._SubParsersAction"},
    # pyroute2 creates a namespace without forking only through netns._create (no public
    # equivalent); netlink.py is the one module that talks to pyroute2
    "testbed/netlink.py": {"netns._create"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_module_outside(module: str, importer: str) -> str | None:
    """The private module in the dotted `module` that `importer` is not a sibling of."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        package = ".".join(parts[:i])
        if _is_private(part) and not (importer == package or importer.startswith(package + ".")):
            return ".".join(parts[: i + 1])
    return None


def _private_reaches(path: Path) -> list[str]:
    """Every access of `path` to a name private to another module, with its line."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    allowed = PRIVATE_ALLOWED.get(_rel(path), set())
    return [f"{what} (line {line})" for what, line in _reaches(_tree(path), me, package)
            if what not in allowed]


def _reaches(tree: ast.Module, me: str, package: str) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append((ast.unparse(node), node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            outside = _private_module_outside(node.module, me)
            if outside is not None:
                found.append((f"from {node.module} import ...", node.lineno))
            for alias in node.names:
                # a private submodule of the importer's own package is its to use
                if _is_private(alias.name) and node.module != package:
                    found.append((f"from {node.module} import {alias.name}", node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                outside = _private_module_outside(alias.name, me)
                if outside is not None:
                    found.append((f"import {alias.name}", node.lineno))
    return found


def test_the_private_rule_sees_a_reach() -> None:
    source = (
        "from testbed.features import _router\n"  # line 1: another package's private module
        "from testbed.features._nft import NftTable\n"
        "from testbed.topology import _substitute\n"
        "from testbed.measure.kinds import _stress\n"  # line 4: its own package's: fine
        "import testbed.features._nat64\n"
        "def f(tb, self):\n"
        "    return tb._scopes[-1], self._ok, tb.__class__, self.tb._handles\n"
    )
    found = _reaches(ast.parse(source), "testbed.measure.kinds.x", "testbed.measure.kinds")
    assert sorted(found, key=lambda f: (f[1], f[0])) == [
        ("from testbed.features import _router", 1),
        ("from testbed.features._nft import ...", 2),
        ("from testbed.topology import _substitute", 3),
        ("import testbed.features._nat64", 5),
        ("self.tb._handles", 7),
        ("tb._scopes", 7),
    ]
    assert _reaches(ast.parse(source.splitlines()[0]), "testbed.features.nat",
                    "testbed.features") == []


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_no_module_touches_another_modules_private_names(path: Path) -> None:
    found = _private_reaches(path)
    assert not found, (
        f"{_rel(path)} uses names private to another module: {', '.join(found)}; give that "
        "module a public operation (or, for another project's name with no public spelling, "
        "list it in PRIVATE_ALLOWED with why)"
    )
