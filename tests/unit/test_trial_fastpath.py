"""A trial's cheap paths: readiness read from /proc/PID/net (no `ss` started per poll) and the
ping-pong client measuring its own loopback overhead with a forked server (no second probe
start). Loopback traffic of this test process only."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from testbed import checks, netlink
from testbed.errors import DaemonError
from testbed.measure import pingpong_probe
from testbed.measure.kinds import base


@pytest.fixture
def own_netns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A namespace name ("tb-self") that resolves to this process's own network namespace."""
    monkeypatch.setattr(netlink, "NETNS_DIR", tmp_path)
    (tmp_path / "tb-self").symlink_to(f"/proc/{os.getpid()}/ns/net")
    (tmp_path / "tb-other").symlink_to(f"/proc/{os.getpid()}/ns/uts")  # another inode
    yield "tb-self"


@pytest.mark.parametrize("family,host", [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_listening_read_from_proc(own_netns: str, family: socket.AddressFamily,
                                  host: str) -> None:
    with socket.socket(family, socket.SOCK_DGRAM) as u, \
            socket.socket(family, socket.SOCK_STREAM) as t:
        u.bind((host, 0))
        t.bind((host, 0))
        uport, tport = u.getsockname()[1], t.getsockname()[1]
        pid = os.getpid()
        assert netlink.listening_in_netns_of(pid, own_netns, uport, "udp")
        # bound but not listening yet: not ready; then listening
        assert not netlink.listening_in_netns_of(pid, own_netns, tport, "tcp")
        t.listen(1)
        assert netlink.listening_in_netns_of(pid, own_netns, tport, "tcp")
        # the right port on the wrong protocol, another namespace, a missing one, a dead pid
        assert not netlink.listening_in_netns_of(pid, own_netns, uport, "tcp")
        assert not netlink.listening_in_netns_of(pid, "tb-other", uport, "udp")
        assert not netlink.listening_in_netns_of(pid, "tb-missing", uport, "udp")
        assert not netlink.listening_in_netns_of(2**22 + 7, own_netns, uport, "udp")


class NoSsTestbed:
    """A TestbedLike whose node h1 is this process's namespace; `ss` must never be run."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.runs: list[list[str]] = []

    def netns(self, node: str) -> str:
        return self.ns

    def run(self, node: str, argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        self.runs.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_wait_listening_reads_proc_instead_of_starting_ss(own_netns: str) -> None:
    tb = NoSsTestbed(own_netns)
    me = SimpleNamespace(pid=os.getpid(), alive=lambda: True)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind(("127.0.0.1", 0))
        port = u.getsockname()[1]
        checks.wait_listening(tb, "h1", port, "udp", me, deadline_s=5.0)  # type: ignore[arg-type]
    assert tb.runs == []
    # nothing listens on a closed port: the wait ends (here at once: the deadline is tiny)
    with pytest.raises(DaemonError, match="did not listen"):
        checks.wait_listening(tb, "h1", port, "udp", me, deadline_s=0.05)  # type: ignore[arg-type]
    assert tb.runs == []


def test_serve_reads_proc_for_probes_and_polls_ss_for_third_party_servers(
        own_netns: str, tmp_path: Path) -> None:
    class Tb(NoSsTestbed):
        def popen(self, node: str, argv: list[str], **kw: Any) -> Any:
            return SimpleNamespace(pid=os.getpid(), alive=lambda: True,
                                   stop=lambda grace=2.0: 0)

        def run(self, node: str, argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
            self.runs.append(argv)
            return subprocess.CompletedProcess(argv, 0, "UNCONN 0 0 *:1", "")

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind(("127.0.0.1", 0))
        port = u.getsockname()[1]
        for argv, polls in ((lambda p, _o: pingpong_probe.argv("py", "server", host="h",
                                                               port=p), 0),
                            (lambda p, _o: ["iperf3", "-s", "-p", str(p)], 1)):
            tb = Tb(own_netns)
            ctx = base.Context(python="py", scratch=tmp_path)
            ctx._ports = itertools.count(port)
            with base.serve(tb, ctx, "h1", argv, proto="udp", what="s", name="s") as srv:
                assert srv.port == port
            assert len(tb.runs) == polls and all(r[0] == "ss" for r in tb.runs)


def test_wait_listening_polls_ss_without_a_real_namespace() -> None:
    tb = NoSsTestbed("tb-no-such-namespace-here")
    me = SimpleNamespace(pid=os.getpid(), alive=lambda: True)
    with pytest.raises(DaemonError, match="did not listen"):
        checks.wait_listening(tb, "h1", 9, "udp", me, deadline_s=0.05)  # type: ignore[arg-type]
    assert tb.runs and tb.runs[0][0] == "ss"


@pytest.mark.parametrize("protocol", ["udp", "tcp"])
def test_overhead_run_forks_its_server_and_reaps_it(protocol: str) -> None:
    before = _children()
    doc = pingpong_probe.overhead_run("127.0.0.1", protocol, 40, 20, False, 1.0, 2)
    assert doc["lost"] == 0 and doc["owd"]["n"] == 20 and doc["host"] == "127.0.0.1"
    assert doc["protocol"] == protocol and doc["size"] == 40
    # the forked server was reaped: no child of ours is new (other tests' children may remain)
    assert _children() <= before


def _children() -> set[int]:
    """This process's children, zombies included (/proc: every thread's list)."""
    out: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            out |= {int(x) for x in (task / "children").read_text().split()}
    return out


def test_loopback_forked_at_the_start_runs_when_told() -> None:
    """The loopback run is forked before the network run and waits; `run()` starts it (its
    own forked server) and returns its document; every child is reaped."""
    before = _children()
    loop = pingpong_probe.Loopback("127.0.0.1", "udp", 16, 15, False, 1.0, 2)
    assert os.waitpid(loop.pid, os.WNOHANG) == (0, 0)  # waiting, not done
    doc = loop.run()
    assert doc["owd"]["n"] == 15 and doc["lost"] == 0 and doc["host"] == "127.0.0.1"
    assert _children() <= before
    idle = pingpong_probe.Loopback("::1", "tcp", 16, 15, False, 1.0, 2)
    idle.cancel()  # the client failed: the child ends without a run
    assert _children() <= before


def test_client_prints_network_then_waits_then_loopback() -> None:
    """`client --overhead`: first document, then nothing until a line on stdin, then the
    loopback document (the runner stops the network server in between)."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe_port:
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    server = subprocess.Popen(pingpong_probe.argv(sys.executable, "server", host="127.0.0.1",
                                            port=port), env=env)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _ in range(200):  # until the server answers
                s.settimeout(0.05)
                s.sendto(b"x" * 8, ("127.0.0.1", port))
                try:
                    s.recv(64)
                    break
                except TimeoutError:
                    continue
        cli = subprocess.Popen(
            pingpong_probe.argv(sys.executable, "client", host="127.0.0.1", port=port, count=10,
                          busy_poll=False, overhead="127.0.0.1"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        assert cli.stdout is not None and cli.stdin is not None
        first = json.loads(cli.stdout.readline())
        assert first["owd"]["n"] == 10 and cli.poll() is None  # waiting for the go-ahead
        rest, _ = cli.communicate("go\n", timeout=60)
        second = json.loads(rest)
        assert second["owd"]["n"] == 10 and second["lost"] == 0 and cli.returncode == 0
    finally:
        server.kill()
        server.wait()
