"""Teaching labs (testbed/labs/*.md): a sheet's tier, its `sh` script and its answer key;
running the script on its tier and evaluating the key (docs/labs.md)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import statistics
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.errors import SpecError, TestbedError, UsageError

SHIPPED_LABS = Path(__file__).parent / "labs"
TIERS = ("host", "vm", "vm virtual")
KEY_HEADING = "## For the teacher: the answer key"
STATS: dict[str, Callable[[list[float]], float]] = {
    "median": statistics.median, "mean": statistics.fmean, "min": min, "max": max,
    "count": lambda xs: float(len(xs)),
}
OPS: dict[str, Callable[[float, float], float]] = {
    "minus": lambda a, b: a - b, "ratio": lambda a, b: a / b,
}
SOURCES = ("command", "results", "of")
NOT_JUDGED = ("not judged: every trial behind the value ran on a host that did not keep up "
              "(suspect, see `testbed results show`); rerun the lab on an idle machine")

_TITLE = re.compile(r"^# Lab \d+ — \S")
_TIER = re.compile(r"^\*\*Tier:\*\*\s*(vm virtual|vm|host)\b", re.M)
_FENCE = re.compile(r"^```([^`\n]*)$")
_PLACEHOLDER = re.compile(r"<[A-Za-z][\w .-]*>")
_PAPER_PATH = re.compile(r"(/work/|/home/|~/|\bpapers/)\S*|\S+\.pdf\b")


@dataclass(frozen=True)
class Block:
    """One fenced block of a sheet: its info string, first line of text (1-based), text."""

    info: str
    line: int
    text: str


@dataclass(frozen=True)
class Answer:
    """One entry of the answer key."""

    question: str
    say: str
    source: str  # "command" | "results" | "of"
    spec: Mapping[str, Any]
    unit: str = ""
    expect: tuple[float, float] | None = None
    id: str | None = None


@dataclass(frozen=True)
class Lab:
    """A parsed sheet."""

    id: str
    path: Path
    title: str
    tier: str | None
    blocks: tuple[Block, ...]
    answers: tuple[Answer, ...]
    problems: tuple[str, ...] = ()

    @property
    def script_blocks(self) -> list[Block]:
        return [b for b in self.blocks if b.info == "sh"]


@dataclass
class Measured:
    """An answer with the value the lab's run gave (or why none)."""

    answer: Answer
    value: float | None = None
    error: str | None = None
    suspect: bool = False  # the value rests only on trials whose host was late (fidelity)

    @property
    def ok(self) -> bool:
        exp = self.answer.expect
        return (self.value is not None and not self.suspect
                and (exp is None or exp[0] <= self.value <= exp[1]))

    @property
    def state(self) -> str:
        """"ok", "FAIL", or "not judged" (a value measured only on a late host)."""
        if self.ok:
            return "ok"
        return "not judged" if self.suspect and self.value is not None else "FAIL"


# --- finding and parsing ---------------------------------------------------------------------

def shipped_labs() -> list[Path]:
    """Every shipped sheet, by file name."""
    return sorted(SHIPPED_LABS.glob("*.md"))


def find_lab(name: str) -> Path:
    """A lab by id (shipped) or by path to a sheet."""
    p = Path(name)
    if p.suffix == ".md" and p.is_file():
        return p
    shipped = SHIPPED_LABS / f"{name}.md"
    if shipped.is_file():
        return shipped
    raise UsageError(f"no lab {name!r}",
                     hint="a path to a sheet, or one of: "
                     + ", ".join(p.stem for p in shipped_labs()))


