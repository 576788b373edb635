"""The guest's lean boot: testbed.vm.mountns and the udev/tmpfiles stand-ins (vm.lean_boot)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.errors import UsageError
from testbed.vm import lean_boot, mountns


def test_parse_binds_and_command() -> None:
    assert mountns.parse(["--bind", "/a", "/b", "--bind", "/c", "/d", "--", "vng", "-x"]) == (
        [("/a", "/b"), ("/c", "/d")], ["vng", "-x"])
    assert mountns.parse(["--", "true"]) == ([], ["true"])


@pytest.mark.parametrize("argv", [[], ["--"], ["--bind", "/a", "--", "x"], ["vng"],
                                  ["--bind", "/a", "/b", "vng"]])
def test_parse_rejects(argv: list[str]) -> None:
    with pytest.raises(ValueError):
        mountns.parse(argv)


def test_lean_argv() -> None:
    assert lean_boot.lean_argv(["vng", "--run"], []) == ["vng", "--run"]
    argv = lean_boot.lean_argv(["vng"], [(Path("/s/udevadm"), Path("/usr/bin/udevadm"))])
    assert argv == [sys.executable, "-m", "testbed.vm.mountns",
                    "--bind", "/s/udevadm", "/usr/bin/udevadm", "--", "vng"]


def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A guest PATH with udevadm, udevd as a link to it (as on Debian) and systemd-tmpfiles."""
    bin_ = tmp_path / "root" / "bin"
    lib = tmp_path / "root" / "lib" / "systemd"
    bin_.mkdir(parents=True)
    lib.mkdir(parents=True)
    for name in ("udevadm", "systemd-tmpfiles"):
        (bin_ / name).write_text("#!/bin/sh\n")
        (bin_ / name).chmod(0o755)
    (lib / "systemd-udevd").symlink_to(bin_ / "udevadm")
    monkeypatch.setattr(lean_boot, "GUEST_INIT_PATH", (str(bin_),))
    monkeypatch.setattr(lean_boot, "UDEVD_PATHS", (str(lib / "systemd-udevd"),))
    return bin_


def test_standin_binds_cover_udevd_udevadm_and_tmpfiles(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_ = fake_root(tmp_path, monkeypatch)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    binds = lean_boot.standin_binds(scratch, env={})
    # udevd is udevadm itself: bound once
    assert sorted(dst for _, dst in binds) == [bin_ / "systemd-tmpfiles", bin_ / "udevadm"]
    for src, _ in binds:
        assert src.parent == scratch / "standin" and os.access(src, os.X_OK)
    by_dst = {dst.name: src.read_text() for src, dst in binds}
    assert "virtio-ports" in by_dst["udevadm"] and "/run/lock" in by_dst["systemd-tmpfiles"]


def test_standin_binds_off_and_wrong_values(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_root(tmp_path, monkeypatch)
    assert lean_boot.standin_binds(tmp_path, env={lean_boot.ENV_GUEST_INIT: "system"}) == []
    with pytest.raises(UsageError, match="TESTBED_VM_INIT='fast'"):
        lean_boot.standin_binds(tmp_path, env={lean_boot.ENV_GUEST_INIT: "fast"})


def test_standin_binds_without_the_programs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lean_boot, "GUEST_INIT_PATH", (str(tmp_path / "none"),))
    monkeypatch.setattr(lean_boot, "UDEVD_PATHS", ())
    assert lean_boot.standin_binds(tmp_path, env={}) == []


def run_udev_standin(tmp_path: Path, *args: str) -> Path:
    """The udev stand-in with its /sys and /dev folders moved under tmp_path."""
    sysfs = tmp_path / "sys" / "class" / "virtio-ports"
    for port, name in (("vport1p1", "virtme.stdin"), ("vport1p2", "virtme.dev_stderr"),
                       ("vport1p3", "")):
        (sysfs / port).mkdir(parents=True, exist_ok=True)
        (sysfs / port / "name").write_text(name + "\n" if name else "")
    dev = tmp_path / "dev" / "virtio-ports"
    text = (lean_boot.STANDINS / "udev.sh").read_text()
    text = text.replace("/sys/class/virtio-ports", str(sysfs))
    text = text.replace("/dev/virtio-ports", str(dev))
    script = tmp_path / "udev.sh"
    script.write_text(text)
    subprocess.run(["sh", str(script), *args], check=True, timeout=60)
    return dev


def test_udev_standin_links_the_named_ports(tmp_path: Path) -> None:
    dev = run_udev_standin(tmp_path, "--daemon", "--resolve-names=never")
    assert sorted(p.name for p in dev.iterdir()) == ["virtme.dev_stderr", "virtme.stdin"]
    assert os.readlink(dev / "virtme.stdin") == "../vport1p1"


@pytest.mark.parametrize("args", [("trigger", "--type=devices", "--action=add"), ("settle",)])
def test_udev_standin_does_nothing_for_udevadm(tmp_path: Path, args: tuple[str, ...]) -> None:
    assert not run_udev_standin(tmp_path, *args).exists()


@pytest.mark.root
def test_mountns_binds_only_in_its_own_namespace(tmp_path: Path) -> None:
    src, dst = tmp_path / "standin", tmp_path / "program"
    src.write_text("stand-in\n")
    dst.write_text("original\n")
    out = subprocess.run(
        [sys.executable, "-m", "testbed.vm.mountns", "--bind", str(src), str(dst), "--",
         "cat", str(dst)], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout == "stand-in\n" and out.stderr == ""
    assert dst.read_text() == "original\n"  # the host's view never changed


def test_mountns_says_what_is_wrong() -> None:
    out = subprocess.run([sys.executable, "-m", "testbed.vm.mountns", "--bind", "/x"],
                         capture_output=True, text=True, check=False, timeout=60)
    assert out.returncode == 2 and "--bind wants SRC DST" in out.stderr
