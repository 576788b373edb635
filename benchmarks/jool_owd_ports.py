"""Benchmark: what moves Jool's one-way delay between trials on the virtual clock — the server's
port, under a key that changes with every boot (docs/vm.md, "Jool does not").

Usage (as root, from the checkout; each boot is one virtual-clock guest, ~3 min, two at once):

    .venv/bin/python benchmarks/jool_owd_ports.py [--boots 2] [--rounds 2]
        [--ports 7777,20001,33333,41000,52345,60999] [--size 100] [--count 1000]
        [--side-by-side 2] [--json FILE]

Per boot, in one guest: `testbed up nat64-jool --set rate=ethernet` (netem, as the transition
experiment's delays), one ping-pong server (testbed.measure.pingpong_probe) in h2 per port,
then `--rounds` rounds of one probe client in h1 to each port (UDP, `--size` bytes, `--count`
exchanges, its own ephemeral port). Prints each port's OWD median per round and boot: the
spread of a port's rounds in one boot (what repeats), the range over the ports in one boot
(what a trial's fresh server port moves), and each port's range over the boots.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTBED = ROOT / ".venv" / "bin" / "testbed"
RUN = "jport"
PREFIX = "2001:db8:ffff::"  # topologies/nat64-jool.toml's default prefix (/96)


def _tb(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TESTBED), *args], cwd=ROOT, capture_output=True, text=True,
                          check=check)


def _probe(role: str, host: str, port: int, a: argparse.Namespace) -> list[str]:
    from testbed.measure import pingpong_probe

    return pingpong_probe.argv(sys.executable, role, host=host, port=port, size=a.size,
                               count=a.count, busy_poll=False)


def _client(dst: str, port: int, a: argparse.Namespace) -> float:
    """One client run's OWD median (µs); retried while its server is still starting."""
    for _attempt in range(10):
        res = _tb("exec", "--name", RUN, "h1", "--", *_probe("client", dst, port, a),
                  check=False)
        if res.returncode == 0:
            return float(json.loads(res.stdout.splitlines()[-1])["owd"]["median_us"])
        time.sleep(2)
    raise RuntimeError(f"client to port {port} failed 10 times: {res.stderr.strip()[-300:]}")


def inside(a: argparse.Namespace) -> int:
    """In the guest: build, serve, measure, print one JSON line, tear down."""
    _tb("up", "nat64-jool", "--set", "rate=ethernet", "--name", RUN)
    servers: list[subprocess.Popen[str]] = []
    try:
        addrs = json.loads(_tb("exec", "--name", RUN, "h2", "--", "ip", "-j", "-4", "addr",
                               "show", "scope", "global").stdout)
        v4 = next(i["local"] for link in addrs for i in link.get("addr_info", []))
        dst = PREFIX + v4
        for port in a.ports:
            servers.append(subprocess.Popen(
                [str(TESTBED), "exec", "--name", RUN, "h2", "--",
                 *_probe("server", "0.0.0.0", port, a)], cwd=ROOT, text=True,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        rounds = [{str(p): _client(dst, p, a) for p in a.ports} for _ in range(a.rounds)]
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        print("RESULT " + json.dumps({"boot_id": boot_id, "rounds": rounds}), flush=True)
    finally:
        for s in servers:
            s.terminate()
        for s in servers:
            s.wait()
        _tb("down", "--name", RUN, check=False)
    return 0


def boot(a: argparse.Namespace) -> dict[str, Any]:
    argv = [str(TESTBED), "vm", "--clock", "virtual", "--", sys.executable, __file__,
            "--inside", "--ports", ",".join(map(str, a.ports)), "--rounds", str(a.rounds),
            "--size", str(a.size), "--count", str(a.count)]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            doc: dict[str, Any] = json.loads(line[len("RESULT "):])
            return doc
    raise RuntimeError(f"the guest gave no result (exit {out.returncode}): "
                       f"{(out.stdout + out.stderr).strip()[-600:]}")


def report(boots: list[dict[str, Any]], ports: list[int]) -> None:
    print(f"\n{'port':>6} " + " ".join(f"{'boot ' + str(b + 1) + ' (rounds, µs)':>26} {'spread':>7}"
                                      for b in range(len(boots))) + f" {'over boots':>11}")
    for port in ports:
        line = f"{port:>6} "
        meds = []
        for doc in boots:
            vals = [r[str(port)] for r in doc["rounds"]]
            meds.append(sum(vals) / len(vals))
            line += f"{' '.join(f'{v:.3f}' for v in vals):>26} {max(vals) - min(vals):>7.3f} "
        print(line + f"{max(meds) - min(meds):>11.3f}")
    for b, doc in enumerate(boots):
        first = [doc["rounds"][0][str(p)] for p in ports]
        print(f"boot {b + 1} ({doc['boot_id'][:8]}): the ports' range "
              f"{max(first) - min(first):.3f} µs")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--boots", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--ports", type=lambda s: [int(x) for x in s.split(",")],
                   default=[7777, 20001, 33333, 41000, 52345, 60999])
    p.add_argument("--size", type=int, default=100, help="message bytes")
    p.add_argument("--count", type=int, default=1000, help="exchanges per client run")
    p.add_argument("--side-by-side", type=int, default=2,
                   help="guests at once (default 2: one per core of a 2-core machine)")
    p.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, help="also write the numbers here")
    a = p.parse_args()
    if a.inside:
        return inside(a)
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, min(a.boots, a.side_by_side))) as pool:
        boots = list(pool.map(lambda _: boot(a), range(a.boots)))
    print(f"{a.boots} boot(s): {time.monotonic() - t0:.0f} s", flush=True)
    report(boots, a.ports)
    if a.json:
        a.json.write_text(json.dumps(boots, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