def fenced_blocks(text: str) -> list[Block]:
    """The sheet's fenced blocks (``` fences at the start of a line), in order."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        blocks.append(Block(m.group(1).strip(), start + 1, "\n".join(body)))
        i += 1
    return blocks


def parse_lab(path: Path) -> Lab:
    """Read a sheet; what is wrong with it is listed in `Lab.problems` (nothing raises)."""
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[0] if text else ""
    problems: list[str] = []
    if not _TITLE.match(first):
        problems.append("the first line is not '# Lab N — Title'")
    tier_m = _TIER.search(text)
    if tier_m is None:
        problems.append("no '**Tier:** host|vm|vm virtual' line")
    blocks = fenced_blocks(text)
    answers: list[Answer] = []
    keys = [b for b in blocks if b.info == "toml key"]
    if len(keys) != 1:
        problems.append(f"{len(keys)} ```toml key blocks (want exactly one)")
    else:
        answers = _parse_key(keys[0], problems)
        if KEY_HEADING not in text or text.index(KEY_HEADING) > text.index(keys[0].text):
            problems.append(f"the key block is not under '{KEY_HEADING}'")
    problems.extend(_script_problems(blocks))
    problems.extend(f"line {n}: a file path where a citation belongs: {m}"
                    for n, m in _paper_paths(text))
    title = first.removeprefix("#").strip()
    return Lab(path.stem, path, title, tier_m.group(1) if tier_m else None,
               tuple(blocks), tuple(answers), tuple(problems))


def _script_problems(blocks: Sequence[Block]) -> list[str]:
    sh = [b for b in blocks if b.info == "sh"]
    out = [] if sh else ["no ```sh block: nothing to run"]
    for b in sh:
        for k, line in enumerate(b.text.splitlines()):
            m = _PLACEHOLDER.search(line)
            if m:
                out.append(f"line {b.line + k}: a placeholder in a sh block: {m.group(0)}")
            if re.search(r"(^|[;&|(]\s*)sudo\b", line):
                out.append(f"line {b.line + k}: sudo in a sh block (the sheet runs as root)")
    return out


def _paper_paths(text: str) -> list[tuple[int, str]]:
    return [(n, m.group(0)) for n, line in enumerate(text.splitlines(), 1)
            for m in [_PAPER_PATH.search(line)] if m and "paper" in line.lower()]


def _parse_key(block: Block, problems: list[str]) -> list[Answer]:
    try:
        doc = tomllib.loads(block.text)
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"line {block.line}: the key is not TOML: {exc}")
        return []
    entries = doc.get("answer")
    if not isinstance(entries, list) or not entries:
        problems.append("the key has no [[answer]] entries")
        return []
    answers: list[Answer] = []
    for n, e in enumerate(entries, 1):
        a = _parse_answer(e, f"answer {n}", {x.id for x in answers if x.id}, problems)
        if a is not None:
            answers.append(a)
    return answers


def _parse_answer(e: Mapping[str, Any], where: str, ids: set[str],
                  problems: list[str]) -> Answer | None:
    """One [[answer]] table, or None (its problems appended)."""
    before = len(problems)
    sources = [s for s in SOURCES if s in e]
    if len(sources) != 1:
        problems.append(f"{where}: needs exactly one of {', '.join(SOURCES)}, has {sources}")
    for k in ("question", "say"):
        if not isinstance(e.get(k), str) or not e[k]:
            problems.append(f"{where}: '{k}' must be a non-empty string")
    expect = _expect(e.get("expect"), where, problems)
    source = sources[0] if sources else ""
    if source == "command" and not (isinstance(e["command"], list) and e["command"]
                                    and all(isinstance(x, str) for x in e["command"])):
        problems.append(f"{where}: command must be a list of strings (an argv)")
    elif source == "results":
        _check_results_spec(e["results"], where, problems)
    elif source == "of":
        of = e["of"]
        if not (isinstance(of, list) and len(of) == 2 and all(x in ids for x in of)):
            problems.append(f"{where}: of must name two earlier answers' ids, got {of!r}")
        if e.get("op") not in OPS:
            problems.append(f"{where}: op must be one of {', '.join(OPS)}")
    if len(problems) > before:
        return None
    spec = {k: v for k, v in e.items()
            if k not in ("question", "say", "unit", "expect", "id")}
    return Answer(e["question"], e["say"], source, spec, str(e.get("unit", "")), expect,
                  e.get("id"))


def _expect(raw: Any, where: str, problems: list[str]) -> tuple[float, float] | None:
    if raw is None:
        problems.append(f"{where}: no expect range")
        return None
    if (isinstance(raw, list) and len(raw) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in raw)
            and raw[0] <= raw[1]):
        return float(raw[0]), float(raw[1])
    problems.append(f"{where}: expect must be [low, high] numbers with low <= high, got {raw!r}")
    return None


def _check_results_spec(spec: Any, where: str, problems: list[str]) -> None:
    if not isinstance(spec, dict):
        problems.append(f"{where}: results must be a table")
        return
    for k in ("experiment", "metric"):
        if not isinstance(spec.get(k), str):
            problems.append(f"{where}: results.{k} must be a string")
    if spec.get("stat", "median") not in STATS:
        problems.append(f"{where}: results.stat must be one of {', '.join(STATS)}")
    if not isinstance(spec.get("where", {}), dict):
        problems.append(f"{where}: results.where must be a table")


def load(name: str) -> Lab:
    """A lab by id or path, refused (SpecError) when its structure is broken."""
    lab = parse_lab(find_lab(name))
    if lab.problems:
        raise SpecError(str(lab.path), "", "; ".join(lab.problems))
    return lab


# --- the script ------------------------------------------------------------------------------

def script(lab: Lab) -> str:
    """The lab's `sh` blocks as one bash script: each block announced as it starts, and a
    failing command reported by block and sheet line."""
    blocks = lab.script_blocks
    out = [
        "# generated by `testbed lab check` from " + lab.path.name,
        "__lab_b=0; __lab_off=0",
        "trap '__lab_rc=$?; echo \"testbed lab: block $__lab_b failed at sheet line "
        "$((LINENO + __lab_off)) (exit $__lab_rc)\" >&2' ERR",
    ]
    for n, b in enumerate(blocks, 1):
        first = next((x for x in b.text.splitlines() if x.strip()), "")
        say = f"== {lab.id}: block {n}/{len(blocks)} (line {b.line}): {first}"
        out.append(f"echo {_quote(say)} >&2")
        # the block's first line lands on script line len(out)+2 (1-based, after this one)
        out.append(f"__lab_b={n}; __lab_off={b.line - (len(out) + 2)}")
        out.extend(b.text.splitlines())
    return "\n".join(out) + "\n"


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


def bash_argv(path: Path) -> list[str]:
    return ["bash", "-Eeuo", "pipefail", str(path)]


def preflight(lab: Lab) -> None:
    """What the lab's tier needs, before anything runs (UsageError, exit 2)."""
    from testbed import preflight as pre

    if lab.tier == "host":
        pre.require_root(f"lab check {lab.id}", "the lab's commands build network namespaces")
        return
    from testbed.vm.run import vm_available

    ok, why = vm_available()
    if not ok:
        raise UsageError(f"lab {lab.id} runs in the full-kernel tier, which cannot boot here: "
                         f"{why}")


