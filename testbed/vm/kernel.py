"""What the full-kernel tier boots: the stock kernel (lookup, its PVH copy), vng and QEMU."""

from __future__ import annotations

import lzma
import os
import re
import shutil
import struct
import sys
from pathlib import Path

from testbed import processes
from testbed.errors import MissingCapability

PROVISION_HINT = "run scripts/provision.sh as root (it installs everything the VM tier needs)"
QEMU = "qemu-system-x86_64"


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
    """The release a /boot/vmlinuz-RELEASE image names (its modules are in /lib/modules)."""
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

