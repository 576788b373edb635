"""The only importer of pyroute2: namespaces, links, addresses, routes, sysctls and qdiscs."""

from __future__ import annotations

import errno
import importlib.util
import os
import socket
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testbed.errors import KernelError, MissingCapability
from testbed.waiting import is_virtual


def _lazy_package(name: str) -> None:
    """Register package `name` without running its `__init__` until something asks it for a
    name it has not got: then the whole `__init__` runs, so `from name import X` still works.

    pyroute2's `__init__` imports the whole library (NDB, IPDB, IPVS, nl80211, ...): 64 of its
    163 modules are ones testbed never uses. In a virtual-clock guest `import pyroute2` adds
    3.5-4.5 s to a run's start, this module with the rest 2.6-3.0 s (host-timed boots).
    """
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # let the plain import say what is wrong
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    places = [Path(p) for p in spec.submodule_search_locations]

    def load_all(attr: str) -> Any:
        # A submodule is the import system's to load (`from name import sub` asks here first),
        # and so are the dunders it probes; only a name the `__init__` defines loads it all.
        is_sub = any((p / f"{attr}.py").exists() or (p / attr).is_dir() for p in places)
        if is_sub or (attr.startswith("__") and attr not in ("__version__", "__all__")):
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        del module.__dict__["__getattr__"]
        loader.exec_module(module)
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__dict__["__getattr__"] = load_all
    sys.modules[name] = module


_lazy_package("pyroute2")

from pyroute2 import netns  # noqa: E402
from pyroute2.iproute import IPRoute  # noqa: E402
from pyroute2.netlink.exceptions import NetlinkError  # noqa: E402

NUD_PERMANENT = 0x80
"""A neighbour entry that no timer ages (linux/neighbour.h)."""

if is_virtual():
    # pyroute2 waits for its forked netns helper with a 2 s poll() on the guest clock, which
    # leaps past it while anything waits on the host (9p): wait on the helper instead.
    import pyroute2.config

    pyroute2.config.default_communicate_timeout = 86400
    pyroute2.config.default_create_socket_timeout = 86400

NETNS_DIR = Path("/var/run/netns")


def _kernel_error(op: str, obj: str, exc: NetlinkError) -> KernelError:
    return KernelError(op, obj, int(exc.code), str(exc))


# ---------------------------------------------------------------------------- namespaces


def list_netns() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except FileNotFoundError:
        return []


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


CLONE_NEWNET = 0x40000000
_libc: Any = None


def create_netns(name: str) -> None:
    """Create the named namespace from this thread (unshare, bind-mount, setns back).

    pyroute2's netns.create forks a helper for this; a fork is where a Ctrl-C used to be
    lost (inside the fork hooks) and where a signal to the process group kills the helper
    halfway, so testbed does the same three steps in-process."""
    if netns_exists(name):
        raise KernelError("create namespace", name, errno.EEXIST)
    try:
        _create_here(name)
    except OSError as exc:
        raise KernelError("create namespace", name, exc.errno or 0, str(exc)) from None


def _create_here(name: str) -> None:
    import ctypes

    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if _libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        try:
            netns._create(name, _libc, pid="thread-self")  # mkdir, shared mount, bind
        finally:
            if _libc.setns(back, CLONE_NEWNET) != 0:  # back to where this thread was
                err = ctypes.get_errno()
                raise KernelError("return to the original namespace from", name, err)
    finally:
        os.close(back)


def remove_netns(name: str) -> None:
    """Unmount and remove a named namespace; a missing one is not an error."""
    if not netns_exists(name):
        return
    try:
        netns.remove(name)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise KernelError("remove namespace", name, exc.errno or 0, str(exc)) from None


def netns_inode(name: str) -> int | None:
    try:
        return os.stat(NETNS_DIR / name).st_ino
    except FileNotFoundError:
        return None


def netns_pids(name: str) -> list[int]:
    """Processes whose network namespace is `name` (what `ip netns pids` prints)."""
    ino = netns_inode(name)
    if ino is None:
        return []
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry.name}/ns/net").st_ino == ino:
                pids.append(int(entry.name))
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
    return pids


PROC_NET_STATE = {"tcp": "0A", "udp": "07"}  # LISTEN; a bound, unconnected UDP socket


