"""`testbed report` from a small results database built here: figures, the tables behind them,
paper-vs-emulator tables, quoted numbers, the ledger, provenance and failed trials."""

from __future__ import annotations

import json
from contextlib import closing
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from testbed import models, papers, results
from testbed.cli import main
from testbed.report.claims import ClaimResult
from testbed.report.data import load
from testbed.report.render import build, write_report
from testbed.stats import describe

TBF = [{"node": "h1", "qdiscs": [{"kind": "tbf", "handle": "1:"}]}]
NETEM = [{"node": "h1", "qdiscs": [{"kind": "netem", "handle": "1:"}]}]

# (ip, payload) -> three throughput values (Mbit/s) at Ethernet, point-to-point
GM_TPUT = {(4, 100): [6.30, 6.31, 6.29], (4, 1481): [9.10, 9.11, 9.12],
           (6, 100): [5.60, 5.58, 5.59]}
# (ip, payload, routers) -> OWD means (µs) at Ethernet
GM_OWD = {(4, 100, 0): [120.0, 121.0], (4, 100, 2): [300.0, 310.0], (6, 1460, 0): [1250.0]}


class Db:
    def __init__(self, path: Path) -> None:
        self.con = results.connect(path)
        self.n = 0

    def run(self, experiment: str, prov: dict[str, Any] | None = None) -> str:
        p = {"kernel": "6.1.0-test", "python": "3.11", "testbed_version": "0.1.0",
             "git_revision": "abc123", "cpu_model": "Test CPU", "ncpu": 2, "machine": "x86_64",
             "tools": {"iperf3": "iperf 3.12"}, **(prov or {})}
        return results.start_run(self.con, experiment, "quick", {}, p, 0)

    def trial(self, run_id: str, experiment: str, measurement: str, kind: str,
              point: dict[str, Any], params: dict[str, Any], metrics: dict[str, float],
              rep: int, *, status: str = "ok", error: str | None = None,
              qdiscs: Any = None, result: dict[str, Any] | None = None) -> None:
        self.n += 1
        gk = results.canonical(point)
        results.write_trial(self.con, results.TrialRow(
            f"{run_id}/{measurement}/{gk}/{rep}/{self.n}", run_id, experiment, "quick",
            measurement, kind, point, gk, rep, 1.0 + self.n, 2.0 + self.n, status, error,
            metrics, {"params": params, **(result or {})}, {}, TBF if qdiscs is None else qdiscs))


