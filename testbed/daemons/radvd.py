"""radvd, the router advertisement daemon: its config for one interface and prefix, its argv."""

from __future__ import annotations


def radvd_config(interface: str, prefix: str, *, unicast_only: bool = False) -> str:
    """Advertise `prefix` (autonomous, on-link) on `interface`. `unicast_only` is for links
    without multicast such as ISATAP: no unsolicited adverts, answers unicast to solicitors."""
    lines = [
        "# written by testbed (testbed/daemons/radvd.py)",
        f"interface {interface}",
        "{",
        "    AdvSendAdvert on;",
    ]
    if unicast_only:
        # No unsolicited adverts: the host's route lives only as long as the last answer to
        # its own solicitation. The default lifetime (3 x MaxRtrAdvInterval = 30 s) let an
        # ISATAP host lose its default route mid-run on the virtual clock (quintero-2016's full
        # run, 29 Nov: "Network is unreachable" for the rest of a topology point, 31 trials);
        # RFC 4861 sec. 6.2.1 allows up to 9000 s.
        lines += ["    UnicastOnly on;", "    AdvDefaultLifetime 9000;"]
    lines += [
        "    MinRtrAdvInterval 3;",
        "    MaxRtrAdvInterval 10;",
        f"    prefix {prefix}",
        "    {",
        "        AdvOnLink on;",
        "        AdvAutonomous on;",
        "    };",
        "};",
    ]
    return "\n".join(lines) + "\n"


def radvd_argv(config: str, pidfile: str) -> list[str]:
    """`radvd` in the foreground, logging to stderr, its pid file where asked."""
    return [
        "radvd",
        "--nodaemon",
        "--logmethod",
        "stderr",
        "--debug",
        "1",
        "--config",
        config,
        "--pidfile",
        pidfile,
    ]
