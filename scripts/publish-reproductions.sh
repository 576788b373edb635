#!/usr/bin/env bash
# Regenerate docs/reproductions/: each named paper's FULL profile end to end (`testbed reproduce
# PAPER`), its report (index.html, figures, ledger.json) into docs/reproductions/PAPER/ with a
# run.json (date, commit, wall time, the machine and its load), and docs/reproductions/README.md,
# the index of every published paper. The results database stays out of git, in
# results/reproductions/PAPER.sqlite (a fresh one each time).
#     sudo scripts/publish-reproductions.sh [--quick] [PAPER ...]     (default: all five papers)
#   --quick   the quick profiles instead, into docs/reproductions/PAPER-quick/ (a dry run of the
#             publishing itself; README.md lists them apart)
#   --report-only  measure nothing: write the report again from the database an earlier run of
#             this script left (results/reproductions/PAPER.sqlite) — e.g. after a report-side fix;
#             run.json keeps that run's commit and wall time and adds the report's commit
#   --resume  go on with an interrupted run (Ctrl-C or SIGTERM ends a sitting cleanly): its
#             database is kept, `testbed reproduce --resume` runs what is not stored yet, and
#             run.json's wall time is the sum of the sittings (each listed in it)
# Keep the machine otherwise idle while it runs: the real-clock parts measure the host.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"
T="$REPO/.venv/bin/testbed"
PY="$REPO/.venv/bin/python"
QUICK=()
SUFFIX=""
PAPERS=()
REPORT_ONLY=false
RESUME=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=(--quick); SUFFIX="-quick"; shift ;;
        --report-only) REPORT_ONLY=true; shift ;;
        --resume) RESUME=(--resume); shift ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "publish-reproductions: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) PAPERS+=("$1"); shift ;;
    esac
done
[ "${#PAPERS[@]}" -gt 0 ] || PAPERS=(zeadally-2004 gamess-morales quintero-2016 dobrinov-2016 gometz-2015)
[ "$(id -u)" -eq 0 ] || { echo "publish-reproductions: run as root (namespaces, guests)" >&2; exit 1; }
[ -x "$T" ] || { echo "publish-reproductions: no $T — run scripts/provision.sh first" >&2; exit 1; }

mkdir -p results/reproductions docs/reproductions
for paper in "${PAPERS[@]}"; do
    out="docs/reproductions/$paper$SUFFIX"
    db="results/reproductions/$paper$SUFFIX.sqlite"
    rc=0
    if $REPORT_ONLY; then
        [ -f "$db" ] || { echo "publish-reproductions: --report-only: no $db (run without it first)" >&2; exit 1; }
        load="not recorded (report written again from $db)"
        wall=0
        mapfile -t runs < <("$PY" -c 'import sqlite3, sys
for (r,) in sqlite3.connect(sys.argv[1]).execute("select run_id from runs order by started"): print(r)' "$db")
        prev=$(cat "$out/run.json" 2>/dev/null || echo '{}')  # its load, kept below
        rm -rf "$out"
        echo "publish-reproductions: $paper: the report again from $db (${#runs[@]} runs) -> $out"
        "$T" report --db "$db" "${runs[@]/#/--run=}" --out "$out" || rc=$?
    else
        prev='{}'
        sittings="results/reproductions/$paper$SUFFIX.sittings"  # one JSON line per sitting
        if [ "${#RESUME[@]}" -eq 0 ]; then
            rm -rf "$db" "$db-wal" "$db-shm" "$sittings"
        elif [ ! -f "$db" ]; then
            echo "publish-reproductions: --resume: no $db to go on with (run without it first)" >&2
            exit 1
        fi
        rm -rf "$out"
        load=$(cut -d' ' -f1-3 /proc/loadavg)
        start=$(date +%s)
        echo "publish-reproductions: $paper${SUFFIX:+ (quick)}${RESUME:+ (resumed)} -> $out (load before: $load)"
        stopped=false
        trap 'stopped=true' INT TERM  # the sitting is recorded below; testbed cleans up itself
        "$T" reproduce "$paper" "${QUICK[@]}" "${RESUME[@]}" --db "$db" --out "$out" || rc=$?
        trap - INT TERM
        wall=$(( $(date +%s) - start ))
        "$PY" -c 'import json, subprocess, sys, time
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(int(sys.argv[1]))),
                  "commit": commit.stdout.strip(), "wall_s": int(sys.argv[2]),
                  "load_before": sys.argv[3], "exit_status": int(sys.argv[4])}))' \
            "$start" "$wall" "$load" "$rc" >> "$sittings"
        if $stopped || [ ! -f "$out/ledger.json" ]; then
            echo "publish-reproductions: $paper stopped after $((wall / 60))m$((wall % 60))s (exit $rc);" \
                 "go on with: sudo scripts/publish-reproductions.sh --resume ${QUICK[*]:+${QUICK[*]} }$paper" >&2
            exit 1
        fi
        wall=$("$PY" -c 'import json, sys
print(sum(json.loads(x)["wall_s"] for x in open(sys.argv[1]) if x.strip()))' "$sittings")
        prev=$("$PY" -c 'import json, sys
print(json.dumps({"sittings": [json.loads(x) for x in open(sys.argv[1]) if x.strip()]}))' "$sittings")
    fi
    [ -f "$out/ledger.json" ] || { echo "publish-reproductions: $paper wrote no report (exit $rc)" >&2; exit 1; }
    "$PY" - "$out/run.json" "$paper" "${QUICK[*]:-full}" "$wall" "$load" "$rc" "$db" "$REPORT_ONLY" "$prev" <<'EOF'
import json, os, platform, subprocess, sqlite3, sys, time
path, paper, profile, wall, load, rc, db, report_only, prev_doc = sys.argv[1:]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                             ":!docs/reproductions"],
                            capture_output=True, text=True).stdout.strip())
