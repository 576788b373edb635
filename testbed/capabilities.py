"""What this kernel and machine can do (netns, veth, qdiscs, sit, tun, Jool, binaries)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from testbed import kthreads, netlink, processes

KERNEL_FEATURES = (
    "netns", "veth", "tbf", "htb", "netem", "sit", "tun", "jool", "nftables", "hfsc", "esp",
    "threaded-napi", "cgroup2-cpu",
)  # fmt: skip
# Programs of the core; each node feature declares its own (testbed.features, `programs`).
BINARIES: dict[str, tuple[str, str]] = {
    # capability: (program, Debian package)
    "iperf3": ("iperf3", "iperf3"),
    "tcpdump": ("tcpdump", "tcpdump"),
    "qemu": ("qemu-system-x86_64", "qemu-system-x86"),
    "virtme-ng": ("vng", "virtme-ng (pip)"),
}
# Kernel features the full-kernel tier (testbed vm) brings when the host lacks them.
VM_PROVIDES = {"netem", "sit", "jool", "tun", "tbf", "htb", "nftables", "hfsc", "esp",
               "threaded-napi", "cgroup2-cpu"}
MODULE_OF = {
    "netem": "sch_netem",
    "sit": "sit",
    "jool": "jool",
    "tun": "tun",
    "tbf": "sch_tbf",
    "htb": "sch_htb",
    "hfsc": "sch_hfsc",
    "esp": "esp4, esp6",
    "nftables": "nf_tables",
    "veth": "veth",
}


@dataclass(frozen=True)
class Capability:
    """Whether one feature is available, why not, and how to get it."""

    name: str
    kind: str  # "kernel" or "program"
    available: bool
    reason: str
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ip(args: list[str]) -> subprocess.CompletedProcess[str]:
    return processes.run(["ip", *args], check=False)


def _tc(ns: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    return processes.run(["tc", "-n", ns, *args], check=False)


def _msg(proc: subprocess.CompletedProcess[str]) -> str:
    return (
        (proc.stderr or proc.stdout).strip().splitlines()[0]
        if (proc.stderr or proc.stdout)
        else f"exit {proc.returncode}"
    )


def _module_present(module: str) -> bool:
    if Path(f"/sys/module/{module}").exists():
        return True
    if shutil.which("modprobe") is None:
        return False
    return processes.run(["modprobe", "-n", "-q", module], check=False).returncode == 0


_TRIED: dict[str, tuple[bool, str]] = {}
"""Kernel features this process has tried, and what came of it: each is tried once."""

_NEEDS_DEVICE = ("tbf", "htb", "hfsc", "netem")  # qdiscs: tried on the veth (else lo)


def _probe_kernel(wanted: Iterable[str] = KERNEL_FEATURES) -> dict[str, tuple[bool, str]]:
    """The kernel features of `wanted` (names in KERNEL_FEATURES), each tried for real once
    per process inside a scratch namespace that is then removed. Only what is asked for is
    tried: under emulation every `ip` or `tc` started costs a fraction of a second."""
    asked = set(wanted)
    todo = [f for f in KERNEL_FEATURES if f in asked and f not in _TRIED]
    if todo:
        _TRIED.update(_try_kernel(todo))
    return {f: _TRIED[f] for f in KERNEL_FEATURES if f in asked}


QDISC_PROBES = {
    "tbf": ["tbf", "rate", "10mbit", "burst", "3100", "limit", "10000", "mpu", "84",
            "overhead", "24"],
    "htb": ["htb", "default", "1"],
    "hfsc": ["hfsc", "default", "1"],
    "netem": ["netem", "delay", "1ms", "rate", "10mbit", "24"],  # overhead: positional
}


def _try_kernel(todo: list[str]) -> dict[str, tuple[bool, str]]:
    results: dict[str, tuple[bool, str]] = {}
    if os.geteuid() != 0:
        why = "not root: testbed needs root to probe and use the kernel"
        return {f: (False, why) for f in todo}
    if "jool" in todo:
        jool = _module_present("jool")
        results["jool"] = (
            jool,
            "module jool is loaded or loadable"
            if jool
            else "no jool module for this kernel (package jool-dkms builds it)",
        )
    if "cgroup2-cpu" in todo:  # a router's CPU budget (testbed.kthreads)
        results["cgroup2-cpu"] = kthreads.has_cpu_controller()
    if all(f in ("jool", "cgroup2-cpu") for f in todo):
        return results
    ns = f"tb-probe-{os.getpid()}"
    try:
        netlink.create_netns(ns)
    except Exception as exc:  # any failure here means no usable netns
        for f in todo:
            results.setdefault(f, (False, f"cannot create a network namespace: {exc}"))
        return results
    try:
        results["netns"] = (True, "created a scratch namespace")
        results.update(_probe_in(ns, todo))
    finally:
        netlink.remove_netns(ns)
    return results


def _probe_in(ns: str, todo: list[str]) -> dict[str, tuple[bool, str]]:
    """Each kernel feature of `todo` tried in the scratch namespace `ns`."""
    results: dict[str, tuple[bool, str]] = {}
    dev = "lo"
    if "veth" in todo or "threaded-napi" in todo or any(q in todo for q in _NEEDS_DEVICE):
        p = _ip(["-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"])
        results["veth"] = (p.returncode == 0,
                           "created a veth pair" if p.returncode == 0 else _msg(p))
        dev = "p0" if p.returncode == 0 else "lo"
        _ip(["-n", ns, "link", "set", dev, "up"])
    for name, args in QDISC_PROBES.items():
        if name not in todo:
            continue
        q = _tc(ns, ["qdisc", "replace", "dev", dev, "root", *args])
        results[name] = (q.returncode == 0, f"installed a {name} qdisc" if q.returncode == 0
                         else f"{_msg(q)} (module {MODULE_OF[name]})")
        _tc(ns, ["qdisc", "del", "dev", dev, "root"])
    if "sit" in todo:
        # explicit endpoints: "remote any local any" would be the kernel's own sit0
        s = _ip(["-n", ns, "link", "add", "s0", "type", "sit", "remote", "192.0.2.1", "local",
                 "192.0.2.2"])
        results["sit"] = (s.returncode == 0, "created a sit tunnel" if s.returncode == 0
                          else f"{_msg(s)} (module sit)")
    if "tun" in todo:
        t = _ip(["-n", ns, "tuntap", "add", "dev", "t0", "mode", "tun"])
        results["tun"] = (t.returncode == 0, "created a tun device" if t.returncode == 0
                          else f"{_msg(t)} (module tun, /dev/net/tun)")
    if "esp" in todo:
        results["esp"] = _probe_esp(ns)
    if "threaded-napi" in todo:
        n = processes.run(processes.ns_argv(ns, ["cat", "/sys/class/net/p0/threaded"]),
                          check=False)
        results["threaded-napi"] = (
            n.returncode == 0 and dev == "p0",
            "a veth offers threaded NAPI" if n.returncode == 0 and dev == "p0"
            else "no /sys/class/net/IF/threaded on a veth (Linux >= 5.13)")
    if "nftables" in todo:
        results["nftables"] = _probe_nft(ns)
    return results


def _probe_nft(ns: str) -> tuple[bool, str]:
    if not shutil.which("nft"):
        return False, "the nft program is missing (package nftables)"
    n = processes.run(processes.ns_argv(ns, ["nft", "list", "tables"]), check=False)
    return n.returncode == 0, "listed nftables tables" if n.returncode == 0 else _msg(n)


def _probe_esp(ns: str) -> tuple[bool, str]:
    """An ESP security association for IPv4 and one for IPv6 (the kernel refuses them with
    "Protocol not supported" without esp4/esp6); removed with the scratch namespace."""
    for src, dst in (("192.0.2.1", "192.0.2.2"), ("2001:db8::1", "2001:db8::2")):
        x = _ip(["-n", ns, "xfrm", "state", "add", "src", src, "dst", dst, "proto", "esp",
                 "spi", "0x100", "mode", "tunnel", "aead", "rfc4106(gcm(aes))",
                 "0x" + "11" * 20, "128"])  # fmt: skip
        if x.returncode != 0:
            return False, f"{_msg(x)} (modules esp4, esp6)"
    return True, "added ESP security associations (IPv4 and IPv6)"


def probe(wanted: Iterable[str] | None = None) -> dict[str, Capability]:
    """The capabilities named in `wanted` (default: every one), kernel features first, then
    programs; names that are neither are left out."""
    asked = None if wanted is None else set(wanted)
    caps: dict[str, Capability] = {}
    kernel = KERNEL_FEATURES if asked is None else [f for f in KERNEL_FEATURES if f in asked]
    for name, (ok, reason) in _probe_kernel(kernel).items():
        if ok:
            fix = ""
        elif name in VM_PROVIDES:
            fix = (
                "the full-kernel tier provides it: `testbed vm -- COMMAND` "
                "(a stock Debian kernel under QEMU)"
            )
        else:
            fix = "run as root on a Linux kernel with network namespaces"
        caps[name] = Capability(name, "kernel", ok, reason, fix)
    for name, (program, package) in binaries().items():
        if asked is not None and name not in asked:
            continue
        path = processes.find_program(program)  # the venv's bin/ first, as `testbed vm` does
        caps[name] = Capability(
            name,
            "program",
            path is not None,
            f"found {path}"
            if path
            else f"'{program}' is neither in {processes.venv_bin()} nor on PATH",
            "" if path else f"install {package} (scripts/provision.sh installs everything)",
        )
    return caps


def binaries() -> dict[str, tuple[str, str]]:
    """BINARIES plus the programs the node features declare (named by their package)."""
    from testbed import features

    out = dict(BINARIES)
    for p in features.programs():
        out.setdefault(p.package, (p.name, p.package))
    return out


def features() -> dict[str, bool]:
    return {name: cap.available for name, cap in probe().items()}


def has(feature: str) -> bool:
    cap = probe([feature]).get(feature)
    return cap is not None and cap.available


def missing(wanted: Iterable[str]) -> list[str]:
    """The features of `wanted` this machine lacks (unknown names count as missing)."""
    names = list(wanted)
    caps = probe(names)
    return [f for f in names if f not in caps or not caps[f].available]
