"""RFC 2544 search and frame loss rate on simulated devices and generators."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from testbed.measure.rfc2544_search import (
    GENERATOR_TOLERANCE,
    TrialOutcome,
    frame_loss_rate,
    passed,
    throughput_search,
)


def device(capacity: float, generator_max: float = float("inf"), seconds: float = 2.0,
           queue: float = 0.0, sender: Callable[[float, int], float] | None = None):
    """A device forwarding up to `capacity` (units/s) behind a generator capped at
    `generator_max`; `queue` units of buffer hide overload as lateness instead of loss.
    `sender(rate, i)`: the fraction of `rate` the generator really sends on trial `i` (0-based)."""
    calls: list[float] = []

    def trial(rate: float) -> TrialOutcome:
        fraction = sender(rate, len(calls)) if sender else 1.0
        calls.append(rate)
        achieved = min(rate * fraction, generator_max)
        sent = round(achieved * seconds)
        excess = max(0.0, achieved - capacity) * seconds
        lost = round(max(0.0, excess - queue))
        late = min(excess, queue) / capacity
        return TrialOutcome(rate, achieved, sent, sent - lost, late_s=late, duration_s=seconds)

    trial.calls = calls  # type: ignore[attr-defined]
    return trial


@pytest.mark.parametrize("capacity", [1.0e6, 3.3e6, 9.62e6, 9.99e6])
def test_search_finds_device_capacity_within_resolution(capacity: float) -> None:
    res = throughput_search(device(capacity), max_rate=10e6, resolution=10e3)
    assert res.limited_by == "device"
    assert res.throughput is not None
    assert capacity - 10e3 <= res.throughput <= capacity


def test_search_without_loss_guess_is_plain_binary_search() -> None:
    trial = device(4e6)
    res = throughput_search(trial, max_rate=10e6, resolution=1e3, guess_from_loss=False)
    assert res.throughput is not None and 4e6 - 1e3 <= res.throughput <= 4e6
    # log2(10e6 / 1e3) ~ 13.3 halvings + the first trial at max_rate
    assert len(res.trials) <= 16


def test_loss_guess_converges_in_fewer_trials() -> None:
    plain = throughput_search(device(4e6), max_rate=10e6, resolution=1e3, guess_from_loss=False)
    guessed = throughput_search(device(4e6), max_rate=10e6, resolution=1e3)
    assert guessed.throughput is not None and 4e6 - 1e3 <= guessed.throughput <= 4e6
    assert len(guessed.trials) <= len(plain.trials)


@pytest.mark.parametrize("capacity", [11962.0, 11972.0, 12250.0, 12268.0])
def test_the_answer_is_the_highest_grid_point_that_passes_whatever_the_path(
        capacity: float) -> None:
    """A 0.1 % different device count moves the first guess across a grid line (11,160 vs
    11,905 frames/s here); the answer must not follow it: halving the bracket itself gave
    11,625 for one capacity and 11,905 for the other."""
    line = 14880.952380952382
    res = throughput_search(device(capacity, seconds=1.0), max_rate=line,
                            resolution=0.05 * line)
    assert res.limited_by == "device"
    assert res.throughput == pytest.approx(16 * 0.05 * line)  # the highest grid point below
    # every rate tried after the first lies on the grid
    for t in res.trials:
        k = t.offered / (0.05 * line)
        assert k == pytest.approx(round(k))


def test_a_search_cut_short_says_how_wide_the_bracket_is() -> None:
    """Three trials cannot close a 5 % grid from line rate: the note must not claim the
    resolution, but name the rate that lost and say the trials ran out."""
    short = throughput_search(device(0.81e6), max_rate=1e6, resolution=0.05e6, max_trials=3)
    assert short.throughput is not None and short.throughput <= 0.81e6
    assert "loss at" in short.note and "the most allowed" in short.note
    assert "to within" not in short.note
    closed = throughput_search(device(0.81e6), max_rate=1e6, resolution=0.05e6)
    assert "to within" in closed.note and "the most allowed" not in closed.note


def test_no_loss_at_max_rate_says_max_rate() -> None:
    res = throughput_search(device(20e6), max_rate=10e6, resolution=1e3)
    assert res.limited_by == "max_rate"
    assert res.throughput == 10e6
    assert len(res.trials) == 1


def test_slow_generator_is_never_reported_as_device_limit() -> None:
    res = throughput_search(device(50e6, generator_max=7e6), max_rate=100e6, resolution=10e3)
    assert res.limited_by == "generator"
    assert res.generator_max == pytest.approx(7e6)
    assert res.throughput is not None and res.throughput <= 7e6
    assert "generator" in res.note


def test_slow_generator_and_slower_device_is_device_limit() -> None:
    res = throughput_search(device(5e6, generator_max=7e6), max_rate=100e6, resolution=10e3)
    assert res.throughput is not None and 5e6 - 10e3 <= res.throughput <= 5e6
    # the limit found lies below what the generator can offer
    assert res.throughput < 7e6


def flaky(capacity: float, short_calls: set[int], shortfall: float = 0.975):
    """A device of `capacity` behind a generator that falls `shortfall` short on the trials
    numbered in `short_calls` (0-based) and is exact otherwise, as on a busy machine."""
    return device(capacity, sender=lambda _rate, i: shortfall if i in short_calls else 1.0)


@pytest.mark.parametrize("short_calls", [{1}, {2}, {1, 2}, {2, 3, 4}])
def test_generator_falling_short_now_and_then_does_not_end_the_search(
        short_calls: set[int]) -> None:
    # the case seen at 100 Mbit/s: a short (but clean) trial must not close the bracket there
    res = throughput_search(flaky(94.5e6, short_calls), max_rate=99.2e6, resolution=0.2e6)
    assert res.throughput is not None
    assert 94.5e6 - 0.2e6 <= res.throughput <= 94.5e6
    assert res.limited_by == "device"


def test_generator_dipping_near_the_link_rate_is_asked_faster() -> None:
    # a paced sender near a shaper's rate: 2.5 % short of any rate within 3 % of the capacity
    trial = device(
        94.5e6, sender=lambda rate, _i: 0.975 if 0.97 * 94.5e6 <= rate <= 1.03 * 94.5e6 else 1.0
    )
    res = throughput_search(trial, max_rate=99.2e6, resolution=0.2e6, guess_from_loss=False)
    assert res.throughput is not None and 94.5e6 - 0.4e6 <= res.throughput <= 94.5e6
    assert res.limited_by == "device"
    assert any(t.offered > t.achieved * 1.02 for t in res.trials)  # it did ask faster


def test_sender_slightly_behind_schedule_still_closes_the_bracket() -> None:
    # 0.4 % behind (within the generator tolerance) with a finer resolution: the bracket is kept
    # in offered rates, so it closes; the result is what was really sent
    trial = flaky(94.5e6, set(range(100)), shortfall=0.996)
    res = throughput_search(trial, max_rate=99.2e6, resolution=0.002 * 99.2e6)
    assert len(res.trials) < 15
    assert res.limited_by == "device"
    assert res.throughput is not None and 94.5e6 - 0.4e6 <= res.throughput <= 94.5e6
    assert res.throughput == max(t.achieved for t in res.trials if t.lost == 0)


def test_generator_short_every_time_still_caps_the_search() -> None:
    trial = flaky(200e6, set(range(100)), shortfall=0.9)
    res = throughput_search(trial, max_rate=100e6, resolution=0.1e6, guess_from_loss=False)
    assert res.limited_by == "generator"
    assert res.throughput is not None and res.throughput <= 100e6 * 0.9
    assert len(trial.calls) < 40  # type: ignore[attr-defined]


def test_deep_queue_hides_loss_but_lateness_catches_it() -> None:
    queue = 5e4  # units of buffer: a 0.5% overload for 2 s fits without loss
    naive = throughput_search(device(9e6, queue=queue), max_rate=10e6, resolution=1e3)
    assert naive.throughput is not None and naive.throughput > 9e6 * 1.001
    strict = throughput_search(
        device(9e6, queue=queue), max_rate=10e6, resolution=1e3, max_late_s=0.002
    )
    assert strict.throughput is not None and strict.throughput <= 9e6 * 1.0021


def test_nothing_passes() -> None:
    def dead(rate: float) -> TrialOutcome:
        return TrialOutcome(rate, rate, 100, 0)

    res = throughput_search(dead, max_rate=1e6, resolution=1e3)
    assert res.throughput is None
    assert res.limited_by == "nothing_passed"


def test_search_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        throughput_search(device(1.0), max_rate=0, resolution=1)


def test_passed_needs_something_sent() -> None:
    assert not passed(TrialOutcome(1.0, 1.0, 0, 0))
    assert passed(TrialOutcome(1.0, 1.0, 10, 10))
    assert not passed(TrialOutcome(1.0, 1.0, 10, 9))
    assert passed(TrialOutcome(1.0, 1.0, 10, 9), loss_tolerance=0.1)
    assert not passed(TrialOutcome(1.0, 1.0, 10, 10, late_s=0.5), max_late_s=0.1)


def test_frame_loss_steps_down_until_two_clean_trials() -> None:
    trial = device(7.5e6)
    points = frame_loss_rate(trial, start_rate=10e6)
    rates = [p.offered for p in points]
    assert rates == pytest.approx([10e6, 9e6, 8e6, 7e6, 6e6])
    assert points[0].loss_percent == pytest.approx(25.0)
    assert points[-1].loss_percent == 0 and points[-2].loss_percent == 0
    assert points[2].loss_percent > 0


def test_frame_loss_starting_clean_stops_after_two() -> None:
    points = frame_loss_rate(device(100e6), start_rate=10e6)
    assert len(points) == 2


def test_frame_loss_marks_generator_shortfall() -> None:
    points = frame_loss_rate(device(100e6, generator_max=9.5e6), start_rate=10e6)
    assert points[0].generator_short
    assert not points[1].generator_short


def stalling(capacity: float, stall_calls: set[int], stall_s: float = 0.005, seconds: float = 2.0):
    """A device of `capacity` behind a generator that is exact but stopped once for `stall_s` on
    the trials numbered in `stall_calls`: it sends less in all, at the rate asked."""
    calls: list[float] = []

    def trial(rate: float) -> TrialOutcome:
        stall = stall_s if len(calls) in stall_calls else 0.0
        calls.append(rate)
        achieved = rate * seconds / (seconds + stall)
        sent = round(rate * seconds)
        lost = 0 if rate <= capacity else sent
        return TrialOutcome(rate, achieved, sent, sent - lost, late_s=0.0, duration_s=seconds,
                            paced=rate, stalled_s=stall)

    return trial


def test_a_stalled_generator_is_credited_with_the_rate_asked() -> None:
    # the same search with and without a 5 ms stall in any one trial: the same result, exactly
    results = {throughput_search(stalling(6.33e6, calls), max_rate=6.46e6, resolution=0.013e6
                                 ).throughput for calls in (set(), {1}, {2}, {3}, {4}, {5})}
    assert len(results) == 1
    (tp,) = results
    assert tp is not None and 6.33e6 - 0.013e6 <= tp <= 6.33e6


def test_credit_needs_the_rate_asked_apart_from_short_stalls() -> None:
    def out(paced: float | None, stalled: float) -> TrialOutcome:
        return TrialOutcome(100.0, 99.0, 200, 200, duration_s=2.0, paced=paced, stalled_s=stalled)

    assert out(100.0, 0.005).credited() == 100.0
    assert out(99.95, 0.005).credited() == 100.0  # within 0.1 %
    assert out(99.5, 0.0).credited() == 99.0  # a slow sender: what it really sent
    assert out(None, 0.0).credited() == 99.0  # nothing known of stalls: what it really sent
    assert out(100.0, 0.05).credited() == 99.0  # stopped 2.5 % of the trial: proves less
    res = throughput_search(lambda r: TrialOutcome(r, r * 0.999, 10, 10, paced=r * 0.999),
                            max_rate=100.0, resolution=1.0)
    assert res.throughput == 100.0 and res.sent == pytest.approx(99.9)


def test_a_trial_with_a_stalled_sender_is_run_again_until_one_does_not_stall() -> None:
    from testbed.measure.kinds.rfc2544 import with_retries

    def scripted(*outs: TrialOutcome) -> Callable[[float], TrialOutcome]:
        it = iter(outs)
        return lambda _rate: next(it)

    stalled_pass = TrialOutcome(100.0, 99.7, 200, 200, late_s=0.004, duration_s=2.0,
                                paced=100.0, stalled_s=0.003)
    stalled_late = TrialOutcome(100.0, 99.7, 200, 200, late_s=0.009, duration_s=2.0,
                                paced=100.0, stalled_s=0.003)
    clean_fail = TrialOutcome(100.0, 100.0, 200, 200, late_s=0.008, duration_s=2.0, paced=100.0)
    clean_pass = TrialOutcome(100.0, 100.0, 200, 200, late_s=0.006, duration_s=2.0, paced=100.0)
    lossy = TrialOutcome(100.0, 100.0, 200, 150, late_s=0.0, duration_s=2.0, paced=100.0)
    # the stall drained the queue: without it the trial fails by lateness (rerun twice, as
    # any late failure), and that stands
    assert with_retries(scripted(stalled_pass, clean_fail, clean_fail, clean_fail), 100.0,
                        0.007) is clean_fail
    assert with_retries(scripted(stalled_pass, clean_pass), 100.0, 0.007) is clean_pass
    # a stalled failure is run again too, and the stall-free verdict stands
    assert with_retries(scripted(stalled_late, stalled_pass, clean_pass), 100.0,
                        0.007) is clean_pass
    # a clean pass, or a loss, is not run again
    assert with_retries(scripted(clean_pass), 100.0, 0.007) is clean_pass
    assert with_retries(scripted(lossy), 100.0, 0.007) is lossy
    # stalled every time: after 4 reruns the last stands
    five = [TrialOutcome(100.0, 99.7, 200, 200, late_s=0.004, duration_s=2.0, paced=100.0,
                         stalled_s=0.003) for _ in range(5)]
    assert with_retries(scripted(*five), 100.0, 0.007) is five[-1]
    # the real clock's setting: a stall is not a reason to run again
    assert with_retries(scripted(stalled_pass), 100.0, 0.007, stall_retries=0) is stalled_pass


def test_a_sender_behind_its_schedule_without_a_stall_is_run_again_on_the_virtual_clock() -> None:
    from testbed.measure.kinds.rfc2544 import PACE_SLACK, hiccup, with_retries

    def scripted(*outs: TrialOutcome) -> Callable[[float], TrialOutcome]:
        it = iter(outs)
        return lambda _rate: next(it)

    def paced(pace: float, late: float) -> TrialOutcome:
        return TrialOutcome(1e6, pace, 200, 200, late_s=late, duration_s=2.0, paced=pace)

    behind_pass = paced(1e6 * (1 - 4.7e-4), 0.0064)  # 0.047 % short: the queue had time to drain
    on_time_fail = paced(1e6 * (1 - 1e-5), 0.0074)
    on_time_pass = paced(1e6 * (1 - 1e-5), 0.0060)
    assert hiccup(behind_pass, PACE_SLACK) and not hiccup(on_time_fail, PACE_SLACK)
    # 2 % short or more is a generator too slow: reruns do not cure that, so it is no hiccup
    assert not hiccup(paced(0.97e6, 0.0), PACE_SLACK)
    # behind its schedule: run again, and the on-time verdict stands (then rerun as late)
    assert with_retries(scripted(behind_pass, on_time_fail, on_time_fail, on_time_fail), 1e6,
                        0.007, pace_slack=PACE_SLACK) is on_time_fail
    assert with_retries(scripted(behind_pass, behind_pass, on_time_pass), 1e6, 0.007,
                        pace_slack=PACE_SLACK) is on_time_pass
    # behind every time: after 4 reruns the last stands
    five = [paced(1e6 * (1 - 4.7e-4), 0.0064) for _ in range(5)]
    assert with_retries(scripted(*five), 1e6, 0.007, pace_slack=PACE_SLACK) is five[-1]
    # the default (the real clock's) slack ignores it
    assert with_retries(scripted(behind_pass), 1e6, 0.007) is behind_pass


def test_the_guess_from_loss_is_on_the_resolution_grid() -> None:
    # everything arrives, the first trial 40.10 or 40.26 ms late: the same next rate, on the grid
    def device(first_late: float) -> Callable[[float], TrialOutcome]:
        def trial(rate: float) -> TrialOutcome:
            sent = round(rate * 2)
            late = first_late if rate > 6.4e6 else (0.0 if rate <= 6.33e6 else 0.01)
            return TrialOutcome(rate, rate, sent, sent, late_s=late, duration_s=2.0)
        return trial

    res = 12911.4
    a = throughput_search(device(0.04010), max_rate=6.4557e6, resolution=res, max_late_s=0.007)
    b = throughput_search(device(0.04026), max_rate=6.4557e6, resolution=res, max_late_s=0.007)
    assert a.trials[1].offered == b.trials[1].offered
    assert a.trials[1].offered / res == pytest.approx(round(a.trials[1].offered / res))
    assert [t.offered for t in a.trials] == [t.offered for t in b.trials]
    assert a.throughput == b.throughput

    def stalled_first(rate: float) -> TrialOutcome:  # stopped 2.6 ms: the queue drained as long
        out = device(0.04010)(rate)
        if rate > 6.4e6:
            return TrialOutcome(rate, rate * 0.9987, out.sent, out.received,
                                late_s=0.04010 - 0.0026, duration_s=2.0, paced=rate,
                                stalled_s=0.0026)
        return out

    c = throughput_search(stalled_first, max_rate=6.4557e6, resolution=res, max_late_s=0.007)
    assert [t.offered for t in c.trials][1:] == [t.offered for t in a.trials][1:]


def test_a_late_failure_is_run_again_only_when_near_the_limit() -> None:
    from testbed.measure.kinds.rfc2544 import LATE_RETRY_FACTOR, queued, with_retries

    calls: list[float] = []

    def scripted(*outs: TrialOutcome) -> Callable[[float], TrialOutcome]:
        it = iter(outs)

        def once(rate: float) -> TrialOutcome:
            calls.append(rate)
            return next(it)
        return once

    def late(seconds: float) -> TrialOutcome:
        return TrialOutcome(100.0, 100.0, 200, 200, late_s=seconds, duration_s=2.0, paced=100.0)

    allowed = 0.007
    deep = late(allowed * LATE_RETRY_FACTOR * 1.01)  # a queue built up over the trial
    near = late(allowed * 1.5)  # a moment's deschedule could do that
    assert queued(deep, allowed) and not queued(near, allowed)
    assert with_retries(scripted(deep), 100.0, allowed) is deep and len(calls) == 1
    calls.clear()
    ok = late(0.001)
    assert with_retries(scripted(near, ok), 100.0, allowed) is ok and len(calls) == 2
    calls.clear()
    # a late failure near the limit is still run twice more, and the third verdict stands
    assert with_retries(scripted(near, near, deep), 100.0, allowed).late_s == deep.late_s
    assert len(calls) == 3


@pytest.mark.parametrize("held", [0.9806, 0.9795, 0.97])
def test_a_sender_held_to_its_line_rate_above_it_is_credited_the_line_rate_every_run(
        held: float) -> None:
    """Offered 1.02 x the line rate, a sender on a link of that line rate sends the line rate
    (less a stall): 0.9806 of the offer, 0.06 % above the 2 % generator tolerance. A 10-ms
    stall (0.9795) flipped the cell from "max_rate" (credited 1.02 x the line rate) to
    "generator" (what was sent): a 2 % jump between runs in a cell whose answer is the line
    rate. With `medium` both are short of nothing and credited the line rate."""
    line = 962.29e6

    def trial(rate: float) -> TrialOutcome:
        achieved = min(rate, line) * (held / 0.9806 if rate > line else 1.0)
        sent = round(achieved / 12000 * 2)
        return TrialOutcome(rate, achieved, sent, sent, late_s=0.0, duration_s=2.0,
                            paced=min(rate, line) * 1.0005, stalled_s=0.01)

    old = throughput_search(trial, max_rate=1.02 * line, resolution=0.01 * line)
    new = throughput_search(trial, max_rate=1.02 * line, resolution=0.01 * line, medium=line)
    assert new.limited_by == "max_rate" and new.throughput == line and len(new.trials) == 1
    assert "the medium's rate" in new.note
    assert new.sent == pytest.approx(line * held / 0.9806)
    if held < 0.98:  # without `medium`: the old flip
        assert old.limited_by == "generator" and old.throughput is not None
        assert old.throughput < line
    else:
        assert old.limited_by == "max_rate" and old.throughput == pytest.approx(1.02 * line)
    # a sender slower than the line rate by more than the tolerance is still short
    slow = throughput_search(lambda r: trial(r) if r <= line else TrialOutcome(
        r, 0.9 * line, 100, 100, late_s=0.0, duration_s=2.0), max_rate=1.02 * line,
        resolution=0.01 * line, medium=line)
    assert slow.trials[0].generator_short(GENERATOR_TOLERANCE, line)
    assert slow.limited_by != "max_rate"


def test_the_line_rate_caps_the_credit_of_every_passing_trial() -> None:
    out = TrialOutcome(1.01e9, 0.9996e9, 100, 100, duration_s=2.0)
    assert out.target(1e9) == 1e9 and out.target() == 1.01e9
    assert out.credited(medium=1e9) == 1e9
    assert out.credited() == 0.9996e9  # 1 % short of the offer: what was sent
    assert not out.generator_short(0.02) and not out.generator_short(0.001, 1e9)


@pytest.mark.parametrize("capacity", [0.9, 0.975, 0.9899, 0.9996, 1.0, 1.0004, 1.03])
@pytest.mark.parametrize("queue", [0.0, 0.004])
def test_a_search_bracketed_by_the_line_rate_gives_the_same_answer_in_fewer_trials(
        capacity: float, queue: float) -> None:
    """With the line rate known (`medium`), a first trial that shows the device carrying
    about it tries the line rate's grid point and the one above: the same answer (the highest
    grid point that passes), in 3 trials where the device is at the line rate (was 6)."""
    line = 10e6
    kw: dict[str, float] = {"max_rate": 1.02 * line, "resolution": 0.002 * 1.02 * line,
                            "max_late_s": 0.007}

    def dev() -> Callable[[float], TrialOutcome]:
        return device(capacity * line, generator_max=line * 1.0005,
                      queue=queue * line)

    plain = throughput_search(dev(), **kw)
    model = throughput_search(dev(), medium=line, **kw)
    if plain.limited_by == "max_rate":  # the first passed: credited the line rate, not 1.02 x
        assert model.limited_by == "max_rate" and model.throughput == line
    else:
        assert model.throughput == plain.throughput and model.limited_by == plain.limited_by
    assert len(model.trials) <= len(plain.trials) + 1  # a device far below: one probe more
    if capacity < 0.97:  # the model does not apply: the very same path (the loss guess of what
        # the sender offered, not of the line rate)
        assert [t.offered for t in model.trials] == [t.offered for t in plain.trials]
    if 0.998 <= capacity <= 1.0 and len(plain.trials) > 1:  # (a deep queue: the first passes)
        assert len(model.trials) == 3 and len(plain.trials) >= 5


def test_a_pass_credited_the_line_rate_ends_the_search() -> None:
    """A shaper's bucket lets a 2-s trial of tiny datagrams pass a little above the line rate
    (gamess-morales' 10-byte cells: up to 1.0037 x). Credited the line rate (no more can be),
    it ends the search: 3 trials, not 6, and every repetition the line rate itself."""
    line = 1.19048e6
    kw: dict[str, float] = {"max_rate": 1.02 * line, "resolution": 0.002 * 1.02 * line,
                            "max_late_s": 0.007}
    plain = throughput_search(device(1.003 * line), **kw)
    model = throughput_search(device(1.003 * line), medium=line, **kw)
    assert model.throughput == line and model.limited_by == "device"
    assert "nothing above it can be credited" in model.note
    assert len(model.trials) == 3 and len(plain.trials) >= 5
    assert plain.throughput is not None and line < plain.throughput < 1.003 * line