commit += "+changes" if dirty else ""
with sqlite3.connect(db) as c:
    trials = dict(c.execute("select status, count(*) from trials group by status").fetchall())
    started, finished, prov = c.execute(
        "select min(started), max(finished), (select provenance from runs order by started "
        "limit 1) from runs").fetchone()
doc = {"paper": paper, "profile": "quick" if profile == "--quick" else "full",
       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
       "commit": commit, "wall_s": int(wall),
       "exit_status": int(rc), "trials_ok": trials.get("ok", 0),
       "trials_failed": trials.get("error", 0),
       "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                   "load_before": load}}
if report_only != "true":
    sittings = json.loads(prev_doc).get("sittings", [])
    if sittings:  # when the (first) sitting started, as for a report written again
        doc["date"] = sittings[0]["date"]
    if len(sittings) > 1:  # a run in sittings (--resume): each, and the wall time their sum
        doc["sittings"] = sittings
        doc["wall_note"] = f"the sum of {len(sittings)} sittings' wall times (--resume)"
if report_only == "true":
    # the measurement's own commit and times, from the database; the report's commit beside
    measured = json.loads(prov).get("git_revision") or "unknown"
    doc.update(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
               commit=measured[:7], wall_s=int(finished - started),
               wall_note="the runs' first start to last finish, from the database",
               report_written_again={"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                     "commit": commit})
    # the load the measuring run saw, from its own run.json when this one replaces it
    try:
        seen = json.loads(prev_doc).get("machine", {}).get("load_before")
    except (ValueError, AttributeError):
        seen = None
    if isinstance(seen, str) and not seen.startswith("not recorded"):
        doc["machine"]["load_before"] = seen
with open(path, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
EOF
    if $REPORT_ONLY; then
        echo "publish-reproductions: $paper: report written again (exit $rc)"
    else
        echo "publish-reproductions: $paper done in $((wall / 60))m$((wall % 60))s (exit $rc)"
    fi
done

# the index: every published folder, from its run.json and ledger.json
"$PY" - docs/reproductions <<'EOF'
import json, sys
from pathlib import Path
root = Path(sys.argv[1])
rows = []
for run in sorted(root.glob("*/run.json")):
    r = json.loads(run.read_text())
    led = json.loads((run.parent / "ledger.json").read_text())
    c = led["counts"]
    m, s = divmod(int(r["wall_s"]), 60)
    rows.append(f"| [{r['paper']}]({run.parent.name}/index.html) | {r['profile']} | {r['date']} | "
                f"{r['commit']} | {m}m{s:02d}s | {r['trials_ok']} / {r['trials_failed']} | "
                f"{c['holds']} / {c['does not hold']} / {c['inconclusive']} / "
                f"{c['not measured']} / {c['not measurable here']} | "
                f"{r['machine']['cpus']} CPUs, load {r['machine']['load_before']} |")
text = ["# Published reproductions", "",
        "Each folder is one `testbed reproduce PAPER` run's report — `index.html` (open it in a "
        "browser), the figures, and `ledger.json` (every claim's verdict, n, effect, interval "
        "and tolerance) — with `run.json` saying when, on which commit and machine, and how "
        "long it took. Regenerate with `sudo scripts/publish-reproductions.sh [PAPER ...]` "
        "(README, 'Publishing full reproductions').", "",
        "| paper | profile | date | commit | wall time | trials ok / failed | holds / does not "
        "hold / inconclusive / not measured / not measurable | machine |",
        "|---|---|---|---|---|---|---|---|", *rows, ""]
(root / "README.md").write_text("\n".join(text))
print(f"publish-reproductions: {root}/README.md lists {len(rows)} report(s)")
EOF