def run_script(lab: Lab, workdir: Path) -> int:
    """Run the lab's script on its tier in `workdir` (results/ lands there); its exit code."""
    path = workdir / "lab.sh"
    path.write_text(script(lab))
    db = workdir / "results" / "testbed.sqlite"
    db.parent.mkdir(parents=True, exist_ok=True)
    if lab.tier == "host":
        from testbed import processes

        env = processes.program_env()
        env.pop("TESTBED_DB", None)
        return processes.spawn(bash_argv(path), cwd=workdir, env=env).wait()
    from testbed.vm.run import run_in_vm

    extra = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    clock = "virtual" if lab.tier == "vm virtual" else "real"
    return run_in_vm(bash_argv(path), cwd=workdir, db=db, clock=clock, env=extra).returncode


# --- the key ---------------------------------------------------------------------------------

def evaluate(lab: Lab, db: Path, runner: Callable[[Sequence[str]], str] | None = None
             ) -> list[Measured]:
    """Every answer of the key, measured: commands by `runner` (argv -> stdout), results
    from `db`, `of` from earlier answers."""
    run = runner or _run_command(db)
    done: dict[str, Measured] = {}
    out: list[Measured] = []
    for a in lab.answers:
        m = Measured(a)
        try:
            m.value, m.suspect = _value(a, db, run, done)
        except (TestbedError, ValueError, KeyError, LookupError, ZeroDivisionError,
                sqlite3.Error) as exc:
            m.error = str(exc) or type(exc).__name__
        if a.id:
            done[a.id] = m
        out.append(m)
    return out


def _value(a: Answer, db: Path, run: Callable[[Sequence[str]], str],
           done: Mapping[str, Measured]) -> tuple[float, bool]:
    """The answer's value, and whether it rests only on suspect trials."""
    if a.source == "command":
        return from_output(run(a.spec["command"]), a.spec.get("json")), False
    if a.source == "results":
        return from_results(db, a.spec["results"])
    x, y = (done.get(i) for i in a.spec["of"])
    if x is None or y is None or x.value is None or y.value is None:
        raise ValueError(f"{a.spec['of']}: an answer it needs has no value")
    return OPS[a.spec["op"]](x.value, y.value), x.suspect or y.suspect


def _run_command(db: Path) -> Callable[[Sequence[str]], str]:
    def run(argv: Sequence[str]) -> str:
        from testbed import processes

        env = processes.program_env()
        env["TESTBED_DB"] = str(db)
        return processes.run(argv, env=env, timeout=300).stdout
    return run


def from_output(stdout: str, key: str | None) -> float:
    """A number from a command's output: `key` (dotted, list indices as numbers) into its
    JSON, else the whole output as one number."""
    if key is None:
        return float(stdout.strip())
    node: Any = json.loads(stdout)
    for part in key.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, bool) or not isinstance(node, int | float):
        raise ValueError(f"{key}: not a number: {node!r}")
    return float(node)


