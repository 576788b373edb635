"""Link shapes become qdiscs: tbf with Ethernet framing, or netem (rate, delay, loss) if present."""

from __future__ import annotations

from dataclasses import dataclass

from testbed.errors import MissingCapability
from testbed.topology_model import Link, Shape

# Ethernet on the wire, beyond what the kernel counts in skb->len (which includes the 14-byte
# header): 4 FCS + 7 preamble + 1 SFD + 12 inter-frame gap; a frame is at least 64 bytes with its
# FCS, so at least 84 bytes on the wire.
WIRE_OVERHEAD = 24
MIN_WIRE_FRAME = 84
HEADER = 14


@dataclass(frozen=True)
class Qdisc:
    """One qdisc to install on an interface, as the arguments of `tc qdisc replace dev IF`."""

    kind: str
    args: tuple[str, ...]
    needs_offload_off: bool = False
    stab: tuple[str, ...] = ()  # a size table: how long the qdisc takes each packet to be

    def argv(self, ifname: str) -> list[str]:
        return ["qdisc", "replace", "dev", ifname, "root", *self.stab, self.kind, *self.args]


def ethernet_stab(frame_max: int) -> tuple[str, ...]:
    """A size table making a qdisc count each packet as Ethernet puts it on the wire:
    skb length + 24 (FCS, preamble, SFD, gap), at least 84 bytes.

    netem's `rate` has a per-packet overhead but no minimum frame, so without this a short
    frame (a small fragment, a 1-byte datagram) would be serialized in 67 bytes' time instead
    of 84's. The table has one entry per byte (cell_log 0) up to the link's largest frame, so
    the lengths are exact; beyond 16384 bytes tc coarsens the cells.
    """
    size = min(max(frame_max, 2048), 16384)
    return (
        "stab", "overhead", str(WIRE_OVERHEAD), "mpu", str(MIN_WIRE_FRAME),
        "mtu", str(size - 1), "tsize", str(size),
    )


def wire_bytes(skb_len: int) -> int:
    """Bytes a frame of `skb_len` (header included, FCS excluded) takes on the wire."""
    return max(skb_len + WIRE_OVERHEAD, MIN_WIRE_FRAME)


def _rate(bps: float) -> str:
    return f"{round(bps)}bit"


def _usec(seconds: float) -> str:
    return f"{round(seconds * 1e6, 3)}us"


def choose_shaper(shape: Shape, netem_available: bool) -> str | None:
    """Which qdisc a shape needs here: None (unshaped), 'tbf' or 'netem'."""
    if shape.is_plain:
        return None
    if shape.needs_netem:
        return "netem"
    if shape.shaper == "tbf":
        return "tbf"
    # A rate alone: netem models per-packet serialization delay, tbf only throughput.
    return "netem" if netem_available else "tbf"


def qdisc_for(link: Link, netem_available: bool) -> Qdisc | None:
    """The qdisc for each end of `link` (both directions are shaped alike)."""
    shape = link.shape
    kind = choose_shaper(shape, netem_available)
    if kind is None:
        return None
    if kind == "netem" and not netem_available:
        wants = []
        if shape.delay_s:
            wants.append("delay")
        if shape.jitter_s:
            wants.append("jitter")
        if shape.loss_pct:
            wants.append("loss")
        if shape.shaper == "netem":
            wants.append('shaping = "netem"')
        raise MissingCapability(
            "sch_netem",
            f"{' and '.join(wants) or 'netem'} on link {link.a}-{link.b} ({link.key})",
        )
    frame_max = link.mtu + HEADER + WIRE_OVERHEAD
    if kind == "tbf":
        assert shape.rate_bps is not None
        burst = max(2 * frame_max, int(shape.rate_bps / 8 * 0.0005))
        limit = max(256 * 1024, int(shape.rate_bps / 8 * 0.1), 4 * frame_max)
        return Qdisc(
            "tbf",
            (
                "rate",
                _rate(shape.rate_bps),
                "burst",
                str(burst),
                "limit",
                str(limit),
                "mpu",
                str(MIN_WIRE_FRAME),
                "overhead",
                str(WIRE_OVERHEAD),
            ),
        )
    args: list[str] = []
    if shape.delay_s or shape.jitter_s:
        args += ["delay", _usec(shape.delay_s)]
        if shape.jitter_s:
            args += [_usec(shape.jitter_s), "distribution", "normal"]
    if shape.loss_pct:
        args += ["loss", f"{shape.loss_pct}%"]
    stab: tuple[str, ...] = ()
    if shape.rate_bps is not None:
        # the Ethernet overhead and minimum frame come from the size table (netem's own
        # per-packet overhead, the positional after the rate, has no minimum)
        args += ["rate", _rate(shape.rate_bps)]
        stab = ethernet_stab(frame_max)
    args += ["limit", "10000"]
    return Qdisc("netem", tuple(args), needs_offload_off=shape.rate_bps is not None, stab=stab)
