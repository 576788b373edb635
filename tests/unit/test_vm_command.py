"""The `testbed vm` command line: parsing and hand-off to testbed.vm.run_in_vm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testbed import cli
from testbed.vm import run as vm_run
from testbed.vm.boot import VmResult
from testbed.vm.guest import ENV_IN_VM


def test_vm_command_passes_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake(command: list[str], **kw: Any) -> VmResult:
        seen["command"] = command
        seen.update(kw)
        return VmResult(returncode=7, booted=True)

    monkeypatch.setattr(vm_run, "run_in_vm", fake)
    rc = cli.main(
        [
            "vm",
            "--memory",
            "2G",
            "--cpus",
            "1",
            "--results",
            "out",
            "--",
            "testbed",
            "doctor",
            "--json",
        ]
    )
    assert rc == 7
    assert seen["command"] == ["testbed", "doctor", "--json"]
    assert seen["memory"] == "2G" and seen["cpus"] == 1 and seen["results"] == Path("out")
    assert seen["kernel"] is None


def test_vm_command_reports_errors(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(ENV_IN_VM, raising=False)
    assert cli.main(["vm"]) == 2
    assert "nothing to run" in capsys.readouterr().err


def test_vm_command_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake(command: list[str], **kw: Any) -> VmResult:
        seen.update(kw)
        return VmResult(returncode=0, booted=True)

    monkeypatch.setattr(vm_run, "run_in_vm", fake)
    assert cli.main(["vm", "--clock", "virtual", "--", "true"]) == 0
    assert seen["clock"] == "virtual" and seen["icount_shift"] == 0 and seen["cpus"] is None
    assert cli.main(["vm", "--", "true"]) == 0
    assert seen["clock"] == "real"


def test_vm_command_virtual_clock_refuses_more_cpus(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(ENV_IN_VM, raising=False)
    assert cli.main(["vm", "--clock", "virtual", "--cpus", "2", "--", "true"]) == 2
    assert "one vCPU" in capsys.readouterr().err