def listening_in_netns_of(pid: int, name: str, port: int, proto: str) -> bool:
    """Whether a socket listens on `port` (`proto` "tcp" or "udp", IPv4 or IPv6) in namespace
    `name`, read from /proc/PID/net of a process in it: no program is started (in the
    full-kernel tier each `ip netns exec ... ss` costs seconds). False while `pid` is not (yet)
    in that namespace, or is gone."""
    ino = netns_inode(name)
    want = PROC_NET_STATE[proto]
    try:
        if ino is None or os.stat(f"/proc/{pid}/ns/net").st_ino != ino:
            return False
        for table in (proto, proto + "6"):
            with open(f"/proc/{pid}/net/{table}") as f:
                next(f, None)  # header
                for line in f:
                    cols = line.split()
                    if (len(cols) > 3 and cols[3] == want
                            and int(cols[1].rsplit(":", 1)[1], 16) == port):
                        return True
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return False


@contextmanager
def inside_netns(name: str) -> Iterator[None]:
    """Run the body with this process's network namespace switched to `name`."""
    netns.pushns(name)
    try:
        yield
    finally:
        netns.popns()


def set_sysctls(name: str, values: Mapping[str, str]) -> None:
    """Write `net.*` sysctls inside the namespace `name` (never the host's)."""
    with inside_netns(name):
        for key, value in values.items():
            path = Path("/proc/sys") / key.replace(".", "/")
            try:
                path.write_text(f"{value}\n")
            except FileNotFoundError:
                raise MissingCapability(
                    f"sysctl {key}", f"namespace {name}", "this kernel has no such setting"
                ) from None
            except OSError as exc:
                raise KernelError(f"set sysctl {key}={value} in", name, exc.errno or 0) from None


def read_sysctl(name: str, key: str) -> str:
    with inside_netns(name):
        return (Path("/proc/sys") / key.replace(".", "/")).read_text().strip()


# ---------------------------------------------------------------------------- links and addresses


