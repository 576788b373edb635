"""Unit tests of the full-kernel tier: kernel discovery, argv, guest script, error messages."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.errors import MissingCapability, UsageError
from testbed.vm.accel import kvm_works
from testbed.vm.clock import DEFAULT_CPUS, HOST_CLOCK_FILE, check_clock, clock_env
from testbed.vm.guest import (
    BOOT_MARKER,
    ENV_IN_VM,
    GUEST_TMP_DIR,
    PACKAGE_DIR,
    UNUSED_GUEST_MODULES,
    VmSpec,
    default_loose_dirs,
    guest_modules,
    guest_script,
    module_lines,
    vng_argv,
)
from testbed.vm.kernel import (
    PVH_ENTRY_NOTE,
    direct_boot_image,
    find_kernel,
    find_qemu,
    find_vng,
    has_pvh_entry,
)
from testbed.vm.memory import available_memory_mib, check_memory, parse_memory
from testbed.vm.run import host_db, merge_results, precompile, run_in_vm, vm_available


def make_kernel(boot: Path, modules: Path, release: str, with_modules: bool = True) -> Path:
    boot.mkdir(exist_ok=True)
    image = boot / f"vmlinuz-{release}"
    image.write_bytes(b"")
    if with_modules:
        (modules / release).mkdir(parents=True)
        (modules / release / "modules.dep").write_text("")
    return image


def test_find_kernel_picks_newest_with_modules(tmp_path: Path) -> None:
    boot, mods = tmp_path / "boot", tmp_path / "modules"
    make_kernel(boot, mods, "6.1.0-9-amd64")
    newest = make_kernel(boot, mods, "6.1.0-56-amd64")
    make_kernel(boot, mods, "6.12.0-1-amd64", with_modules=False)
    (boot / "vmlinuz-6.18.0-cloud").write_bytes(b"")
    assert find_kernel(boot, mods) == newest


def test_find_kernel_says_how_to_install_one(tmp_path: Path) -> None:
    with pytest.raises(MissingCapability) as info:
        find_kernel(tmp_path / "boot", tmp_path / "modules")
    text = str(info.value)
    assert "apt-get install linux-image-amd64" in text
    assert "scripts/provision.sh" in text


def test_find_kernel_names_a_kernel_without_modules(tmp_path: Path) -> None:
    make_kernel(tmp_path / "boot", tmp_path / "modules", "6.1.0-56-amd64", with_modules=False)
    with pytest.raises(MissingCapability, match=r"6.1.0-56-amd64 found .* without modules"):
        find_kernel(tmp_path / "boot", tmp_path / "modules")


@pytest.mark.parametrize(
    ("text", "mib"), [("1G", 1024), ("512M", 512), ("2g", 2048), ("768", 768), ("1GiB", 1024)]
)
def test_parse_memory(text: str, mib: int) -> None:
    assert parse_memory(text) == mib


@pytest.mark.parametrize("text", ["lots", "1T", "100M", ""])
def test_parse_memory_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_memory(text)


def test_check_memory_explains_the_shortfall() -> None:
    check_memory(1024, 4000)
    check_memory(1024, None)
    with pytest.raises(UsageError, match=r"1224 MiB.*500 MiB are available") as info:
        check_memory(1024, 500)
    assert "--memory 512M" in str(info.value)


def test_available_memory_reads_meminfo(tmp_path: Path) -> None:
    f = tmp_path / "meminfo"
    f.write_text("MemTotal: 100 kB\nMemAvailable:    2097152 kB\n")
    assert available_memory_mib(f) == 2048
    assert available_memory_mib(tmp_path / "absent") is None


def spec(tmp_path: Path, **kw: object) -> VmSpec:
    base: dict[str, object] = {
        "kernel": Path("/boot/vmlinuz-6.1.0-56-amd64"),
        "command": ("testbed", "run", "experiments/a b.toml", "--quick"),
        "scratch": tmp_path / "tb-vm-x",
        "cwd": Path("/work/main"),
        "rwdirs": (Path("/work/main/results"),),
        "path_first": (Path("/work/main/.venv/bin"),),
        "loose_dirs": (Path("/work/main/.venv"),),
        "env": {"TESTBED_DB": "/run/tb-db/testbed.sqlite", "CI": "true"},
    }
    base.update(kw)
    return VmSpec(**base)  # type: ignore[arg-type]


def test_vng_argv_tcg(tmp_path: Path) -> None:
    s = spec(tmp_path)
    argv = vng_argv(s, Path("/venv/bin/vng"))
    assert argv[:3] == ["/venv/bin/vng", "--run", "/boot/vmlinuz-6.1.0-56-amd64"]
    assert "--disable-kvm" in argv
    assert "--force-9p" in argv  # no waiting for a virtiofsd that cannot start
    assert argv[argv.index("--memory") + 1] == "1024M"
    assert argv[argv.index("--cpus") + 1] == "2"
    assert argv[argv.index("--user") + 1] == "root"
    assert f"--rwdir={s.scratch}" in argv
    assert "--rwdir=/work/main/results" in argv
    assert argv[argv.index("--exec") + 1] == f"sh {s.script}"
    assert any("mount_tag=tbroot" in a and "readonly=on" in a for a in argv)


def test_vng_argv_kvm_and_no_loose(tmp_path: Path) -> None:
    argv = vng_argv(spec(tmp_path, kvm=True, loose_dirs=()), Path("vng"))
    assert "--disable-kvm" not in argv
    assert "--force-9p" not in argv  # KVM: vng's virtiofs and microvm where they work
    assert not any("virtfs" in a for a in argv)


def test_vng_argv_keeps_udev_from_loading_unused_drivers(tmp_path: Path) -> None:
    for kvm in (False, True):
        argv = vng_argv(spec(tmp_path, kvm=kvm), Path("vng"))
        (opt,) = [a for a in argv if a.startswith("--append=modprobe.blacklist=")]
        listed = opt.split("=", 2)[2].split(",")
        assert {"ahci", "sr_mod", "kvm", "aesni_intel"} <= set(listed)


def test_no_module_the_guest_loads_is_kept_from_udev() -> None:
    assert not set(guest_modules()) & set(UNUSED_GUEST_MODULES)


def test_guest_script(tmp_path: Path) -> None:
    s = spec(tmp_path)
    text = guest_script(s)
    lines = text.splitlines()
    assert lines[0] == "#!/bin/sh"
    assert f"echo up > {s.scratch / BOOT_MARKER}" in lines  # first thing: boot marker
    assert "cache=loose tbroot /run/tb-root" in text
    assert "mount --bind /run/tb-root/work/main/.venv /work/main/.venv" in text
    assert "modprobe -q" in text and "sch_netem" in text and "jool" in text and " sit " in text
    assert "export TESTBED_IN_VM=1" in lines
    assert "export PATH=/work/main/.venv/bin:" in text
    assert "export CI=true" in lines
    # the command, quoted as one argv
    assert shlex.join(s.command) in lines
    assert shlex.split(shlex.join(s.command)) == list(s.command)
    assert lines[-1] == 'exit "$rc"'


def test_default_loose_dirs_never_hide_a_rwdir(tmp_path: Path) -> None:
    dirs = default_loose_dirs([Path("/usr/lib/x")])
    assert Path("/usr/lib") not in dirs
    assert all(d != Path("/") for d in dirs)


def test_the_package_is_cached_and_precompiled_for_the_guest(tmp_path: Path) -> None:
    """Every probe start in the guest imports from the package: it is read through the
    cache=loose export, and its bytecode is brought up to date on the host before a boot
    (the guest cannot write .pyc files)."""
    assert PACKAGE_DIR in default_loose_dirs([tmp_path])
    assert PACKAGE_DIR not in default_loose_dirs([PACKAGE_DIR / "x"])
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text("X = 1\n")
    precompile(pkg)
    assert [f.name.split(".")[0] for f in (pkg / "__pycache__").iterdir()] == ["mod"]
    (pkg / "__pycache__").chmod(0o500)
    try:
        (pkg / "mod.py").write_text("X = 2\n")  # stale and cannot be rewritten: no error
        precompile(pkg)
    finally:
        (pkg / "__pycache__").chmod(0o700)


def test_host_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESTBED_DB", raising=False)
    assert host_db(None) == Path("results/testbed.sqlite")
    assert host_db(tmp_path) == tmp_path / "testbed.sqlite"
    monkeypatch.setenv("TESTBED_DB", "/x/y.sqlite")
    assert host_db(None) == Path("/x/y.sqlite")


def test_run_in_vm_refuses_nesting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_IN_VM, "1")
    with pytest.raises(UsageError, match="already inside"):
        run_in_vm(["true"])
    assert vm_available() == (False, "already inside the VM tier")


def test_run_in_vm_needs_a_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_IN_VM, raising=False)
    with pytest.raises(UsageError, match="testbed vm -- lsmod"):
        run_in_vm([])


def test_missing_vng_and_qemu_say_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(sys, "executable", "/nonexistent/bin/python")
    with pytest.raises(MissingCapability, match="pip install virtme-ng"):
        find_vng()
    with pytest.raises(MissingCapability, match="apt-get install qemu-system-x86"):
        find_qemu()
    ok, why = vm_available()
    assert not ok and "provision.sh" in why


def test_kvm_works_without_dev_kvm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert kvm_works() is False


def test_merge_results_without_guest_db(tmp_path: Path) -> None:
    import io

    assert merge_results(tmp_path / "none.sqlite", tmp_path / "dst.sqlite", io.StringIO()) == 0
    assert not (tmp_path / "dst.sqlite").exists()


# --- the virtual clock ---------------------------------------------------------------------


def test_vng_argv_virtual_clock_is_icount_on_one_tcg_vcpu(tmp_path: Path) -> None:
    argv = vng_argv(spec(tmp_path, clock="virtual", kvm=True, cpus=2), Path("vng"))
    assert "--qemu-opts=-icount shift=0,sleep=off" in argv
    assert "--disable-kvm" in argv  # icount does not work with KVM
    assert {"--append=nokaslr", "--append=norandmaps"} <= set(argv)  # same addresses each boot
    assert argv[argv.index("--cpus") + 1] == "1"
    # vng joins its --qemu-opts into one shell line: each must split into QEMU's words
    opts = [a.split("=", 1)[1] for a in argv if a.startswith("--qemu-opts=")]
    assert shlex.split(" ".join(opts))[-2:] == ["-icount", "shift=0,sleep=off"]


def test_vng_argv_real_clock_has_no_icount(tmp_path: Path) -> None:
    argv = vng_argv(spec(tmp_path), Path("vng"))
    assert not any("icount" in a for a in argv)
    assert not {"--append=nokaslr", "--append=norandmaps"} & set(argv)


def test_vng_argv_icount_shift(tmp_path: Path) -> None:
    argv = vng_argv(spec(tmp_path, clock="virtual", icount_shift=3), Path("vng"))
    assert "--qemu-opts=-icount shift=3,sleep=off" in argv


def test_check_clock() -> None:
    assert check_clock("real", None, 0) == DEFAULT_CPUS
    assert check_clock("real", 4, 0) == 4
    assert check_clock("virtual", None, 0) == 1
    assert check_clock("virtual", 1, 0) == 1
    with pytest.raises(UsageError, match="one vCPU"):
        check_clock("virtual", 2, 0)
    with pytest.raises(UsageError, match="--clock 'wall'"):
        check_clock("wall", None, 0)
    with pytest.raises(UsageError, match="icount-shift"):
        check_clock("virtual", None, 11)


def test_clock_env_tells_the_guest(tmp_path: Path) -> None:
    env = clock_env("virtual", 0, tmp_path)
    assert env == {
        "TESTBED_CLOCK": "virtual",
        "TESTBED_ICOUNT_SHIFT": "0",
        "TESTBED_HOST_CLOCK": str(tmp_path / HOST_CLOCK_FILE),
        "PYTHONHASHSEED": "0",
    }
    assert clock_env("real", 0, tmp_path)["TESTBED_CLOCK"] == "real"
    assert "PYTHONHASHSEED" not in clock_env("real", 0, tmp_path)
    assert "TESTBED_ICOUNT_SHIFT" not in clock_env("real", 0, tmp_path)
    script = guest_script(spec(tmp_path, env=env))
    assert "export TESTBED_CLOCK=virtual" in script.splitlines()


def test_run_in_vm_refuses_kvm_with_the_virtual_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_IN_VM, raising=False)
    with pytest.raises(UsageError, match="TCG"):
        run_in_vm(["true"], clock="virtual", kvm=True)
    with pytest.raises(UsageError, match="one vCPU"):
        run_in_vm(["true"], clock="virtual", cpus=2)


def test_guest_programs_get_a_temporary_folder_on_the_guests_tmpfs(tmp_path: Path) -> None:
    spec = VmSpec(kernel=tmp_path / "vmlinuz", command=["true"], scratch=tmp_path,
                     cwd=tmp_path)
    script = guest_script(spec)
    assert f"mkdir -p {GUEST_TMP_DIR}" in script
    assert f"export TMPDIR={GUEST_TMP_DIR}" in script
    assert script.index(f"mkdir -p {GUEST_TMP_DIR}") < script.index("export TMPDIR")


def test_module_lines_load_all_at_once_and_name_only_the_missing(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    fake = bin_dir / "modprobe"  # records each call; fails for "jool"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\nfor a; do [ "$a" = jool ] && exit 1; done\n'
                    "exit 0\n")
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}

    def run(mods: tuple[str, ...]) -> tuple[list[str], str]:
        log.write_text("")
        script = "\n".join(module_lines(mods)) + "\n"
        p = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
        assert p.returncode == 0
        return log.read_text().splitlines(), p.stderr

    calls, err = run(("sch_netem", "sit"))
    assert calls == ["-q -a sch_netem sit"] and err == ""  # one program for all
    calls, err = run(("sch_netem", "jool", "sit"))
    assert calls[0] == "-q -a sch_netem jool sit" and len(calls) == 4  # then one by one
    assert err.strip() == "testbed vm: module jool not loaded"
    assert module_lines(()) == []


# --- starting the kernel uncompressed (PVH) ------------------------------------------------


def fake_elf(note_type: int) -> bytes:
    """A minimal ELF64 with one PT_NOTE segment holding one "Xen" note of `note_type`."""
    import struct

    note = struct.pack("<III", 4, 8, note_type) + b"Xen\0" + b"\0" * 8
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 32, 64)  # e_phoff
    struct.pack_into("<HH", header, 54, 56, 1)  # e_phentsize, e_phnum
    phdr = struct.pack("<IIQQQQQQ", 4, 4, 120, 0, 0, len(note), len(note), 4)
    return bytes(header) + phdr + note


def fake_bzimage(tmp_path: Path, payload: bytes, name: str = "vmlinuz-6.1.0-9-amd64") -> Path:
    import lzma

    image = tmp_path / name
    image.write_bytes(b"MZ real-mode setup" + lzma.compress(payload) + b"trailer")
    return image


def test_has_pvh_entry() -> None:
    assert has_pvh_entry(fake_elf(PVH_ENTRY_NOTE))
    assert not has_pvh_entry(fake_elf(5))
    assert not has_pvh_entry(b"MZ" + b"\0" * 100)
    assert not has_pvh_entry(fake_elf(PVH_ENTRY_NOTE)[:100])  # cut short: no crash


def test_direct_boot_image_is_made_once_and_reused(tmp_path: Path) -> None:
    elf = fake_elf(PVH_ENTRY_NOTE)
    kernel = fake_bzimage(tmp_path, elf)
    cache = tmp_path / "cache"
    first = direct_boot_image(kernel, cache)
    assert first is not None and first.read_bytes() == elf
    assert first.name.startswith("vmlinux-6.1.0-9-amd64-")
    stamp = first.stat().st_mtime_ns
    assert direct_boot_image(kernel, cache) == first
    assert first.stat().st_mtime_ns == stamp  # not written again
    # a new build of the same release replaces the old copy
    kernel.write_bytes(kernel.read_bytes() + b"more")
    second = direct_boot_image(kernel, cache)
    assert second is not None and second != first and not first.exists()


def test_direct_boot_image_none_where_it_cannot_be_made(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    no_pvh = fake_bzimage(tmp_path, fake_elf(5), "vmlinuz-a")
    assert direct_boot_image(no_pvh, cache) is None
    no_xz = tmp_path / "vmlinuz-b"
    no_xz.write_bytes(b"MZ gzip payload \x1f\x8b")
    assert direct_boot_image(no_xz, cache) is None
    assert direct_boot_image(tmp_path / "vmlinuz-missing", cache) is None
    assert not cache.exists() or not any(cache.iterdir())


def test_vng_argv_boots_the_direct_image_under_tcg_only(tmp_path: Path) -> None:
    direct = tmp_path / "vmlinux-x"
    tcg = vng_argv(spec(tmp_path, direct_image=direct), Path("vng"))
    assert tcg[tcg.index("--run") + 1] == str(direct)
    virtual = vng_argv(spec(tmp_path, direct_image=direct, kvm=True, clock="virtual"),
                          Path("vng"))
    assert virtual[virtual.index("--run") + 1] == str(direct)
    kvm = vng_argv(spec(tmp_path, direct_image=direct, kvm=True), Path("vng"))
    assert kvm[kvm.index("--run") + 1] == "/boot/vmlinuz-6.1.0-56-amd64"
