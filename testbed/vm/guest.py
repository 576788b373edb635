"""The guest: what one boot is (VmSpec), the script it runs, and the vng argv that boots it."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testbed.vm.clock import (
    DEFAULT_CPUS,
    DEFAULT_ICOUNT_SHIFT,
    VIRTUAL_KERNEL_OPTIONS,
    icount_option,
)

ENV_IN_VM = "TESTBED_IN_VM"
"""Set to "1" in the guest; the pytest plugin and `testbed doctor` read it."""

# Modules loaded in the guest before the command runs (all of them: loading is cheap and a
# command never has to say what it needs).  Missing ones are reported, not fatal. The core's
# are here; each node feature declares its own (testbed.features, `guest_modules`).
CORE_GUEST_MODULES = (
    "sch_netem",
    "sch_tbf",
    "sch_htb",
    "sch_fq_codel",
    "ipip",
    "ip6_tunnel",
    "veth",
    "nf_tables",
    "nft_nat",
    "nft_chain_nat",
    "br_netfilter",
)


def guest_modules() -> tuple[str, ...]:
    """CORE_GUEST_MODULES and those the node features declare."""
    from testbed import features

    return CORE_GUEST_MODULES + tuple(
        m for m in features.guest_modules() if m not in CORE_GUEST_MODULES
    )


# Tag of a second, read-only 9p export of / that the guest mounts with cache=loose: Python
# imports over the default (uncached) 9p root are 2-3x slower.
LOOSE_TAG = "tbroot"
BOOT_MARKER = "booted"
GUEST_DB = "testbed.sqlite"
GUEST_DB_DIR = "/run/tb-db"  # tmpfs in the guest
# The guest's /tmp is an overlay on the host's over 9p, where programs' temporary files (iperf3's
# stream buffer) failed now and then with ENOENT: they get a folder on the guest's tmpfs instead.
GUEST_TMP_DIR = "/run/tb-tmp"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The testbed package: read through the cache=loose export, precompiled before a boot."""


UNUSED_GUEST_MODULES = (
    # QEMU's q35 machine: SATA and its CD-ROM, SMBus, LPC, watchdogs, speaker, PS/2, buttons.
    "ahci", "libahci", "sr_mod", "cdrom", "sg", "i2c_i801", "lpc_ich", "iTCO_wdt",
    "intel_pmc_bxt", "i6300esb", "pcspkr", "psmouse", "serio_raw", "evdev", "joydev", "button",
    "qemu_fw_cfg",
    # The emulated CPU's features: nested KVM, frequency scaling, accelerated crypto (the
    # kernel's generic implementations serve IPsec when it asks by algorithm).
    "kvm", "kvm_amd", "kvm_intel", "irqbypass", "ccp", "powernow_k8", "aesni_intel",
    "ghash_clmulni_intel", "crc32_pclmul", "crc32c_intel", "crct10dif_pclmul", "sha1_ssse3",
    "sha256_ssse3", "sha512_ssse3",
)
"""Modules the guest's udev must not load (`modprobe.blacklist=` on the kernel command line
applies to loads by device alias; `modprobe NAME` still loads one). Measured under TCG on a
loaded 2-core host: udev's coldplug took 15 s of a 33 s boot with them, 5 s of 24 s without."""


@dataclass(frozen=True)
class VmSpec:
    """Everything one boot needs; argv and guest script are derived from it alone."""

    kernel: Path
    command: tuple[str, ...]
    scratch: Path  # host temp dir, writable in the guest at the same path
    cwd: Path
    memory_mib: int = 1024
    cpus: int = DEFAULT_CPUS
    kvm: bool = False
    rwdirs: tuple[Path, ...] = ()  # extra host dirs writable in the guest (e.g. results/)
    env: Mapping[str, str] = field(default_factory=dict)
    path_first: tuple[Path, ...] = ()  # prepended to PATH in the guest (the venv's bin)
    loose_dirs: tuple[Path, ...] = ()  # re-mounted from the cache=loose export
    modules: tuple[str, ...] = field(default_factory=lambda: guest_modules())
    clock: str = "real"  # "virtual": QEMU -icount, one vCPU, TCG
    icount_shift: int = DEFAULT_ICOUNT_SHIFT
    direct_image: Path | None = None  # `kernel` uncompressed, booted under TCG (PVH entry)

    @property
    def script(self) -> Path:
        return self.scratch / "guest.sh"


def default_loose_dirs(rwdirs: Sequence[Path]) -> tuple[Path, ...]:
    """Read-mostly trees worth caching in the guest: the Pythons, /usr, this package (every
    probe start imports from it); never above a rwdir."""
    candidates = [
        PACKAGE_DIR,
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path("/usr/lib"),
        Path("/usr/bin"),
        Path("/usr/sbin"),
        Path("/usr/local"),
    ]
    out: list[Path] = []
    for c in candidates:
        c = c.resolve()
        if not c.is_dir() or c in out or c == Path("/"):
            continue
        if any(r.resolve().is_relative_to(c) or c.is_relative_to(r.resolve()) for r in rwdirs):
            continue
        out.append(c)
    return tuple(out)


