"""Deadlines that a virtual-clock guest must not break: each one is tested with a guest clock
that leaps ahead (as it does while the guest waits on 9p host I/O) and a host clock that does
not."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testbed import checks, waiting
from testbed.errors import DaemonError
from testbed.measure import kinds, pingpong_probe, udpprobe
from testbed.measure.kinds import pingpong as pingpong_kind


class LeapingClock:
    """time.monotonic of a virtual-clock guest: every reading jumps `leap` seconds."""

    def __init__(self, leap: float) -> None:
        self.now = 1000.0
        self.leap = leap

    def __call__(self) -> float:
        self.now += self.leap
        return self.now


@pytest.fixture
def virtual(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A virtual-clock guest: TESTBED_CLOCK=virtual, a host-clock file, a leaping monotonic."""
    stamp = tmp_path / "host-clock"
    stamp.write_bytes(b"")
    monkeypatch.setenv("TESTBED_CLOCK", "virtual")
    monkeypatch.setenv("TESTBED_ICOUNT_SHIFT", "0")
    monkeypatch.setenv("TESTBED_HOST_CLOCK", str(stamp))
    monkeypatch.delenv("TESTBED_DEADLINE_SCALE", raising=False)
    monkeypatch.delenv("TESTBED_IN_VM", raising=False)
    monkeypatch.setattr(time, "monotonic", LeapingClock(30.0))
    return stamp


