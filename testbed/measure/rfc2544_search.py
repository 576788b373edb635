"""RFC 2544 / RFC 5180 throughput search and frame loss rate, pure over a `trial(rate)` callable."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

LimitedBy = Literal["device", "generator", "max_rate", "nothing_passed"]

GENERATOR_TOLERANCE = 0.02
"""How far below the offered rate a generator may send before it counts as too slow."""

MODEL_NEAR = 0.03
"""How close to the line rate the first trial's delivered rate must be for the search to try
the line rate's grid points first (`_Search.at_line`)."""


@dataclass(frozen=True)
class TrialOutcome:
    """What one trial at an offered rate did; rates are in the caller's unit (e.g. bit/s)."""

    offered: float  # the rate asked of the generator
    achieved: float  # the rate the generator really sent at (sender side)
    sent: int  # frames (or datagrams) the generator sent
    received: int  # frames (or datagrams) that reached the receiver
    late_s: float | None = None  # last arrival minus end of sending: a queue left behind
    duration_s: float | None = None  # how long the generator sent
    extra: dict[str, Any] = field(default_factory=dict)
    paced: float | None = None  # the rate it sent at apart from its stalls (None: `achieved`)
    stalled_s: float = 0.0  # how long the generator was stopped (descheduled) mid-trial

    @property
    def lost(self) -> int:
        return max(0, self.sent - self.received)

    @property
    def loss_fraction(self) -> float:
        return self.lost / self.sent if self.sent else 0.0

    def target(self, medium: float | None = None) -> float:
        """The rate the generator could have sent: the offered rate, or the medium's (its own
        link's line rate, `medium`) where that is less — a rate above the line rate is offered
        to see the device carry the line rate, and the link holds the sender to it."""
        return self.offered if medium is None else min(self.offered, medium)

    def generator_short(self, tolerance: float, medium: float | None = None) -> bool:
        """True when the generator sent noticeably slower (by more than `tolerance`) than asked,
        or than its link allows where that is less (`target`)."""
        return self.achieved < self.target(medium) * (1.0 - tolerance)

    @property
    def pace(self) -> float:
        """The rate it sent at apart from its stalls (`achieved` where that is not known)."""
        return self.achieved if self.paced is None else self.paced

    def credited(self, tolerance: float = 0.001, max_stalled: float = 0.01,
                 medium: float | None = None) -> float:
        """The rate this trial shows the device carrying (if it passed): the offered rate (or
        the medium's, where less: `target`) when the generator sent at it within `tolerance`
        apart from stalls adding up to at most `max_stalled` of the trial, else what it really
        sent.

        RFC 2544 reports offered rates. A generator stopped for a moment (descheduled; on the
        virtual clock, its guest busy elsewhere) sends less in all, but what it sent came at the
        offered rate, and a device that kept up with that kept up with the rate asked.
        """
        pace, target = self.pace, self.target(medium)
        stalls_ok = self.duration_s is None or self.stalled_s <= max_stalled * self.duration_s
        if stalls_ok and pace >= target * (1.0 - tolerance):
            return target
        return self.achieved

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["lost"] = self.lost
        d["loss_fraction"] = self.loss_fraction
        return d


Trial = Callable[[float], TrialOutcome]


@dataclass(frozen=True)
class ThroughputResult:
    """Outcome of the zero-loss throughput search.

    `throughput` is the highest rate a passing trial showed the device carrying
    (`TrialOutcome.credited`: its offered rate when the generator kept to it, else what it
    really sent); `sent` is what that trial really sent. When `limited_by` is "generator"
    the traffic generator could not offer more than `generator_max`: the device's own limit was
    not reached and is only known to be at least `throughput`.
    """

    throughput: float | None
    limited_by: LimitedBy
    resolution: float
    max_rate: float
    generator_max: float | None
    trials: tuple[TrialOutcome, ...]
    note: str
    sent: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["trials"] = [t.to_dict() for t in self.trials]
        return d