def module_lines(modules: Sequence[str]) -> list[str]:
    """sh lines loading `modules`: one modprobe for all (a program start costs a fraction of a
    second under TCG); only when that fails, one by one to say which are missing."""
    if not modules:
        return []
    mods = " ".join(shlex.quote(m) for m in modules)
    return [
        f"if ! modprobe -q -a {mods} 2>/dev/null; then",
        f"  for m in {mods}; do",
        '    modprobe -q "$m" 2>/dev/null || echo "testbed vm: module $m not loaded" >&2',
        "  done",
        "fi",
    ]


def guest_script(spec: VmSpec) -> str:
    """The sh script the guest runs: marker, fast mounts, modules, environment, the command."""
    q = shlex.quote
    lines = [
        "#!/bin/sh",
        "# written by testbed.vm; runs as root inside the guest",
        f"echo up > {q(str(spec.scratch / BOOT_MARKER))}",
    ]
    if spec.loose_dirs:
        lines += [
            "mkdir -p /run/tb-root",
            "if mount -t 9p -o ro,trans=virtio,version=9p2000.L,access=any,msize=524288,"
            f"cache=loose {LOOSE_TAG} /run/tb-root 2>/dev/null; then",
        ]
        lines += [
            f"  mount --bind {q('/run/tb-root' + str(d))} {q(str(d))} 2>/dev/null || :"
            for d in spec.loose_dirs
        ]
        lines += ["fi"]
    # No sit0/tunl0/ip6tnl0 fallback devices in every new namespace once the tunnel modules
    # are loaded (as on a host where they are built in and tidy): testbed's namespaces
    # contain exactly what it created.
    lines += ["sysctl -qw net.core.fb_tunnels_only_for_init_net=1 2>/dev/null || :"]
    lines += module_lines(spec.modules)
    path = ":".join(
        [
            *(str(p) for p in spec.path_first),
            "/usr/local/sbin",
            "/usr/local/bin",
            "/usr/sbin",
            "/usr/bin",
            "/sbin",
            "/bin",
        ]
    )
    env = {
        "PATH": path,
        "HOME": "/root",
        ENV_IN_VM: "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TMPDIR": GUEST_TMP_DIR,
        **spec.env,
    }
    lines += [f"mkdir -p {GUEST_TMP_DIR}"]
    lines += [f"export {k}={q(v)}" for k, v in env.items()]
    # SQLite wants a local filesystem: the command writes its database on the guest's tmpfs
    # and it is copied to the scratch dir (9p) once the command has exited.
    lines += [
        f"mkdir -p {GUEST_DB_DIR}",
        f"cd {q(str(spec.cwd))} || exit 125",
        shlex.join(spec.command),
        "rc=$?",
        f'for f in {GUEST_DB_DIR}/*; do [ -f "$f" ] && cp "$f" {q(str(spec.scratch))}/; done',
        'exit "$rc"',
        "",
    ]
    return "\n".join(lines)


def vng_argv(spec: VmSpec, vng: Path) -> list[str]:
    """The vng command line that boots `spec.kernel` (under TCG its uncompressed copy, where
    there is one) and runs the guest script."""
    tcg = not spec.kvm or spec.clock == "virtual"
    image = spec.direct_image if tcg and spec.direct_image is not None else spec.kernel
    argv = [
        str(vng),
        "--run",
        str(image),
        "--memory",
        f"{spec.memory_mib}M",
        "--cpus",
        "1" if spec.clock == "virtual" else str(spec.cpus),
        "--user",
        "root",
        "--cwd",
        str(spec.cwd),
        f"--rwdir={spec.scratch}",
    ]
    argv += [f"--rwdir={d}" for d in spec.rwdirs]
    if tcg:  # -icount works only under TCG
        # Under emulation vng tries virtiofsd first and waits seconds for it to fail where it
        # cannot run (no FUSE); 9p is what it falls back to, so one root filesystem everywhere.
        argv += ["--disable-kvm", "--force-9p"]
    # udev's coldplug loads a driver for every emulated device (SATA, CD-ROM, watchdogs, KVM,
    # CPU-feature crypto): a third of an emulated boot, none of it used by a testbed guest.
    argv.append(f"--append=modprobe.blacklist={','.join(UNUSED_GUEST_MODULES)}")
    # vng hands --exec to a shell; the path is ours (mkdtemp, no special characters).
    argv += ["--exec", f"sh {shlex.quote(str(spec.script))}"]
    if spec.loose_dirs:
        argv.append(
            f"--qemu-opts=-virtfs local,path=/,mount_tag={LOOSE_TAG},security_model=none,"
            "readonly=on,multidevs=remap"
        )
    if spec.clock == "virtual":
        # vng hands its --qemu-opts to virtme-run through a shell, which splits at spaces.
        argv.append(f"--qemu-opts=-icount {icount_option(spec.icount_shift)}")
        argv += [f"--append={opt}" for opt in VIRTUAL_KERNEL_OPTIONS]
    return argv
