"""Subcommands up, plan, show, exec, down, clean and doctor."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from testbed import capabilities, netlink, preflight, processes, signals, state
from testbed.errors import UsageError
from testbed.plan import run_namespaces
from testbed.testbed import Testbed, progress_to_stderr, remove_run
from testbed.topology import find_topology, load_topology


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """`--set k=v` pairs as a dict."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"--set {item!r}: expected NAME=VALUE", hint="e.g. --set routers=5")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def add_set_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        default=[],
        help="override a parameter the file declares (repeatable)",
    )


TOPOLOGY_HELP = ("a shipped topology by name (chain, p2p, one-router, ...: see "
                 "`testbed plan NAME`) or a topology file's path")


def topology_path(text: str) -> Path:
    """`up`/`plan`'s TOPOLOGY: a path as given (its own errors say what is wrong with it),
    else a name among topologies/ here and the shipped ones."""
    if text.endswith(".toml") or "/" in text:
        return Path(text)
    return find_topology(text)


def add_name_option(p: argparse.ArgumentParser, what: str, positional: bool = True) -> None:
    """A run is named the same way in every command: `--name NAME` (`up` sets it)."""
    p.add_argument("--name", help=what)
    if positional:  # `testbed down NAME`, the old spelling, is answered with the one way
        p.add_argument("positional_name", nargs="?", metavar="", help=argparse.SUPPRESS)


def _named(args: argparse.Namespace) -> str | None:
    if getattr(args, "positional_name", None):
        raise UsageError(f"name the run with --name: testbed {args.command} --name "
                         f"{args.positional_name}",
                         hint="every command names a run the same way (up, show, exec, down)")
    name: str | None = args.name
    return name


def register(sub: Any) -> None:
    p = sub.add_parser("up", help="build a topology and keep it (prints its addresses)")
    p.add_argument("file", metavar="TOPOLOGY", help=TOPOLOGY_HELP)
    add_set_option(p)
    p.add_argument("--name", help="the run's name (default: a fresh random one); show, exec and "
                   "down take it with --name")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("plan", help="print what `up` would create, without creating anything")
    p.add_argument("file", metavar="TOPOLOGY", help=TOPOLOGY_HELP)
    add_set_option(p)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser(
        "features", help="list the node features a topology's [[features]] tables can use"
    )
    p.set_defaults(func=cmd_features)

    p = sub.add_parser("show", help="list the runs that exist and their addresses")
    add_name_option(p, "show only this run (default: every run)")
    p.add_argument("--json", action="store_true", help="print the runs as JSON")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("exec", help="run a command in a node: testbed exec NODE -- CMD...")
    p.add_argument("node", help="the node (h1, r1, ...) to run it in")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="the command and its arguments")
    add_name_option(p, "which run (needed when several are up)", positional=False)
    p.set_defaults(func=cmd_exec)

    p = sub.add_parser("down", help="remove a run built by `testbed up`")
    add_name_option(p, "which run (needed when several are up)")
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("clean", help="remove what crashed or killed runs left behind")
    p.add_argument(
        "--all", action="store_true", help="also remove runs kept by `testbed up` (and probes)"
    )
    p.set_defaults(func=cmd_clean)

    p = sub.add_parser("doctor", help="report what this machine can do, and how to fix the rest")
    p.add_argument("--json", action="store_true", help="one JSON object with a `features` map")
    p.set_defaults(func=cmd_doctor)


def cmd_up(args: argparse.Namespace) -> int:
    preflight.require_root("up")
    topo = load_topology(topology_path(args.file), parse_sets(args.set))
    # A signal at any moment of `up` leaves nothing: during the build the Testbed undoes
    # itself; after it (the run already marked "up", output being printed) the run is removed
    # here. Exit 0 means the run is up; exit 130/143 means it is gone.
    record: state.RunRecord | None = None
    with signals.deferred():
        try:
            with Testbed(topo, args.name, keep=True, progress=progress_to_stderr) as tb:
                record = tb.record
                secs = tb.build_seconds
            assert record is not None
            _print_up(args, topo, record, secs)
            signals.check()
        except KeyboardInterrupt:
            if record is not None and state.load(record.name) is not None:
                remove_run(record)
            raise
    return 0


def _print_up(args: argparse.Namespace, topo: Any, record: state.RunRecord, secs: float) -> None:
    if args.json:
        print(
            json.dumps(
                {
                    "name": record.name,
                    "namespaces": record.namespaces,
                    "interfaces": record.interfaces,
                    "build_seconds": secs,
                },
                indent=1,
            )
        )
    else:
        print(
            f"run {record.name}: {topo.name} is up ({len(record.namespaces)} nodes, "
            f"built in {secs:.2f} s)"
        )
        print(_table(record))
        print(
            f"\nnext: testbed exec {topo.nodes[0].name} -- ping -c1 <address>   "
            f"|   testbed down {record.name}"
        )


def cmd_plan(args: argparse.Namespace) -> int:
    from testbed.plan import plan_for

    topo = load_topology(topology_path(args.file), parse_sets(args.set))
    plan = plan_for(topo, "RUN")  # the same front as `testbed up`: the same actions
    for line in plan.describe():
        print(line)
    needs = plan.needs()
    if needs:
        lacking = set(capabilities.missing(needs)) if os.geteuid() == 0 else set()
        shown = [f"{n} (missing here)" if n in lacking else n for n in needs]
        print("needs: " + ", ".join(shown))
    return 0


