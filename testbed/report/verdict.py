"""The statistics behind a verdict: a relative effect with its 95 % interval (t on the log ratio
of two means; several cells pooled), a comparison of it against a stated tolerance (above,
below, within by TOST), Holm-corrected p-values, a trend's slope with its interval and a sign
test across cells. Each turns into an `Outcome` that says holds / does not hold / inconclusive
and, when inconclusive, what would decide it."""


from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from testbed.report.claims import Data, Outcome, Status, not_measured, param
from testbed.results import TrialRow

Expect = Literal["above", "below", "within"]


@dataclass(frozen=True)
class Effect:
    """A relative effect b/a - 1 with its 95 % interval; `log_se` and `df` (log scale) let
    several be pooled. n: the observations behind it (both sides, all cells)."""

    value: float
    low: float
    high: float
    n: int
    log_se: float
    df: float
    cells: int = 1


def _t(df: float, q: float = 0.975) -> float:
    from scipy import special  # the t quantile without scipy.stats' per-call overhead

    return float(special.stdtrit(df, q)) if df > 0 and math.isfinite(df) else 1.959964


def _mean_var(v: Sequence[float]) -> tuple[float, float]:
    m = math.fsum(v) / len(v)
    var = math.fsum((x - m) ** 2 for x in v) / (len(v) - 1) if len(v) > 1 else 0.0
    return m, var


def ratio(a: Sequence[float], b: Sequence[float], exact: bool | tuple[bool, bool] = False
          ) -> Effect | None:
    """b's mean over a's, less one, with a 95 % interval from the log ratio (delta method,
    Welch-Satterthwaite df). None when a side has fewer than 2 values (unless it is `exact`:
    numbers as a paper prints them or a virtual-clock cell that repeats, taken as they are;
    a pair says it per side, a and b) or a mean is not > 0."""
    ea, eb = exact if isinstance(exact, tuple) else (exact, exact)
    if not a or not b or (len(a) < 2 and not ea) or (len(b) < 2 and not eb):
        return None
    (ma, va), (mb, vb) = _mean_var(a), _mean_var(b)
    if ma <= 0 or mb <= 0:
        return None
    ca, cb = va / (len(a) * ma * ma), vb / (len(b) * mb * mb)
    se = math.sqrt(ca + cb)
    den = (ca * ca / (len(a) - 1) if ca else 0.0) + (cb * cb / (len(b) - 1) if cb else 0.0)
    df = (ca + cb) ** 2 / den if den > 0 else math.inf
    lr, h = math.log(mb / ma), _t(df) * se
    return Effect(mb / ma - 1, math.exp(lr - h) - 1, math.exp(lr + h) - 1, len(a) + len(b),
                  se, df)


def pool(effects: Sequence[Effect]) -> Effect | None:
    """Several cells' effects as one: with 3 or more cells a t interval over the cells' log
    ratios (the cells are the replicates: their spread includes the noise); with 1-2 cells
    the mean of the log ratios with their own standard errors."""
    if not effects:
        return None
    logs = [math.log1p(e.value) for e in effects]
    n = sum(e.n for e in effects)
    k = len(effects)
    if k >= 3:
        m, var = _mean_var(logs)
        se_cells = math.sqrt(var / k)
        se_within = math.sqrt(math.fsum(e.log_se ** 2 for e in effects)) / k
        se, df = max(se_cells, se_within), float(k - 1)
    else:
        m = math.fsum(logs) / k
        se = math.sqrt(math.fsum(e.log_se ** 2 for e in effects)) / k
        df = min(e.df for e in effects)
    h = _t(df) * se
    return Effect(math.expm1(m), math.expm1(m - h), math.expm1(m + h), n, se, df, k)


@dataclass(frozen=True)
class Difference:
    """mean(b) - mean(a) with its 95 % Welch interval (quantities near 0, e.g. CPU points)."""

    value: float
    low: float
    high: float
    n: int


def difference(a: Sequence[float], b: Sequence[float]) -> Difference | None:
    """None when a side has fewer than 2 values."""
    if len(a) < 2 or len(b) < 2:
        return None
    (ma, va), (mb, vb) = _mean_var(a), _mean_var(b)
    ca, cb = va / len(a), vb / len(b)
    den = (ca * ca / (len(a) - 1) if ca else 0.0) + (cb * cb / (len(b) - 1) if cb else 0.0)
    df = (ca + cb) ** 2 / den if den > 0 else math.inf
    h = _t(df) * math.sqrt(ca + cb)
    return Difference(mb - ma, mb - ma - h, mb - ma + h, len(a) + len(b))


