"""The full-kernel tier: boot a stock kernel with virtme-ng, run a command, bring results back."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import lzma
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

from testbed import processes
from testbed.errors import CommandError, MissingCapability, TestbedError, UsageError
from testbed.waiting import ENV_CLOCK, ENV_HOST_CLOCK, ENV_ICOUNT_SHIFT

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

# Environment handed through to the guest command when set on the host.
PASSTHROUGH_ENV = ("CI", "TERM", "LANG", "LC_ALL", "TZ", "PYTEST_ADDOPTS", "NO_COLOR")
# Tag of a second, read-only 9p export of / that the guest mounts with cache=loose: Python
# imports over the default (uncached) 9p root are 2-3x slower.
LOOSE_TAG = "tbroot"
DEFAULT_MEMORY = "1G"
DEFAULT_CPUS = 2
QEMU = "qemu-system-x86_64"
BOOT_MARKER = "booted"
GUEST_DB = "testbed.sqlite"
GUEST_DB_DIR = "/run/tb-db"  # tmpfs in the guest
# The guest's /tmp is an overlay on the host's over 9p, where programs' temporary files (iperf3's
# stream buffer) failed now and then with ENOENT: they get a folder on the guest's tmpfs instead.
GUEST_TMP_DIR = "/run/tb-tmp"

PROVISION_HINT = "run scripts/provision.sh as root (it installs everything the VM tier needs)"
# A KVM guest reaches its command in a few seconds; one that has not within this many seconds
# hangs (seen on nested, paravirtualised KVM: /dev/kvm works, the boot spins for ever).  It is
# killed, the verdict remembered, and the boot retried under TCG.
KVM_BOOT_DEADLINE_S = 60.0
ENV_ACCEL = "TESTBED_VM_ACCEL"
"""'kvm', 'tcg' or 'auto' (default): force or probe the accelerator of the full-kernel tier."""
KVM_VERDICT = "vm/kvm-verdict.json"  # under the state dir, outside the run records (*.json)

CLOCKS = ("real", "virtual")
"""`testbed vm --clock`: the guest's clock follows the host's (real) or counts instructions."""
DEFAULT_ICOUNT_SHIFT = 0
"""Virtual clock: 2**shift ns of guest time per instruction (0: a 1 GHz one-instruction CPU)."""
# In the guest: $TESTBED_CLOCK ('virtual' or 'real'), $TESTBED_ICOUNT_SHIFT, and
# $TESTBED_HOST_CLOCK, a file on the host whose modification time gives host wall time.
HOST_CLOCK_FILE = "host-clock"
HOST_TOOLS_FILE = "host-tools.json"  # results.ENV_HOST_TOOLS: the host's tool versions


# --- discovery (pure given the paths) ------------------------------------------------------


def _version_key(release: str) -> tuple[int | str, ...]:
    """Sort key for a kernel release such as '6.1.0-56-amd64' (numbers compare as numbers)."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.\-+~]", release))


def find_kernel(boot: Path = Path("/boot"), modules: Path = Path("/lib/modules")) -> Path:
    """The newest /boot/vmlinuz-*-amd64 whose modules are installed; raise if there is none."""
    found: list[tuple[tuple[int | str, ...], Path]] = []
    without_modules: list[str] = []
    for image in boot.glob("vmlinuz-*-amd64"):
        release = image.name.removeprefix("vmlinuz-")
        if (modules / release / "modules.dep").exists() or (modules / release / "kernel").is_dir():
            found.append((_version_key(release), image))
        else:
            without_modules.append(release)
    if found:
        return max(found)[1]
    detail = (
        f" ({', '.join(sorted(without_modules))} found in {boot} but without modules in {modules})"
        if without_modules
        else f" (no {boot}/vmlinuz-*-amd64)"
    )
    raise MissingCapability(
        "a stock Debian kernel" + detail,
        "the full-kernel tier (testbed vm)",
        fix="apt-get install linux-image-amd64 — or " + PROVISION_HINT,
    )


def kernel_release(kernel: Path) -> str:
    return kernel.name.removeprefix("vmlinuz-")


