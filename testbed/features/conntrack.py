"""Conntrack feature: connection tracking on a router's forwarding path (an accept-all nftables
table that looks up every forwarded packet's connection), the "conntrack on" router profile."""

from __future__ import annotations

from testbed.features._nft import NftTable, NftTableFeature
from testbed.features._router import nft_table_text

TABLE = "tb_conntrack"


def ruleset() -> str:
    return nft_table_text("inet", TABLE, (
        "forward", "type filter hook forward priority filter; policy accept;",
        ['ct state established,related counter accept comment "established"',
         'ct state new counter accept comment "new"']))


class Conntrack(NftTableFeature):
    """Connection tracking on the router's forwarding path (the "conntrack on" profile)."""

    kind = "conntrack"
    summary = "connection tracking on a router's forwarding path (accept-all nftables ct rules)"
    node_role = "router"
    guest_modules = ("nf_tables", "nft_ct")
    nft = NftTable(TABLE, lambda _none: ruleset())
