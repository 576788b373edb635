"""Measurement kind `rfc2544`: RFC 2544/5180 zero-loss throughput search and frame loss rate."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from testbed import units, waiting
from testbed.api import TestbedLike
from testbed.measure import rfc2544_search as search
from testbed.measure import udpprobe
from testbed.measure.kinds import base
from testbed.measure.kinds.base import Kind, Metric, Param


def max_late_s(p: Mapping[str, Any]) -> float:
    """How late the last datagram may arrive: `max_late_ms`, else 2 ms per second + 3 ms."""
    late = p.get("max_late_ms")
    return float(late) / 1000.0 if late is not None else 0.002 * float(p["duration"]) + 0.003


PACE_SLACK = 1e-4
"""On the virtual clock, how far short of its schedule a sender may end without a counted stall
(0.01 %: clean trials end within 0.003 %, a sender held up for about a millisecond 0.02-0.05 %)."""


DEADLINE_SLACK = 0.05
"""A sender stops `duration` x (1 + this) after its start, sent or not: one on schedule ends
before that (its last datagram is due at `duration`), one too slow for the rate offers what it
can in about the trial's duration (RFC 2544 section 24: a trial lasts its duration) instead of
sending every datagram asked at its own pace (a 2-s step at 64 B and 1 Gbit/s lasted 16 s)."""

LATE_RETRY_FACTOR = 3.0
"""A trial that lost nothing but whose last datagram came more than this many times the
allowed lateness after the sender ended is not run again: a queue that deep built up over the
trial (the offered rate above what the device carries), and reruns found it again; a moment's
deschedule of the sender or receiver leaves a few milliseconds, near the limit."""


def hiccup(out: search.TrialOutcome, slack: float, medium: float | None = None) -> bool:
    """True when the sender stalled, or paced short of the offered rate by more than `slack`
    (but less than the 2 % that marks a generator too slow, which reruns cannot cure)."""
    if out.stalled_s > 0:
        return True
    target = out.target(medium)
    return target * (1.0 - search.GENERATOR_TOLERANCE) <= out.pace < target * (1.0 - slack)


def queued(out: search.TrialOutcome, late_s: float) -> bool:
    """True when the last datagram came so late (`LATE_RETRY_FACTOR`) that a queue built up."""
    return out.late_s is not None and out.late_s > LATE_RETRY_FACTOR * late_s


def with_retries(once: Callable[[float], search.TrialOutcome], rate: float, late_s: float,
                 retries: int = 2, stall_retries: int = 4,
                 pace_slack: float = 1.0, medium: float | None = None
                 ) -> search.TrialOutcome:
    """Run once; rerun (up to `retries` times) a trial that lost nothing but failed by
    lateness, or whose generator fell short: on a shared machine a descheduled sender or
    receiver can look like that for a moment; real overload (or a generator too slow) stays so.
    A trial late by more than `LATE_RETRY_FACTOR` times `late_s` failed for good.
    A trial whose sender stalled, or ended more than `pace_slack` behind its schedule (a
    hold-up too short to count as a stall), did not offer the stream asked (and a hold-up lets
    the queue drain, so its verdict can be wrong either way near the limit): it is run again,
    up to `stall_retries` times, until one keeps to its schedule; the last stands if none did.
    `medium`: the sender's own line rate (`TrialOutcome.target`), where `rate` may be above it."""
    out = once(rate)
    tries = stalls = 0
    while True:
        if stalls < stall_retries and hiccup(out, pace_slack, medium):
            stalls += 1
            out = once(rate)
            continue
        short = out.generator_short(search.GENERATOR_TOLERANCE, medium)
        if tries >= retries or (not short and (out.lost or search.passed(out, 0.0, late_s)
                                               or queued(out, late_s))):
            return out
        tries += 1
        again = once(rate)
        if short and again.achieved <= out.achieved:
            continue
        out = again