ENV_CACHE = "TESTBED_CACHE_DIR"
DEFAULT_CACHE = Path("/var/cache/testbed")
XZ_MAGIC = b"\xfd7zXZ\x00"
PVH_ENTRY_NOTE = 18  # XEN_ELFNOTE_PHYS32_ENTRY: the kernel can be started uncompressed (PVH)


def cache_dir() -> Path:
    """Where `testbed vm` keeps what it derives from the host's files (safe to delete)."""
    return Path(os.environ.get(ENV_CACHE) or DEFAULT_CACHE)


def has_pvh_entry(elf: bytes) -> bool:
    """Whether an x86-64 ELF kernel has the note QEMU needs to start it directly (PVH)."""
    if len(elf) < 64 or elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        return False
    phoff, = struct.unpack_from("<Q", elf, 32)
    phentsize, phnum = struct.unpack_from("<HH", elf, 54)
    for k in range(phnum):
        off = phoff + k * phentsize
        if off + 56 > len(elf):
            return False
        p_type, = struct.unpack_from("<I", elf, off)
        if p_type != 4:  # PT_NOTE
            continue
        n_off, = struct.unpack_from("<Q", elf, off + 8)
        n_size, = struct.unpack_from("<Q", elf, off + 32)
        pos, end = n_off, min(n_off + n_size, len(elf))
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12:pos + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and ntype == PVH_ENTRY_NOTE:
                return True
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def direct_boot_image(kernel: Path, cache: Path | None = None) -> Path | None:
    """An uncompressed copy of `kernel` (a bzImage with an XZ payload and a PVH entry), made
    once into the cache: QEMU starts it at its PVH entry, skipping the firmware's real-mode
    loader and the decompression (seconds under emulation). None where it cannot be made."""
    cache = cache or cache_dir()
    try:
        st = kernel.stat()
        out = cache / f"vmlinux-{kernel_release(kernel)}-{st.st_size}-{int(st.st_mtime)}"
        if out.is_file():
            return out
        data = kernel.read_bytes()
        start = data.find(XZ_MAGIC)
        if start < 0:
            return None
        elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[start:])
        if not has_pvh_entry(elf):
            return None
        cache.mkdir(parents=True, exist_ok=True)
        for old in cache.glob(f"vmlinux-{kernel_release(kernel)}-*"):
            if old.name != out.name:  # (another boot may be making this one too)
                old.unlink(missing_ok=True)  # an earlier build of the same release
        tmp = out.with_name(f".{out.name}.{os.getpid()}")
        tmp.write_bytes(elf)
        os.replace(tmp, out)
        return out
    except (OSError, lzma.LZMAError, struct.error):
        return None


def find_vng() -> Path:
    """virtme-ng's `vng`: the one next to this Python (the venv) first, then PATH."""
    found = processes.find_program("vng")
    if found is not None:
        return found
    raise MissingCapability(
        "virtme-ng (the `vng` command)",
        "the full-kernel tier (testbed vm)",
        fix=f"{Path(sys.executable).parent}/pip install virtme-ng — or " + PROVISION_HINT,
    )


def find_qemu() -> Path:
    found = shutil.which(QEMU)
    if found:
        return Path(found)
    raise MissingCapability(
        f"QEMU ({QEMU})",
        "the full-kernel tier (testbed vm)",
        fix="apt-get install qemu-system-x86 — or " + PROVISION_HINT,
    )


def parse_memory(text: str) -> int:
    """'1G', '512M', '1536' (MiB) -> MiB."""
    m = re.fullmatch(r"\s*(\d+)\s*([mMgG]?)(?:i?[bB])?\s*", text)
    if not m:
        raise UsageError(f"--memory {text!r}: expected a size such as 512M or 1G")
    value = int(m.group(1))
    mib = value * 1024 if m.group(2).lower() == "g" else value
    if mib < 256:
        raise UsageError(f"--memory {text!r}: the guest needs at least 256M")
    return mib


