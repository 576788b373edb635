"""Stand-in for `testbed run EXP --share FILE --db DB` in the parallel tests: the real trial
loop (run_experiment with its share) on a fake testbed whose trials sleep, and can die."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testbed.experiment import run_experiment
from testbed.experiment_spec import load_experiment
from testbed.measure.kinds import Measured
from testbed.shares import read_share


class _Topology:
    node_names: tuple[str, ...] = ()  # no namespaces: the fake builds none

    def to_dict(self) -> dict[str, Any]:
        return {"name": "fake"}


class _Testbed:
    def __init__(self, params: Mapping[str, str]) -> None:
        self.params = dict(params)
        self.topology = _Topology()

    def qdiscs(self) -> list[Any]:
        return []

    @contextmanager
    def scope(self) -> Iterator[_Testbed]:  # a trial's undo scope: nothing to undo here
        yield self


@contextmanager
def _open(path: Path, params: Mapping[str, str]) -> Iterator[_Testbed]:
    yield _Testbed(params)


def _claim_death() -> bool:
    """One of TB_FAKE_DIE_TIMES deaths, claimed atomically: two workers reaching a matching
    trial at the same moment must not both die."""
    marks = Path(os.environ["TB_FAKE_DIE_DIR"])
    marks.mkdir(exist_ok=True)
    for i in range(int(os.environ.get("TB_FAKE_DIE_TIMES", "1"))):
        try:
            os.close(os.open(marks / f"death-{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        return True
    return False


def _trial(tb: Any, t: Any, ctx: Any) -> Measured:
    cell = f"{t.measurement.name}/{t.group_key}/{t.repetition}"
    log = os.environ.get("TB_FAKE_LOG")
    if log:
        with open(log, "a") as f:
            f.write(cell + "\n")
    die_on = os.environ.get("TB_FAKE_DIE_ON")
    if die_on and die_on in cell and _claim_death():
        if os.environ.get("TB_FAKE_GUEST"):  # like a guest: a session of its own
            import subprocess

            guest = subprocess.Popen(["sleep", "300"], start_new_session=True)
            Path(os.environ["TB_FAKE_GUEST"]).write_text(str(guest.pid))
            time.sleep(1.5)  # the coordinator sees it
        # the worker dies: this process, or the Dask worker above it (its child dies too)
        pid = os.getppid() if os.environ.get("TB_FAKE_DIE_PARENT") else os.getpid()
        os.kill(pid, signal.SIGKILL)
        time.sleep(30)
    time.sleep(float(os.environ.get("TB_FAKE_DELAY", "0.05")))
    size = t.params.get("size") or 0
    return Measured({"value": 1000.0 * t.params.get("ip", 4) + size + 0.5 * t.repetition},
                    {"rate": tb.params.get("rate")})


def main(argv: list[str]) -> int:
    exp_file, rest = argv[0], argv[1:]
    share = read_share(Path(rest[rest.index("--share") + 1]))
    db = Path(rest[rest.index("--db") + 1])
    exp = load_experiment(exp_file, "quick" if "--quick" in rest else "full")
    s = run_experiment(exp, db=db, share=(share.run_id, share.keys), open_testbed=_open,
                       run_trial=_trial)
    return 1 if s.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