def make_db(path: Path) -> Path:
    db = Db(path)
    gm = db.run("gamess-morales")
    for (ip, n), vals in GM_TPUT.items():
        for rep, v in enumerate(vals):
            pt = {"topology": "chain", "topology.rate": "ethernet", "topology.routers": 0,
                  "ip_payload": n}
            db.trial(gm, "gamess-morales", f"throughput_v{ip}", "rfc2544", pt, {"ip": ip},
                     {"throughput_bps": v * 1e6}, rep)
    for (ip, n, routers), vals in GM_OWD.items():
        for rep, v in enumerate(vals):
            pt = {"topology": "chain", "topology.rate": "ethernet", "topology.routers": routers,
                  "ip_payload": n}
            db.trial(gm, "gamess-morales", f"owd_v{ip}", "pingpong", pt,
                     {"ip": ip, "protocol": "udp"},
                     {"owd_mean_us": v, "probe_overhead_mean_us": 20.0 + rep}, rep)
    # the same point measured with netem (another tier): a separate statistic
    db.trial(gm, "gamess-morales", "owd_v4", "pingpong",
             {"topology": "chain", "topology.rate": "ethernet", "topology.routers": 0,
              "ip_payload": 100}, {"ip": 4, "protocol": "udp"}, {"owd_mean_us": 160.0}, 7,
             qdiscs=NETEM)
    db.trial(gm, "gamess-morales", "owd_v6", "pingpong",
             {"topology": "chain", "topology.rate": "ethernet", "topology.routers": 2,
              "ip_payload": 100}, {"ip": 6, "protocol": "udp"}, {}, 0, status="error",
             error="ping-pong server on h2: did not listen on udp port 20001 within 10 s")
    go = db.run("gometz-2015")
    for ip in (4, 6):
        for rep, v in enumerate([80.0, 82.0, 90.0]):
            db.trial(go, "gometz-2015", "throughput", "rfc2544",
                     {"topology": "host-router", "ip": ip, "frame_size": 1518},
                     {"ip": ip, "frame_size": 1518}, {"throughput_bps": (v - ip) * 1e6}, rep,
                     result={"frame_loss": [{"loss_percent": 0.0}, {"loss_percent": 0.0}]})
            db.trial(go, "gometz-2015", "latency", "ping",
                     {"topology": "host-router", "ip": ip, "frame_size": 64},
                     {"ip": ip, "frame_size": 64},
                     {"rtt_min_ms": 0.05 + rep / 100, "rtt_mean_ms": 0.1 + rep / 100,
                      "rtt_max_ms": 0.4 + rep / 10}, rep)
    ze = db.run("zeadally-2004")
    for ip, cps in ((4, [450.0, 452.0]), (6, [426.0, 428.0])):
        for rep, c in enumerate(cps):
            db.trial(ze, "zeadally-2004", "stack", "stackcost", {"topology": "p2p", "ip": ip},
                     {"ip": ip}, {"connections_per_s": c, "tcp_socket_create_us": 3.0 + ip,
                                  "udp_socket_create_us": 2.0, "tcp_connect_us": 40.0 + ip},
                     rep)
            db.trial(ze, "zeadally-2004", "udp_latency", "pingpong",
                     {"topology": "p2p", "ip": ip, "size": 64},
                     {"ip": ip, "protocol": "udp", "size": 64}, {"owd_mean_us": 50.0 + ip}, rep)
        for size, mbps in ((64, 90.0), (1408, 93.0)):
            db.trial(ze, "zeadally-2004", "tcp_throughput", "iperf3",
                     {"topology": "p2p", "ip": ip, "length": size},
                     {"ip": ip, "protocol": "tcp", "length": size},
                     {"receiver_bps": (mbps - (ip - 4) / 2) * 1e6}, 0)
    do = db.run("dobrinov-2016")
    for ip, ipd in ((4, [1.21, 1.22]), (6, [1.23, 1.24])):
        for rep, v in enumerate(ipd):
            db.trial(do, "dobrinov-2016", "ipd", "receiver",
                     {"topology": "one-router", "ip": ip, "rate": "10mbit"},
                     {"ip": ip, "rate": "10mbit", "frame_size": 1518},
                     {"ipd_mean_us": v * 1000, "cpu_machine_softirq_pct": 2.0}, rep)
    for ratio, bps in (("100/0", 94e6), ("0/100", 92e6)):
        db.trial(do, "dobrinov-2016", "mixed", "iperf3",
                 {"topology": "one-router", "ratio": ratio, "frame_size": 1518},
                 {"rate": "95mbit", "protocol": "udp", "ratio": ratio, "frame_size": 1518},
                 {"receiver_bps": bps, "cpu_machine_softirq_pct": 5.0}, 0)
    tr = db.run("transition", {"tier": "vm", "clock": "virtual"})
    for topo, owd in (("native4", 100.0), ("6to4", 140.0)):
        db.trial(tr, "transition", "owd_v6" if topo != "native4" else "owd_v4", "pingpong",
                 {"topology": topo, "topology.rate": "ethernet", "size": 100},
                 {"ip": 4, "protocol": "udp", "size": 100}, {"owd_mean_us": owd}, 0,
                 qdiscs=NETEM)
    db.con.close()
    return path