def udp_trial(
    tb: TestbedLike,
    p: Mapping[str, Any],
    ctx: base.Context,
    ip_v: int,
    n: int,
    data: int,
    retries: int = 2,
    medium: float | None = None,
) -> Callable[[float], search.TrialOutcome]:
    """A trial function for the search: offer `rate` bit/s of IP payload (n bytes a datagram);
    `medium`: the sender's line rate (see `with_retries`)."""
    duration = float(p["duration"])
    dst = tb.address(p["server"], ip_v)
    listen = base.listen_address(tb, p["server"], ip_v)
    late_s = max_late_s(p)

    # On the virtual clock a trial that keeps to its schedule repeats exactly, so one whose
    # sender stalled or fell behind is run again; on the real clock a preemptible sender stalls
    # now and then whatever is done, and reruns would only multiply the trials.
    virtual = waiting.is_virtual()
    stall_retries = 4 if virtual else 0
    pace_slack = PACE_SLACK if virtual else 1.0

    def trial(rate: float) -> search.TrialOutcome:
        return with_retries(once, rate, late_s, retries, stall_retries, pace_slack, medium)

    def once(rate: float) -> search.TrialOutcome:
        pps = rate / (8.0 * n)
        with base.serve(
            tb, ctx, p["server"],
            lambda port, out: udpprobe.recv_argv(
                ctx.python, host=listen, port=port, out=str(out), idle_s=float(p["drain_s"]),
                max_wait_s=duration + 10),
            proto="udp", what="udp receiver", name="udpprobe-recv", output=True,
        ) as rx:
            sent = base.run_client(
                tb, p["client"],
                udpprobe.send_argv(ctx.python, host=dst, port=rx.port, size=data, pps=pps,
                                   duration_s=duration,
                                   deadline_s=duration * (1.0 + DEADLINE_SLACK)),
                timeout_s=duration * 3 + 30, what="udp sender")
            udpprobe.senders_done(rx.proc)
            got = rx.result(duration + 30)
        # Both clocks are CLOCK_MONOTONIC of this machine. (Kernel receive stamps are not used:
        # across veth and namespaces they can carry the sender's time, hiding the queue.)
        late = (got["last_ns"] - sent["end_ns"]) / 1e9 if got["last_ns"] else None
        return search.TrialOutcome(
            offered=rate,
            achieved=sent["achieved_pps"] * 8.0 * n,
            sent=int(sent["attempted"]),
            received=int(got["received"]),
            late_s=late,
            duration_s=duration,
            paced=float(sent.get("paced_pps", sent["achieved_pps"])) * 8.0 * n,
            stalled_s=float(sent.get("stalled_s", 0.0)),
            extra={
                "sender": {
                    k: sent[k] for k in ("eagain", "elapsed_s", "achieved_pps", "max_lag_s",
                                         "stalls", "cut_short")
                    if k in sent
                },
                "receiver_rcvbuf_drops": got["rcvbuf_drops"],
            },
        )

    return trial


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    base.one_size(out, given)
    base.fits(out, [int(out["ip"])], "udp")
    if base.ip_payload_and_data(out, int(out["ip"]))[1] < 1:
        raise base.ParamProblem("frame_size", "leaves no byte of UDP data",
                           "a frame or payload that carries at least one byte of UDP data")


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    ip_v = int(p["ip"])
    n, data = base.ip_payload_and_data(p, ip_v)
    link = base.bottleneck_bps(tb)
    given_max = units.rate(p.get("max_rate"), zero=True)
    medium: float | None = None  # the line rate where the search starts above it
    # RFC 2544 section 26.3: the frame loss test starts at the maximum rate of the medium (the
    # model's line rate at the bottleneck link), not at the zero-loss throughput
    if given_max is not None:
        max_rate = line_rate = given_max
    elif link is not None:
        from testbed.models import max_throughput_bps

        line_rate = medium = max_throughput_bps(n, link, ip_v)
        max_rate = 1.02 * line_rate
    else:
        max_rate = line_rate = 1e9
    trial = udp_trial(tb, p, ctx, ip_v, n, data, medium=medium)
    metrics: dict[str, float] = {"ip_payload": n, "udp_data": data}
    result: dict[str, Any] = {
        "ip_payload": n,
        "udp_data": data,
        "max_rate_bps": max_rate,
        "rate_unit": "bit/s of IP payload (UDP header + data)",
        "line_rate_bps": line_rate,
    }
    with base.cpu_window(tb, p, KIND) as cpu:
        if p["test"] in ("throughput", "both"):
            res = search.throughput_search(trial, max_rate=max_rate,
                                           resolution=float(p["resolution"]) * max_rate,
                                           max_late_s=max_late_s(p), medium=medium)
            result["throughput"] = res.to_dict()
            if res.throughput is not None:
                metrics["throughput_bps"] = res.throughput
                metrics["throughput_udp_data_bps"] = res.throughput * data / n
                metrics["throughput_pps"] = res.throughput / (8.0 * n)
            if res.sent is not None:
                metrics["throughput_sent_bps"] = res.sent
            metrics["generator_limited"] = 1.0 if res.limited_by == "generator" else 0.0
            metrics["search_trials"] = float(len(res.trials))
        if p["test"] in ("frame_loss", "both"):
            pts = search.frame_loss_rate(trial, start_rate=line_rate)
            result["frame_loss"] = [pt.to_dict() for pt in pts]
            metrics["frame_loss_pct_at_start"] = pts[0].loss_percent
            metrics["frame_loss_pct_max"] = max(pt.loss_percent for pt in pts)
            metrics["frame_loss_steps"] = float(len(pts))
            metrics["frame_loss_start_generator_short"] = 1.0 if pts[0].generator_short else 0.0
    result["cpu"] = cpu or None
    metrics.update(base.cpu_metrics(cpu))
    return base.Measured(metrics, result)