def mean_ci(values: Sequence[float], exact: bool = False) -> Difference | None:
    """A mean with its 95 % t interval (None below 2 values unless `exact`)."""
    if not values or (len(values) < 2 and not exact):
        return None
    m, var = _mean_var(values)
    h = _t(len(values) - 1) * math.sqrt(var / len(values)) if len(values) > 1 else 0.0
    return Difference(m, m - h, m + h, len(values))


def side(ci: Difference | None, low: float, high: float) -> Status:
    """holds when the interval lies inside [low, high], does not hold when wholly outside it,
    inconclusive when it straddles an edge or is missing. One-sided (an infinite edge): above
    `low` holds only strictly above it and does not hold at or below it (below `high` alike)."""
    if ci is None:
        return "inconclusive"
    if high == math.inf:
        return "holds" if ci.low > low else "does not hold" if ci.high <= low else "inconclusive"
    if low == -math.inf:
        return "holds" if ci.high < high else "does not hold" if ci.low >= high else (
            "inconclusive")
    if low <= ci.low and ci.high <= high:
        return "holds"
    if ci.high < low or ci.low > high:
        return "does not hold"
    return "inconclusive"


def cells_ratio(pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
                exact: bool | tuple[bool, bool] = False) -> Effect | None:
    """b over a in several cells, pooled (`pool`). A cell of one repetition a side counts as a
    point; with fewer than 3 cells every cell needs its own interval (None otherwise), unless
    `exact` (a paper's printed numbers). A pair (a's, b's) says it per side: a cell measured
    once where it repeats (the virtual clock) against one repeated where it does not (Jool)
    takes its interval from the repeated side alone."""
    sides = exact if isinstance(exact, tuple) else None
    both = all(exact) if isinstance(exact, tuple) else exact
    effects: list[Effect] = []
    for a, b in pairs:
        if not a or not b:
            continue
        e = ratio(a, b, sides) if sides is not None else ratio(a, b)
        if e is None:
            ma, mb = math.fsum(a) / len(a), math.fsum(b) / len(b)
            if ma <= 0 or mb <= 0:
                continue
            e = Effect(mb / ma - 1, mb / ma - 1, mb / ma - 1, len(a) + len(b), 0.0, math.inf)
            if len(pairs) < 3 and not both:
                return None
        effects.append(e)
    if len(effects) < 3 and not both and any(e.log_se == 0 and e.n < 4 for e in effects):
        return None
    return pool(effects)


def shrinks(a: Effect | None, b: Effect | None) -> Effect | None:
    """How b's effect compares with a's: (1 + b) / (1 + a) - 1 with the interval of the
    difference of their log ratios (None without both intervals)."""
    if a is None or b is None:
        return None
    lr = math.log1p(b.value) - math.log1p(a.value)
    se = math.sqrt(a.log_se ** 2 + b.log_se ** 2)
    df = min(a.df, b.df)
    h = _t(df) * se
    return Effect(math.expm1(lr), math.expm1(lr - h), math.expm1(lr + h), a.n + b.n, se, df, 2)


def tost_p(e: Effect, margin: float) -> float:
    """Two one-sided tests of |effect| < margin (on the log scale): the larger p-value."""
    from scipy import stats as sps

    if e.log_se == 0:
        return 0.0 if abs(e.value) < margin else 1.0
    lr = math.log1p(e.value)
    lo, hi = math.log1p(-margin) if margin < 1 else -math.inf, math.log1p(margin)
    df = e.df if math.isfinite(e.df) else 1e6
    p_lo = float(sps.t.sf((lr - lo) / e.log_se, df))
    p_hi = float(sps.t.cdf((lr - hi) / e.log_se, df))
    return max(p_lo, p_hi)


def pct(x: float) -> str:
    return f"{x:+.1%}"


def describe_effect(e: Effect) -> str:
    where = f", {e.cells} cells" if e.cells > 1 else ""
    return f"effect {pct(e.value)} (95 % interval {pct(e.low)} … {pct(e.high)}; n = {e.n}{where})"