@pytest.fixture
def real(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESTBED_CLOCK", raising=False)
    monkeypatch.delenv("TESTBED_DEADLINE_SCALE", raising=False)
    monkeypatch.delenv("TESTBED_IN_VM", raising=False)
    monkeypatch.setattr(time, "monotonic", LeapingClock(30.0))


def test_clock_info() -> None:
    assert waiting.clock_info({})["clock"] == "real"
    v = waiting.clock_info({"TESTBED_CLOCK": "virtual", "TESTBED_ICOUNT_SHIFT": "1"})
    assert v == {**v, "clock": "virtual", "icount_shift": 1, "ns_per_instruction": 2,
                 "label": "virtual(icount shift=1)"}


def test_host_time_reads_the_stamp_of_the_host_file(virtual: Path) -> None:
    os.utime(virtual, (0, 0))
    t = waiting.host_time()
    assert abs(t - time.time()) < 5  # re-stamped now, by "the host" (here: this kernel)
    assert os.stat(virtual).st_mtime == pytest.approx(t, abs=0.01)
    assert waiting.host_time({"TESTBED_CLOCK": "real"}) == pytest.approx(time.time(), abs=1)


def test_deadline_follows_the_host_clock_in_a_virtual_guest(virtual: Path) -> None:
    dl = waiting.Deadline(5.0)
    for _ in range(20):
        time.monotonic()  # the guest clock leaps 600 s
    assert not dl.expired() and dl.remaining() > 4


def test_deadline_on_the_local_clock_elsewhere(real: None) -> None:
    dl = waiting.Deadline(5.0)
    assert dl.expired()  # one leap of 30 s: the local clock is what counts here


def test_deadline_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESTBED_DEADLINE_SCALE", raising=False)
    monkeypatch.setenv("TESTBED_IN_VM", "1")  # emulation: programs start slowly
    assert waiting.Deadline(2.0, clock=lambda: 0.0).budget == 2.0 * waiting.VM_SCALE
    monkeypatch.delenv("TESTBED_IN_VM")
    assert waiting.Deadline(2.0, clock=lambda: 0.0).budget == 2.0
    monkeypatch.setenv("TESTBED_DEADLINE_SCALE", "3")
    assert waiting.Deadline(2.0, clock=lambda: 0.0).budget == 6.0
    monkeypatch.setenv("TESTBED_DEADLINE_SCALE", "nonsense")
    assert waiting.Deadline(2.0, clock=lambda: 0.0).budget == 2.0


def test_process_timeout_is_off_in_a_virtual_guest(virtual: Path) -> None:
    assert waiting.process_timeout(36.0) is None
    assert waiting.process_timeout(36.0, {}) == 36.0


class SlowStartTestbed:
    """A server that listens only after the guest clock has leapt far past 10 s."""

    def __init__(self, polls_needed: int) -> None:
        self.polls = 0
        self.needed = polls_needed

    def run(self, node: str, argv: list[str], **kw: Any) -> Any:
        self.polls += 1
        time.monotonic()  # a 9p read: the guest clock leaps

        class Out:
            stdout = "UNCONN 0 0 0.0.0.0:20000 0.0.0.0:*" if self.polls >= self.needed else ""

        return Out()


def test_wait_listening_survives_a_leaping_guest_clock(virtual: Path) -> None:
    tb = SlowStartTestbed(polls_needed=5)  # ~300 s of guest time, milliseconds of host time
    checks.wait_listening(tb, "h2", 20000, "udp", deadline_s=10.0)  # type: ignore[arg-type]
    assert tb.polls == 5


def test_wait_listening_gives_up_on_the_host_clock(virtual: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    host = iter(float(i) for i in range(0, 10_000, 4))
    monkeypatch.setattr(waiting, "host_time", lambda env=None: next(host))
    with pytest.raises(DaemonError, match=r"within 10\.0 s"):
        checks.wait_listening(SlowStartTestbed(10**6), "h2", 1, "udp",  # type: ignore[arg-type]
                               deadline_s=10.0)


def test_wait_listening_real_clock_still_times_out(real: None) -> None:
    with pytest.raises(DaemonError):
        checks.wait_listening(SlowStartTestbed(10**6), "h2", 1, "udp",  # type: ignore[arg-type]
                               deadline_s=10.0)


def test_daemon_readiness_poll_survives_a_leaping_guest_clock(virtual: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setattr(checks, "POLL_S", 0.0)
    left = [6]

    class Countdown:
        def describe(self) -> str:
            return "countdown"

        def check(self, env: object) -> str | None:
            time.monotonic()
            left[0] -= 1
            return None if left[0] <= 0 else "no tun device yet"

    assert checks.poll(None, [Countdown()], 10.0) is None  # type: ignore[arg-type]


def _bound(port: int) -> bool:
    """Whether a UDP socket of this namespace has `port` (read, not probed by binding it)."""
    rows = Path("/proc/net/udp").read_text().splitlines()[1:]
    return any(int(r.split()[1].split(":")[1], 16) == port for r in rows)


def _receiver(port: int, env: dict[str, str], max_wait: float = 0.3, wait_bound: bool = True
              ) -> subprocess.Popen[str]:
    """The receiver probe as a program (it owns its signals), once its port is bound."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "testbed.measure.udpprobe", "recv", "--host", "127.0.0.1",
         "--port", str(port), "--idle", "0.2", "--max-wait", str(max_wait)],
        env={**os.environ, **env}, stdout=subprocess.PIPE, text=True)
    deadline = time.perf_counter() + 30
    while wait_bound and not _bound(port):
        if proc.poll() is not None or time.perf_counter() > deadline:
            proc.kill()
            raise AssertionError("the receiver did not bind its port")
        time.sleep(0.02)
    return proc


def _wakeups(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(text.split("voluntary_ctxt_switches:")[1].split()[0])


VIRTUAL_ENV = {"TESTBED_CLOCK": "virtual", "TESTBED_ICOUNT_SHIFT": "0"}


def test_udp_receiver_waits_for_its_sender_without_a_timer_on_the_virtual_clock(
        tmp_path: Path) -> None:
    """The receiver waits for a sender that is still starting (reading over 9p, the guest
    clock leaping): no guest-time deadline may end that wait, and no timer may wake it while
    the sender sends (a wake-up there shifts the sender it shares the CPU with)."""
    port = _free_udp_port()
    proc = _receiver(port, {**VIRTUAL_ENV, "TESTBED_HOST_CLOCK": str(tmp_path / "stamp")})
    time.sleep(0.3)  # settled in its wait
    before = _wakeups(proc.pid)
    time.sleep(1.2)  # > max_wait_s: a guest-clock deadline would have fired, a poll woken it
    assert _wakeups(proc.pid) == before and proc.poll() is None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(3):
            s.sendto(b"x" * 10, ("127.0.0.1", port))
    udpprobe.senders_done(proc)  # late: it has its datagrams already, and it must survive
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and json.loads(out)["received_by_socket"] == 3


def test_udp_receiver_with_nothing_ends_when_told_its_senders_ended(tmp_path: Path) -> None:
    port = _free_udp_port()
    proc = _receiver(port, {**VIRTUAL_ENV, "TESTBED_HOST_CLOCK": str(tmp_path / "stamp")})
    time.sleep(0.5)
    assert proc.poll() is None  # still waiting: nothing bounds it by guest time
    udpprobe.senders_done(proc)
    out, _ = proc.communicate(timeout=30)
    doc = json.loads(out)
    assert proc.returncode == 0 and doc["received_by_socket"] == 0 and doc["received"] == 0


def test_udp_receiver_gives_up_after_max_wait_on_the_real_clock() -> None:
    port = _free_udp_port()
    proc = _receiver(port, {"TESTBED_CLOCK": "real"}, max_wait=0.3, wait_bound=False)
    out, _ = proc.communicate(timeout=30)  # never told: max_wait ends it
    assert proc.returncode == 0 and json.loads(out)["received_by_socket"] == 0


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- probe modes ---------------------------------------------------------------------------


def test_pingpong_blocks_when_spinners_outnumber_cpus() -> None:
    busy, why = pingpong_probe.choose_mode(True, spinners=2, cpus=1)
    assert not busy and "2 spinning processes would outnumber 1 CPU" in why
    assert pingpong_probe.choose_mode(True, spinners=2, cpus=2)[0]
    assert not pingpong_probe.choose_mode(False, spinners=1, cpus=8)[0]
    assert pingpong_probe.available_cpus() >= 1


def test_udp_sender_pacing() -> None:
    assert udpprobe.pacing_mode("auto", cpus=1) == (
        False, "sleep: 2 spinning processes would outnumber 1 CPU(s)")
    assert udpprobe.pacing_mode("auto", cpus=4)[0]
    assert udpprobe.pacing_mode("spin", cpus=1)[0]
    assert not udpprobe.pacing_mode("sleep", cpus=4)[0]
    argv = udpprobe.send_argv("py", host="h", port=1, size=10, pps=100, duration_s=1)
    assert argv[argv.index("--pacing") + 1] == "auto"


def test_udp_sender_records_its_pacing() -> None:
    port = _free_udp_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.bind(("127.0.0.1", port))
        doc = udpprobe.send("127.0.0.1", port, 10, pps=2000, duration_s=0.05, pacing="sleep")
    assert doc["pacing"] == "sleep" and doc["attempted"] == 100
    assert doc["pacing_reason"] == "sleep: --pacing sleep"


class RecordingTestbed:
    """Records the probe argv; answers like the ping-pong client would."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def popen(self, node: str, argv: list[str], **kw: Any) -> Any:
        self.argvs.append(argv)

        class P:
            def stop(self) -> None:
                pass

            def alive(self) -> bool:
                return True

        return P()

    def run(self, node: str, argv: list[str], **kw: Any) -> Any:
        import json

        class Out:
            stdout = ""

        out = Out()
        if argv[:2] == ["ss", "-Hlun"]:
            out.stdout = "UNCONN"
        else:
            self.argvs.append(argv)
            out.stdout = json.dumps({"owd": {"n": 1, "median_us": 1.0}, "lost": 0,
                                     "busy_poll": "--busy-poll" in argv})
        return out


def test_pingpong_runner_records_the_mode_it_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pingpong_probe, "available_cpus", lambda: 1)
    tb = RecordingTestbed()
    p = kinds.validate_params("pingpong", {"size": 10}, "x.toml", "m")
    doc = pingpong_kind.exchange(tb, "h2", "h1", "10.0.0.2", p, kinds.Context(), 10)  # type: ignore[arg-type]
    assert all("--busy-poll" not in a for a in tb.argvs)
    assert doc["busy_poll"] is False and "outnumber 1 CPU" in doc["mode_reason"]
    monkeypatch.setattr(pingpong_probe, "available_cpus", lambda: 4)
    tb = RecordingTestbed()
    doc = pingpong_kind.exchange(tb, "h2", "h1", "10.0.0.2", p, kinds.Context(), 10)  # type: ignore[arg-type]
    assert all("--busy-poll" in a for a in tb.argvs) and doc["mode_reason"].startswith("busy")


def test_process_stop_grace_survives_a_leaping_guest_clock(virtual: Path) -> None:
    """A process that takes a moment to exit (closing files over 9p leaps the guest clock)
    is waited for on the host's clock, not declared stuck after 2 s of guest time."""
    import subprocess

    class LeapingPopen(subprocess.Popen[bytes]):
        def wait(self, timeout: float | None = None) -> int:
            time.monotonic()  # every wait leaps the guest clock by 30 s
            return super().wait(timeout)

    p = LeapingPopen(["sleep", "0.3"])
    assert waiting.wait_process(p, 2.0) == 0


def test_wait_process_times_out_on_the_host_clock(virtual: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    host = iter(float(i) for i in range(10_000))
    monkeypatch.setattr(waiting, "host_time", lambda env=None: next(host))
    p = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            waiting.wait_process(p, 2.0)
    finally:
        p.kill()
        p.wait()


def test_udp_sender_counts_a_stall_apart_from_its_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    real_sleep = time.sleep
    stalled = []

    def sleep_with_one_stall(seconds: float) -> None:  # the sender descheduled once, 30 ms
        if not stalled:
            stalled.append(True)
            real_sleep(0.03)
        real_sleep(seconds)

    monkeypatch.setattr(udpprobe.time, "sleep", sleep_with_one_stall)
    port = _free_udp_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.bind(("127.0.0.1", port))
        doc = udpprobe.send("127.0.0.1", port, 10, pps=2000, duration_s=0.2, pacing="sleep")
    assert doc["stalls"] >= 1 and doc["stalled_s"] >= 0.02  # 60 datagrams due at once
    assert doc["achieved_pps"] < doc["paced_pps"]  # sent less in all, not slower
    assert doc["achieved_pps"] < 0.95 * 2000


def test_udp_sender_with_a_deadline_offers_what_it_can_in_that_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A sender too slow for its rate (here: every datagram takes 1 ms) stops at its deadline
    and says how many it offered, instead of sending them all at its own pace."""
    real_send = socket.socket.send

    def slow_send(self: socket.socket, data: Any, *args: Any) -> int:
        time.sleep(0.001)
        return real_send(self, data, *args)

    monkeypatch.setattr(socket.socket, "send", slow_send)
    port = _free_udp_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.bind(("127.0.0.1", port))
        t0 = time.monotonic()
        doc = udpprobe.send("127.0.0.1", port, 10, pps=5000, duration_s=0.2, pacing="sleep",
                            deadline_s=0.21)
        took = time.monotonic() - t0
    assert doc["scheduled"] == 1000 and doc["cut_short"] is True
    assert 20 < doc["attempted"] < 1000 and doc["sent"] == doc["attempted"]
    assert took < 0.6  # all 1000 at ~1 ms each would take ~1 s
    assert doc["achieved_pps"] == pytest.approx((doc["attempted"] - 1) / doc["elapsed_s"])
    # on schedule, the deadline changes nothing
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.bind(("127.0.0.1", port))
        monkeypatch.setattr(socket.socket, "send", real_send)
        doc = udpprobe.send("127.0.0.1", port, 10, pps=500, duration_s=0.2, pacing="sleep",
                            deadline_s=0.21)
    assert doc["attempted"] == doc["scheduled"] == 100 and doc["cut_short"] is False
