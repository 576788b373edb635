"""Capability probing tries only what it is asked for, once per process (no kernel touched:
the programs it would start are recorded instead)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from testbed import capabilities


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every program the probe starts; each one succeeds. No namespace is created."""
    argvs: list[list[str]] = []

    def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        argvs.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(capabilities, "_TRIED", {})
    monkeypatch.setattr("testbed.capabilities.os.geteuid", lambda: 0)
    monkeypatch.setattr("testbed.capabilities.processes.run", run)
    monkeypatch.setattr("testbed.netlink.create_netns", lambda ns: argvs.append(["+ns"]))
    monkeypatch.setattr("testbed.netlink.remove_netns", lambda ns: argvs.append(["-ns"]))
    monkeypatch.setattr("testbed.capabilities.shutil.which", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setattr("testbed.capabilities.Path.exists", lambda self: False)  # no jool loaded
    return argvs


def words(argvs: list[list[str]]) -> set[str]:
    return {w for a in argvs for w in a}


def test_only_the_asked_feature_is_tried(started: list[list[str]]) -> None:
    assert capabilities._probe_kernel(["netem"]) == {"netem": (True, "installed a netem qdisc")}
    assert started[0] == ["+ns"] and started[-1] == ["-ns"]
    assert "veth" in words(started) and "netem" in words(started)  # the qdisc needs a device
    assert not {"sit", "tuntap", "xfrm", "nft", "tbf", "htb", "hfsc", "modprobe"} & words(started)


def test_each_feature_is_tried_once(started: list[list[str]]) -> None:
    capabilities._probe_kernel(["netem"])
    n = len(started)
    assert capabilities.has("netem")
    assert len(started) == n  # known now: nothing started again
    assert capabilities.missing(["netem", "sit"]) == []
    assert "sit" in words(started[n:]) and "netem" not in words(started[n:])


def test_jool_alone_needs_no_namespace(started: list[list[str]]) -> None:
    assert capabilities._probe_kernel(["jool"])["jool"][0]
    assert started == [["modprobe", "-n", "-q", "jool"]]


def test_everything_by_default(started: list[list[str]]) -> None:
    assert set(capabilities._probe_kernel()) == set(capabilities.KERNEL_FEATURES)
    assert {"sit", "tuntap", "xfrm", "nft", "tbf", "htb", "hfsc", "netem"} <= words(started)


def test_probe_returns_what_was_asked(started: list[list[str]]) -> None:
    caps = capabilities.probe(["netem", "iperf3", "no-such-thing"])
    assert set(caps) == {"netem", "iperf3"}
    assert caps["netem"].kind == "kernel" and caps["iperf3"].kind == "program"


def test_not_root_tries_nothing(started: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("testbed.capabilities.os.geteuid", lambda: 1000)
    ok, why = capabilities._probe_kernel(["veth"])["veth"]
    assert not ok and "not root" in why and started == []
