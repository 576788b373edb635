"""Per-claim false-hold rates on synthetic data without the claim's effect, and hold rates with
the paper's effect, for every claim that asserts one (the generators of tests/unit/nulldata.py).
Usage:
    PYTHONPATH=$PWD .venv/bin/python benchmarks/null_data.py [SEEDS]"""

from __future__ import annotations

import sys

from testbed import papers
from tests.unit import nulldata


def main() -> int:
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    effect = sorted(c.id for p in papers.all_papers() for c in p.claims if c.effect)
    missing = sorted(set(effect) - set(nulldata.GENERATORS))
    print(f"{len(effect)} claims assert an effect"
          + (f"; no generator yet: {', '.join(missing)}" if missing else "; each has a generator"))
    print(f"{'claim':<7} {'false holds (no effect)':>24} {'holds (paper effect)':>22}")
    for cid in nulldata.GENERATORS:
        null = nulldata.hold_rate(cid, seeds, effect=False)
        eff = nulldata.hold_rate(cid, seeds, effect=True)
        print(f"{cid:<7} {null:>23.1%} {eff:>21.1%}   ({seeds} seeds each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