class Netns:
    """A netlink socket opened inside one namespace, with the few operations testbed needs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._index: dict[str, int] = {}
        try:
            # Open the socket from inside the namespace (setns, then back): a netlink socket
            # stays bound to the namespace it was created in, and this avoids a fork per
            # namespace that IPRoute(netns=...) costs.
            with inside_netns(name):
                self._ipr: Any = IPRoute()
        except OSError as exc:
            raise KernelError("open netlink in namespace", name, exc.errno or 0) from None

    def close(self) -> None:
        self._ipr.close()

    def __enter__(self) -> Netns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def index(self, ifname: str) -> int:
        cached = self._index.get(ifname)
        if cached is not None:
            return cached
        found = self._ipr.link_lookup(ifname=ifname)
        if not found:
            raise KernelError("find interface", f"{ifname} in {self.name}", errno.ENODEV)
        self._index[ifname] = int(found[0])
        return int(found[0])

    def has_link(self, ifname: str) -> bool:
        return bool(self._ipr.link_lookup(ifname=ifname))

    def add_veth(
        self,
        ifname: str,
        peer_netns: str,
        peer_ifname: str,
        mtu: int,
        ifindex: int = 0,
        peer_ifindex: int = 0,
    ) -> None:
        """A veth pair with the peer created directly in `peer_netns` (never in the host's).

        Distinct ifindexes on the two ends matter: linkwatch handles a carrier change at once
        only when a device's ifindex differs from its peer's, else it may defer it by 1 s.
        """
        fd = os.open(NETNS_DIR / peer_netns, os.O_RDONLY)
        kw: dict[str, Any] = {"ifname": ifname, "kind": "veth", "mtu": mtu}
        peer: dict[str, Any] = {"ifname": peer_ifname, "net_ns_fd": fd, "mtu": mtu}
        if ifindex:
            kw["index"] = ifindex
        if peer_ifindex:
            peer["index"] = peer_ifindex
        try:
            self._ipr.link("add", peer=peer, **kw)
        except NetlinkError as exc:
            if exc.code == errno.EOPNOTSUPP:
                raise MissingCapability("veth", "links between namespaces") from None
            raise _kernel_error("create veth", f"{self.name}/{ifname}", exc) from None
        finally:
            os.close(fd)

    def delete_link(self, ifname: str) -> None:
        self._index.pop(ifname, None)
        found = self._ipr.link_lookup(ifname=ifname)
        if not found:
            return
        try:
            self._ipr.link("del", index=found[0])
        except NetlinkError as exc:
            if exc.code != errno.ENODEV:
                raise _kernel_error("delete link", f"{self.name}/{ifname}", exc) from None

    def set_up(self, ifname: str, mtu: int | None = None) -> None:
        kw: dict[str, Any] = {"state": "up"}
        if mtu is not None:
            kw["mtu"] = mtu
        try:
            self._ipr.link("set", index=self.index(ifname), **kw)
        except NetlinkError as exc:
            raise _kernel_error("bring up", f"{self.name}/{ifname}", exc) from None

    def add_address(self, ifname: str, cidr: str) -> None:
        addr, plen = cidr.split("/")
        kw: dict[str, Any] = {"address": addr, "prefixlen": int(plen)}
        if ":" in addr:
            kw["flags"] = 0x80  # IFA_F_NODAD: usable at once, no duplicate address detection
        try:
            self._ipr.addr("add", index=self.index(ifname), **kw)
        except NetlinkError as exc:
            raise _kernel_error("add address", f"{cidr} to {self.name}/{ifname}", exc) from None

    def add_route(self, dst: str, via: str, dev: str | None = None) -> None:
        kw: dict[str, Any] = {"dst": dst, "gateway": via}
        if dev is not None:
            kw["oif"] = self.index(dev)
        try:
            self._ipr.route("add", **kw)
        except NetlinkError as exc:
            if exc.code == errno.EEXIST:
                return
            raise _kernel_error("add route", f"{dst} via {via} in {self.name}", exc) from None

    def addresses(self) -> list[dict[str, Any]]:
        out = []
        for msg in self._ipr.get_addr():
            out.append(
                {
                    "index": msg["index"],
                    "family": 4 if msg["family"] == 2 else 6,
                    "address": msg.get_attr("IFA_ADDRESS"),
                    "prefixlen": msg["prefixlen"],
                    "flags": msg.get_attr("IFA_FLAGS") or msg["flags"],
                }
            )
        return out

    def not_ready(self, ipv6: bool, names: set[str]) -> list[str]:
        """Interfaces not yet usable: carrier not up, or (IPv6) no link-local address yet.

        Carrier changes reach the IP stacks through linkwatch, which may defer them by up to
        a second; until then IPv6 on that interface drops neighbour discovery.
        """
        links = {m["index"]: m for m in self._ipr.get_links()}
        lladdr: set[int] = set()
        if ipv6:
            for msg in self._ipr.get_addr(family=10):
                flags = msg.get_attr("IFA_FLAGS") or msg["flags"]
                addr = str(msg.get_attr("IFA_ADDRESS") or "")
                if addr.startswith("fe80:") and not flags_tentative(int(flags)):
                    lladdr.add(int(msg["index"]))
        waiting = []
        for idx, m in links.items():
            name = str(m.get_attr("IFLA_IFNAME"))
            if name not in names:
                continue  # lo, and devices the kernel adds by itself (sit0, tunl0, ...)
            if m.get_attr("IFLA_OPERSTATE") != "UP" or (ipv6 and idx not in lladdr):
                waiting.append(name)
        return waiting

    def links(self) -> list[dict[str, Any]]:
        return [
            {
                "index": m["index"],
                "ifname": m.get_attr("IFLA_IFNAME"),
                "mtu": m.get_attr("IFLA_MTU"),
                "kind": _link_kind(m),
                "address": m.get_attr("IFLA_ADDRESS"),
            }
            for m in self._ipr.get_links()
        ]

    def set_neighbour(self, ifname: str, addr: str, lladdr: str) -> None:
        """A permanent neighbour entry `addr` -> `lladdr` on `ifname` (replacing a learned one:
        `ip neigh replace ... nud permanent`)."""
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        try:
            self._ipr.neigh("replace", dst=addr, lladdr=lladdr, ifindex=self.index(ifname),
                            family=family, state=NUD_PERMANENT)
        except NetlinkError as exc:
            raise _kernel_error("set neighbour", f"{addr} on {self.name}/{ifname}",
                                exc) from None

    def delete_neighbour(self, ifname: str, addr: str) -> None:
        """Remove the neighbour entry `addr` on `ifname` (gone already: nothing to do)."""
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        try:
            self._ipr.neigh("del", dst=addr, ifindex=self.index(ifname), family=family)
        except NetlinkError as exc:
            if exc.code not in (errno.ENOENT, errno.ENODEV):
                raise _kernel_error("delete neighbour", f"{addr} on {self.name}/{ifname}",
                                    exc) from None


def _link_kind(msg: Any) -> str | None:
    info = msg.get_attr("IFLA_LINKINFO")
    if info is None:
        return None
    kind = info.get_attr("IFLA_INFO_KIND")
    return str(kind) if kind is not None else None


# ---------------------------------------------------------------------------- qdiscs
# qdiscs are set with tc's own client (argv): tbf with Ethernet framing needs `overhead` and
# `mpu`, which pyroute2's tbf request leaves at zero.


def tc_argv(name: str, args: Sequence[str]) -> list[str]:
    return ["tc", "-n", name, *args]


def qdisc_show_argv(name: str) -> list[str]:
    return ["tc", "-n", name, "-j", "-d", "qdisc", "show"]


def flags_tentative(flags: int) -> bool:
    return bool(flags & 0x40)  # IFA_F_TENTATIVE