KIND = Kind(
    name="rfc2544",
    doc="RFC 2544/5180 zero-loss throughput search and frame loss rate",
    tool="built-in paced UDP sender + receiver (`testbed.measure.udpprobe`)",
    params=(
        *base.ENDPOINTS,
        Param("frame_size", "size", None, "Ethernet frame bytes (header + FCS included)"),
        Param("ip_payload", "size", None, "IP payload bytes (UDP header + data)"),
        Param("size", "size", None, "UDP data bytes (default 18)"),
        Param("duration", "number", 2, "seconds of each trial", max=3600),
        Param("resolution", "number", 0.002, "search resolution, a fraction of max_rate", max=1),
        Param("max_rate", "rate", None, "top of the search; unset: 1.02 x the model's rate at the "
              "bottleneck link (1 Gbit/s unshaped)"),
        Param("test", "str", "throughput", "which RFC 2544 tests",
              choices=("throughput", "frame_loss", "both")),
        Param("drain_s", "number", 0.5, "receiver's idle time that ends a trial", max=60),
        Param("max_late_ms", "number", None, "how late the last datagram may arrive; unset: 2 ms "
              "per second of trial + 3 ms", max=60_000),
        *base.CPU,
    ),
    metrics=(
        Metric("ip_payload", "B", "IP payload of each datagram (UDP header + data)"),
        Metric("udp_data", "B", "UDP data of each datagram"),
        Metric("throughput_bps", "bit/s", "zero-loss throughput, IP payload bits"),
        Metric("throughput_udp_data_bps", "bit/s", "zero-loss throughput, UDP data bits"),
        Metric("throughput_pps", "pkt/s", "zero-loss throughput, datagrams"),
        Metric("throughput_sent_bps", "bit/s", "what the credited trial really sent (less when its "
               "sender stalled)"),
        Metric("generator_limited", "flag", "1: the sender, not the device, capped the search"),
        Metric("search_trials", "count", "trials the search ran"),
        Metric("frame_loss_pct_at_start", "%", "frame loss at the line rate (section 26.3)"),
        Metric("frame_loss_pct_max", "%", "largest frame loss of the steps"),
        Metric("frame_loss_steps", "count", "frame loss steps run"),
        Metric("frame_loss_start_generator_short", "flag", "1: the sender could not offer the line "
               "rate"),
        *base.CPU_METRICS,
    ),
    runner=run,
    check=check,
    measures="throughput",
    host_reason=base.THROUGHPUT_ON_HOST,
)