def wrong_side(e: Effect, expect: Expect, bound: float) -> bool:
    """The effect's 95 % interval lies wholly on the wrong side of a claim's tolerance: below
    `bound` for "above", above it for "below", outside ±bound for "within"."""
    if expect == "above":
        return e.high < bound
    if expect == "below":
        return e.low > bound
    return e.low > bound or e.high < -bound


def judge(e: Effect | None, expect: Expect, bound: float, tolerance: str, what: str,
          needs: str = "two or more repetitions on each side") -> Outcome:
    """An effect against a stated tolerance. above: holds when the whole interval is above
    `bound`, does not hold when it is below; below: the mirror; within: holds when the
    interval lies inside ±bound (TOST at 2.5 % a side), does not hold when it lies outside.
    Anything else (the interval straddles the tolerance, or no interval) is inconclusive."""
    if e is None:
        return Outcome("inconclusive", f"{what}: no interval", f"evidence short: needs {needs}",
                       tolerance=tolerance)
    ev = f"{what}: {describe_effect(e)}"
    if expect == "above":
        ok = e.low > bound
        rule = f"needs the interval above {pct(bound)}"
    elif expect == "below":
        ok = e.high < bound
        rule = f"needs the interval below {pct(bound)}"
    else:
        ok = -bound <= e.low and e.high <= bound
        ev += f"; TOST p = {tost_p(e, bound):.3g} for ±{bound:.0%}"
        rule = f"needs the interval inside ±{bound:.0%}"
    status: Status = ("holds" if ok else "does not hold" if wrong_side(e, expect, bound)
                      else "inconclusive")
    reason = "" if status != "inconclusive" else (
        f"the interval straddles the tolerance ({rule}): more repetitions would narrow it")
    return Outcome(status, ev, reason, e.n, e.value, (e.low, e.high), tolerance)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    out = [0.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        out[i] = running
    return out


@dataclass(frozen=True)
class Slope:
    value: float
    low: float
    high: float
    r2: float
    n: int


def slope(xs: Sequence[float], ys: Sequence[float]) -> Slope | None:
    """Least-squares slope with its 95 % interval (None below 3 points or with one x)."""
    if len(xs) < 3 or len(set(xs)) < 2:
        return None
    from scipy import stats as sps

    r = sps.linregress(xs, ys)
    h = _t(len(xs) - 2) * float(r.stderr)
    return Slope(float(r.slope), float(r.slope) - h, float(r.slope) + h, float(r.rvalue) ** 2,
                 len(xs))


@dataclass(frozen=True)
class Bend:
    """How much a straight line's slope fails to describe the points: a parabola fitted
    through them has, at either end of the range, a slope that differs from its mean slope
    by this share (0: straight; +0.7: 70 % steeper at the top end and 70 % flatter at the
    bottom), with a 95 % interval. An effect, so a bend too small to matter can be told from
    one not yet measured well enough."""

    value: float
    low: float
    high: float
    df: int


def bend(xs: Sequence[float], ys: Sequence[float]) -> Bend | None:
    """The parabola y = a + b·u + c·u² (u: x from mid-range, h: half the range) has slope
    b ± 2·c·h at the ends against b on average: 2·c·h / b, its interval by the delta method on
    (b, c) with n - 3 degrees of freedom. None without a residual degree of freedom (fewer
    than 4 points or 3 distinct xs) or without a mean slope (b = 0)."""
    if len(xs) < 4 or len(set(xs)) < 3:
        return None
    import numpy as np

    x = np.asarray(xs, dtype=float)
    h = (float(x.max()) - float(x.min())) / 2
    u = x - (float(x.max()) + float(x.min())) / 2
    y = np.asarray(ys, dtype=float)
    design = np.column_stack([np.ones_like(u), u, u * u])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    b, c = float(coef[1]), float(coef[2])
    if abs(b) * h <= 1e-9 * (float(np.abs(y).max()) or 1.0):  # no rise to compare with
        return None
    df = len(xs) - 3
    cov = float(((y - design @ coef) ** 2).sum()) / df * np.linalg.inv(design.T @ design)
    value = 2 * c * h / b
    grad = np.array([-2 * c * h / (b * b), 2 * h / b])  # d value / d(b, c)
    se = math.sqrt(max(float(grad @ cov[1:, 1:] @ grad), 0.0))
    return Bend(value, value - _t(df) * se, value + _t(df) * se, df)


def sign_test(k: int, n: int) -> tuple[float, float, float]:
    """k of n cells go the claimed way: (share, its 95 % Clopper-Pearson interval)."""
    from scipy import stats as sps

    lo = float(sps.beta.ppf(0.025, k, n - k + 1)) if k > 0 else 0.0
    hi = float(sps.beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return k / n, lo, hi


EXACT_SHARE = 0.9


def judge_share(k: int, n: int, tolerance: str, what: str, *, least: float = 0.5,
                exact: bool = False) -> Outcome:
    """Most cells go the claimed way: holds when the 95 % interval of the share lies above
    `least` (a sign test), does not hold when below; else inconclusive. With `exact` cells
    (printed or virtual-clock numbers: no noise decides a cell's sign) it holds when at least
    90 % of the cells go the claimed way and does not hold otherwise."""
    if n == 0:
        return Outcome("inconclusive", f"{what}: no cells", "evidence short: needs cells",
                       tolerance=tolerance)
    if exact:
        ok = k >= EXACT_SHARE * n
        return Outcome("holds" if ok else "does not hold",
                       f"{what}: {k}/{n} cells ({k / n:.0%}; exact numbers: at least "
                       f"{EXACT_SHARE:.0%} asked)", "", n, k / n, (k / n, k / n), tolerance)
    share, lo, hi = sign_test(k, n)
    ev = (f"{what}: {k}/{n} cells ({share:.0%}, 95 % interval {lo:.0%} … {hi:.0%}; "
          f"sign test against {least:.0%})")
    status: Status = "holds" if lo > least else "does not hold" if hi < least else "inconclusive"
    reason = "" if status != "inconclusive" else (
        f"the share's interval straddles {least:.0%}: more cells would decide it")
    return Outcome(status, ev, reason, n, share, (lo, hi), tolerance)


ONE_SIDE = 0.025
"""The level of each one-sided test behind a 95 % interval: wholly on one side of a bound."""


def p_beyond(e: Effect, expect: Expect, bound: float) -> float:
    """The one-sided p of the effect lying on the wrong side of a claim's tolerance (below
    `bound` for "above", above it for "below", outside ±bound for "within"): the test whose
    rejection at 2.5 % is what `judge`'s 95 % interval wholly on the wrong side means. An effect
    without a standard error (exact numbers, a search's grid) decides by its interval alone:
    0 when it lies wholly beyond, else 1."""
    if e.log_se == 0 or not math.isfinite(e.log_se):
        return 0.0 if wrong_side(e, expect, bound) else 1.0
    from scipy import stats as sps

    df = e.df if math.isfinite(e.df) else 1e6
    lr = math.log1p(e.value)
    over = float(sps.t.sf((lr - math.log1p(bound)) / e.log_se, df))  # shown above bound
    if expect == "below":
        return over
    under_at = math.log1p(bound) if expect == "above" else (
        math.log1p(-bound) if bound < 1 else -math.inf)
    under = float(sps.t.cdf((lr - under_at) / e.log_se, df)) if math.isfinite(under_at) else 1.0
    return under if expect == "above" else min(over, under)


def refuted(effects: Sequence[Effect | None], expect: Expect, bound: float) -> list[bool]:
    """Which cells refute a claim about every cell. Each cell is beyond when its 95 % interval
    lies wholly on the wrong side (`judge`); with k cells that happens to some cell by noise
    alone up to k times as often (gometz-2015's go:3, uncorrected over seven sizes, was refuted
    in one full run of three, 28 Nov). So with two or more cells the claim is refuted, at 2.5 %
    in all (each half of it): where a cell stays beyond after Holm's correction (its `p_beyond`),
    one cell far off; or where more cells are beyond than noise would put there (a binomial
    tail at 2.5 % a cell below 1.25 %: e.g. 2 of 7), many cells a little off, each on few
    repetitions. One cell: its interval's rule, as `judge`."""
    from scipy import stats as sps

    known = [(i, e) for i, e in enumerate(effects) if e is not None]
    beyond = [wrong_side(e, expect, bound) for _, e in known]
    out = [False] * len(effects)
    if len(known) == 1:
        out[known[0][0]] = beyond[0]
        return out
    level = ONE_SIDE / 2
    adj = holm([p_beyond(e, expect, bound) for _, e in known])
    many = sum(beyond) > 0 and float(sps.binom.sf(sum(beyond) - 1, len(known), ONE_SIDE)) < level
    for (i, _), b, p in zip(known, beyond, adj, strict=True):
        out[i] = b and (many or p < level)
    return out


def judge_all(cells: Sequence[tuple[str, Effect | None]], expect: Expect, bound: float,
              tolerance: str, what: str, needs: str = "two or more repetitions per cell"
              ) -> Outcome:
    """A claim about every cell: holds when every cell's interval holds (`judge`; an
    intersection-union test, no correction needed), does not hold when some cell's interval is
    wholly on the wrong side after Holm's correction over the cells (`refuted`); else
    inconclusive. n, effect and interval are the worst cell's (farthest from the claimed
    side)."""
    if not cells:
        return Outcome("inconclusive", f"{what}: no cells", "evidence short: needs cells",
                       tolerance=tolerance)
    verdicts = [(label, e, judge(e, expect, bound, tolerance, label, needs))
                for label, e in cells]
    statuses = {o.status for _, _, o in verdicts}
    beyond = refuted([e for _, e, _ in verdicts], expect, bound)
    status: Status = ("does not hold" if any(beyond) else "holds"
                      if statuses == {"holds"} else "inconclusive")

    def badness(e: Effect | None) -> float:
        if e is None:
            return math.inf
        return {"above": -e.low, "below": e.high}.get(expect, max(abs(e.low), abs(e.high)))

    _, worst, _ = max(verdicts, key=lambda v: badness(v[1]))
    ev = f"{what}: " + "; ".join(
        f"{label} {pct(e.value)} ({pct(e.low)} … {pct(e.high)})" if e else f"{label} no interval"
        for label, e, _ in verdicts)
    loose = sum(o.status == "does not hold" for _, _, o in verdicts) - sum(beyond)
    if len(verdicts) > 1:
        wrong = [label for (label, _, _), b in zip(verdicts, beyond, strict=True) if b]
        ev += (f"; wrong side after Holm's correction over {len(verdicts)} cells: "
               f"{', '.join(wrong) or 'none'}")
    short = [label for label, e, _ in verdicts if e is None]
    reason = "" if status != "inconclusive" else (
        f"evidence short at {', '.join(short)}: needs {needs}" if short else
        f"{loose} cell(s) beyond the tolerance by their own interval, not after Holm's "
        f"correction over {len(verdicts)} cells: more repetitions would decide it" if loose else
        "an interval straddles the tolerance: more repetitions would narrow it")
    return Outcome(status, ev, reason, sum(e.n for _, e, _ in verdicts if e) or None,
                   worst.value if worst else None,
                   (worst.low, worst.high) if worst else None, tolerance)


def compare(kind: str, metric: str, a: Mapping[str, Any], b: Mapping[str, Any],
            expect: Expect, bound: float, tolerance: str, what: str,
            cells: Sequence[str] = (), needs: str = "two or more repetitions a side"
            ) -> Callable[[Data], Outcome]:
    """A claim's check declared as data: `metric` of the `kind` trials whose parameters match
    `b`, over those matching `a` (b/a - 1), per cell (the parameters named in `cells`), pooled
    over the cells and judged against `bound` (`judge`). E.g. ze:6:
    compare("stackcost", "tcp_socket_create_us", {"ip": 4}, {"ip": 6}, "above", 0.06, ...)."""

    def side_of(r: TrialRow) -> str | None:
        for name, want in (("a", a), ("b", b)):
            if all(param(r, k) == v for k, v in want.items()):
                return name
        return None

    def key(r: TrialRow) -> tuple[Any, ...] | None:
        s = side_of(r)
        return None if s is None else (s, *(param(r, c) for c in cells))

    def check(d: Data) -> Outcome:
        rows = d.select(kind)
        vals = d.cells(rows, metric, key)
        keys = sorted({k[1:] for k in vals if k[0] == "a" and ("b", *k[1:]) in vals}, key=str)
        if not keys:
            return not_measured(f"{metric} of {kind} trials with {dict(a)} and with {dict(b)}")
        pairs = [(vals[("a", *k)], vals[("b", *k)]) for k in keys]
        exact = d.exact_rows(rows)
        e = ratio(*pairs[0], exact=exact) if len(pairs) == 1 else cells_ratio(pairs, exact)
        la = ",".join(f"{k}={v}" for k, v in a.items())
        lb = ",".join(f"{k}={v}" for k, v in b.items())
        means = "; ".join(f"{'/'.join(map(str, k)) + ': ' if k else ''}"
                          f"{la} {math.fsum(x) / len(x):.4g} vs {lb} {math.fsum(y) / len(y):.4g}"
                          for k, (x, y) in zip(keys, pairs, strict=True))
        o = judge(e, expect, bound, tolerance, what, needs)
        return replace(o, evidence=f"{means}; {o.evidence}")

    return check


def judge_between(e: Effect | None, low: float, high: float, tolerance: str, what: str,
                  needs: str = "two or more repetitions on each side") -> Outcome:
    """An effect inside a stated range [low, high] (e.g. "about 10x lower": -93 % ... -80 %):
    holds when the whole interval lies inside it, does not hold when wholly outside, else
    inconclusive."""
    if e is None:
        return Outcome("inconclusive", f"{what}: no interval", f"evidence short: needs {needs}",
                       tolerance=tolerance)
    status = side(Difference(e.value, e.low, e.high, e.n), low, high)
    reason = "" if status != "inconclusive" else (
        f"the interval straddles an edge of {pct(low)} … {pct(high)}: more repetitions would "
        "narrow it")
    return Outcome(status, f"{what}: {describe_effect(e)}; needs the interval inside "
                   f"{pct(low)} … {pct(high)}", reason, e.n, e.value, (e.low, e.high), tolerance)


def all_of(parts: Sequence[Outcome], tolerance: str, reason: str = "") -> Outcome:
    """The parts of one claim (each judged): does not hold when a part does not hold, holds
    when every part holds, else inconclusive (the first inconclusive part's reason). A part
    "not measured" is missing evidence: with others judged the claim is inconclusive (unless a
    part does not hold), with none it is not measured. n sums the parts'; the effect and
    interval are the deciding part's (the first that does not hold, else the first
    inconclusive, else the first). `reason`: the known cause when it does not hold."""
    judged = [p for p in parts if p.status in ("holds", "does not hold", "inconclusive")]
    missing = [p.reason.removeprefix("not measured: needs ") for p in parts
               if p.status == "not measured"]
    if not judged:
        return Outcome("not measured", "", "not measured: needs " + "; ".join(missing)
                       if missing else "evidence short", tolerance=tolerance)
    statuses = {p.status for p in judged}
    status: Status = ("does not hold" if "does not hold" in statuses else "holds"
                      if statuses == {"holds"} and not missing else "inconclusive")
    decider = next((p for p in judged if p.status == status), judged[0])
    short = f"evidence short: not measured: {'; '.join(missing)}"
    why = {"holds": "", "inconclusive": decider.reason if decider.status == status else short,
           "does not hold": reason or decider.reason}[status]
    n = sum(p.n for p in judged if p.n) or None
    evidence = "; ".join([*(p.evidence for p in judged if p.evidence),
                          *(f"not measured: {m}" for m in missing)])
    return Outcome(status, evidence, why, n, decider.effect, decider.interval, tolerance)


def against(values: Sequence[float], reference: float, exact: bool = False,
            resolution: float = 0.0) -> Effect | None:
    """values over a reference without noise (a model's value, a printed number) - 1, with the
    95 % t interval of the values' mean (None below 2 values unless `exact`).

    `resolution` (in the values' unit): each value is a search's result, known only to that
    step (an RFC 2544 search stops when its bracket is narrower). Values within two steps of
    each other are the same answer read off the grid: the truth lies where every value's
    ±step overlaps, [max - step, min + step] (one value: ±step), not in a t interval whose
    width, at n = 2, is 12.7 times the spread of two grid points. Values farther apart than
    that differ by more than the grid: the t interval."""
    if reference <= 0 or not values:
        return None
    rel = [v / reference - 1 for v in values]
    step = resolution / reference
    if step > 0 and not exact and max(rel) - min(rel) <= 2 * step:
        m = math.fsum(rel) / len(rel)
        return Effect(m, max(rel) - step, min(rel) + step, len(rel), 0.0, math.inf)
    ci = mean_ci(rel, exact)
    if ci is None:
        return None
    if ci.n < 2 or ci.high == ci.low or 1 + ci.value <= 0:
        return Effect(ci.value, ci.low, ci.high, ci.n, 0.0, math.inf)
    # its standard error on the log scale (delta method), for `p_beyond` across cells
    se = (ci.high - ci.low) / (2 * _t(ci.n - 1)) / (1 + ci.value)
    return Effect(ci.value, ci.low, ci.high, ci.n, se, float(ci.n - 1))
