"""The cpu-budget feature (a router with a CPU budget): options, its plan; kthreads' pure parts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testbed import kthreads
from testbed.actions import Command, CpuBudget
from testbed.errors import KernelError, SpecError
from testbed.features.cpu_budget import CpuBudgetFeature, parse_share
from testbed.plan import compile_plan
from testbed.topology import load_topology

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "topologies" / "one-router-budget.toml"


def budget_of(**params: str) -> CpuBudgetFeature:
    plan = compile_plan(load_topology(TOPO, params), "t", netem_available=False)
    (feature,) = plan.features
    assert isinstance(feature, CpuBudgetFeature)
    return feature


@pytest.mark.parametrize(("value", "share"), [
    (0.2, 0.2), ("0.05", 0.05), ("40%", 0.4), (1, 1.0), ("none", None), ("max", None),
])
def test_share_is_a_fraction_a_percentage_or_none(value: object, share: float | None) -> None:
    assert parse_share(value) == share


@pytest.mark.parametrize("value", [0, 1.5, "-0.1", "120%", True, "fast", [0.2]])
def test_bad_shares_are_refused(value: object) -> None:
    with pytest.raises(ValueError):
        parse_share(value)


def test_the_plan_caps_the_routers_napi_threads() -> None:
    f = budget_of(budget="0.05")
    assert (f.quota_us, f.period_us) == (5000, 100_000)
    acts = f.actions()
    budget = acts[-1]
    assert isinstance(budget, CpuBudget)
    assert (budget.node, budget.ifnames, budget.quota_us) == ("r1", ("eth0", "eth1"), 5000)
    # TSO off on both ends of each link (a veth with TSO bypasses its peer's NAPI), GRO on r1
    cmds = [a for a in acts if isinstance(a, Command)]
    assert {(c.node, c.argv[2]) for c in cmds} == {("r1", "eth0"), ("r1", "eth1"),
                                                    ("h1", "eth0"), ("h2", "eth0")}
    assert all("tso" in c.argv and c.undo_argv for c in cmds)
    line = budget.describe()
    assert 'cgroup testbed-RUN-r1, cpu.max "5000 100000" (5 % of one CPU)' in line
    assert CpuBudgetFeature.kernel == ("threaded-napi", "cgroup2-cpu")


def test_period_and_no_limit() -> None:
    f = budget_of(budget="none")
    assert f.quota_us is None
    assert '"max 100000" (no limit)' in f.actions()[-1].describe()
    assert budget_of(budget="25%").quota_us == 25_000


@pytest.mark.parametrize(("budget", "key"), [("2", "share"), ("0.001", "share"),
                                             ("fast", "share")])
def test_bad_options_name_the_key(budget: str, key: str) -> None:
    with pytest.raises(SpecError) as err:
        budget_of(budget=budget)
    assert f"features[0].{key}" in str(err.value)


def test_testbed_plan_prints_it() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "testbed.cli", "plan", str(TOPO), "--set", "budget=0.1"],
        capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert 'r1: threaded NAPI on eth0, eth1; their kernel threads into cgroup testbed-RUN-r1, ' \
           'cpu.max "10000 100000" (10 % of one CPU)' in out
    assert "h1: ethtool -K eth0 tso off" in out
    assert out.splitlines()[-1].startswith("needs: threaded-napi, cgroup2-cpu")


# --- kthreads: pure parts -------------------------------------------------------------------


def fake_proc(tmp: Path, mounts: str, cgroups: str, threads: dict[int, str]) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "mounts").write_text(mounts)
    (tmp / "cgroups").write_text(cgroups)
    (tmp / "filesystems").write_text("nodev\tcgroup\nnodev\tcgroup2\n")
    for pid, comm in threads.items():
        (tmp / str(pid)).mkdir()
        (tmp / str(pid) / "comm").write_text(comm + "\n")
        (tmp / str(pid) / "schedstat").write_text(f"{pid * 1000} 0 0\n")
    return tmp


V1 = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\ncpu\t1\t1\t1\n"
V2 = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t0\t1\t1\ncpu\t0\t1\t1\n"


def test_a_host_on_cgroup_v1_has_no_cpu_budget(tmp_path: Path) -> None:
    unified = tmp_path / "unified"
    unified.mkdir()
    (unified / "cgroup.controllers").write_text("\n")
    mounts = (f"cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"
              f"cgroup2 {unified} cgroup2 rw 0 0\n")
    proc = fake_proc(tmp_path / "proc", mounts, V1, {})
    ok, why = kthreads.has_cpu_controller(proc)
    assert not ok and "cgroup v1" in why and str(unified) in why


def test_a_guest_mounts_cgroup_v2_or_uses_the_mounted_one(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", "proc /proc proc rw 0 0\n", V2, {})
    assert kthreads.cpu_root(proc) == (None, "")  # free: ensure_cpu_root mounts it
    assert kthreads.has_cpu_controller(proc)[0]
    root = tmp_path / "cg"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    proc2 = fake_proc(tmp_path / "proc2", f"cgroup2 {root} cgroup2 rw 0 0\n", V2, {})
    assert kthreads.cpu_root(proc2)[0] == root


def test_threads_are_found_by_difference_and_by_group(tmp_path: Path) -> None:
    before = {10: "napi/eth0-8193", 11: "napi/eth0-8194"}
    after = {**before, 12: "napi/eth0-8195", 13: "napi/eth1-8196"}
    assert kthreads.new_napi_thread(before, after, "eth0", "r1") == 12
    with pytest.raises(KernelError, match="found 0 new napi/eth2"):
        kthreads.new_napi_thread(before, after, "eth2", "r1")
    root = tmp_path / "cg"
    group = root / "testbed-run1-r1"
    group.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu\n")
    (group / "cgroup.threads").write_text("12\n13\n")
    proc = fake_proc(tmp_path / "proc", f"cgroup2 {root} cgroup2 rw 0 0\n", V2, after)
    assert kthreads.budget_group("tb-run1-r1") == "testbed-run1-r1"
    assert kthreads.group_napi_thread("tb-run1-r1", "eth0", proc) == 12  # not h1's 10, 11
    assert kthreads.group_napi_thread("tb-run1-r1", "eth1", proc) == 13
    assert kthreads.group_napi_thread("tb-run1-h1", "eth0", proc) is None
    assert kthreads.run_ns(12, proc) == 12_000


def test_a_group_writes_cpu_max_and_takes_threads(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    root.mkdir()
    (root / "cgroup.subtree_control").write_text("\n")
    g = kthreads.CpuGroup(root, "testbed-x-r1")
    g.create(20_000, 100_000)
    assert g.enabled_cpu and (root / "cgroup.subtree_control").read_text() == "+cpu"
    assert (g.path / "cpu.max").read_text() == "20000 100000"
    g.add(42)
    assert (g.path / "cgroup.procs").read_text() == "42"
    (g.path / "cpu.stat").write_text("usage_usec 10\nnr_periods 3\nnr_throttled 2\n")
    assert g.stat()["nr_throttled"] == 2
    assert kthreads.cpu_max(None, 50_000) == "max 50000"


def test_senders_align_to_the_budgets_refill_grid(tmp_path: Path) -> None:
    from testbed.measure import udpprobe

    root = tmp_path / "cg"
    (root / "testbed-run1-r1").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "testbed-run1-r1" / "cpu.max").write_text("2000 20000\n")
    proc = fake_proc(tmp_path / "proc", f"cgroup2 {root} cgroup2 rw 0 0\n", V2, {})
    names = ["tb-run1-h1", "tb-run1-r1", "tb-run1-h2"]
    assert kthreads.budget_period_s(names, proc) == pytest.approx(0.02)
    (root / "testbed-run1-r1" / "cpu.max").write_text("max 100000\n")  # budget "none"
    assert kthreads.budget_period_s(names, proc) == pytest.approx(0.1)
    assert kthreads.budget_period_s(["tb-run2-r1"], proc) is None  # no group: no budget
    argv = udpprobe.send_argv("py", host="h", port=1, size=10, pps=100, duration_s=1,
                              align_s=0.1)
    assert argv[argv.index("--align") + 1] == "0.1"
    plain = udpprobe.send_argv("py", host="h", port=1, size=10, pps=100, duration_s=1)
    assert "--align" not in plain


def test_an_aligned_sender_sleeps_to_the_next_multiple(monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed.measure import udpprobe

    slept: list[float] = []

    class Stop(Exception):
        pass

    def sleep(s: float) -> None:
        slept.append(s)
        raise Stop

    monkeypatch.setattr(udpprobe.time, "monotonic_ns", lambda: 1_234_567_890)
    monkeypatch.setattr(udpprobe.time, "sleep", sleep)
    monkeypatch.setattr(udpprobe.socket.socket, "connect", lambda self, addr: None)
    with pytest.raises(Stop):
        udpprobe.send("10.0.0.1", 9, 10, 100.0, 1.0, align_s=0.1)
    assert slept == [pytest.approx(0.065432110)]  # 1.234567890 s → 1.3 s
