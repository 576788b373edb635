"""A virtual-clock trial whose paced sender fell behind its schedule, measured again: the bounded
rerun rule and which attempt is kept.

On the virtual clock a guest's time is instructions, yet the instant a trial's programs start
is still the host's: a sender that starts while the guest has other work left (a program
starting beside it, a daemon's timer) ends behind its schedule and meets a router with that
work beside it. Measured: ICMPv6 100 B echoes 12.90 µs each with the sender 8-14 % late, 13.18
on time; the CPU-budgeted router's IPv6 70 % load 9.650 / 9.702 µs per frame with the sender
0.17 / 0.73 % short. A sender on time repeats its schedule to 0.001-0.006 %; one more than
0.1 % behind (`LATE`) was held up. Some trials are late by nature (a sender beside a router at
its CPU budget, 2.4 % short in every attempt): two attempts that agree on the lateness to
`LATE` end the rerun — though the same hold-up can also repeat after the same history in a
guest (two attempts 0.315 % short where another run's one attempt was on time).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

LATE = 0.001
"""A sender more than this share behind its schedule was held up: clean virtual-clock senders
end within 0.001 % of it (icmpload, 16 trials) or 0.006 % (the `load` kind's UDP senders, the
budgeted router's quick profile)."""

ATTEMPTS = 3
"""At most this many attempts per trial."""

Attempt = tuple[dict[str, float], dict[str, Any]]


def least_late(run: Callable[[], Attempt], behind: Callable[[Attempt], float],
               late: float = LATE, attempts: int = ATTEMPTS) -> Attempt:
    """`run()` (metrics, document) until an attempt is within `late` of its schedule, two
    attempts agree on their lateness to within `late` (it is the trial's own), or `attempts`
    ran; the attempt least behind is kept. Its document gains `behind_schedule` and
    `earlier_attempts` (each other attempt's lateness and metrics)."""
    tried: list[tuple[float, Attempt]] = []
    while True:
        got = run()
        b = behind(got)
        agrees = any(abs(b - other) <= late for other, _ in tried)
        tried.append((b, got))
        if b <= late or agrees or len(tried) >= attempts:
            break
    best = min(range(len(tried)), key=lambda i: tried[i][0])
    m, doc = tried[best][1]
    doc["behind_schedule"] = tried[best][0]
    doc["earlier_attempts"] = [{"behind_schedule": b, "metrics": got[0]}
                               for i, (b, got) in enumerate(tried) if i != best]
    return m, doc


def short_of(offered: float, achieved: float) -> float:
    """The share by which a sender's achieved rate fell short of the offered one (0 when it
    kept up)."""
    return max(0.0, 1.0 - achieved / offered) if offered > 0 else 0.0


def flows_short(flows: Any) -> float:
    """The largest shortfall among the flows of a stream document (`offered_pps`,
    `sender_pps` per flow). The UDP sender (`udpprobe`) never bursts more than `max_burst`
    to catch up — a held-up one delays its schedule, and the time lost shows as a shortfall."""
    out = 0.0
    for f in flows if isinstance(flows, list) else []:
        if isinstance(f, Mapping):
            out = max(out, short_of(float(f.get("offered_pps") or 0.0),
                                    float(f.get("sender_pps") or 0.0)))
    return out