def passed(outcome: TrialOutcome, loss_tolerance: float = 0.0, max_late_s: float | None = None
           ) -> bool:
    """Nothing (beyond `loss_tolerance`) lost, and no queue left behind longer than `max_late_s`.

    A deep queue (e.g. a tbf limit) hides overload in a short trial: every frame arrives, late.
    The late check catches that, so the search finds the rate the device sustains.
    """
    if outcome.sent <= 0 or outcome.loss_fraction > loss_tolerance:
        return False
    return max_late_s is None or outcome.late_s is None or outcome.late_s <= max_late_s


def throughput_search(
    trial: Trial,
    *,
    max_rate: float,
    resolution: float,
    min_rate: float = 0.0,
    loss_tolerance: float = 0.0,
    generator_tolerance: float = GENERATOR_TOLERANCE,
    max_trials: int = 40,
    guess_from_loss: bool = True,
    max_late_s: float | None = None,
    credit_tolerance: float = 0.001,
    medium: float | None = None,
) -> ThroughputResult:
    """Binary search for the highest rate in [min_rate, max_rate] at which nothing is lost.

    Tries only multiples of `resolution` (same unit as the rates) below max_rate and stops when
    no such grid point is left inside the bracket: the answer is the highest grid point that
    passed, whichever path the search took (`_Search.next_rate`). A trial whose
    generator sent slower than asked (beyond `generator_tolerance`) and lost nothing proves only
    the rate really sent: it raises the lower bound to that and leaves the upper one open. If it
    gets no higher than the lower bound, the rate is asked once more, faster by the shortfall;
    only when that too gets no higher does it cap the search, and the result then says
    `limited_by="generator"`, never that the device was the limit. The bracket is kept in offered
    rates; the throughput reported is the highest rate a passing trial is credited with
    (`TrialOutcome.credited` with `credit_tolerance`): its offered rate when the generator sent
    at it apart from momentary stalls, else what it really sent.
    With `guess_from_loss`, the first failing trial's delivered fraction picks the next rate to try
    (just under the rate that got through), which is still a valid bracket step, only faster.
    `max_late_s`: see `passed`. `medium`: the line rate of the generator's own link, where
    `max_rate` lies above it (RFC 2544 sec. 26.3 starts at the medium's maximum rate; we offer
    a little more): a trial is short of, and credited with, the lesser of the rate offered and
    the medium's (`TrialOutcome.target`). Without it, a sender held to a gigabit line rate at an
    offered 1.02 x that rate sat 0.06 % above the 2 % tolerance, and a 10-ms stall flipped the
    cell between "max_rate" (credited 1.02 x the line rate) and "generator" (what was sent).
    """

    if max_rate <= 0 or resolution <= 0:
        raise ValueError("max_rate and resolution must be positive")
    # The bracket is kept in offered rates (a sender a few tenths of a % behind its schedule
    # must not keep it from closing); the result is the most a passing trial really sent.
    s = _Search(trial, max_rate, resolution, min_rate, loss_tolerance, generator_tolerance,
                max_trials, max_late_s, credit_tolerance, medium, lo=min_rate, hi=max_rate)
    first = s.run(max_rate)
    if s.passed(first) and not s.short(first):
        top = first.target(medium)
        return ThroughputResult(
            top, "max_rate", resolution, max_rate, None, tuple(s.trials),
            "no loss at the highest rate tried: the device is at least this fast" + (
                "" if top == max_rate else
                f" (credited {top:g}, the medium's rate: the link holds the sender to it)"),
            first.achieved,
        )
    s.after_first(first, guess_from_loss)
    s.bisect()
    return s.result()