def available_memory_mib(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def check_memory(wanted_mib: int, available_mib: int | None) -> None:
    """Raise when the host cannot give the guest `wanted_mib` plus QEMU's own ~200 MiB."""
    if available_mib is None:
        return
    need = wanted_mib + 200
    if available_mib < need:
        raise UsageError(
            f"not enough free memory for the VM: it needs ~{need} MiB "
            f"({wanted_mib} MiB guest + QEMU) and {available_mib} MiB are available",
            hint="give the guest less with --memory 512M, or stop other programs",
        )


def _verdict_path() -> Path:
    from testbed.state import state_dir

    return state_dir() / KVM_VERDICT


def kvm_hang_recorded(kernel: Path | None = None) -> str | None:
    """Why KVM is not to be used here, if a KVM boot hung since the host booted, else None."""
    try:
        data = json.loads(_verdict_path().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("boot_id") != _host_boot_id():
        return None  # recorded before the host rebooted: probe again
    if kernel is not None and data.get("kernel") not in (None, str(kernel)):
        return None
    return str(data.get("reason", "a KVM boot hung"))


def record_kvm_hang(kernel: Path, reason: str) -> None:
    """Remember (until the host reboots) that KVM boots hang here, so later boots use TCG."""
    path = _verdict_path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps({"boot_id": _host_boot_id(), "kernel": str(kernel), "reason": reason})
        )


def _host_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def accel_choice(env: Mapping[str, str] | None = None) -> str:
    """$TESTBED_VM_ACCEL: 'kvm', 'tcg' or 'auto'; raise on anything else."""
    value = (env if env is not None else os.environ).get(ENV_ACCEL, "auto").strip().lower()
    if value not in ("kvm", "tcg", "auto", ""):
        raise UsageError(
            f"{ENV_ACCEL}={value!r}: expected kvm, tcg or auto",
            hint=f"unset {ENV_ACCEL} to let testbed probe KVM itself",
        )
    return value or "auto"


def kvm_works(qemu: Path | None = None) -> bool:
    """Whether QEMU can really use KVM here: /dev/kvm alone is not enough (MSR failures,
    boots that hang on nested KVM; $TESTBED_VM_ACCEL forces the choice)."""
    choice = accel_choice()
    if choice != "auto":
        return choice == "kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    if kvm_hang_recorded() is not None:
        return False
    qemu_bin = qemu or Path(shutil.which(QEMU) or QEMU)
    argv = [
        str(qemu_bin),
        "-accel",
        "kvm",
        "-cpu",
        "host",
        "-machine",
        "q35",
        "-display",
        "none",
        "-nodefaults",
        "-no-reboot",
        "-m",
        "64",
        "-S",
        "-monitor",
        "stdio",
    ]
    try:
        proc = processes.run(argv, input="quit\n", check=False, timeout=20)
    except (OSError, TestbedError):
        return False
    return proc.returncode == 0


def vm_available() -> tuple[bool, str]:
    """Whether the VM tier can boot here, and a sentence saying why (not)."""
    if os.environ.get(ENV_IN_VM) == "1":
        return False, "already inside the VM tier"
    try:
        kernel = find_kernel()
        vng = find_vng()
        find_qemu()
        check_memory(parse_memory(DEFAULT_MEMORY), available_memory_mib())
    except TestbedError as exc:
        return False, str(exc)
    if kvm_works():
        accel = (
            "KVM (falls back to TCG if the guest has not started within "
            f"{KVM_BOOT_DEADLINE_S:.0f} s)"
        )
    else:
        hung = kvm_hang_recorded()
        why = f"a KVM boot hung here: {hung}" if hung else "no usable KVM"
        accel = f"software emulation (TCG, {why}; slower)"
    return True, f"boots {kernel} with {vng} under {accel}"


# --- the guest command (pure) --------------------------------------------------------------


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


PACKAGE_DIR = Path(__file__).resolve().parent


def precompile(package: Path = PACKAGE_DIR) -> None:
    """Bring the package's bytecode up to date on the host before a boot: the guest runs with
    PYTHONDONTWRITEBYTECODE over a read-only root, so a stale .pyc is recompiled at every
    program start there (each probe start under emulation). Best effort (a read-only
    checkout keeps what it has)."""
    import compileall

    with contextlib.suppress(OSError), open(os.devnull, "w") as quiet, \
            contextlib.redirect_stdout(quiet):
        compileall.compile_dir(str(package), quiet=2, workers=1)


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


ENV_GUEST_INIT = "TESTBED_VM_INIT"
"""'lean' (default) or 'system': whether a guest boots with testbed's stand-ins for udev and
systemd-tmpfiles or with the host's own programs (`standin_binds`)."""
GUEST_INIT_PATH = ("/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin")
"""Where virtme-ng-init looks for udevd, udevadm and systemd-tmpfiles (its PATH)."""
UDEVD_PATHS = ("/usr/lib/systemd/systemd-udevd", "/lib/systemd/systemd-udevd")
UDEV_STANDIN = """#!/bin/sh
# testbed's stand-in for udevd and udevadm in a VM-tier guest (testbed.vm.standin_binds).
# virtme-ng-init runs `udevd --daemon`, then `udevadm trigger` and `udevadm settle`; a guest
# needs only the virtio-serial port links that carry the command's input and output.
[ "$1" = "--daemon" ] || exit 0
mkdir -p /dev/virtio-ports
i=0
while [ "$i" -lt 500 ]; do
  for p in /sys/class/virtio-ports/vport*; do
    [ -r "$p/name" ] || continue
    n=; read -r n < "$p/name" || :
    [ -n "$n" ] && [ ! -e "/dev/virtio-ports/$n" ] && ln -s "../${p##*/}" "/dev/virtio-ports/$n"
  done
  [ -e /dev/virtio-ports/virtme.stdin ] && [ -e /dev/virtio-ports/virtme.dev_stderr ] && exit 0
  sleep 0.01
  i=$((i + 1))
done
echo "testbed: the guest's virtio-serial ports never appeared" >&2
exit 0
"""
TMPFILES_STANDIN = """#!/bin/sh
# testbed's stand-in for systemd-tmpfiles in a VM-tier guest: the run-time folders programs
# expect on a fresh /run (testbed.vm.standin_binds)
mkdir -p /run/lock /run/user
chmod 1777 /run/lock
exit 0
"""


def _guest_program(name: str, extra: Sequence[str] = ()) -> Path | None:
    """The file virtme-ng-init would run for `name` (its real path), if the guest has one."""
    for cand in [*extra, *(f"{d}/{name}" for d in GUEST_INIT_PATH)]:
        path = Path(cand)
        if path.is_file() and os.access(path, os.X_OK):
            return path.resolve()
    return None


def standin_binds(scratch: Path, env: Mapping[str, str] | None = None) -> list[tuple[Path, Path]]:
    """(stand-in, program) pairs to bind in the boot's own mount namespace: the guest's init
    then runs testbed's few lines instead of udev's coldplug and systemd-tmpfiles. Measured
    under the virtual clock: the guest reaches its command 5.3 s sooner (10.7 s instead of
    16.0 s); udev's coldplug took 3.4 s, tmpfiles 1.3 s. Nothing a testbed guest uses comes
    from either: devtmpfs makes the device nodes, testbed loads its modules itself, and the
    namespaces' interfaces are never seen by a udevd in the initial namespace. Empty with
    TESTBED_VM_INIT=system."""
    value = (env if env is not None else os.environ).get(ENV_GUEST_INIT, "lean").strip().lower()
    if value == "system":
        return []
    if value != "lean":
        raise UsageError(f"{ENV_GUEST_INIT}={value!r}: expected lean or system",
                         hint=f"unset {ENV_GUEST_INIT} for testbed's lean guest boot")
    folder = scratch / "standin"
    folder.mkdir(exist_ok=True)
    binds: list[tuple[Path, Path]] = []
    for text, programs in (
        (UDEV_STANDIN, [_guest_program("udevd", UDEVD_PATHS), _guest_program("udevadm")]),
        (TMPFILES_STANDIN, [_guest_program("systemd-tmpfiles")]),
    ):
        found = sorted({p for p in programs if p is not None})
        if not found:
            continue
        script = folder / found[0].name
        script.write_text(text)
        script.chmod(0o755)
        binds += [(script, p) for p in found]
    return binds


def lean_argv(argv: Sequence[str], binds: Sequence[tuple[Path, Path]]) -> list[str]:
    """`argv` started through testbed.mountns with `binds`, or as is without any."""
    if not binds:
        return list(argv)
    out = [sys.executable, "-m", "testbed.mountns"]
    for src, dst in binds:
        out += ["--bind", str(src), str(dst)]
    return [*out, "--", *argv]


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

VIRTUAL_KERNEL_OPTIONS = ("nokaslr", "norandmaps")
"""Kernel options of a virtual-clock guest: the same addresses in every boot, kernel and
processes. With randomized addresses one boot's probe ran every exchange of a cell ~300
instructions (0.15 µs) cheaper than three others did; what a copy costs in instructions can
depend on its buffers' alignment, which randomized addresses change from boot to boot."""


def icount_option(shift: int) -> str:
    """QEMU's -icount value: fixed shift (deterministic), no sleeping while the guest idles."""
    return f"shift={shift},sleep=off"


def clock_env(clock: str, shift: int, scratch: Path) -> dict[str, str]:
    """What the guest is told about its clock (testbed.waiting and the results read it)."""
    env = {ENV_CLOCK: clock, ENV_HOST_CLOCK: str(scratch / HOST_CLOCK_FILE)}
    if clock == "virtual":
        env[ENV_ICOUNT_SHIFT] = str(shift)
        env["PYTHONHASHSEED"] = "0"  # the probes' dicts and sets laid out alike in every boot
    return env


def check_clock(clock: str, cpus: int | None, shift: int) -> int:
    """Validate `--clock` with `--cpus` and the shift; return the vCPU count to boot with."""
    if clock not in CLOCKS:
        raise UsageError(f"--clock {clock!r}: expected one of {', '.join(CLOCKS)}")
    if not 0 <= shift <= 10:
        raise UsageError(f"--icount-shift {shift}: expected 0..10 (2**shift ns an instruction)")
    if clock == "real":
        return DEFAULT_CPUS if cpus is None else cpus
    if cpus not in (None, 1):
        raise UsageError(
            f"--cpus {cpus} with --clock virtual: the virtual clock runs one vCPU "
            "(QEMU's instruction counting is single-threaded)",
            hint="drop --cpus, or use --clock real for more CPUs",
        )
    return 1


# --- running -------------------------------------------------------------------------------


@dataclass
class VmResult:
    """What one boot did: the command's exit code, whether it started, and merged trials."""

    returncode: int
    booted: bool
    merged_trials: int = 0
    hung: bool = False  # a KVM boot killed because the guest had not started by its deadline
    scratch_files: dict[str, bytes] = field(default_factory=dict)


class _Terminated(Exception):
    """SIGTERM arrived while the VM ran."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Terminated()

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop vng, its shell, virtme-run and QEMU: they share the process group we gave them."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)
    # QEMU may outlive the leader for a moment; the group id is still the leader's pid.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _binary(stream: IO[str]) -> IO[bytes]:
    """The byte stream under a text stream (pytest's capture may give one without .buffer)."""
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        return buffer  # type: ignore[no-any-return]
    return os.fdopen(os.dup(stream.fileno()), "wb", buffering=0)


def _tee(stream: IO[bytes], sink: IO[bytes], tail: deque[bytes] | None) -> None:
    """Copy the VM's output line by line as it comes, keeping the last lines for errors."""
    for line in iter(stream.readline, b""):
        try:
            sink.write(line)
            sink.flush()
        except (OSError, ValueError):
            pass  # our own output closed: keep draining so QEMU never blocks
        if tail is not None:
            tail.append(line)


def host_db(results: Path | None) -> Path:
    """The host's results database: --results DIR, else $TESTBED_DB, else results/."""
    from testbed.results import default_db

    return results / GUEST_DB if results is not None else default_db()


def merge_results(guest_db: Path, dst: Path, out: IO[str]) -> int:
    """Bring the guest's trials into the host database; never lose them."""
    if not guest_db.exists():
        return 0
    dst.parent.mkdir(parents=True, exist_ok=True)
    from testbed.results import merge

    n = merge(guest_db, dst)
    print(f"testbed vm: merged {n} trial(s) from the VM into {dst}", file=out)
    return n


def run_in_vm(
    command: Sequence[str],
    *,
    kernel: Path | None = None,
    memory: str = DEFAULT_MEMORY,
    cpus: int | None = None,
    results: Path | None = None,
    env: Mapping[str, str] | None = None,
    keep_files: Sequence[str] = (),
    kvm: bool | None = None,
    cwd: Path | None = None,
    clock: str = "real",
    icount_shift: int = DEFAULT_ICOUNT_SHIFT,
    db: Path | None = None,
) -> VmResult:
    """Boot once, run `command` as root in the guest with live output, merge results back.

    `keep_files` names files the command writes into $TESTBED_SCRATCH that are returned in
    `VmResult.scratch_files` (the scratch dir itself is always removed). `clock="virtual"`
    boots one vCPU under TCG with QEMU's instruction counter as the guest's clock.
    `db` (a file) overrides where the trials are merged (default: `host_db(results)`).
    """
    from testbed.results import ENV_HOST_TOOLS, tool_provenance

    if os.environ.get(ENV_IN_VM) == "1":
        raise UsageError("already inside the VM tier: run the command directly")
    if not command:
        raise UsageError("nothing to run: give a command after --, e.g. testbed vm -- lsmod")
    cpus = check_clock(clock, cpus, icount_shift)
    if cpus < 1:
        raise UsageError(f"--cpus {cpus}: need at least 1")
    if clock == "virtual":
        if kvm:
            raise UsageError("the virtual clock needs software emulation (TCG): QEMU's "
                             "-icount does not work with KVM")
        kvm = False
    memory_mib = parse_memory(memory)
    kernel_path = kernel or find_kernel()
    if not kernel_path.is_file():
        raise UsageError(f"--kernel {kernel_path}: no such file")
    vng = find_vng()
    qemu = find_qemu()
    check_memory(memory_mib, available_memory_mib())
    use_kvm = kvm_works(qemu) if kvm is None else kvm
    workdir = (cwd or Path.cwd()).resolve()
    dst = (db if db is not None else host_db(results)).resolve()
    dst.parent.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="tb-vm-") as tmp:
        scratch = Path(tmp)
        guest_env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
        guest_env.update(
            {k: v for k, v in os.environ.items() if k.startswith("TESTBED_") and k != "TESTBED_DB"}
        )
        guest_env.update(
            {
                "TESTBED_DB": f"{GUEST_DB_DIR}/{GUEST_DB}",
                "TESTBED_SCRATCH": str(scratch),
                "TESTBED_HOST_DB": str(dst),
                **clock_env(clock, icount_shift, scratch),
                ENV_HOST_TOOLS: str(scratch / HOST_TOOLS_FILE),
            }
        )
        guest_env.update(env or {})
        rwdirs = (dst.parent,)
        spec = VmSpec(
            kernel=kernel_path,
            command=tuple(command),
            scratch=scratch,
            cwd=workdir,
            memory_mib=memory_mib,
            cpus=cpus,
            kvm=use_kvm,
            rwdirs=rwdirs,
            env=guest_env,
            path_first=(Path(sys.executable).parent,),
            loose_dirs=default_loose_dirs([scratch, *rwdirs]),
            clock=clock,
            icount_shift=icount_shift,
            direct_image=direct_boot_image(kernel_path) if not use_kvm or kvm is None else None,
        )
        spec.script.write_text(guest_script(spec))
        (scratch / HOST_CLOCK_FILE).write_bytes(b"")
        (scratch / HOST_TOOLS_FILE).write_text(json.dumps(tool_provenance()))
        precompile()
        result = _boot(spec, vng)
        if not result.booted and use_kvm and kvm is None:
            if result.hung:
                record_kvm_hang(
                    kernel_path,
                    f"the guest had not started its command {KVM_BOOT_DEADLINE_S:.0f} s "
                    "into a KVM boot",
                )
            print(
                "testbed vm: boot with KVM "
                + (f"did not start within {KVM_BOOT_DEADLINE_S:.0f} s" if result.hung else "failed")
                + "; retrying with software emulation (TCG)"
                + (f"; later boots use TCG until the host reboots (or {ENV_ACCEL}=kvm)"
                   if result.hung else ""),
                file=sys.stderr,
            )
            spec = dataclasses.replace(spec, kvm=False)
            result = _boot(spec, vng)
        for name in keep_files:
            p = scratch / name
            if p.is_file():
                result.scratch_files[name] = p.read_bytes()
        result.merged_trials = merge_results(scratch / GUEST_DB, dst, sys.stderr)
    return result


def _wait_for_boot(proc: subprocess.Popen[bytes], marker: Path, deadline_s: float) -> bool:
    """Wait until the guest writes its boot marker or exits; False if neither by the deadline.

    Host wall time is right here: the guest has not started, so no guest clock exists yet.
    """
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if marker.exists() or proc.poll() is not None:
            return True
        time.sleep(0.2)
    return marker.exists() or proc.poll() is not None


def _boot(spec: VmSpec, vng: Path) -> VmResult:
    argv = lean_argv(vng_argv(spec, vng), standin_binds(spec.scratch))
    tail: deque[bytes] = deque(maxlen=40)
    host_tmp = spec.scratch / "host-tmp"
    host_tmp.mkdir(exist_ok=True)
    with _sigterm_raises():
        # Both streams go through pipes we copy from: QEMU reopens /proc/self/fd/1 with
        # O_TRUNC, which would truncate a file the caller redirected our output into.
        proc = processes.spawn(
            argv,
            what="booting the full-kernel tier (vng)",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            cwd=spec.cwd,
            # vng's own temp files (its exit-code file) die with our scratch dir, even when
            # it is killed before its atexit cleanup
            # vng starts `virtme-run` (and QEMU) through PATH: the venv's bin/ goes first, so
            # a venv that was never activated works.
            env={**processes.program_env(), "TMPDIR": str(host_tmp)},
        )
        assert proc.stdout is not None and proc.stderr is not None
        sys.stdout.flush()
        sys.stderr.flush()
        readers = [
            threading.Thread(target=_tee, args=(proc.stdout, _binary(sys.stdout), None)),
            threading.Thread(target=_tee, args=(proc.stderr, _binary(sys.stderr), tail)),
        ]
        for r in readers:
            r.daemon = True
            r.start()
        hung = False
        try:
            if spec.kvm:
                hung = not _wait_for_boot(proc, spec.scratch / BOOT_MARKER, KVM_BOOT_DEADLINE_S)
                if hung:
                    _kill_group(proc)
            rc = proc.wait()
        except (KeyboardInterrupt, _Terminated):
            _kill_group(proc)
            for r in readers:
                r.join(5)
            raise KeyboardInterrupt() from None
        finally:
            if proc.poll() is None:
                _kill_group(proc)
        for r in readers:
            r.join(5)
        # leftovers in the group (QEMU after vng died) must not outlive us
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    booted = (spec.scratch / BOOT_MARKER).exists()
    if not booted:
        if spec.kvm:
            return VmResult(rc, False, hung=hung)
        err = CommandError(
            argv,
            rc,
            b"".join(tail).decode(errors="replace"),
            where="the VM boot (the guest never started the command)",
        )
        err.hint = (
            f"see QEMU's own messages with: {vng} --run {spec.kernel} --disable-kvm "
            f"--verbose --exec true ; a broken install is fixed by {PROVISION_HINT}; "
            f"{ENV_GUEST_INIT}=system boots with the system's udev instead of testbed's stand-in"
        )
        raise err
    return VmResult(rc, True)
