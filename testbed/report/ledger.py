"""The claims ledger as JSON (`ledger.json` beside the report's index.html): every claim's id,
verdict, verdict on the paper's own numbers, n, effect, interval, tolerance and its source,
evidence, and its verdicts on the paper's variants (other routers); and the comparison of two
ledgers (`testbed report --compare A B`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.errors import UsageError

if TYPE_CHECKING:
    from testbed.report.claims import ClaimResult
    from testbed.report.render import Report

NAME = "ledger.json"
FORMAT = 1


def claim_doc(c: ClaimResult) -> dict[str, Any]:
    on = c.on_paper
    return {
        "id": c.claim_id, "paper": c.paper, "text": c.text, "verdict": c.status,
        "on_paper": None if on is None else {"verdict": on.status, "evidence": on.evidence},
        "n": c.n, "effect": c.effect, "interval": list(c.interval) if c.interval else None,
        "tolerance": c.tolerance, "basis": c.basis, "evidence": c.evidence,
        "reason": c.reason,
        "variants": [{"on": label, "verdict": o.status, "n": o.n, "effect": o.effect,
                      "interval": list(o.interval) if o.interval else None,
                      "tolerance": o.tolerance, "evidence": o.evidence, "reason": o.reason}
                     for label, o in c.variants],
    }


def document(report: Report) -> dict[str, Any]:
    return {
        "format": FORMAT, "generated": report.generated, "db": str(report.db),
        "runs": [r.run_id for s in report.sections for r in s.runs],
        "counts": report.counts(),
        "claims": [claim_doc(c) for s in report.sections for c in s.claims],
    }


def write(report: Report) -> Path:
    path = report.out / NAME
    path.write_text(json.dumps(document(report), indent=1, ensure_ascii=False) + "\n")
    return path


def read(where: Path) -> dict[str, dict[str, Any]]:
    """claim id -> its entry, from a ledger.json or a report folder holding one."""
    path = where / NAME if where.is_dir() else where
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"no claims ledger at {path}",
                         hint="give a report folder (testbed report --out DIR) or its "
                         "ledger.json") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not a claims ledger: {exc}") from None
    claims = doc.get("claims") if isinstance(doc, dict) else None
    if not isinstance(claims, list):
        raise UsageError(f"{path} is not a claims ledger (no \"claims\" list)")
    out: dict[str, dict[str, Any]] = {}
    for c in claims:
        if isinstance(c, dict) and "id" in c:
            out[str(c["id"])] = c
            for v in c.get("variants") or []:  # a verdict on another system: its own entry
                out[f"{c['id']} on {v.get('on')}"] = v
    return out


def differences(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]
                ) -> list[tuple[str, str, str]]:
    """(claim id, verdict in a, verdict in b) for every claim whose verdict differs; a claim in
    one ledger only is "absent" in the other."""
    out = []
    for cid in sorted(a.keys() | b.keys(), key=_order):
        va = str(a[cid]["verdict"]) if cid in a else "absent"
        vb = str(b[cid]["verdict"]) if cid in b else "absent"
        if va != vb:
            out.append((cid, va, vb))
    return out


def _order(cid: str) -> tuple[str, int, str]:
    prefix, _, rest = cid.partition(":")
    num, _, variant = rest.partition(" ")
    return (prefix, int(num) if num.isdigit() else 0, variant)