def cmd_features(args: argparse.Namespace) -> int:
    from testbed import features

    for cls in features.classes():
        where = {None: "no node", "": "node = any node"}.get(
            cls.node_role, f"node = a {cls.node_role}"
        )
        print(f"{cls.kind}: {cls.summary} ({where})")
        for o in cls.options:
            if o.required or o.default is None:
                print(f"    {o.name}: {o.help}" + (" (required)" if o.required else ""))
            else:
                print(f"    {o.name}: {o.help} (default {o.default!r})")
        print("    enabled: true/false (default true)")
        if cls.needs():
            print(f"    needs: {', '.join(cls.needs())}")
    print("\nsyntax and how to write one: docs/features.md")
    return 0


def _table(record: state.RunRecord) -> str:
    rows = [("node", "namespace", "iface", "peer", "addresses")]
    for i in record.interfaces:
        rows.append((i["node"], i["ns"], i["ifname"], i["peer"], " ".join(i["addresses"])))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    lines = []
    for r in rows:
        lines.append("  ".join(r[c].ljust(widths[c]) for c in range(4)) + "  " + r[4])
    return "\n".join(lines)


def _find_run(name: str | None, states: tuple[str, ...] = ("up", "active")) -> state.RunRecord:
    if name:
        rec = state.load(name)
        if rec is None:
            raise UsageError(f"no run named {name!r}", hint="`testbed show` lists the runs")
        return rec
    recs = [r for r in state.all_records() if r.state in states]
    if not recs:
        raise UsageError("no run is up", hint="start one: testbed up topologies/p2p.toml")
    if len(recs) > 1:
        raise UsageError(
            "several runs are up: " + ", ".join(r.name for r in recs),
            hint="name one with --name NAME",
        )
    return recs[0]


def cmd_show(args: argparse.Namespace) -> int:
    name = _named(args)
    recs = [_find_run(name)] if name else state.all_records()
    if args.json:
        print(json.dumps([vars(r) for r in recs], indent=1))
        return 0
    if not recs:
        print("no runs")
        return 0
    for rec in recs:
        owner = (
            "kept by testbed up"
            if rec.state == "up"
            else (
                f"held by pid {rec.pid}"
                if rec.owner_alive()
                else f"left behind by pid {rec.pid} (remove with `testbed clean`)"
            )
        )
        print(f"run {rec.name} ({rec.source} {rec.params}) — {rec.state}, {owner}")
        print(_table(rec))
        print()
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    preflight.require_root("exec", "it enters a network namespace")
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("no command given", hint="testbed exec h1 -- ping -c1 198.18.0.2")
    rec = _find_run(_named(args))
    ns = rec.namespaces.get(args.node)
    if ns is None:
        raise UsageError(
            f"no node {args.node!r} in run {rec.name}", hint="nodes: " + ", ".join(rec.namespaces)
        )
    return processes.interactive(processes.ns_argv(ns, cmd))


def cmd_down(args: argparse.Namespace) -> int:
    preflight.require_root("down", "it removes network namespaces")
    rec = _find_run(_named(args), ("up",))
    if rec.state == "active" and rec.owner_alive():
        raise UsageError(
            f"run {rec.name} is held by a running process (pid {rec.pid})",
            hint="stop that process; it removes its run when it exits",
        )
    removed = remove_run(rec)
    print(f"run {rec.name}: removed {len(removed)} namespaces")
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    preflight.require_root("clean", "it removes network namespaces and processes")
    cleaned = 0
    for rec in state.all_records():
        if rec.state == "up" and not args.all:
            print(
                f"run {rec.name}: up (kept by `testbed up`); left alone — "
                f"`testbed down --name {rec.name}` or `testbed clean --all` removes it"
            )
            continue
        if rec.state != "up" and rec.owner_alive():
            print(f"run {rec.name}: still held by pid {rec.pid}; left alone")
            continue
        removed = remove_run(rec)
        cleaned += 1
        print(f"run {rec.name}: removed {len(removed)} namespaces and their processes")
    records = state.all_records()
    present = netlink.list_netns()
    known = {ns for r in records for ns in r.namespaces.values()}
    known |= {ns for r in records for ns in run_namespaces(r.name, present)}
    for ns in present:
        if ns.startswith("tb-probe-"):
            pid = ns.rsplit("-", 1)[-1]
            if pid.isdigit() and not state.pid_alive(int(pid)):
                from testbed.actions import remove_namespace

                remove_namespace(ns)
                print(f"removed probe namespace {ns}")
        elif ns.startswith("tb-") and ns not in known:
            print(
                f"note: namespace {ns} looks like testbed's but no run records it; "
                f"left alone (remove with `ip netns del {ns}` if it is yours)"
            )
    if cleaned == 0:
        print("nothing to clean")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    caps = capabilities.probe()
    from testbed.vm.run import vm_available

    vm_ok, vm_why = vm_available()
    if args.json:
        print(
            json.dumps(
                {
                    "features": {k: c.available for k, c in caps.items()},
                    "details": {k: c.to_dict() for k, c in caps.items()},
                    "kernel": os.uname().release,
                    "root": os.geteuid() == 0,
                    "vm_tier": {"available": vm_ok, "reason": vm_why},
                    "in_vm": os.environ.get("TESTBED_IN_VM") == "1",
                },
                indent=1,
                sort_keys=True,
            )
        )
        return 0
    print(f"kernel {os.uname().release}; running as {'root' if os.geteuid() == 0 else 'user'}")
    width = max(len(k) for k in caps)
    for name, cap in caps.items():
        mark = "yes" if cap.available else "NO "
        print(f"  {name.ljust(width)}  {mark}  {cap.reason}")
        if not cap.available:
            fix = cap.fix
            if name in capabilities.VM_PROVIDES:
                fix += "" if vm_ok else f" — but the VM tier cannot boot here: {vm_why}"
            print(f"  {' ' * width}        fix: {fix}")
    print(f"\nfull-kernel tier (testbed vm): {'ready' if vm_ok else 'not ready'} — {vm_why}")
    return 0

