"""Benchmark: the deterministic virtual-time tier (`testbed vm --clock virtual`) — issue 10.

Runs gamess-morales style experiments on the virtual clock through `testbed run` (which boots
the tier itself) and prints:

- determinism: every OWD cell's median in run 1 and run 2, the second run while this script
  loads every host core with busy processes it starts and stops by pid; target: they differ
  by <= 0.1 µs or 0.01 %, whichever is larger;
- fidelity: routers x payload, measured, model (pi = 0), ratio; the per-router increment
  cell(p+1) - cell(p) against the model's TTFS plus one fitted per-router cost (per IP version
  and rate); target: within 1 %;
- throughput: RFC 2544 zero-loss UDP throughput at `ethernet` / model, two runs;
- transition: `experiments/transition.toml --quick` on the virtual clock (OWD and UDP
  throughput per mechanism and payload), with its failed-trial count;
- wall time of each part.

Usage (as root, from the checkout; every part is optional and sized by its flags):

    .venv/bin/python benchmarks/virtual_clock.py [--parts owd,throughput,transition]
        [--ip 4,6] [--rates ethernet,fastethernet] [--routers 0,1,2,3,4,5]
        [--payloads-v4 10,100,400,700,1000,1480] [--payloads-v6 10,100,400,700,1000,1460]
        [--count 1000] [--workers 2] [--no-load]
        [--tp-payloads-v4 10,100,...] [--tp-payloads-v6 ...]
        [--transition-rates ethernet,fastethernet] [--transition-sizes 100,2000]
        [--json FILE] [--keep DIR]

Defaults are the full gamess-morales OWD grid (2 runs), Tables I-II payloads at ethernet
(2 runs) and the transition quick profile: hours of TCG time; pass smaller sets to sample.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from testbed import models, results, units

ROOT = Path(__file__).resolve().parent.parent
TESTBED = [str(Path(sys.executable).parent / "testbed")]
RATES = {"ethernet": 10e6, "fastethernet": 100e6}
OWD_V4 = [10, 100, 400, 700, 1000, 1480]
OWD_V6 = [10, 100, 400, 700, 1000, 1460]
TP_V4 = [10, 100, 500, 1000, 1480, 1481, 1500, 2000, 2960, 2961]
TP_V6 = [10, 100, 500, 1000, 1460, 1461, 1500, 2000, 2900, 2901]


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def words(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def toml_list(values: list[Any]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


@contextmanager
def host_load(enabled: bool) -> Iterator[list[int]]:
    """One busy process per host core (started here, stopped here by pid)."""
    procs: list[subprocess.Popen[bytes]] = []
    if enabled:
        for _ in range(os.cpu_count() or 1):
            procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            os.kill(p.pid, signal.SIGTERM)
            p.wait()


WORKERS = 1  # --workers: guests run side by side (each on its own virtual clock)


def run_experiment(toml: str, name: str, db: Path, extra: list[str] | None = None) -> float:
    """`testbed run FILE --clock virtual [--workers N]` (boots the tier); its wall time in s."""
    path = db.parent / f"{name}.toml"
    path.write_text(toml)
    t0 = time.monotonic()
    argv = [*TESTBED, "run", str(path), "--db", str(db), "--clock", "virtual", *(extra or [])]
    if WORKERS > 1:
        argv += ["--workers", str(WORKERS)]
    proc = subprocess.run(argv, cwd=ROOT, env={**os.environ, "TESTBED_VM_ACCEL": "tcg"})
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{name}: testbed run exited {proc.returncode}")
    return wall


def rows_of(db: Path) -> list[results.TrialRow]:
    with closing(results.connect(db)) as con:
        return list(results.trials(con))


# --- OWD: determinism and fidelity ----------------------------------------------------------


def owd_toml(a: argparse.Namespace) -> str:
    meas = []
    for ip in a.ip:
        payloads = a.payloads_v4 if ip == 4 else a.payloads_v6
        meas.append(f"""
[measurements.owd_v{ip}]
kind = "pingpong"
ip = {ip}
protocol = "udp"
ip_payload = {toml_list(payloads)}
count = {a.count}
overhead = false
keep_samples = false
cpu = false
""")
    return f"""name = "vclock-owd"