class Tables(HTMLParser):
    """Cells of every <table> by its data-figure / data-table attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.cur: list[list[str]] | None = None
        self.cell: list[str] | None = None
        self.imgs = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and (a.get("data-figure") or a.get("data-table")):
            self.cur = self.tables.setdefault(str(a.get("data-figure") or a.get("data-table")),
                                              [])
        elif tag == "tr" and self.cur is not None:
            self.cur.append([])
        elif tag in ("td", "th") and self.cur is not None:
            self.cell = []
        elif tag == "img" and str(a.get("src", "")).startswith("data:image/png;base64,"):
            self.imgs += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.cur = None
        elif tag in ("td", "th") and self.cur is not None and self.cell is not None:
            self.cur[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def _fake_evaluate(calls: list[tuple[str, int]]) -> Any:
    """A stand-in for testbed.report.claims.evaluate (tests of the page only)."""

    def evaluate(paper: Any, trials: Any, runs: Any = ()) -> list[ClaimResult]:
        pid = paper.id
        calls.append((pid, len(list(trials))))
        return [ClaimResult(f"{pid[:2]}:1", pid, "IPv4 beats IPv6", "holds", "9.1 > 8.9",
                            n=4, effect=0.02, interval=(0.01, 0.03),
                            tolerance="> 0 (the paper's sec. 4)"),
                ClaimResult(f"{pid[:2]}:2", pid, "vendor claim", "not measurable here", "",
                            "a Linux router is not a Cisco 1841")]

    return evaluate


@pytest.fixture
def fake_claims(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    calls: list[tuple[str, int]] = []
    monkeypatch.setattr("testbed.report.render.evaluate", _fake_evaluate(calls))
    return calls


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[Any, str, Tables, list[tuple[str, int]]]:
    """One report of every paper from the fixture database (drawing takes seconds)."""
    tmp = tmp_path_factory.mktemp("report")
    calls: list[tuple[str, int]] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("testbed.report.render.evaluate", _fake_evaluate(calls))
        db = make_db(tmp / "r.sqlite")
        rep = write_report(db, tmp / "out", experiments=["gamess-morales", "gometz-2015",
                                                         "zeadally-2004", "dobrinov-2016",
                                                         "transition"])
    html = rep.html.read_text()
    t = Tables()
    t.feed(html)
    return rep, html, t, calls


Built = tuple[Any, str, Tables, list[tuple[str, int]]]


def test_every_figure_is_drawn_and_tabulated(built: Built) -> None:
    rep, html, t, _fake_claims = built
    figs = [f for s in rep.sections for f in s.figures]
    ids = {f.id for f in figs}
    assert {"gm-throughput-ethernet", "gm-owd-v4-ethernet", "gm-owd-v6-ethernet",
            "go-throughput-rfc2544", "go-latency", "ze-latency", "ze-stack", "ze-cps",
            "do-load-ipd", "do-mixed-throughput", "qu-owd-udp-ethernet"} <= ids
    for f in figs:
        assert (rep.out / f.png).stat().st_size > 5000
        assert (rep.out / f.svg).read_text().startswith("<?xml")
        assert f.id in t.tables, f.id
        assert len(t.tables[f.id]) == len(f.rows) + 1  # header + one line per point
    assert t.imgs == len(figs)  # embedded: the page stands alone
    assert "<script" not in html


def test_gamess_throughput_numbers_and_model(built: Built) -> None:
    rep, _html, t, _fake_claims = built
    fig = next(f for s in rep.sections for f in s.figures if f.id == "gm-throughput-ethernet")
    row = next(r for r in fig.rows if r.series == "IPv4" and r.x == 100)
    want = describe(GM_TPUT[(4, 100)])
    assert (row.n, row.mean) == (3, pytest.approx(want.mean))
    assert (row.ci_low, row.ci_high) == (pytest.approx(want.ci95_low),
                                         pytest.approx(want.ci95_high))
    assert row.model == pytest.approx(models.max_throughput_bps(100, 10e6, 4) / 1e6)
    assert fig.curves["IPv4"] and fig.curves["IPv6"]
    # the HTML table says the same
    line = next(c for c in t.tables[fig.id] if c[:2] == ["IPv4", "100"])
    assert line[2] == "3" and float(line[3]) == pytest.approx(want.mean, abs=1e-3)
    assert float(line[8]) == pytest.approx(want.mean / row.model, abs=1e-3)


def test_gamess_paper_tables_cell_by_cell(built: Built) -> None:
    rep, _html, t, _fake_claims = built
    sec = next(s for s in rep.sections if s.paper == "gamess-morales")
    tabs = {pt.id: pt for pt in sec.paper_tables}
    assert list(tabs) == ["table-i", "table-ii", "table-iii", "table-iv", "table-v", "table-vi"]
    assert len(tabs["table-i"].cells) == 30
    # one cell per printed cell, two where two environments measured it (tbf and netem)
    assert len({(c.payload, c.column) for c in tabs["table-iii"].cells}) == 36
    assert len(tabs["table-iii"].cells) == 37
    cell = next(c for c in tabs["table-i"].measured if c.payload == 100)
    assert (cell.paper, round(cell.model, 2)) == (6.32, 6.33)
    assert cell.ours is not None and cell.ours.mean == pytest.approx(6.30)
    assert cell.ours_over_paper == pytest.approx(6.30 / 6.32)
    assert [c.payload for c in tabs["table-ii"].measured] == [100]
    # Table III: 100 B through 2 routers, and 0 routers in two environments (tbf and netem)
    owd = {(c.payload, c.column, c.ours.env.shaping): c.ours.mean
           for c in tabs["table-iii"].measured if c.ours}
    assert owd == {(100, "0", "tbf"): 120.5, (100, "2", "tbf"): 305.0, (100, "0", "netem"): 160.0}
    assert len(t.tables["table-iii"]) == 1 + 3
    six = next(c for c in tabs["table-vi"].cells if c.payload == 1000 and c.column == "2")
    assert (six.paper, round(six.model)) == (317.0, 349) and six.ours is None


def test_environments_never_mix(built: Built) -> None:
    rep, _html, _t, _fake_claims = built
    fig = next(f for s in rep.sections for f in s.figures if f.id == "gm-owd-v4-ethernet")
    zero = [r for r in fig.rows if r.series.startswith("0 routers") and r.x == 100]
    assert sorted((r.n, r.mean) for r in zero) == [(1, 160.0), (2, 120.5)]
    assert all("[" in r.series for r in zero)  # the label says which environment
    assert sorted(r.extra.get("probe overhead (µs)", -1.0) for r in zero) == [-1.0, 20.5]
    assert fig.extra_columns == ["probe overhead (µs)"]


def test_quotes_ledger_provenance_failures(built: Built) -> None:
    rep, html, _t, fake_claims = built
    secs = {s.paper: s for s in rep.sections}
    ze = {q.what: q.ours for q in secs["zeadally-2004"].quotes}
    assert ze["connections per second, Linux IPv4"].startswith("451 ± ")
    assert ze["IPv6 connections/s degradation, Linux"].startswith("-5.3 % (IPv4 451, IPv6 427")
    assert ze["TCP throughput, Linux, all message sizes"] == (
        "IPv4: 90.0 to 93.0 Mbit/s over 2 sizes (n = 2) / "
        "IPv6: 89.0 to 92.0 Mbit/s over 2 sizes (n = 2)")
    do = {q.what: q.ours for q in secs["dobrinov-2016"].quotes}
    assert do["inter-packet delay, 1518 B at 10 Mbit/s"].startswith("IPv4: 1.215 ± ")
    assert do["inter-packet delay, 1518 B at 95 Mbit/s"] == "not measured"
    assert do["software reset time, mean of 5"] == "not measured"  # no reset trials here
    go = {q.what: q.ours for q in secs["gometz-2015"].quotes}
    assert go["frame loss rate, every test"].startswith("max 0.00 %")
    # ledger from evaluate(), once per paper, with the paper's trials
    assert sorted(p for p, _n in fake_claims) == sorted(papers.builtin_ids())
    assert dict(fake_claims)["gamess-morales"] == 16
    assert rep.counts() == {"holds": 5, "does not hold": 0, "inconclusive": 0,
                            "not measured": 0, "not measurable here": 5, "error": 0}
    assert "a Linux router is not a Cisco 1841" in html
    # provenance: tier and clock from the run; failed trials with their reason
    tr = secs["quintero-2016"].runs[0]
    assert (tr.tier, tr.clock, tr.shaping) == ("vm", "virtual", "netem")
    assert secs["gamess-morales"].runs[0].tier == "host"
    assert "6.1.0-test" in html and "Test CPU" in html
    assert [f.measurement for f in secs["gamess-morales"].failed] == ["owd_v6"]
    assert "did not listen on udp port 20001" in html


def test_a_ledger_that_cannot_be_evaluated_says_why(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_a: Any) -> Any:
        raise RuntimeError("registry broken")

    monkeypatch.setattr("testbed.report.render.evaluate", broken)
    db = make_db(tmp_path / "r.sqlite")
    rep = write_report(db, tmp_path / "o", experiments=["gometz-2015"])
    assert "could not be evaluated: RuntimeError: registry broken" in rep.html.read_text()


def test_selection_errors(tmp_path: Path) -> None:
    db = make_db(tmp_path / "r.sqlite")
    with closing(results.connect(db)) as con:
        run_id = results.runs(con)[0]["run_id"]
    ds = load(db, [run_id])
    assert {t.experiment for t in ds.trials} == {"gamess-morales"}
    rc = main(["report", "--db", str(db), "--experiment", "nope", "--out", str(tmp_path / "x")])
    assert rc == 2
    rc = main(["report", "--db", str(tmp_path / "missing.sqlite"), "--run", "x",
               "--out", str(tmp_path / "x")])
    assert rc == 2


def test_report_command(tmp_path: Path, fake_claims: Any, capsys: pytest.CaptureFixture[str]
                        ) -> None:
    db = make_db(tmp_path / "r.sqlite")
    rc = main(["report", "--db", str(db), "--experiment", "gamess-morales",
               "--out", str(tmp_path / "rep")])
    assert rc == 0
    err = capsys.readouterr().err
    assert str(tmp_path / "rep" / "index.html") in err
    assert "holds: 1" in err and "not measurable here: 1" in err
    assert (tmp_path / "rep" / "gm-throughput-ethernet.svg").exists()
    doc = json.loads((tmp_path / "rep" / "ledger.json").read_text())
    first = doc["claims"][0]
    assert (first["id"], first["verdict"], first["n"], first["interval"]) == (
        "ga:1", "holds", 4, [0.01, 0.03])
    assert first["tolerance"] == "> 0 (the paper's sec. 4)"
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "tolerance (source)" in html and "on the paper's data" in html
    # the same ledger twice: nothing differs (exit 0); one verdict changed: listed (exit 1)
    assert main(["report", "--compare", str(tmp_path / "rep"),
                 str(tmp_path / "rep" / "ledger.json")]) == 0
    doc["claims"][0]["verdict"] = "inconclusive"
    (tmp_path / "b.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["report", "--compare", str(tmp_path / "rep"), str(tmp_path / "b.json")]) == 1
    assert capsys.readouterr().out == "ga:1: holds -> inconclusive\n"
    assert main(["report", "--compare", str(tmp_path / "rep"), str(tmp_path / "none")]) == 2


def test_build_uses_only_the_selection(tmp_path: Path, fake_claims: Any) -> None:
    db = make_db(tmp_path / "r.sqlite")
    rep = build(load(db, experiments=["zeadally-2004"]), tmp_path / "z")
    assert [s.paper for s in rep.sections] == ["zeadally-2004"]
    stack = next(f for f in rep.sections[0].figures if f.id == "ze-stack")
    assert {(r.series, r.x) for r in stack.rows} == {
        (f"IPv{v}", op) for v in (4, 6)
        for op in ("TCP socket creation", "UDP socket creation", "TCP connect")}
    lat = next(f for f in rep.sections[0].figures if f.id == "ze-latency")
    assert {r.series: r.mean for r in lat.rows} == {"UDP/IPv4": 108.0, "UDP/IPv6": 112.0}


def test_a_figure_whose_trials_all_failed_still_appears(tmp_path: Path, fake_claims: Any
                                                       ) -> None:
    db = Db(tmp_path / "f.sqlite")
    run = db.run("gamess-morales")
    pt = {"topology": "chain", "topology.rate": "ethernet", "topology.routers": 0,
          "ip_payload": 100}
    db.trial(run, "gamess-morales", "owd_v6", "pingpong", pt, {"ip": 6, "protocol": "udp"}, {},
             0, status="error", error="server did not listen")
    db.con.close()
    rep = write_report(tmp_path / "f.sqlite", tmp_path / "o", experiments=["gamess-morales"])
    fig = next(f for f in rep.sections[0].figures if f.id == "gm-owd-v6-ethernet")
    assert fig.rows == [] and (rep.out / fig.png).exists()
    assert fig.curves["0 routers"][0] == (100.0, pytest.approx(
        models.owd(100, 10e6, 6, 0, 30e-6) * 1e6))
    assert "server did not listen" in rep.html.read_text()


def test_trial_env_reads_the_clock_the_runner_stores() -> None:
    from testbed import waiting
    from testbed.report import data

    virtual = waiting.clock_info({"TESTBED_CLOCK": "virtual", "TESTBED_IN_VM": "1"})
    row = results.TrialRow(
        trial_key="k", run_id="r", experiment="e", profile="quick", measurement="m", kind="owd",
        point={}, group_key="g", repetition=0, started=0.0, finished=1.0, status="ok",
        error=None, metrics={}, result={"clock": virtual}, topology=None, qdiscs=[],
    )
    assert data.trial_env(row, {"in_vm": True}).clock == "virtual"
    real = {**row.to_dict(), "result": {"clock": waiting.clock_info({})}}
    assert data.trial_env(results.TrialRow(**real), {}).clock == "real"
    # a parallel run is recorded by its coordinator on the host; its trials ran in guests
    assert data.trial_env(row, {"hostname": "devbox"}).tier == "vm"
    assert data.trial_env(results.TrialRow(**real), {"hostname": "devbox"}).tier == "host"
