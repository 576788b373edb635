"""Load-time checks of measurement parameter combinations; a trial that raises never aborts a run;
RFC 2544 frame loss starts at line rate; ping-pong stores the round trip."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from testbed import models, results
from testbed.cli import main
from testbed.errors import SpecError
from testbed.experiment import run_experiment
from testbed.experiment_spec import experiment_from_dict, load_experiment, plan
from testbed.measure import kinds, rfc2544_search
from testbed.measure.kinds import Measured
from testbed.measure.kinds import pingpong as pingpong_kind
from testbed.measure.kinds import rfc2544 as rfc2544_kind
from testbed.progress import Progress
from tests.unit.fake_testbed import FakeJournal

ROOT = Path(__file__).resolve().parents[2]

OLD_GOMETZ = {
    "topology": "host-router",
    "sweep": {"ip": [4, 6]},
    "measurements": {
        "throughput": {"kind": "rfc2544", "frame_size": [128, 1518]},
        "throughput_64": {"kind": "rfc2544", "ip": 4, "frame_size": 64},
    },
}


def test_a_global_sweep_overriding_a_measurements_own_value_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        experiment_from_dict(OLD_GOMETZ, file="g.toml")
    assert err.value.file == "g.toml" and err.value.key == "measurements.throughput_64.ip"
    assert "[sweep] ip" in str(err.value)


@pytest.mark.parametrize(("meas", "key", "words"), [
    ({"kind": "rfc2544", "ip": [4, 6], "frame_size": 64}, "measurements.a.frame_size",
     "64-byte frame cannot carry one byte of UDP data over IPv6"),
    # the small size last: every combination is checked, not each value with the others' first
    ({"kind": "ping", "ip": [4, 6], "frame_size": [128, 64]}, "measurements.a.frame_size",
     "cannot carry an ICMP echo request over IPv6"),
    ({"kind": "iperf3", "protocol": "udp", "ratio": ["100/0", "50/50"], "frame_size": 64},
     "measurements.a.frame_size", "over IPv6"),
    ({"kind": "pingpong", "protocol": "tcp", "ip_payload": [100, 20]},
     "measurements.a.ip_payload", "no message bytes"),
])
def test_sizes_too_small_for_the_probe_are_refused_at_load(meas: dict[str, Any], key: str,
                                                           words: str) -> None:
    with pytest.raises(SpecError) as err:
        experiment_from_dict({"topology": "chain", "measurements": {"a": meas}}, file="x.toml")
    assert err.value.key == key and words in str(err.value)


def test_sizes_that_fit_load() -> None:
    exp = experiment_from_dict({"topology": "chain", "measurements": {
        "a": {"kind": "rfc2544", "ip": 4, "frame_size": 64},
        "b": {"kind": "ping", "ip": [4, 6], "frame_size": [66, 1518]},
        "c": {"kind": "pingpong", "protocol": "udp", "ip_payload": 9}}}, file="x.toml")
    assert len(plan(exp)) == 1 + 4 + 1


def test_cli_exits_2_naming_file_measurement_and_key(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('topology = "host-router"\n[sweep]\nip = [4, 6]\n'
                 '[measurements.throughput_64]\nkind = "rfc2544"\nframe_size = 64\n')
    assert main(["run", str(f), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert str(f) in err and "measurements.throughput_64.frame_size" in err


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "experiments").glob("*.toml")))
def test_shipped_experiments_load_in_both_profiles(name: str) -> None:
    for profile in ("full", "quick"):
        assert plan(load_experiment(ROOT / "experiments" / f"{name}.toml", profile))


class _Topo:
    name = "chain"
    node_names = ("h1", "r1", "h2")

    def to_dict(self) -> dict[str, Any]:
        return {"name": "chain"}


@contextmanager
def _opener(path: Path, params: Mapping[str, str]) -> Iterator[Any]:
    tb = FakeJournal()
    tb.topology = _Topo()  # type: ignore[attr-defined]
    tb.qdiscs = lambda: []  # type: ignore[attr-defined]
    yield tb


def test_a_trial_that_raises_anything_is_recorded_failed_and_the_run_goes_on(
        tmp_path: Path) -> None:
    import io

    exp = experiment_from_dict({"topology": "chain", "measurements": {
        "a": {"kind": "pingpong", "size": [10, 20, 30]}}}, file=str(tmp_path / "e.toml"))

    def trial(tb: Any, t: Any, ctx: Any) -> Measured:
        if t.params["size"] == 20:
            raise ValueError("a 20-byte thing cannot")
        return Measured({"v": 1.0}, {})

    db = tmp_path / "r.sqlite"
    s = run_experiment(exp, db=db, open_testbed=_opener, run_trial=trial,
                       progress=Progress(0, stream=io.StringIO(), tty=False))
    assert (s.ran, s.failed) == (2, 1)
    with closing(results.connect(db)) as con:
        rows = {r.point["size"]: r for r in results.trials(con)}
    assert rows[20].status == "error" and rows[20].error == "ValueError: a 20-byte thing cannot"
    assert rows[10].status == rows[30].status == "ok"


def test_frame_loss_starts_at_line_rate_not_at_the_throughput(
        monkeypatch: pytest.MonkeyPatch) -> None:
    offered: list[float] = []
    cap = 0.5 * models.max_throughput_bps(1480, 1e9, 4)  # the device forwards half line rate

    def fake_udp_trial(*_a: Any, **_k: Any) -> rfc2544_search.Trial:
        def trial(rate: float) -> rfc2544_search.TrialOutcome:
            offered.append(rate)
            got = min(1.0, cap / rate)
            return rfc2544_search.TrialOutcome(rate, rate, 1000, int(1000 * got), 0.0, 1.0)
        return trial

    monkeypatch.setattr(rfc2544_kind, "udp_trial", fake_udp_trial)
    tb = SimpleNamespace(topology=SimpleNamespace(
        links=[SimpleNamespace(shape=SimpleNamespace(rate_bps=1e9))]))
    p = kinds.validate_params("rfc2544", {"frame_size": 1518, "test": "both", "cpu": False},
                                "x", "m")
    m = kinds.measure("rfc2544", tb, p, kinds.Context())  # type: ignore[arg-type]
    line = models.max_throughput_bps(1480, 1e9, 4)
    loss = m.result["frame_loss"]
    assert loss[0]["offered"] == pytest.approx(line)
    assert m.metrics["frame_loss_pct_at_start"] == pytest.approx(50.0, abs=0.2)
    assert [round(s["offered"] / line, 2) for s in loss[:3]] == [1.0, 0.9, 0.8]
    assert loss[-1]["loss_percent"] == loss[-2]["loss_percent"] == 0.0
    assert m.metrics["throughput_bps"] <= cap * 1.001


def test_pingpong_stores_the_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"owd": {"n": 3, "mean_us": 30.0, "min_us": 25.0, "max_us": 40.0, "median_us": 29.0,
                   "p99_us": 39.0}, "lost": 0, "busy_poll": False}
    monkeypatch.setattr(pingpong_kind, "exchange", lambda *a, **k: dict(doc))
    tb = SimpleNamespace(address=lambda node, ip: "10.0.0.2")
    p = kinds.validate_params("pingpong", {"size": 64, "overhead": False, "cpu": False},
                              "x", "m")
    m = kinds.measure("pingpong", tb, p, kinds.Context())  # type: ignore[arg-type]
    assert m.metrics["rtt_median_us"] == 58.0 and m.metrics["owd_median_us"] == 29.0
    assert m.metrics["rtt_mean_us"] == 60.0


def test_state_folder_ignores_json_that_is_not_a_run_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed import state

    monkeypatch.setenv("TESTBED_STATE_DIR", str(tmp_path))
    (tmp_path / "kvm-verdict.json").write_text('{"boot_id": "x", "kernel": "k", "reason": "r"}')
    assert state.all_records() == []
    assert state.new_run_name().startswith("r")
