"""The base of the features that are one nftables table: firewall, nat, nptv6, conntrack."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from testbed.actions import Check, NftRuleset, Succeeds
from testbed.api import Action, TestbedLike
from testbed.features import _router as r
from testbed.features.base import Feature
from testbed.features.base import Options as FeatureOptions

Parse = Callable[[FeatureOptions], Any]
"""A feature module's `parse(opts)`: its validated options."""

CheckOptions = Callable[[TestbedLike, Any, int], r.CheckResult]
"""A feature module's `check(tb, options, ip)`: its functional check on one IP version."""


@dataclass(frozen=True)
class NftTable:
    """What a feature module hands NftTableFeature: its table (`family` `name`), the ruleset
    of its parsed options and, for a router feature with a check, its `parse` and `check`."""

    name: str
    ruleset: Callable[[Any], str]  # parsed options (None without `parse`) -> `nft -f` text
    parse: Parse | None = None
    check: CheckOptions | None = None
    family: str = "inet"


class NftTableFeature(Feature):
    """A feature that is one nftables table on its node: the action loads `nft.ruleset(o)`
    (removed on undo), ready once `nft list table` lists it."""

    nft: ClassVar[NftTable]
    kernel = ("nftables",)
    o: Any = None  # the parsed options (NftRouterFeature); None for a feature without options

    def actions(self) -> list[Action]:
        table = f"{self.nft.family} {self.nft.name}"
        return [NftRuleset(self.node, self.nft.ruleset(self.o), table)]

    def ready(self) -> list[Check]:
        return [Succeeds(self.node, ("nft", "list", "table", self.nft.family, self.nft.name))]


class NftRouterFeature(NftTableFeature, r.RouterFeature):
    """An nftables table feature with options and a functional check: `configure` keeps the
    module's `parse` result as `o`, `check` is the module's `check(tb, o, ip)`."""

    def __init_subclass__(cls, **kw: Any) -> None:
        if cls.kind and (cls.nft.parse is None or cls.nft.check is None):
            raise TypeError(f"feature {cls.kind!r}: its NftTable needs `parse` and `check`")
        super().__init_subclass__(**kw)

    def configure(self, opts: FeatureOptions) -> None:
        assert self.nft.parse is not None  # __init_subclass__ checked it
        self.o = self.nft.parse(opts)

    def check(self, tb: TestbedLike, ip: int, others: Sequence[Feature]) -> r.CheckResult:
        assert self.nft.check is not None
        return self.nft.check(tb, self.o, ip)
