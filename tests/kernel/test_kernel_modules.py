"""Kernel-tier smoke tests: the modules the experiments need really work (host or VM)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.root


def sh(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"tb-ktest-{os.getpid()}"
    r = sh("ip", "netns", "add", name)
    assert r.returncode == 0, r.stderr
    try:
        sh("ip", "-n", name, "link", "set", "lo", "up")
        yield name
    finally:
        sh("ip", "netns", "del", name)
    assert name not in sh("ip", "netns", "list").stdout


@pytest.mark.kernel("sit")
def test_sit_tunnel_can_be_created(netns: str) -> None:
    r = sh(
        "ip",
        "-n",
        netns,
        "link",
        "add",
        "s6",
        "type",
        "sit",
        "remote",
        "192.0.2.1",
        "local",
        "192.0.2.2",
        "ttl",
        "64",
    )
    assert r.returncode == 0, r.stderr
    shown = sh("ip", "-n", netns, "-d", "link", "show", "s6").stdout
    assert "sit" in shown and "remote 192.0.2.1" in shown


@pytest.mark.kernel("netem")
def test_netem_qdisc_with_rate_and_delay(netns: str) -> None:
    r = sh(
        "tc",
        "-n",
        netns,
        "qdisc",
        "add",
        "dev",
        "lo",
        "root",
        "netem",
        "delay",
        "5ms",
        "rate",
        "10mbit",
        "24",
    )
    assert r.returncode == 0, r.stderr
    shown = sh("tc", "-n", netns, "qdisc", "show", "dev", "lo").stdout
    assert "netem" in shown and "delay 5ms" in shown


@pytest.mark.kernel("jool", "jool-tools")
def test_jool_nat64_instance(netns: str) -> None:
    r = sh(
        "ip",
        "netns",
        "exec",
        netns,
        "jool",
        "instance",
        "add",
        "tb-k",
        "--netfilter",
        "--pool6",
        "64:ff9b::/96",
    )
    assert r.returncode == 0, r.stderr + r.stdout
    try:
        shown = sh("ip", "netns", "exec", netns, "jool", "instance", "display").stdout
        assert "tb-k" in shown
    finally:
        sh("ip", "netns", "exec", netns, "jool", "instance", "remove", "tb-k")
