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


# --- layers, cycles and names (docs/architecture.md, "Layers") --------------------------------

DOC = PACKAGE.parent / "docs" / "architecture.md"


def _layers() -> list[tuple[int, str, list[str]]]:
    """(number, name, full module patterns) from docs/architecture.md's layer table."""
    text = DOC.read_text()
    table = text.split("<!-- layers: bottom first -->", 1)[1].split("<!-- /layers -->", 1)[0]
    out = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0][:1].isdigit():
            continue
        number, name = cells[0].split(" ", 1)
        pats = [p.strip().strip("`") for p in cells[1].split(",")]
        out.append((int(number), name, [p if p == "testbed" or p.startswith("testbed.")
                                        else f"testbed.{p}" for p in pats]))
    return out


def _layer_of(module: str, layers: list[tuple[int, str, list[str]]]) -> int | None:
    best: tuple[int, int] | None = None  # (pattern length, layer)
    for number, _, pats in layers:
        for p in pats:
            hit = (module.startswith(p[:-1]) and module != p[:-2]) if p.endswith(".*") \
                else module == p
            if hit and (best is None or len(p) > best[0]):
                best = (len(p), number)
    return best[1] if best else None


def _type_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:` (they name types for mypy only)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _deps(path: Path, modules: set[str], runtime_only: bool = False) -> list[tuple[str, int]]:
    """Every testbed module `path` imports (anywhere in the file, function-local too), with the
    line; `runtime_only`: not those imported only for type checking."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = []
    tree = _tree(path)
    skip = _type_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        for t in targets:
            while t and t not in modules:
                t = t.rsplit(".", 1)[0] if "." in t else ""
            if t and t != me:
                out.append((t, node.lineno))
    return out


def _graph(runtime_only: bool = False) -> dict[str, set[str]]:
    modules = {_module_name(p) for p in MODULES}
    return {_module_name(p): {d for d, _ in _deps(p, modules, runtime_only)} for p in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_every_module_has_a_layer() -> None:
    layers = _layers()
    assert [n for n, _, _ in layers] == list(range(1, len(layers) + 1))
    missing = [m for m in sorted(_graph()) if _layer_of(m, layers) is None]
    assert not missing, f"add these to the layer table of docs/architecture.md: {missing}"


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_no_upward_import(path: Path) -> None:
    layers = _layers()
    names = {n: name for n, name, _ in layers}
    modules = {_module_name(p) for p in MODULES}
    me = _module_name(path)
    mine = _layer_of(me, layers)
    assert mine is not None
    up = [f"line {line}: {dep} (layer {_layer_of(dep, layers)} "
          f"{names.get(_layer_of(dep, layers) or 0)})"
          for dep, line in _deps(path, modules) if (_layer_of(dep, layers) or 0) > mine]
    assert not up, f"{me} (layer {mine} {names[mine]}) imports upward: {up}"


def test_no_import_cycles() -> None:
    # runtime imports: one under `if TYPE_CHECKING:` names a type (a report's Paper) and
    # never runs, so it cannot make an import order fail (the layer rule still counts it)
    assert _cycles(_graph(runtime_only=True)) == []


def test_the_layer_rules_see_a_violation() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    layers = _layers()
    assert _layer_of("testbed.errors", layers) == 1
    assert _layer_of("testbed.measure.kinds.ping", layers) == 5
    assert _layer_of("testbed.measure.ping_tool", layers) == 2
    assert _layer_of("testbed.testbed", layers) == 4 and _layer_of("testbed", layers) == 1
    assert _layer_of("testbed.nonexistent", layers) is None


NAME_EXEMPT = {"__init__", "base"}


def test_module_names_are_unique() -> None:
    seen: dict[str, list[str]] = {}
    for p in MODULES:
        m = _module_name(p)
        if p.stem in NAME_EXEMPT or m.startswith("testbed.commands.") or (m.count(".") > 2 \
                and m.startswith("testbed.papers.")):
            continue  # a paper package's modules are named for the part they hold (claims)
        seen.setdefault(p.stem, []).append(m)
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_modules_and_functions_stay_readable() -> None:
    """No module over 600 lines, no function over 80 (issue 26): split along what they own."""
    big = []
    for p in MODULES:
        tree = _tree(p)
        if len(p.read_text().splitlines()) > MAX_MODULE_LINES:
            big.append(f"{_rel(p)}: {len(p.read_text().splitlines())} lines")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    big.append(f"{_rel(p)}:{node.lineno} {node.name}: {n} lines")
    assert big == []


def test_every_cli_argument_has_help() -> None:
    import argparse

    from testbed.cli import build_parser

    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for a in parser._actions:  # argparse keeps its actions only there
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, f"{path} {name}")
            elif a.help is None and not isinstance(a, argparse._HelpAction):
                missing.append(f"{path} {a.option_strings or a.dest}")

    walk(build_parser(), "testbed")
    assert missing == []
