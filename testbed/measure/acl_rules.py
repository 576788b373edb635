"""ACLs on a router as nftables rule sets with a counter on every rule (dobrinov-2016).

The paper's Cisco ACLs had 1 or 25 lines per protocol: 24 that deny other destinations and a
last that permits the traffic's destination, so every packet reads all 25. Here each line is an
nftables rule whose *first* expression is a counter: it counts every packet that reaches the
rule, matched or not, so the counters prove that every packet walked every rule. Applied on the
ingress interface (`in`: a prerouting chain with `iifname`), the egress (`out`: postrouting,
`oifname`) or both. Each IP version has its own list (a jump on `meta nfproto`), as the paper
had one ACL for IPv4 and one for IPv6. `Acl` is a per-trial scope of the Testbed's journal: the
table goes with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

from testbed.actions import NftRuleset
from testbed.api import TestbedLike
from testbed.errors import SpecError

TABLE = "tbacl"
RULE_COUNTS = (0, 1, 25)
APPLY = ("in", "out", "both")
DENY4 = "203.0.113.{n}"  # TEST-NET-3: never our traffic's destination
DENY6 = "2001:db8::{n}"  # the documentation prefix


def ruleset(rules: int, apply: str, in_if: str, out_if: str, dst: Mapping[int, str]) -> str:
    """The nft script of an ACL of `rules` lines per IP version (`rules - 1` deny lines for
    other destinations, then a permit for `dst[version]`), on `apply` ∈ in/out/both."""
    if rules < 1:
        raise ValueError("an ACL has at least one line (0 rules: no table at all)")
    if apply not in APPLY:
        raise ValueError(f"apply must be one of {', '.join(APPLY)}")
    lines = [f"table inet {TABLE} {{"]
    for where, hook, match, ifname in (("in", "prerouting", "iifname", in_if),
                                       ("out", "postrouting", "oifname", out_if)):
        if apply not in (where, "both"):
            continue
        lines.append(f"  chain acl_{where} {{ type filter hook {hook} priority 0; "
                     "policy accept;")
        lines.append(f'    {match} "{ifname}" meta nfproto ipv4 jump acl_{where}4')
        lines.append(f'    {match} "{ifname}" meta nfproto ipv6 jump acl_{where}6')
        lines.append("  }")
        for v, fam, deny in ((4, "ip", DENY4), (6, "ip6", DENY6)):
            lines.append(f"  chain acl_{where}{v} {{")
            for n in range(1, rules):
                lines.append(f"    counter {fam} daddr {deny.format(n=n)} drop")
            if v in dst:
                lines.append(f"    counter {fam} daddr {dst[v]} accept")
            else:  # a family without traffic still gets its permit line (any destination)
                lines.append("    counter accept")
            lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def rule_counters(nft_json: str) -> list[dict[str, Any]]:
    """[{chain, handle, packets, rule}] of every rule with a counter, in listing order."""
    out = []
    for item in json.loads(nft_json).get("nftables", []):
        rule = item.get("rule")
        if not rule:
            continue
        for e in rule.get("expr", []):
            if "counter" in e:
                out.append({"chain": rule["chain"], "handle": rule["handle"],
                            "packets": int(e["counter"]["packets"]),
                            "first": rule["expr"][0] is e})
                break
    return out


class Acl:
    """A per-trial ACL on `router` (no table when `rules` is 0): an `NftRuleset` applied in a
    scope of the Testbed's journal, whose end deletes the table; `counters()` reads them.
    (`scratch` is not used: the rule set goes to `nft -f -` on its input.)"""

    def __init__(self, tb: TestbedLike, router: str, rules: int, apply: str, in_if: str,
                 out_if: str, dst: Mapping[int, str], scratch: Path | None = None) -> None:
        if rules < 0:
            raise SpecError("measurement", "rules", f"{rules!r} rules", "0, 1, 25 or more")
        self.tb = tb
        self.router = router
        self.rules = rules
        self.apply = apply
        self.text = ruleset(rules, apply, in_if, out_if, dst) if rules else ""
        self.active = False
        self.stack = ExitStack()

    def __enter__(self) -> Acl:
        with ExitStack() as opening:
            opening.enter_context(self.tb.scope())
            if self.rules:
                self.tb.apply(NftRuleset(self.router, self.text, f"inet {TABLE}"))
                self.active = True
            self.stack = opening.pop_all()  # open until __exit__ (closed now on a failure)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.active = False
        self.stack.__exit__(et, ev, tb)

    def counters(self) -> list[dict[str, Any]]:
        if not self.active:
            return []
        out = self.tb.run(self.router, ["nft", "-j", "list", "table", "inet", TABLE]).stdout
        return rule_counters(out)


def walked_metrics(counters: list[dict[str, Any]], families: set[int]) -> dict[str, float]:
    """What the counters saw of the IP versions that carried the test traffic (`families`):
    every packet that reads a list reads all its lines, so the fewest packets any line of
    those lists counted is what each line saw at least (stray packets, e.g. neighbour
    discovery, walk a list too and only add to it)."""
    lines = [c for c in counters if c["chain"][-1:] in ("4", "6")]
    if not lines:
        return {}
    used = [c["packets"] for c in lines if int(c["chain"][-1]) in families]
    return {"acl_rule_visits": float(sum(c["packets"] for c in lines)),
            "acl_min_rule_packets": float(min(used)) if used else 0.0,
            "acl_lines": float(len(lines))}
