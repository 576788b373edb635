"""Runs across machines (`testbed run --cluster ADDRESS`) on Dask's distributed scheduler: one
task per share, each trial streamed back as its worker commits it (Dask events), a share whose
worker died retried once elsewhere, then its trials recorded as failed with the reason."""

from __future__ import annotations

import socket
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from testbed.errors import UsageError
from testbed.experiment import RunSummary
from testbed.experiment_spec import Experiment
from testbed.parallel import (
    POLL_S,
    RunBook,
    ShareOutcome,
    execute_share,
    here,
    host_interference,
)
from testbed.shares import Share, split

STARTED_TOPIC = "testbed-share-started"
INSTALL_HINT = "install the cluster extra: .venv/bin/pip install -e '.[cluster]'"


def _distributed() -> Any:
    try:
        import distributed
    except ModuleNotFoundError:
        raise UsageError("--cluster needs Dask's distributed scheduler, which is not installed",
                         hint=INSTALL_HINT) from None
    return distributed


def share_task(share_doc: Mapping[str, Any], argv_prefix: Sequence[str],
               files: Mapping[str, str], topic: str) -> dict[str, Any]:
    """Runs on a Dask worker: the share in a child `testbed run --share` (the experiment file
    shipped in `files`, `{dir}` in the argv is where it lies), each committed trial sent to the
    coordinator as a `topic` event. A share the scheduler re-runs after its first worker died
    is not run again here: the coordinator retries what is missing itself (at most once)."""
    distributed = _distributed()
    worker = distributed.get_worker()
    share = Share.from_dict(share_doc)
    task_key = f"{share.run_id}/{share.index}/{share.attempt}"
    started = distributed.get_client().get_events(STARTED_TOPIC)
    if any(msg == task_key for _, msg in started):
        return {"rerun": True, "worker": worker.address, "placement": here(), "rc": None,
                "why": "the scheduler re-ran a share whose worker died", "rows": []}
    worker.log_event(STARTED_TOPIC, task_key)
    placement = here()

    def send(rows: list[dict[str, Any]]) -> None:
        worker.log_event(topic, {"worker": worker.address, "placement": placement,
                                 "rows": rows})

    def say(lines: list[str]) -> None:
        worker.log_event(topic + "-output", {"worker": worker.address, "lines": lines})

    # in the worker's own folder: Dask purges the folder of a worker that died
    with tempfile.TemporaryDirectory(prefix="tb-share-", dir=worker.local_directory) as tmp:
        out = execute_share(share, argv_prefix, Path(tmp), worker.address, send, files,
                            on_output=say)
    return {"rerun": False, "worker": worker.address, "placement": out.placement,
            "rc": out.returncode, "why": out.why, "rows": out.rows}


def connect(address: str) -> Any:
    """A client of the scheduler at `address` (tcp://HOST:8786), or why not."""
    distributed = _distributed()
    try:
        return distributed.Client(address, timeout=30)
    except (OSError, TimeoutError) as exc:
        raise UsageError(f"--cluster {address}: cannot reach a Dask scheduler there ({exc})",
                         hint="start one with `dask scheduler` and workers with `dask worker "
                         "ADDRESS` (docs/parallel.md)") from None


def run_cluster(exp: Experiment, exp_file: Path, *, db: Path, client: Any,
                resume: bool = False, clock: str | None = None,
                argv_prefix: Sequence[str] | None = None, shares_per_worker: int = 1,
                stream: TextIO | None = None, poll_s: float = POLL_S) -> RunSummary:
    """Run `exp` on the workers of a Dask `client`, one task per share; every trial is stored
    in `db` with its placement (worker address, host, kernel, clock) as soon as it is
    committed on the worker."""
    from testbed.parallel import worker_argv

    workers = client.scheduler_info().get("workers", {})
    if not workers:
        raise UsageError(f"the Dask scheduler at {client.scheduler.address} has no workers",
                         hint="start some: dask worker ADDRESS --nworkers 1 --nthreads 1")
    book = RunBook(exp, db, resume, stream, clock)
    if (clock or exp.clock or "real") == "real":
        per_host = Counter(str(w.get("host")) for w in workers.values())
        for host, n in sorted(per_host.items()):
            problem = host_interference(exp, n)
            if problem:
                book.note(f"warning: {n} Dask workers on {host} measure on the real clock at "
                          f"once: {problem}; run one worker per machine there, or use the "
                          "virtual clock (docs/parallel.md)")
    name = f"{exp.name}.toml"
    files = {name: Path(exp_file).read_text()}
    prefix = list(argv_prefix or worker_argv("{dir}/" + name, exp.profile, clock))
    shares = split(book.todo, book.run_id, len(workers) * shares_per_worker)
    book.shares = len(shares)
    topic = f"testbed-trials-{book.run_id}"
    book.note(f"run {book.run_id}: {len(book.todo)} trials in {len(shares)} shares on "
              f"{len(workers)} Dask workers at {client.scheduler.address} (from "
              f"{socket.gethostname()})")
    running: dict[Any, Share] = {}

    def submit(s: Share) -> None:
        fut = client.submit(share_task, s.to_dict(), prefix, files, topic, pure=False,
                            key=f"testbed-{s.run_id}-{s.index}-{s.attempt}")
        running[fut] = s

    for s in shares:
        submit(s)
    seen = said = 0
    try:
        while running:
            time.sleep(poll_s)
            seen = _drain(client, topic, seen, book)
            said = _echo(client, topic + "-output", said, book)
            for fut in [f for f in running if f.done()]:
                share = running.pop(fut)
                seen = _drain(client, topic, seen, book)
                if fut.status == "finished":
                    res = fut.result()
                    why = str(res["why"])
                    out = ShareOutcome(share, str(res["worker"]), res["rc"], why,
                                       list(res["rows"]), dict(res["placement"]),
                                       bool(res["rerun"]))
                else:
                    exc = fut.exception()
                    out = ShareOutcome(share, "?", None, f"{type(exc).__name__}: {exc}")
                for retry in book.settle(out):
                    submit(retry)
    finally:
        for fut in running:
            fut.cancel()
    return book.finish()


def _echo(client: Any, topic: str, seen: int, book: RunBook) -> int:
    """The workers' own output (a guest's progress lines), named."""
    events = client.get_events(topic)
    for _, msg in list(events)[seen:]:
        book.note("\n".join(f"  {msg['worker']}: {x}" for x in msg["lines"]))
    return len(events)


def _drain(client: Any, topic: str, seen: int, book: RunBook) -> int:
    events = client.get_events(topic)
    for _, msg in list(events)[seen:]:
        book.store(msg["rows"], str(msg["worker"]), dict(msg["placement"]))
    return len(events)
