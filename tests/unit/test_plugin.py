"""The pytest plugin: kernel marker decisions, the VM pass hand-off, CI strictness."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest

from testbed import pytest_plugin
from testbed.vm import run as vm_run
from testbed.vm.boot import VmResult
from testbed.vm.guest import ENV_IN_VM

TESTS = """
import pytest

@pytest.mark.kernel("sit")
def test_needs_sit():
    pass

@pytest.mark.kernel("veth")
def test_needs_veth():
    pass

def test_plain():
    pass
"""


@pytest.fixture
def host_lacks_sit(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(wanted: Iterable[str]) -> list[str]:
        return [f for f in wanted if f == "sit"]

    monkeypatch.setattr(pytest_plugin, "_missing_probe", lambda: missing)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(ENV_IN_VM, raising=False)


@pytest.mark.usefixtures("host_lacks_sit")
def test_off_mode_skips_with_a_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_inprocess("--testbed-vm=off", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*needs sit, which this machine lacks*"])
    result.stdout.fnmatch_lines(["testbed: 2 tests ran on the host, 0 in the VM (1 skipped*"])


@pytest.mark.usefixtures("host_lacks_sit")
def test_ci_never_skips_silently(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_inprocess("--testbed-vm=off")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*strict (CI=true*forbids skipping*"])


@pytest.mark.usefixtures("host_lacks_sit")
@pytest.mark.parametrize(("env", "args"), [
    ({"CI": "true", "TESTBED_STRICT": "0"}, []),
    ({"CI": "true"}, ["--testbed-strict=no"]),
])
def test_strictness_can_be_turned_off_under_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
    args: list[str],
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_inprocess("--testbed-vm=off", *args)
    result.assert_outcomes(passed=2, skipped=1)


@pytest.mark.usefixtures("host_lacks_sit")
def test_strictness_can_be_asked_for_without_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TESTBED_STRICT", "1")
    pytester.makepyfile(TESTS)
    pytester.runpytest_inprocess("--testbed-vm=off").assert_outcomes(passed=2, errors=1)


def test_silent_in_sessions_that_use_none_of_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1)
    assert not [line for line in result.outlines if line.startswith("testbed")]


@pytest.mark.usefixtures("host_lacks_sit")
def test_run_mode_defers_to_one_vm_boot(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def fake_run(command: list[str], **kw: Any) -> VmResult:
        calls.append(command)
        summary = json.dumps({"passed": 1, "ran": 1}).encode()
        return VmResult(0, True, scratch_files={pytest_plugin.VM_SUMMARY: summary})

    monkeypatch.setattr(vm_run, "run_in_vm", fake_run)
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_inprocess("--testbed-vm=run")
    result.assert_outcomes(passed=2, deselected=1)
    assert len(calls) == 1
    assert calls[0][1:3] == ["-m", "pytest"]
    assert calls[0][-1].endswith("::test_needs_sit")
    result.stdout.fnmatch_lines(["testbed: 2 tests ran on the host, 1 in the VM (features: sit)"])
    assert result.ret == 0


@pytest.mark.usefixtures("host_lacks_sit")
def test_run_mode_fails_when_the_vm_cannot_boot(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from testbed.errors import MissingCapability

    def no_vm(command: list[str], **kw: Any) -> VmResult:
        raise MissingCapability("QEMU", "the VM tier", fix="apt-get install qemu-system-x86")

    monkeypatch.setattr(vm_run, "run_in_vm", no_vm)
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_inprocess("--testbed-vm=run")
    result.stdout.fnmatch_lines(["*VM pass FAILED*QEMU*", "*apt-get install qemu-system-x86"])
    result.stdout.fnmatch_lines(["testbed: 2 tests ran on the host, 0 in the VM (1 could not*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.usefixtures("host_lacks_sit")
def test_in_vm_a_missing_feature_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_IN_VM, "1")
    monkeypatch.setenv("TESTBED_SCRATCH", str(pytester.path))
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*inside the full-kernel VM but still missing: sit*"])
    summary = json.loads((pytester.path / pytest_plugin.VM_SUMMARY).read_text())
    assert summary["passed"] == 2 and summary["error"] == 1 and summary["ran"] == 3


def test_summary_line() -> None:
    assert (
        pytest_plugin.summary_line(123, 17, ["sit", "jool", "netem"])
        == "testbed: 123 tests ran on the host, 17 in the VM (features: jool, netem, sit)"
    )


def test_testbed_net_needs_a_topology(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_x(testbed_net):
            pass
        """
    )
    result = pytester.runpytest_inprocess()
    assert result.ret != 0


CLOCK_TESTS = TESTS + """

@pytest.mark.kernel("veth", clock="virtual")
def test_needs_the_virtual_clock():
    pass
"""


@pytest.mark.usefixtures("host_lacks_sit")
def test_virtual_clock_tests_get_a_second_boot_on_that_clock(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TESTBED_CLOCK", raising=False)
    calls: list[tuple[str, list[str]]] = []

    def fake_run(command: list[str], **kw: Any) -> VmResult:
        calls.append((kw["clock"], command))
        summary = json.dumps({"passed": 1, "ran": 1}).encode()
        return VmResult(0, True, scratch_files={pytest_plugin.VM_SUMMARY: summary})

    monkeypatch.setattr(vm_run, "run_in_vm", fake_run)
    pytester.makepyfile(CLOCK_TESTS)
    result = pytester.runpytest_inprocess("--testbed-vm=run")
    result.assert_outcomes(passed=2, deselected=2)
    assert [(c, cmd[-1].split("::")[-1]) for c, cmd in calls] == [
        ("real", "test_needs_sit"), ("virtual", "test_needs_the_virtual_clock")]
    result.stdout.fnmatch_lines(["testbed: 2 tests ran on the host, 2 in the VM*virtual-clock*"])
    assert result.ret == 0


@pytest.mark.usefixtures("host_lacks_sit")
def test_virtual_clock_test_fails_in_a_real_clock_guest(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_IN_VM, "1")
    monkeypatch.setenv("TESTBED_CLOCK", "real")
    monkeypatch.setattr(pytest_plugin, "_missing_probe", lambda: lambda wanted: [])
    pytester.makepyfile(CLOCK_TESTS)
    result = pytester.runpytest_inprocess("-k", "needs_the_virtual")
    result.assert_outcomes(errors=1, deselected=3)
    result.stdout.fnmatch_lines(["*still missing: virtual-clock*"])
    monkeypatch.setenv("TESTBED_CLOCK", "virtual")
    result = pytester.runpytest_inprocess("-k", "needs_the_virtual")
    result.assert_outcomes(passed=1, deselected=3)