@dataclass
class _Search:
    """One throughput search's state (`throughput_search`): the bracket [lo, hi] in offered
    rates and what the trials so far said of the generator and the device."""

    trial: Trial
    max_rate: float
    resolution: float
    min_rate: float
    loss_tolerance: float
    generator_tolerance: float
    max_trials: int
    max_late_s: float | None
    credit_tolerance: float
    medium: float | None
    lo: float  # highest rate known to pass (min_rate assumed, not tested, unless tried)
    hi: float  # lowest rate known to fail or not reachable; max_rate itself untested
    lo_tested: bool = False
    hi_short: bool = False  # whether `hi` was last set by a trial whose generator fell short
    generator_max: float | None = None
    generator_capped: bool = False
    device_failed: bool = False
    trials: list[TrialOutcome] = field(default_factory=list)

    def passed(self, o: TrialOutcome) -> bool:
        return passed(o, self.loss_tolerance, self.max_late_s)

    def short(self, o: TrialOutcome) -> bool:
        return o.generator_short(self.generator_tolerance, self.medium)

    def credited(self, o: TrialOutcome) -> float:
        return o.credited(self.credit_tolerance, medium=self.medium)

    def at_medium(self) -> bool:
        """A passing trial was credited the line rate (`medium`): no rate above can be credited
        more, so the search is over. (A shaper's bucket lets a 2-s trial at 10-byte payloads
        pass up to ~0.4 % above the line rate; bisecting up there took 3 more trials to find a
        rate that is credited the line rate anyway.)"""
        return self.medium is not None and any(
            self.passed(t) and not self.short(t) and self.credited(t) >= self.medium
            for t in self.trials)

    def run(self, rate: float) -> TrialOutcome:
        out = self.trial(rate)
        self.trials.append(out)
        return out

    def after_first(self, first: TrialOutcome, guess_from_loss: bool) -> None:
        """The bracket after the first trial (at max_rate), which did not simply pass."""
        if self.passed(first):  # but the generator fell short of max_rate
            self.generator_capped = True
            self.generator_max = first.achieved
            self.lo, self.lo_tested = first.achieved, True
            # nothing to search: the generator cannot go higher
            self.hi, self.hi_short = first.achieved, True
            return
        self.device_failed = not self.short(first)
        if self.short(first):
            self.generator_max = first.achieved
        self.hi, self.hi_short = self.max_rate, self.short(first)
        if guess_from_loss and first.sent and not self.at_line(first):
            self.guess(first)

    @staticmethod
    def delivered(first: TrialOutcome) -> float:
        """The fraction of the first trial's stream the device sustained."""
        delivered = first.received / first.sent
        if first.late_s and first.duration_s and delivered >= 1.0:
            # everything arrived, late: the sustained rate is about sent / (time + lateness);
            # the queue drained while the sender stalled, so the lateness hides the stalls
            late = first.late_s + first.stalled_s
            delivered = first.duration_s / (first.duration_s + late)
        return delivered

    def at_line(self, first: TrialOutcome) -> bool:
        """Bracket the search by the model where the first trial says the device carried about
        the line rate (`medium`; within `MODEL_NEAR`): try the highest grid point at or below
        it, then the one above. A device at the line rate closes the bracket in these two
        trials (the loss guess, 0.5 % under what got through, left 3-4 grid steps to bisect at
        a resolution of 0.2 %); the answer is the same, the highest grid point that passes
        (`next_rate`). False where the model does not apply (nothing run) or the line rate's
        grid point failed (the loss guess then goes on below it)."""
        if self.medium is None or self.short(first) or not first.sent:
            return False
        carried = first.credited(self.credit_tolerance) * self.delivered(first)
        if carried < (1.0 - MODEL_NEAR) * self.medium:
            return False
        res = self.resolution
        for k in (0, 1):
            rate = (math.floor(self.medium / res + 1e-6) + k) * res
            if not (self.lo < rate < self.hi) or rate <= self.min_rate:
                break
            out = self.run(rate)
            if self.passed(out) and not self.short(out):
                self.lo, self.lo_tested = rate, True
                if self.at_medium():
                    break
                continue
            if self.passed(out):  # the generator fell short: leave it to the bisection
                break
            self.hi, self.hi_short = rate, self.short(out)
            self.device_failed = self.device_failed or not self.hi_short
            break
        return self.lo_tested  # the line rate's grid point failed: the loss guess goes on

    def guess(self, first: TrialOutcome) -> None:
        """Try just under the rate that got through the first (failing) trial."""
        delivered = self.delivered(first)
        # on the resolution's grid, so a lateness a few µs different picks the same rate
        # of what the sender offered (not capped at the medium: what got through is a share
        # of what was sent)
        guess = first.credited(self.credit_tolerance) * delivered * 0.995
        guess = math.floor(guess / self.resolution) * self.resolution
        if not self.min_rate < guess < self.hi - self.resolution:
            return
        out = self.run(guess)
        if self.passed(out) and not self.short(out):
            self.lo, self.lo_tested = guess, True
        elif self.passed(out):
            # what was really sent passed; nothing is known of `guess` itself
            self.generator_max = max(self.generator_max or 0.0, out.achieved)
            self.lo, self.lo_tested = max(self.lo, out.achieved), True
        else:
            self.hi_short = self.short(out)
            self.device_failed = self.device_failed or not self.hi_short
            self.hi = guess

    def next_rate(self) -> float | None:
        """The middle one of the grid points (multiples of the resolution) strictly inside the
        bracket, or None when there is none: the search has closed.

        Trying only grid points makes the answer the highest grid point that passes, whatever
        path led there. Halving the bracket itself made it depend on the path: the first
        guess (from how much got through at line rate) picks a different bracket when the
        device's count moves by 0.15 %, and the midpoints, hence the answer, followed — the
        CPU-budgeted router's zero-loss maximum moved a grid step (5 %) between two runs.
        Where a generator fell short, an end of the bracket is what it really sent, off the
        grid: then the bracket is halved as it stands, as before.
        """
        res = self.resolution

        def on_grid(x: float, end: float) -> bool:
            return x == end or abs(x / res - round(x / res)) < 1e-6

        if not (on_grid(self.lo, self.min_rate) and on_grid(self.hi, self.max_rate)):
            # an end set by what a short generator really sent: halve as it stands (asking the
            # same grid point again would not move it)
            return (self.lo + self.hi) / 2.0 if self.hi - self.lo > res else None
        first = math.floor(self.lo / res + 1e-6) + 1  # the first grid index above lo
        last = math.ceil(self.hi / res - 1e-6) - 1  # the last below hi
        if first > last:
            return None
        return ((first + last) // 2) * res

    def bisect(self) -> None:
        """Halve the bracket on the resolution's grid until no grid point is left inside it
        (or the trials run out)."""
        boost = 1.0  # > 1 while re-asking a rate the generator fell short of (see below)
        while len(self.trials) < self.max_trials and not self.at_medium():
            nxt = self.next_rate()
            if nxt is None:
                break
            mid = nxt
            out = self.run(mid * boost)
            # short of `mid` (or of the medium's rate, where less)
            short = out.achieved < (mid if self.medium is None else min(mid, self.medium)) * (
                1.0 - self.generator_tolerance)
            if self.passed(out):
                if not short:
                    # what was really sent (within the generator tolerance of `mid`) passed
                    self.lo, self.lo_tested, boost = max(self.lo, mid), True, 1.0
                    continue
                self.generator_max = max(self.generator_max or 0.0, out.achieved)
                if out.achieved > self.lo + self.resolution / 2.0:
                    # the device carried what was really sent; `mid` itself is still open
                    # (on a busy machine the generator falls short now and then, not always)
                    self.lo, self.lo_tested, boost = out.achieved, True, 1.0
                elif boost == 1.0 and out.achieved > 0:
                    # no progress: ask once more, that much faster, to really send `mid`
                    # (near a shaper's rate a paced sender can fall a few % short of its
                    # schedule)
                    boost = min(1.1, mid / out.achieved)
                else:
                    # still no progress: the generator cannot get above `lo` here
                    self.generator_capped = True
                    self.lo, self.lo_tested = max(self.lo, out.achieved), True
                    self.hi, self.hi_short, boost = mid, True, 1.0
            else:
                if not short:
                    self.device_failed = True
                elif self.generator_max is None or out.achieved > self.generator_max:
                    self.generator_max = out.achieved
                # loss at what was really sent, or at `mid` when that was less
                self.hi, self.hi_short = min(self.hi, max(mid, out.achieved)), short
                boost = 1.0

    def result(self) -> ThroughputResult:
        trials, resolution, max_rate = tuple(self.trials), self.resolution, self.max_rate
        gmax = self.generator_max
        if not self.lo_tested:
            return ThroughputResult(
                None, "nothing_passed", resolution, max_rate, gmax, trials,
                f"every trial lost frames, down to {self.hi:g}",
            )
        best, sent = max((self.credited(t), t.achieved)
                         for t in trials if self.passed(t))
        generator_limited = self.generator_capped and self.hi_short  # a short trial set `hi`
        if generator_limited and not self.device_failed:
            return ThroughputResult(
                best, "generator", resolution, max_rate, gmax, trials,
                f"the traffic generator could not offer more than {gmax:g}; "
                "the device lost nothing up to there, so its own limit was not found", sent,
            )
        if generator_limited:
            return ThroughputResult(
                best, "generator", resolution, max_rate, gmax, trials,
                f"the generator fell short of the offered rate near {gmax:g} and some "
                "trials lost frames: the limit found may be the generator's, not the "
                "device's", sent,
            )
        if self.at_medium():
            return ThroughputResult(
                best, "device", resolution, max_rate, gmax, trials,
                f"zero loss at the line rate {best:g} (a trial at or above it passed; nothing "
                f"above it can be credited), loss at {self.hi:g}", sent,
            )
        if self.next_rate() is not None:  # the trials ran out before the bracket closed
            return ThroughputResult(
                best, "device", resolution, max_rate, gmax, trials,
                f"zero loss at {best:g}, loss at {self.hi:g}: {len(trials)} trials (the most "
                f"allowed) left the limit between them, wider than the resolution "
                f"{resolution:g}", sent,
            )
        return ThroughputResult(
            best, "device", resolution, max_rate, gmax, trials,
            f"zero loss at {best:g}, loss above it (to within {resolution:g})", sent,
        )


@dataclass(frozen=True)
class FrameLossPoint:
    """One step of the frame loss rate test."""

    offered: float
    loss_percent: float
    generator_short: bool
    outcome: TrialOutcome

    def to_dict(self) -> dict[str, Any]:
        return {
            "offered": self.offered,
            "loss_percent": self.loss_percent,
            "generator_short": self.generator_short,
            "outcome": self.outcome.to_dict(),
        }


def frame_loss_rate(
    trial: Trial,
    *,
    start_rate: float,
    step_fraction: float = 0.10,
    clean_in_a_row: int = 2,
    generator_tolerance: float = GENERATOR_TOLERANCE,
    min_fraction: float = 0.05,
) -> list[FrameLossPoint]:
    """RFC 2544 section 26.3: loss at the start rate, then in steps of 10% of it, downward,
    until `clean_in_a_row` consecutive trials lose nothing (or the rate falls below
    `min_fraction` of the start)."""
    if start_rate <= 0 or not 0 < step_fraction < 1:
        raise ValueError("start_rate must be positive and step_fraction in (0, 1)")
    points: list[FrameLossPoint] = []
    clean = 0
    k = 0
    while True:
        rate = start_rate * (1.0 - k * step_fraction)
        if rate < start_rate * min_fraction - 1e-12:
            break
        out = trial(rate)
        pct = 100.0 * out.loss_fraction
        points.append(FrameLossPoint(rate, pct, out.generator_short(generator_tolerance), out))
        clean = clean + 1 if out.lost == 0 and out.sent > 0 else 0
        if clean >= clean_in_a_row:
            break
        k += 1
    return points
