"""pyroute2 is loaded without its all-importing `__init__`, which still runs when asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _python(code: str, path: Path) -> str:
    return subprocess.run([sys.executable, "-c", code], cwd=path, env={"PYTHONPATH": str(path)},
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def package(tmp_path: Path) -> Path:
    pkg = tmp_path / "heavy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "print('init ran')\nfrom heavy.mod import Thing\n__version__ = '1.2'\n")
    (pkg / "mod.py").write_text("class Thing: pass\n")
    (pkg / "sub" / "__init__.py").write_text("from heavy import mod\nX = 1\n")
    return tmp_path


def test_submodules_load_without_the_package_init(package: Path) -> None:
    out = _python("from testbed.netlink import _lazy_package\n_lazy_package('heavy')\n"
                  "from heavy import mod, sub\nimport heavy.sub\nprint(sub.X, mod.Thing.__name__)",
                  package)
    assert out == "1 Thing"


def test_a_name_of_the_init_runs_it_once(package: Path) -> None:
    out = _python("from testbed.netlink import _lazy_package\n_lazy_package('heavy')\n"
                  "import heavy.mod\nfrom heavy import Thing\nimport heavy\n"
                  "print(heavy.__version__, Thing is heavy.mod.Thing)\n"
                  "try:\n    from heavy import Nope\n"
                  "except ImportError:\n    print('no Nope')",
                  package)
    assert out.splitlines() == ["init ran", "1.2 True", "no Nope"]


def test_testbed_leaves_most_of_pyroute2_unloaded() -> None:
    out = _python("import sys, testbed.netlink\n"
                  "print('pyroute2.ndb' in sys.modules, 'pyroute2.ipdb' in sys.modules)\n"
                  "from pyroute2 import NDB\nprint('pyroute2.ndb' in sys.modules)",
                  Path(__file__).resolve().parents[2])
    assert out.splitlines() == ["False False", "True"]