topology = "chain"
repetitions = 1
clock = "virtual"
[params]
mtu = 1500
[sweep]
"topology.rate" = {toml_list(a.rates)}
"topology.routers" = {toml_list(a.routers)}
""" + "".join(meas)


def owd_cells(rows: list[results.TrialRow]) -> dict[tuple[int, str, int, int], float]:
    """(ip, rate, routers, payload) -> median OWD (µs)."""
    out = {}
    for r in rows:
        if r.status != "ok" or r.kind != "pingpong":
            continue
        p = r.point
        out[(int(r.result["params"]["ip"]), str(p["topology.rate"]), int(p["topology.routers"]),
             int(p["ip_payload"]))] = float(r.metrics["owd_median_us"])
    return out


def owd_part(a: argparse.Namespace, work: Path, report: dict[str, Any]) -> None:
    toml = owd_toml(a)
    runs: list[dict[tuple[int, str, int, int], float]] = []
    walls = []
    errors = []
    for i in (1, 2):
        db = work / f"owd-{i}.sqlite"
        with host_load(i == 2 and not a.no_load) as pids:
            if pids:
                print(f"run 2 with the host loaded by {len(pids)} busy processes {pids}",
                      flush=True)
            walls.append(run_experiment(toml, f"owd-{i}", db))
        rows = rows_of(db)
        failed = [r for r in rows if r.status != "ok"]
        errors.append(len(failed))
        for r in failed:
            print(f"run {i} failed: {r.measurement} {r.point}: "
                  f"{(r.error or '').splitlines()[0]}")
        runs.append(owd_cells(rows))
    one, two = runs
    print("\n## Determinism: OWD median, run 1 vs run 2 (run 2 with the host loaded)\n")
    print("| IP | rate | routers | payload | run 1 (µs) | run 2 (µs) | diff (µs) | ok |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    det_ok = True
    for key in sorted(one):
        if key not in two:
            continue
        d = abs(one[key] - two[key])
        ok = d <= max(0.1, 1e-4 * one[key])
        det_ok &= ok
        worst = max(worst, d)
        ip, rate, p, n = key
        print(f"| {ip} | {rate} | {p} | {n} | {one[key]:.3f} | {two[key]:.3f} | {d:.3f} | "
              f"{'yes' if ok else 'NO'} |")
    print(f"\ncells: {len(one)} / {len(two)}; failed trials: {errors}; worst difference "
          f"{worst:.3f} µs; all within target: {det_ok}; wall: run 1 {walls[0]:.0f} s, "
          f"run 2 {walls[1]:.0f} s ({len(one)} cells)")

    print("\n## Fidelity: measured vs model (pi = 0); per-router increment vs TTFS + fitted cost\n")
    fid: list[dict[str, Any]] = []
    fid_ok = True
    for ip in a.ip:
        for rate in a.rates:
            bps = RATES.get(rate) or units.rate(rate, unlimited=False)
            payloads = a.payloads_v4 if ip == 4 else a.payloads_v6
            incs = []
            for n in payloads:
                for p in a.routers:
                    if (ip, rate, p, n) in one and (ip, rate, p + 1, n) in one:
                        inc = one[(ip, rate, p + 1, n)] - one[(ip, rate, p, n)]
                        ttfs = (models.owd(n, bps, ip, p + 1, 0.0)
                                - models.owd(n, bps, ip, p, 0.0)) * 1e6
                        incs.append((n, p, inc, ttfs))
            cost = sum(i - t for _, _, i, t in incs) / len(incs) if incs else 0.0
            print(f"### IPv{ip}, {rate}: fitted per-router cost {cost:.3f} µs "
                  f"(mean of increment - TTFS over {len(incs)} increments)\n")
            print("| routers | payload | measured (µs) | model pi=0 (µs) | ratio | "
                  "increment (µs) | TTFS + cost (µs) | error |")
            print("|---|---|---|---|---|---|---|---|")
            for n in payloads:
                for p in a.routers:
                    if (ip, rate, p, n) not in one:
                        continue
                    meas = one[(ip, rate, p, n)]
                    model = models.owd(n, bps, ip, p, 0.0) * 1e6
                    inc = next(((i, t) for nn, pp, i, t in incs if nn == n and pp + 1 == p),
                               None)
                    inc_txt = pred_txt = err_txt = ""
                    if inc is not None:
                        pred = inc[1] + cost
                        err = (inc[0] - pred) / pred
                        ok = abs(err) <= 0.01
                        fid_ok &= ok
                        inc_txt, pred_txt = f"{inc[0]:.3f}", f"{pred:.3f}"
                        err_txt = f"{100 * err:+.3f} %{'' if ok else ' NO'}"
                    print(f"| {p} | {n} | {meas:.3f} | {model:.3f} | {meas / model:.4f} | "
                          f"{inc_txt} | {pred_txt} | {err_txt} |")
                    fid.append({"ip": ip, "rate": rate, "routers": p, "payload": n,
                                "measured_us": meas, "model_us": model})
            print()
    print(f"every increment within 1 % of TTFS + fitted cost: {fid_ok}")
    report["owd"] = {"run1": {str(k): v for k, v in one.items()},
                     "run2": {str(k): v for k, v in two.items()}, "walls_s": walls,
                     "failed": errors, "deterministic": det_ok, "fidelity_ok": fid_ok,
                     "fidelity": fid}


# --- throughput -------------------------------------------------------------------------------


def tp_toml(a: argparse.Namespace) -> str:
    meas = []
    for ip in a.ip:
        payloads = a.tp_payloads_v4 if ip == 4 else a.tp_payloads_v6
        if payloads:
            meas.append(f"""
