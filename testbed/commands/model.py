"""`testbed model`: print the analytic models' predictions (throughput, OWD) as one JSON object."""

from __future__ import annotations

import argparse
import json
from typing import Any

from testbed import models, units
from testbed.errors import UsageError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `testbed model throughput` and `testbed model owd`."""
    model = subparsers.add_parser(
        "model",
        help="predictions of the analytic models (Gamess & Morales, extended)",
        description="Print a model prediction as one JSON object. See docs/models.md.",
    )
    sub = model.add_subparsers(dest="model_command", metavar="MODEL")
    sub.required = True

    tput = sub.add_parser(
        "throughput",
        help="maximum throughput, equation (7)",
        description="Maximum throughput of IP payload: n*8 / TTFS(n, B) at the bottleneck side.",
    )
    _common(tput)
    tput.add_argument(
        "--fragmenter",
        choices=models.FRAGMENTERS,
        default="paper",
        help="paper: the last fragment may fill the MTU, equation (6) (default); linux: every "
        "fragment a multiple of 8 bytes, as a Linux UDP socket cuts them",
    )
    tput.set_defaults(func=_throughput)

    owd = sub.add_parser(
        "owd",
        help="one-way delay through a chain of routers, equation (9)",
        description="One-way delay TTFS(n,B) + p*TTFS(m,B) + pi*(p+1), per link format.",
    )
    _common(owd)
    owd.add_argument("--routers", type=int, required=True, metavar="P", help="routers in the chain")
    owd.add_argument(
        "--propagation-us",
        type=float,
        default=models.DEFAULT_PROPAGATION_S * 1e6,
        metavar="U",
        help="propagation time per link in microseconds (default 30, as in the paper)",
    )
    owd.add_argument(
        "--first-side-links",
        type=int,
        default=None,
        metavar="L",
        help="isatap/nat64: links from the sender to the ISATAP router / translator (default 1)",
    )
    owd.set_defaults(func=_owd)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ip", type=int, choices=(4, 6), required=True, help="IP version sent")
    parser.add_argument(
        "--payload", type=int, required=True, metavar="N", help="bytes of IP payload"
    )
    parser.add_argument(
        "--rate",
        required=True,
        metavar="RATE",
        help=f"link bit rate: {', '.join(models.RATES)}, Mbit/s, or e.g. 500kbit, 10mbit, 1gbit",
    )
    parser.add_argument(
        "--mechanism",
        choices=models.MECHANISMS,
        default="native",
        help="native IP, or a transition mechanism (default native)",
    )


def _rate(text: str) -> float:
    try:
        return units.rate(text, unlimited=False)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _inputs(args: argparse.Namespace, rate_bps: float) -> dict[str, Any]:
    return {
        "ip": args.ip,
        "payload": args.payload,
        "rate": args.rate,
        "rate_bps": rate_bps,
        "mechanism": args.mechanism,
    }


def _layout(args: argparse.Namespace, fragmenter: str = "paper") -> dict[str, Any]:
    layout = models.fragment_layout(args.payload, args.ip, args.mechanism, fragmenter)
    first, second = models.link_formats(args.ip, args.mechanism)
    return {
        "fragments": layout.count,
        "fragment_payload": layout.size,
        "last_fragment_payload": layout.last,
        "link_formats": [first.name, second.name],
    }


def _throughput(args: argparse.Namespace) -> int:
    rate_bps = _rate(args.rate)
    try:
        bps = models.max_throughput_bps(args.payload, rate_bps, args.ip, args.mechanism,
                                        args.fragmenter)
        sides = [models.frame_bytes(args.payload, args.ip, args.mechanism, s, args.fragmenter)
                 for s in (0, 1)]
        out = {"mbps": round(bps / 1e6, 6), **_inputs(args, rate_bps),
               **_layout(args, args.fragmenter), "fragmenter": args.fragmenter}
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    bottleneck = max(sides, key=sum)
    out["frame_bytes"] = list(bottleneck)
    out["wire_bytes"] = sum(bottleneck)
    out["ttfs_us"] = round(sum(bottleneck) * 8 / rate_bps * 1e6, 6)
    _print(out)
    return 0


def _owd(args: argparse.Namespace) -> int:
    rate_bps = _rate(args.rate)
    prop_s = args.propagation_us * 1e-6
    call = (args.payload, rate_bps, args.ip, args.routers, prop_s, args.mechanism)
    try:
        value = models.owd(*call, first_side_links=args.first_side_links)
        pipeline = models.store_and_forward_owd(*call, first_side_links=args.first_side_links)
        hops = models.hop_serialization(
            args.payload, rate_bps, args.ip, args.routers, args.mechanism, args.first_side_links
        )
        formats = models.hop_formats(args.ip, args.mechanism, args.routers, args.first_side_links)
        out = {"owd_us": round(value * 1e6, 6), **_inputs(args, rate_bps), **_layout(args)}
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out["routers"] = args.routers
    out["propagation_us"] = args.propagation_us
    out["hop_formats"] = [f.name for f in formats]
    out["hop_serialization_us"] = [round(h * 1e6, 6) for h in hops]
    out["store_and_forward_owd_us"] = round(pipeline * 1e6, 6)
    _print(out)
    return 0


def _print(obj: dict[str, Any]) -> None:
    print(json.dumps(obj))
