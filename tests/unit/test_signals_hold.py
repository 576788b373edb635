"""signals.hold(): a process's last moments keep the exit status it decided on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> int:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=30).returncode


def test_a_held_sigterm_does_not_change_the_exit_status() -> None:
    prelude = "import os, signal\nfrom testbed import signals\nsignals.install('raise')\n"
    # without hold(): at interpreter shutdown Python restores the default action, so a SIGTERM
    # that arrives then kills the process (the case hold() exists for)
    assert _run(prelude + "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
                "os.kill(os.getpid(), signal.SIGTERM)\n") == -15
    assert _run(prelude + "signals.set_mode('defer')\nsignals.hold()\n"
                "os.kill(os.getpid(), signal.SIGTERM)\nos.kill(os.getpid(), signal.SIGINT)\n"
                "raise SystemExit(0)\n") == 0
