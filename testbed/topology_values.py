"""The values of a topology file: parameters and their ${param} references, durations and loss,
networks and addresses a link can hold (unspecified, loopback, link-local, multicast and reserved
ranges refused), prefix lengths — each refused with a SpecError naming the key."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from testbed import units
from testbed.errors import SpecError

PARAM_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def parse_duration(value: Any, file: str, key: str) -> float:
    """A duration (see `testbed.units.duration`; a plain number is milliseconds) in seconds."""
    return units.in_spec(units.duration, value, file, key)


def parse_loss(value: Any, file: str, key: str) -> float:
    """A loss percentage from 0 to 100."""
    return units.in_spec(units.percent, value, file, key)


def coerce_param(name: str, text: str, default: Any, file: str) -> Any:
    """Turn a `--set name=text` value into the type of the declared default."""
    key = f"params.{name}"
    try:
        if isinstance(default, bool):
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        raise SpecError(
            file,
            key,
            f"--set {name}={text}: not a {type(default).__name__}",
            f"a {type(default).__name__} like {default!r}",
        ) from None
    return text


def substitute(value: Any, params: Mapping[str, Any], file: str, key: str) -> Any:
    """Replace ${param} references; a whole-string reference keeps the parameter's type."""
    if isinstance(value, str):

        def lookup(name: str) -> Any:
            if name not in params:
                raise SpecError(
                    file,
                    key,
                    f"unknown parameter '${{{name}}}'",
                    ", ".join(sorted(params)) or "no parameters are declared",
                )
            return params[name]

        whole = PARAM_REF.fullmatch(value)
        if whole:
            return lookup(whole.group(1))

        def repl(m: re.Match[str]) -> str:
            return str(lookup(m.group(1)))

        return PARAM_REF.sub(repl, value)
    if isinstance(value, list):
        return [substitute(v, params, file, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {
            k: substitute(v, params, file, f"{key}.{k}" if key else k) for k, v in value.items()
        }
    return value


def prefixlen(
    addressing: dict[str, Any], key: str, default: int, low: int, high: int, file: str
) -> int:
    """`addressing.KEY`: the prefix length of each link's subnet, `low` (the pool's) to `high`."""
    plen = addressing.get(key, default)
    if isinstance(plen, bool) or not isinstance(plen, int) or not low <= plen <= high:
        raise SpecError(
            file,
            f"addressing.{key}",
            f"bad prefix length {plen!r}",
            f"an integer from {low} to {high}",
        )
    return plen


def network(text: Any, version: int, file: str, key: str) -> Any:
    try:
        net = ipaddress.ip_network(str(text), strict=True)
    except ValueError as exc:
        raise SpecError(
            file,
            key,
            f"bad IPv{version} network {text!r}: {exc}",
            "a network like '198.18.0.0/24'" if version == 4 else "a network like '2001:2::/64'",
        ) from None
    if net.version != version:
        raise SpecError(
            file, key, f"{text!r} is not an IPv{version} network", f"an IPv{version} network"
        )
    clash = next((n for n in UNUSABLE[version] if net.overlaps(n)), None)
    if clash is not None:
        raise SpecError(
            file,
            key,
            f"{net} cannot address a link: it overlaps {clash} ({UNUSABLE[version][clash]})",
            "a unicast network such as the benchmarking ranges 198.18.0.0/15 or 2001:2::/48",
        )
    return net


# Ranges whose addresses no interface of a link can hold (pools and link subnets must avoid
# them): the kernel refuses or misroutes them (e.g. ::/0 made h1 ::1/64: errno 99 at `up`).
UNUSABLE: dict[int, dict[Any, str]] = {
    4: {ipaddress.ip_network(n): why for n, why in (
        ("0.0.0.0/8", "this network, RFC 1122"), ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"), ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved, RFC 1112"))},
    6: {ipaddress.ip_network(n): why for n, why in (
        ("::/127", "unspecified and loopback"), ("fe80::/10", "link-local"),
        ("ff00::/8", "multicast"))},
}


def interface(text: Any, file: str, key: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    if not isinstance(text, str) or "/" not in text:
        raise SpecError(
            file,
            key,
            f"bad address {text!r}",
            "an address with prefix length, e.g. '198.18.0.1/24' or '2001:2::1/64'",
        )
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError as exc:
        raise SpecError(
            file,
            key,
            f"bad address {text!r}: {exc}",
            "an address with prefix length, e.g. '198.18.0.1/24'",
        ) from None
    clash = next((n for n in UNUSABLE[iface.version] if iface.ip in n), None)
    if clash is not None:
        raise SpecError(
            file,
            key,
            f"{iface.ip} cannot be a link's address: it lies in {clash} "
            f"({UNUSABLE[iface.version][clash]})",
            "a unicast address such as '198.18.0.1/24' or '2001:2::1/64'",
        )
    return iface
