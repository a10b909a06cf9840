"""`conform` runs its checks side by side, bounded by the cores, with results in suite order."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from vllm_plugin_release.conform import CheckResult, Context, Sources, registry, suite
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput


class Probe:
    """Check functions that record how many run at the same time. With `together`, each
    waits (an event, not a time) until that many have started, so a suite that runs
    fewer at once is seen whatever the machine's load; a suite that never lets that many
    start gives up waiting after `patience` seconds and is then seen short."""

    def __init__(self, together: int = 1, patience: float = 60.0) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.started: list[str] = []
        self.together = together
        self.all_in = threading.Event()
        self.patience = patience

    def check(self, name: str, seconds: float = 0.0, status: str = "pass"):
        def run(ctx: Context) -> CheckResult:
            with self.lock:
                self.running += 1
                self.most = max(self.most, self.running)
                self.started.append(name)
                if len(self.started) >= self.together:
                    self.all_in.set()
            self.all_in.wait(self.patience)
            time.sleep(seconds)
            with self.lock:
                self.running -= 1
            return CheckResult(name, status, f"{name} done")

        return registry.CheckDef(name, name, run)


def _context(tmp_path: Path) -> Context:
    sources = Sources(plugin_root=lambda: tmp_path, core_tree=lambda: tmp_path)
    return Context(None, "cpu", Cache(tmp_path / "cache"), tmp_path, sources)  # type: ignore[arg-type]


@pytest.mark.parametrize("cores", [1, 2, 3])
def test_checks_run_side_by_side_bounded_and_report_in_suite_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cores: int
) -> None:
    probe = Probe(together=cores)
    # The short ones first in the suite, a long in-env one last: it must start first.
    checks = {
        "cadence": probe.check("cadence", status="warn"),
        "isolation": probe.check("isolation"),
        "pinning": probe.check("pinning"),
        "plugin_tests": probe.check("plugin_tests"),
    }
    monkeypatch.setattr(registry, "BY_NAME", checks)
    monkeypatch.setattr(suite, "parallelism", lambda count: min(count, cores))
    results = suite.run_checks(_context(tmp_path), tuple(checks))
    assert [r.name for r in results] == list(checks)
    assert [r.status for r in results] == ["warn", "pass", "pass", "pass"]
    assert probe.most == cores
    assert "plugin_tests" in probe.started[:cores]  # in the first batch (its own thread)


def test_the_long_checks_start_longest_first_whatever_the_suite_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the suite, scheduler and api come before plugin_tests and workload; workload
    (the longest) must still start first, then the plugin's pytest run, or one of them
    ends the stage alone after the others."""
    probe = Probe()
    names = ("cadence", "scheduler", "api", "environment", "plugin_tests", "workload")
    monkeypatch.setattr(registry, "BY_NAME", {n: probe.check(n, 0.01) for n in names})
    monkeypatch.setattr(suite, "parallelism", lambda count: 1)
    results = suite.run_checks(_context(tmp_path), names)
    assert probe.started == [
        "workload", "plugin_tests", "api", "scheduler", "cadence", "environment",
    ]  # fmt: skip
    assert [r.name for r in results] == list(names)


def test_a_failing_check_stops_the_run_and_unstarted_checks_never_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = Probe()

    def bad(ctx: Context) -> CheckResult:
        raise BadInput("broken option")

    checks = {
        "cadence": registry.CheckDef("cadence", "", bad),
        "isolation": probe.check("isolation", 0.3),
        "pinning": probe.check("pinning", 0.0),
    }
    monkeypatch.setattr(registry, "BY_NAME", checks)
    monkeypatch.setattr(suite, "parallelism", lambda count: 1)
    with pytest.raises(BadInput, match="broken option"):
        suite.run_checks(_context(tmp_path), tuple(checks))
    # One at a time: the failure came first; at most the check already taken runs, the
    # rest are cancelled.
    assert "pinning" not in probe.started


def test_context_makes_each_input_once_when_asked_at_once(tmp_path: Path) -> None:
    calls: list[int] = []

    def slow_tree() -> Path:
        calls.append(1)
        time.sleep(0.2)
        return tmp_path

    ctx = Context(
        None,  # type: ignore[arg-type]
        "cpu",
        Cache(tmp_path / "cache"),
        tmp_path,
        Sources(plugin_root=lambda: tmp_path, core_tree=slow_tree),
    )
    threads = [threading.Thread(target=lambda: ctx.core_tree) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]
    # Another key is not held up by a slow one: the slow one waits for the other to finish.
    slow_started, other_done = threading.Event(), threading.Event()

    def slow_make() -> bool:
        slow_started.set()
        return other_done.wait(10)

    slow = threading.Thread(target=lambda: ctx._once("slow", slow_make))
    slow.start()
    assert slow_started.wait(10)
    assert ctx.plugin_root == tmp_path
    other_done.set()
    slow.join()
    assert ctx._memo["slow"] is True
