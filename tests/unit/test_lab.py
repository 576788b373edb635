"""Teaching labs: parsing a sheet, the generated script, the answer key's evaluation, the
structure of every shipped lab, and `testbed lab`'s errors (no root, no guest needed)."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from testbed import cli, results
from testbed import lab as labs

SHEET = """# Lab 9 — A toy

**Tier:** host

Predict:

```sh
x=3
echo "model $x"
```

```text
sample output, never run <not a placeholder problem>
```

```sh
testbed model owd --ip 6 --payload 1000 --rate ethernet --routers 1 --json
```

## For the teacher: the answer key

```toml key
[[answer]]
question = "Q1"
say = "from a command"
command = ["testbed", "model", "owd"]
json = "a.b"
unit = "µs"
expect = [1, 2]
id = "one"

[[answer]]
question = "Q2"
say = "from the results"
results = { experiment = "exp", metric = "owd_median_us", stat = "median", where = { ip = 6 } }
expect = [10, 30]
id = "two"

[[answer]]
question = "Q3"
say = "a difference"
of = ["two", "one"]
op = "minus"
expect = [0, 100]
```
"""


def write(tmp_path: Path, text: str = SHEET, name: str = "toy.md") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_parse_finds_tier_blocks_and_key(tmp_path: Path) -> None:
    lab = labs.parse_lab(write(tmp_path))
    assert lab.problems == ()
    assert (lab.id, lab.tier, lab.title) == ("toy", "host", "Lab 9 — A toy")
    assert [b.info for b in lab.blocks] == ["sh", "text", "sh", "toml key"]
    assert [b.line for b in lab.script_blocks] == [8, 17]
    assert [a.source for a in lab.answers] == ["command", "results", "of"]
    assert lab.answers[0].expect == (1.0, 2.0)
    assert lab.answers[0].unit == "µs"


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda s: s.replace("**Tier:** host", "Tier: host"), "Tier"),
        (lambda s: s.replace("# Lab 9 — A toy", "# A toy"), "first line"),
        (lambda s: s.replace("echo \"model $x\"", "ping <h2-address>"), "placeholder"),
        (lambda s: s.replace("x=3", "sudo testbed up chain"), "sudo"),
        (lambda s: s.replace("expect = [1, 2]", "expect = [2, 1]"), "expect"),
        (lambda s: s.replace("expect = [1, 2]\n", ""), "no expect"),
        (lambda s: s.replace('of = ["two", "one"]', 'of = ["two", "nine"]'), "earlier"),
        (lambda s: s.replace('op = "minus"', 'op = "times"'), "op must"),
        (lambda s: s.replace('json = "a.b"', 'json = "a.b"\nof = ["x", "y"]'), "exactly one"),
        (lambda s: s.replace("```toml key", "```toml"), "0 ```toml key"),
        (lambda s: s.replace("## For the teacher: the answer key", "## Key"), "not under"),
        (lambda s: s + "\nThe paper is in /work/shared/papers/x.pdf\n", "citation"),
        (lambda s: s.replace("[[answer]]", "[[answer]", 1), "not TOML"),
    ],
)
def test_structure_problems_are_found(tmp_path: Path, edit: Any, problem: str) -> None:
    lab = labs.parse_lab(write(tmp_path, edit(SHEET)))
    assert any(problem in p for p in lab.problems), lab.problems


def test_script_runs_blocks_in_order_and_names_the_failing_line(tmp_path: Path) -> None:
    text = SHEET.replace("testbed model owd --ip 6 --payload 1000 --rate ethernet --routers 1"
                         " --json", "echo second\nfalse\necho never")
    lab = labs.parse_lab(write(tmp_path, text))
    script = write(tmp_path, labs.script(lab), "lab.sh")
    proc = subprocess.run(labs.bash_argv(script), capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == ["model 3", "second"]
    assert "== toy: block 1/2 (line 8): x=3" in proc.stderr
    # `false` is on line 18 of the sheet (the block starts on 17)
    assert "block 2 failed at sheet line 18 (exit 1)" in proc.stderr


def _db(tmp_path: Path, suspect: tuple[int, ...] = ()) -> Path:
    """Four trials (owd_median_us 10, 20, 90 at ip 6; 1000 at ip 4); `suspect`: which of them
    carry a fidelity record saying their host was late."""
    db = tmp_path / "results.sqlite"
    with closing(results.connect(db)) as con:
        for i, (ip, v) in enumerate([(6, 10.0), (6, 20.0), (6, 90.0), (4, 1000.0)]):
            pt = {"ip": ip, "payload": 1000}
            results.write_trial(con, results.TrialRow(
                trial_key=f"r/{i}", run_id="r", experiment="exp", profile="quick",
                measurement="owd", kind="pingpong", point=pt, group_key=results.canonical(pt),
                repetition=i, started=1.0, finished=2.0 + i, status="ok", error=None,
                metrics={"owd_median_us": v},
                result={"fidelity": {"verdict": "suspect", "reasons": ["late"]}}
                if i in suspect else {}, topology={}, qdiscs=[]))
    return db


def test_key_from_results_command_and_of(tmp_path: Path) -> None:
    lab = labs.parse_lab(write(tmp_path))
    seen: list[list[str]] = []

    def runner(argv: Any) -> str:
        seen.append(list(argv))
        return json.dumps({"a": {"b": 1.5}})

    got = labs.evaluate(lab, _db(tmp_path), runner)
    assert seen == [["testbed", "model", "owd"]]
    assert [m.value for m in got] == [1.5, 20.0, 18.5]  # median of 10, 20, 90 (ip 6 only)
    assert all(m.ok for m in got)


def test_key_out_of_range_and_missing_data_fail(tmp_path: Path) -> None:
    text = SHEET.replace("expect = [1, 2]", "expect = [3, 4]").replace("ip = 6", "ip = 5")
    lab = labs.parse_lab(write(tmp_path, text))
    got = labs.evaluate(lab, _db(tmp_path), lambda argv: '{"a": {"b": 1.5}}')
    assert [m.ok for m in got] == [False, False, False]
    assert got[0].value == 1.5 and got[0].error is None
    assert got[1].value is None and "no ok trial" in (got[1].error or "")
    assert "no value" in (got[2].error or "")
    assert "FAIL" in labs.table(got)


@pytest.mark.parametrize(("stat", "want"), [("mean", 40.0), ("min", 10.0), ("max", 90.0),
                                            ("count", 3.0)])
def test_results_stats(tmp_path: Path, stat: str, want: float) -> None:
    spec = {"experiment": "exp", "metric": "owd_median_us", "stat": stat,
            "where": {"ip": 6, "measurement": "owd"}}
    value, suspect = labs.from_results(_db(tmp_path), spec)
    assert value == pytest.approx(want) and not suspect


def test_suspect_trials_are_left_out_while_sound_ones_match(tmp_path: Path) -> None:
    spec = {"experiment": "exp", "metric": "owd_median_us", "stat": "max", "where": {"ip": 6}}
    assert labs.from_results(_db(tmp_path, suspect=(2,)), spec) == (20.0, False)


def test_a_value_only_suspect_trials_give_is_not_judged(tmp_path: Path) -> None:
    lab = labs.parse_lab(write(tmp_path))
    got = labs.evaluate(lab, _db(tmp_path, suspect=(0, 1, 2)), lambda argv: '{"a": {"b": 1.5}}')
    assert [m.value for m in got] == [1.5, 20.0, 18.5]  # the suspect trials' values, shown
    assert [m.state for m in got] == ["ok", "not judged", "not judged"]  # Q3 = Q2 - Q1
    assert not got[1].ok
    assert labs.NOT_JUDGED in labs.markdown(lab, got, 1.0)
    assert [r["state"] for r in labs.key_rows(got)] == ["ok", "not judged", "not judged"]


def test_output_as_one_number_or_json_path() -> None:
    assert labs.from_output(" 9.28\n", None) == 9.28
    assert labs.from_output('{"x": [{"y": 2}]}', "x.0.y") == 2.0
    with pytest.raises(ValueError):
        labs.from_output('{"x": "text"}', "x")


@pytest.mark.parametrize("path", labs.shipped_labs(), ids=lambda p: p.stem)
def test_every_shipped_lab_is_well_formed(path: Path) -> None:
    lab = labs.parse_lab(path)
    assert lab.problems == (), "\n".join(lab.problems)
    assert lab.tier in labs.TIERS
    assert all(a.expect is not None for a in lab.answers)


def test_labs_folder_is_the_package_data() -> None:
    top = Path(__file__).resolve().parents[2] / "labs"
    assert top.is_symlink() and top.resolve() == labs.SHIPPED_LABS.resolve()


def test_lab_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lab", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {x["id"] for x in listed} == {p.stem for p in labs.shipped_labs()}
    name = listed[0]["id"]
    assert cli.main(["lab", "show", name]) == 0
    assert capsys.readouterr().out.strip().endswith(f"{name}.md")


def test_lab_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.main(["lab", "show", "no-such-lab"]) == 2
    assert "no lab 'no-such-lab'" in capsys.readouterr().err
    broken = write(tmp_path, SHEET.replace("**Tier:** host", ""), "broken.md")
    assert cli.main(["lab", "check", str(broken)]) == 2
    assert "Tier" in capsys.readouterr().err
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    ok = write(tmp_path)
    assert cli.main(["lab", "check", str(ok)]) == 2
    err = capsys.readouterr().err
    assert "needs root" in err and "Traceback" not in err
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert cli.main(["lab", "check", str(ok), "--keep", str(full)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
