"""unbound as a DNS64 resolver: a local zone server plus a resolver synthesising AAAA records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

ZONE_ADDRESS = "127.0.0.1"
ZONE_PORT = 5353


def _common(workdir: str, name: str, port: int) -> list[str]:
    return [
        "# written by testbed (testbed/daemons/unbound.py)",
        "server:",
        f'    directory: "{workdir}"',
        '    chroot: ""',
        '    username: ""',
        f'    pidfile: "{workdir}/{name}.pid"',
        "    use-syslog: no",
        "    verbosity: 1",
        f"    port: {port}",
        "    do-daemonize: no",
        "    num-threads: 1",
        "    so-reuseport: no",
        '    auto-trust-anchor-file: ""',
    ]


def zones_of(records: Mapping[str, str]) -> list[str]:
    """The parent zones of the record names (h2.test -> test)."""
    return sorted({name.rstrip(".").split(".", 1)[-1] for name in records})


def zone_config(*, records: Mapping[str, str], workdir: str, port: int = ZONE_PORT) -> str:
    """The zone server: answers A records from `records` (name -> IPv4) on 127.0.0.1 only."""
    lines = _common(workdir, "zone", port)
    lines += [
        f"    interface: {ZONE_ADDRESS}",
        "    access-control: 127.0.0.0/8 allow",
        '    module-config: "iterator"',
    ]
    lines += [f'    local-zone: "{z}." static' for z in zones_of(records)]
    lines += [
        f'    local-data: "{name.rstrip(".")}. 300 IN A {addr}"'
        for name, addr in sorted(records.items())
    ]
    lines += ["remote-control:", "    control-enable: no"]
    return "\n".join(lines) + "\n"


def dns64_config(
    *,
    listen: Sequence[str],
    prefix: str,
    zones: Sequence[str],
    workdir: str,
    port: int = 53,
    zone_port: int = ZONE_PORT,
) -> str:
    """The DNS64 resolver (RFC 6147): asks the zone server for `zones` and synthesises an
    AAAA record inside `prefix` for a name that has only A records. unbound does not
    synthesise for its own local-data, hence the separate zone server (a stub zone)."""
    lines = _common(workdir, "dns64", port)
    lines += [f"    interface: {a}" for a in listen]
    lines += [
        "    access-control: ::/0 allow",
        "    access-control: 0.0.0.0/0 allow",
        '    module-config: "dns64 iterator"',
        f"    dns64-prefix: {prefix}",
        "    do-not-query-localhost: no",
    ]
    for z in zones:
        lines += [f'    domain-insecure: "{z}."', f'    local-zone: "{z}." nodefault']
    for z in zones:
        lines += ["stub-zone:", f'    name: "{z}."', f"    stub-addr: {ZONE_ADDRESS}@{zone_port}"]
    lines += ["remote-control:", "    control-enable: no"]
    return "\n".join(lines) + "\n"