def from_results(db: Path, spec: Mapping[str, Any]) -> tuple[float, bool]:
    """A statistic of one metric over the ok trials in `db` that match `where` (keys of the
    trial's point; `measurement` the measurement's name), and whether it is suspect: trials
    whose host was late (testbed.fidelity) are left out, unless no other trial matches — then
    the value is theirs and marked suspect, not judged."""
    from testbed import fidelity, results

    if not db.is_file():
        raise ValueError(f"no results database {db}: the lab's script wrote no trials")
    where: Mapping[str, Any] = spec.get("where", {})
    con = results.connect(db)
    try:
        rows = list(results.trials(con, experiment=spec["experiment"], status="ok"))
    finally:
        con.close()
    matching = [r for r in rows
                if spec["metric"] in r.metrics and all(
                    _same(r.measurement if k == "measurement" else r.point.get(k), v)
                    for k, v in where.items())]
    if not matching:
        raise ValueError(f"no ok trial of {spec['experiment']} with {spec['metric']} "
                         f"where {dict(where)}")
    sound = [r for r in matching if not fidelity.is_suspect(r.result)]
    use = sound or matching
    return STATS[spec.get("stat", "median")]([float(r.metrics[spec["metric"]]) for r in use]), \
        not sound


def _same(have: Any, want: Any) -> bool:
    return have == want or str(have) == str(want)


# --- the report ------------------------------------------------------------------------------

def key_rows(measured: Sequence[Measured]) -> list[dict[str, Any]]:
    """The answer key as rows (what answer-key.json holds)."""
    return [{"question": m.answer.question, "say": m.answer.say, "unit": m.answer.unit,
             "measured": m.value, "expect": list(m.answer.expect) if m.answer.expect else None,
             "ok": m.ok, "state": m.state, "error": m.error} for m in measured]


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g}"


def table(measured: Sequence[Measured]) -> str:
    """The key as a plain-text table."""
    rows = [("question", "what", "measured", "expected", "")]
    for m in measured:
        exp = m.answer.expect
        rows.append((m.answer.question, m.answer.say,
                     f"{_fmt(m.value)} {m.answer.unit}".strip(),
                     f"{_fmt(exp[0])} … {_fmt(exp[1])}" if exp else "",
                     m.state + (f" ({m.error})" if m.error else "")))
    widths = [min(max(len(r[i]) for r in rows), 60) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, [*widths, 0], strict=True)).rstrip()
                     for r in rows)


def not_judged(measured: Sequence[Measured]) -> bool:
    """Whether some answer rests only on trials whose host was late."""
    return any(m.state == "not judged" for m in measured)


def markdown(lab: Lab, measured: Sequence[Measured], wall_s: float) -> str:
    """The key as Markdown (answer-key.md)."""
    lines = [f"# Answer key: {lab.title}", "",
             f"Measured by `testbed lab check {lab.id}` on the {lab.tier} tier "
             f"(script {wall_s:.0f} s).", "",
             "| question | what | measured | expected | |", "|---|---|---|---|---|"]
    for m in measured:
        exp = m.answer.expect
        lines.append(f"| {m.answer.question} | {m.answer.say} | {_fmt(m.value)} "
                     f"{m.answer.unit} | {f'{_fmt(exp[0])} to {_fmt(exp[1])}' if exp else ''} "
                     f"| {m.state} |")
    if not_judged(measured):
        lines += ["", NOT_JUDGED]
    return "\n".join(lines) + "\n"


@dataclass
class Checked:
    """What `check` did: the script's exit code, the key measured, the time taken."""

    returncode: int
    measured: list[Measured] = field(default_factory=list)
    wall_s: float = 0.0


def check(lab: Lab, workdir: Path) -> Checked:
    """Run the lab's script in `workdir`, evaluate its key there, write answer-key.json and
    answer-key.md."""
    import time

    t0 = time.monotonic()
    rc = run_script(lab, workdir)
    wall = time.monotonic() - t0
    if rc != 0:
        return Checked(rc, [], wall)
    measured = evaluate(lab, workdir / "results" / "testbed.sqlite")
    (workdir / "answer-key.json").write_text(json.dumps(
        {"lab": lab.id, "tier": lab.tier, "script_s": round(wall, 1),
         "answers": key_rows(measured)}, indent=2, ensure_ascii=False) + "\n")
    (workdir / "answer-key.md").write_text(markdown(lab, measured, wall))
    return Checked(0, measured, wall)
