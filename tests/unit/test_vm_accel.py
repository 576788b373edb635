"""Choosing the VM accelerator, finding venv programs without an activated venv."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from testbed import processes, state
from testbed.errors import UsageError
from testbed.vm import accel
from testbed.vm.accel import ENV_ACCEL, accel_choice, kvm_hang_recorded, kvm_works, record_kvm_hang
from testbed.vm.boot import _wait_for_boot


def test_accel_choice_reads_the_environment() -> None:
    assert accel_choice({}) == "auto"
    assert accel_choice({ENV_ACCEL: "TCG"}) == "tcg"
    assert accel_choice({ENV_ACCEL: "kvm"}) == "kvm"
    with pytest.raises(UsageError, match="TESTBED_VM_ACCEL"):
        accel_choice({ENV_ACCEL: "hvf"})


def test_forced_accelerator_wins_over_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_ACCEL, "tcg")
    assert kvm_works() is False
    monkeypatch.setenv(ENV_ACCEL, "kvm")
    assert kvm_works() is True


def test_a_recorded_hang_lasts_until_the_host_reboots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TESTBED_STATE_DIR", str(tmp_path))
    kernel = Path("/boot/vmlinuz-6.1.0-1-amd64")
    assert kvm_hang_recorded(kernel) is None
    record_kvm_hang(kernel, "no start in 60 s")
    assert kvm_hang_recorded(kernel) == "no start in 60 s"
    assert state.all_records() == []  # the verdict is no run record
    assert kvm_hang_recorded(Path("/boot/vmlinuz-other-amd64")) is None
    monkeypatch.setattr(accel, "_host_boot_id", lambda: "another-boot")
    assert kvm_hang_recorded(kernel) is None


def test_wait_for_boot_gives_up_at_the_deadline(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert _wait_for_boot(sleeper, tmp_path / "marker", 0.3) is False
        (tmp_path / "marker").write_text("up")
        assert _wait_for_boot(sleeper, tmp_path / "marker", 0.3) is True
    finally:
        sleeper.kill()
        sleeper.wait()


def test_venv_programs_are_found_without_path(monkeypatch: pytest.MonkeyPatch) -> None:
    venv_bin = Path(sys.executable).parent
    monkeypatch.setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    found = processes.find_program("pytest")  # installed in the venv, not on the bare PATH
    assert found is not None and found.parent == venv_bin
    env = processes.program_env()
    assert env["PATH"].split(os.pathsep)[0] == str(venv_bin)
    assert env["PATH"].count(str(venv_bin)) == 1
    assert processes.program_env(env)["PATH"] == env["PATH"]


def test_children_find_venv_programs_through_path(tmp_path: Path) -> None:
    # what vng does: start a sibling program (virtme-run) by name
    probe = tmp_path / "probe"
    probe.write_text("#!/bin/sh\ncommand -v pytest\n")
    probe.chmod(probe.stat().st_mode | stat.S_IXUSR)
    bare = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    out = subprocess.run([str(probe)], env=processes.program_env(bare), capture_output=True,
                         text=True, check=True).stdout.strip()
    assert Path(out).parent == Path(sys.executable).parent
