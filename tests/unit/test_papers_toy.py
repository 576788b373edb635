"""A researcher's own paper as one module from a folder of theirs ($TESTBED_PAPERS): two claims
and one figure give a report and a ledger without touching any file of the package."""

from __future__ import annotations

import json
import textwrap
from contextlib import closing
from pathlib import Path

import pytest

from testbed import papers, results
from testbed.report.render import write_report

TOY = textwrap.dedent('''
    """Toy 2026: IPv6 pings take longer than IPv4 pings (a paper of my own)."""

    from testbed.papers import Claim, Data, Outcome, Paper
    from testbed.report.claims import not_measured, param
    from testbed.report.data import Dataset, metric
    from testbed.report.figures import Figure, grouped, rows_of, select
    from testbed.report.verdict import judge, ratio


    def slower_v6(d: Data) -> Outcome:
        rtt = d.cells(d.select("ping"), "rtt_mean_ms", lambda r: (int(param(r, "ip")),))
        if (4,) not in rtt or (6,) not in rtt:
            return not_measured("ping RTT of IPv4 and IPv6")
        return judge(ratio(rtt[(4,)], rtt[(6,)], exact=d.exact), "above", 0.05,
                     "IPv6/IPv4 - 1 above +5 % (half the paper's +10 %, Table 1)", "RTT")


    def figures(ds: Dataset) -> list[Figure]:
        trials = select(ds, "toy-ping", kinds=["ping"])
        stats = grouped(ds, trials, metric("rtt_mean_ms"), "rtt_mean_ms")
        return [Figure("toy-rtt", "toy-2026", "RTT per IP version", "IP version", "RTT (ms)",
                       "bars", rows_of(stats, lambda s: f"IPv{s.point.get('ip')}",
                                       lambda s: "ping"))]


    PAPER = Paper(
        id="toy-2026", title="Toy 2026: slow IPv6 pings", citation="A. Author, Toy 2026",
        experiments=("toy-ping",),
        claims=(
            Claim("toy:1", "IPv6 pings take about 10 % longer.", slower_v6,
                  tolerance="above +5 % (half the paper's +10 %, Table 1)", effect=True),
            Claim("toy:2", "(vendor) Router X is fastest - not measurable here.",
                  lambda d: Outcome("not measurable here", "", "no Router X here")),
        ),
        figures=figures,
    )
''')


def _db(path: Path) -> Path:
    with closing(results.connect(path)) as con:
        run = results.start_run(con, "toy-ping", "quick", {}, {"kernel": "6.1"}, 0)
        for i, (ip, rtt) in enumerate([(4, 1.00), (4, 1.01), (4, 0.99),
                                       (6, 1.10), (6, 1.11), (6, 1.09)]):
            point = {"ip": ip}
            results.write_trial(con, results.TrialRow(
                f"{run}/ping/{i}", run, "toy-ping", "quick", "ping", "ping", point,
                results.canonical(point), i, 1.0, 2.0, "ok", None, {"rtt_mean_ms": rtt},
                {"params": {}}, {}, []))
    return path


def test_a_toy_paper_from_a_folder_gets_its_ledger(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "my-papers"
    folder.mkdir()
    (folder / "toy_2026.py").write_text(TOY)
    monkeypatch.setenv(papers.ENV, str(folder))
    assert "toy-2026" in papers.names()
    assert papers.resolve("toy-ping").id == "toy-2026"
    rep = write_report(_db(tmp_path / "r.sqlite"), tmp_path / "out", experiments=["toy-ping"])
    (sec,) = rep.sections
    assert [f.id for f in sec.figures] == ["toy-rtt"]
    assert (tmp_path / "out" / "toy-rtt.svg").exists()
    ledger = json.loads((tmp_path / "out" / "ledger.json").read_text())
    got = {c["id"]: c for c in ledger["claims"]}
    assert got["toy:1"]["verdict"] == "holds" and got["toy:1"]["n"] == 6
    assert got["toy:1"]["interval"][0] > 0.05
    assert got["toy:2"]["verdict"] == "not measurable here"


def test_without_the_folder_the_toy_paper_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(papers.ENV, raising=False)
    assert "toy-2026" not in papers.names()
    with pytest.raises(Exception, match="unknown paper"):
        papers.resolve("toy-2026")


def _rows(experiment: str, rtts: list[tuple[int, float]],
          extra: dict[str, str] | None = None) -> list[results.TrialRow]:
    out = []
    for i, (ip, rtt) in enumerate(rtts):
        point: dict[str, object] = {"ip": ip, **(extra or {})}
        out.append(results.TrialRow(
            f"{experiment}/ping/{i}", "r", experiment, "quick", "ping", "ping", point,
            results.canonical(point), i, 1.0, 2.0, "ok", None, {"rtt_mean_ms": rtt},
            {"params": {}}, {}, []))
    return out


def test_a_variant_is_judged_beside_the_main_verdict_and_never_pooled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Paper.variants: the same claims judged on another system's trials, side by side; those
    trials never enter the main verdict, and `report --compare` sees a variant's verdict."""
    from testbed.report import ledger
    from testbed.report.claims import Variant, evaluate

    folder = tmp_path / "my-papers"
    folder.mkdir()
    (folder / "toy_2026.py").write_text(TOY)
    monkeypatch.setenv(papers.ENV, str(folder))
    base = papers.get("toy-2026")
    from dataclasses import replace

    paper = replace(base, experiments=("toy-ping", "toy-other"), variants=(
        Variant("router B", "toy-other", {"topology.router": "b"}),
        Variant("router C", "toy-other", {"topology.router": "c"})))
    slow = [(4, 1.00), (4, 1.01), (4, 0.99), (6, 1.10), (6, 1.11), (6, 1.09)]
    same = [(4, 1.00), (4, 1.01), (4, 0.99), (6, 1.00), (6, 1.01), (6, 0.99)]
    trials = _rows("toy-ping", slow) + _rows("toy-other", same, {"topology.router": "b"})
    first = evaluate(paper, trials)[0]
    assert first.status == "holds" and first.n == 6  # router B's 6 trials are not pooled in
    assert [(label, o.status) for label, o in first.variants] == [("router B", "does not hold")]
    # without the variants, the same trials pooled would give 12 trials and another verdict
    assert evaluate(base, trials)[0].n == 12
    doc = ledger.claim_doc(first)
    assert doc["variants"][0]["on"] == "router B" and doc["variants"][0]["n"] == 6
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"claims": [doc]}))
    flipped = dict(doc, variants=[dict(doc["variants"][0], verdict="holds")])
    b.write_text(json.dumps({"claims": [flipped]}))
    assert ledger.differences(ledger.read(a), ledger.read(b)) == [
        ("toy:1 on router B", "does not hold", "holds")]