[measurements.throughput_v{ip}]
kind = "rfc2544"
ip = {ip}
ip_payload = {toml_list(payloads)}
duration = {a.tp_duration}
resolution = {a.tp_resolution}
cpu = false
""")
    return """name = "vclock-throughput"
topology = "chain"
repetitions = 1
clock = "virtual"
[params]
routers = 0
mtu = 1500
rate = "ethernet"
""" + "".join(meas)


def tp_part(a: argparse.Namespace, work: Path, report: dict[str, Any]) -> None:
    toml = tp_toml(a)
    runs = []
    walls = []
    for i in range(1, a.tp_runs + 1):
        db = work / f"tp-{i}.sqlite"
        walls.append(run_experiment(toml, f"tp-{i}", db))
        cells = {}
        for r in rows_of(db):
            if r.status == "ok" and "throughput_bps" in r.metrics:
                ip = int(r.result["params"]["ip"])
                cells[(ip, int(r.point["ip_payload"]))] = r.metrics["throughput_bps"]
        runs.append(cells)
    print("\n## Throughput at ethernet (zero-loss, RFC 2544) on the virtual clock\n")
    head = " | ".join(f"run {i} (Mbit/s)" for i in range(1, len(runs) + 1))
    # the model of the sender under test: a Linux UDP socket cuts every IPv6 fragment to a
    # multiple of 8 bytes (2897-2900 B take three frames, eq. (6) says two: docs/models.md)
    print(f"| IP | payload | model eq. (7) (Mbit/s) | model, Linux fragments | {head} | "
          "ratio run 1 (Linux fragments) | run spread |")
    print("|---|---|---|---|" + "---|" * len(runs) + "---|---|")
    table = []
    for key in sorted(runs[0]):
        ip, n = key
        paper = models.max_throughput_bps(n, 10e6, ip)
        model = models.max_throughput_bps(n, 10e6, ip, fragmenter="linux")
        vals = [r.get(key) for r in runs]
        got = [v for v in vals if v is not None]
        spread = (max(got) - min(got)) / max(got) if len(got) > 1 else 0.0
        cells = " | ".join(f"{v / 1e6:.4f}" if v else "-" for v in vals)
        print(f"| {ip} | {n} | {paper / 1e6:.4f} | {model / 1e6:.4f} | {cells} | "
              f"{got[0] / model:.4f} | {100 * spread:.3f} % |")
        table.append({"ip": ip, "payload": n, "model_bps": paper, "model_linux_bps": model,
                      "runs_bps": vals})
    print(f"\nwall: {', '.join(f'{w:.0f} s' for w in walls)}")
    report["throughput"] = {"rows": table, "walls_s": walls}


# --- transition -----------------------------------------------------------------------------


def transition_part(a: argparse.Namespace, work: Path, report: dict[str, Any]) -> None:
    src = (ROOT / "experiments" / "transition.toml").read_text()
    if a.transition_rates:
        src = src.replace('"topology.rate" = ["ethernet", "fastethernet"]',
                          f'"topology.rate" = {toml_list(a.transition_rates)}')
    if a.transition_sizes:  # the quick profile's payload lists, reduced
        sizes = toml_list(a.transition_sizes)
        src = src.replace("size = [100, 2000]", f"size = {sizes}")
        src = src.replace("length = [100, 2000]", f"length = {sizes}")
    db = work / "transition.sqlite"
    wall = run_experiment(src, "transition", db, ["--quick"])
    rows = rows_of(db)
    failed = [r for r in rows if r.status != "ok"]
    print("\n## Transition (quick profile) on the virtual clock\n")
    print("| mechanism | rate | measurement | size (B) | OWD median (µs) | UDP (Mbit/s) |")
    print("|---|---|---|---|---|---|")
    table = []
    for r in sorted(rows, key=lambda r: (r.point["topology"], str(r.point.get("topology.rate")),
                                         r.measurement, json.dumps(r.point, sort_keys=True))):
        if r.status != "ok":
            continue
        size = r.point.get("size") or r.point.get("length")
        owd = r.metrics.get("owd_median_us")
        bps = r.metrics.get("receiver_bps")
        print(f"| {r.point['topology']} | {r.point.get('topology.rate')} | {r.measurement} | "
              f"{size} | {'' if owd is None else f'{owd:.2f}'} | "
              f"{'' if bps is None else f'{bps / 1e6:.3f}'} |")
        table.append({"topology": r.point["topology"], "rate": r.point.get("topology.rate"),
                      "measurement": r.measurement, "size": size, "owd_median_us": owd,
                      "receiver_bps": bps})
    print(f"\ntrials: {len(rows)}, failed: {len(failed)}; wall {wall:.0f} s")
    for r in failed:
        print(f"  failed: {r.measurement} {r.point}: {(r.error or '').splitlines()[0]}")
    report["transition"] = {"rows": table, "failed": len(failed), "wall_s": wall}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", type=words, default=["owd", "throughput", "transition"])
    p.add_argument("--ip", type=ints, default=[4, 6])
    p.add_argument("--rates", type=words, default=["ethernet", "fastethernet"])
    p.add_argument("--routers", type=ints, default=[0, 1, 2, 3, 4, 5])
    p.add_argument("--payloads-v4", type=ints, default=OWD_V4)
    p.add_argument("--payloads-v6", type=ints, default=OWD_V6)
    p.add_argument("--count", type=int, default=1000)  # the full profile's
    p.add_argument("--no-load", action="store_true", help="run 2 without loading the host")
    p.add_argument("--tp-payloads-v4", type=ints, default=TP_V4)
    p.add_argument("--tp-payloads-v6", type=ints, default=TP_V6)
    p.add_argument("--tp-duration", type=float, default=2)
    p.add_argument("--tp-resolution", type=float, default=0.002)
    p.add_argument("--tp-runs", type=int, default=2)
    p.add_argument("--transition-rates", type=words, default=None)
    p.add_argument("--transition-sizes", type=ints, default=None,
                   help="replace the quick profile's sizes (100,2000)")
    p.add_argument("--json", type=Path, help="keep every number here")
    p.add_argument("--workers", type=int, default=1,
                   help="guests side by side for each run (testbed run --workers N)")
    p.add_argument("--keep", type=Path, default=None,
                   help="write the experiment files and databases here (default: a temporary "
                   "folder, removed at the end)")
    a = p.parse_args()
    global WORKERS
    WORKERS = a.workers
    if os.geteuid() != 0:
        print("benchmarks/virtual_clock.py needs root (namespaces in the guest, as `testbed "
              "run`)", file=sys.stderr)
        return 2
    report: dict[str, Any] = {"args": {k: v for k, v in vars(a).items() if k != "json"}}
    with tempfile.TemporaryDirectory(prefix="tb-vclock-") as tmp:
        work = Path(tmp)
        if a.keep is not None:
            a.keep.mkdir(parents=True, exist_ok=True)
            work = a.keep
        for part, fn in (("owd", owd_part), ("throughput", tp_part),
                         ("transition", transition_part)):
            if part in a.parts:
                t0 = time.monotonic()
                fn(a, work, report)
                report.setdefault("walls_s", {})[part] = time.monotonic() - t0
    print("\n## Wall time per part\n")
    for part, w in report.get("walls_s", {}).items():
        print(f"- {part}: {w:.0f} s")
    if a.json:
        a.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
