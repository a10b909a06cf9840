"""Long work is legible: a step names its log when it starts and, in a CI log, says it is
still running with the elapsed time; stages are `::group::` blocks in GitHub Actions, the
scorecard goes to the job summary with an `::error::` per failing check, and the release
summary ends with what to look at next."""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges import ci
from vllm_plugin_release.edges.runner import Command, LocalRunner
from vllm_plugin_release.flows.release import Options, Outcome, next_steps


@pytest.fixture
def plain() -> Iterator[None]:
    """Plain lines (a CI log) with a fast heartbeat; the default mode restored after."""
    saved = dict(progress._mode)
    progress.configure(interactive=False, heartbeat=0.05)
    yield
    progress._mode.update(saved)


def _sleep(seconds: float, code: int = 0) -> Command:
    script = f"import sys, time; time.sleep({seconds}); print('done'); sys.exit({code})"
    return Command(label="slow step", argv=(sys.executable, "-c", script))


def _until(release: Path, code: int = 0) -> Command:
    """A step that runs until the file `release` exists (the test says when it ends)."""
    script = (
        "import os, sys, time\n"
        f"while not os.path.exists({str(release)!r}):\n    time.sleep(0.01)\n"
        f"print('done'); sys.exit({code})"
    )
    return Command(label="slow step", argv=(sys.executable, "-c", script))


def _beating() -> bool:
    return any(t.name == "vpr-heartbeat" and t.is_alive() for t in threading.enumerate())


def test_a_long_step_names_its_log_and_beats(
    plain: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Events only: the step runs until two heartbeat lines are out, then is let go."""
    log = tmp_path / "logs" / "slow.log"
    release = tmp_path / "release"
    run = threading.Thread(
        target=LocalRunner(network_isolation="off").run, args=(_until(release), log)
    )
    run.start()
    err = ""
    while len(re.findall(r"still running, \d+ s", err)) < 2 and run.is_alive():
        run.join(0.01)  # (a wait for the next line, not a bound: the step ends when told)
        err += capsys.readouterr().err
    release.touch()
    run.join()
    err += capsys.readouterr().err
    first = err.splitlines()[0]
    assert first == f"vpr slow step: started (log: {log})"  # the log path, at the start
    beats = re.findall(r"vpr slow step: still running, (\d+) s \(log: ", err)
    assert len(beats) >= 2, err
    assert "done" in log.read_text()
    assert not _beating()  # the heartbeat ended with its step


def test_a_quick_step_does_not_beat(
    plain: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    progress.configure(interactive=False, heartbeat=3600)  # "quick": ends within a heartbeat
    LocalRunner(network_isolation="off").run(_sleep(0), tmp_path / "quick.log")
    err = capsys.readouterr().err
    assert "started" in err and "still running" not in err


def test_a_failing_step_stops_beating(
    plain: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "bad.log"
    release = tmp_path / "release"
    release.touch()
    with pytest.raises(GateFailed, match=f"log: {re.escape(str(log))}"):
        LocalRunner(network_isolation="off").run(_until(release, code=4), log)
    capsys.readouterr()
    assert not _beating()  # joined when its step failed: no line can follow
    assert "still running" not in capsys.readouterr().err


def test_elapsed_time_reads_in_minutes() -> None:
    assert progress._elapsed(75) == "1 min 15 s" and progress._elapsed(14.9) == "14 s"


def test_stages_are_groups_in_github_actions(capsys: pytest.CaptureFixture[str]) -> None:
    saved = dict(progress._mode)
    progress.configure(interactive=False, github=True)
    try:
        with progress.stage("stage 1/2: build-core"):
            progress.info("inside")
    finally:
        progress._mode.update(saved)
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["::group::stage 1/2: build-core", "::endgroup::"]
    with progress.stage("stage 2/2: env"):  # elsewhere: a rule, never a workflow command
        pass
    assert "::" not in capsys.readouterr().out


def _card(dist: Path, checks: dict[str, dict[str, str]]) -> None:
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "scorecard.json").write_text(json.dumps({"verdict": "lab", "checks": checks}))
    (dist / "scorecard.md").write_text("# Scorecard\n\nVerdict: lab\n")


def test_scorecard_in_the_job_summary_and_an_error_per_failed_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    _card(
        tmp_path / "d",
        {
            "pinning": {"status": "fail", "summary": "core pin 0.25.0, 100% sure\nline 2"},
            "cadence": {"status": "pass", "summary": "fine"},
            "api": {"status": "fail", "summary": "2 breaking changes"},
        },
    )
    assert ci.report_scorecard(tmp_path / "d")
    assert summary.read_text() == "earlier step\n# Scorecard\n\nVerdict: lab\n\n"  # appended
    errors = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::")]
    assert errors == [
        "::error title=vpr check api::2 breaking changes",
        "::error title=vpr check pinning::core pin 0.25.0, 100%25 sure%0Aline 2",
    ]


def test_outside_github_actions_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    _card(tmp_path / "d", {"api": {"status": "fail", "summary": "x"}})
    assert not ci.report_scorecard(tmp_path / "d")
    assert not summary.exists() and "::error" not in capsys.readouterr().out


def test_annotation_properties_are_escaped() -> None:
    assert ci.error_line("a: b, c", "50%") == "::error title=a%3A b%2C c::50%25"


def _options(tmp_path: Path) -> Options:
    return Options(cache=Cache(tmp_path / ".vpr"), dist_root=tmp_path / "dist", publish=False)


def test_next_steps_after_a_failed_stage_name_the_logs(tmp_path: Path) -> None:
    spec = load_spec(REPO / "buildspec" / "reference.toml")
    steps = next_steps(spec, _options(tmp_path), Outcome(), "env")
    assert str(tmp_path / ".vpr" / "logs") in steps[0] and "env" in steps[0]
    assert "vpr release --spec" in steps[1] and "--no-publish" in steps[1]


def test_next_steps_after_pilot_say_what_fleet_needs(tmp_path: Path) -> None:
    out = Outcome(facts={"verdict": "pilot", "manifest": "m", "public key": "/k/x.key.pub"})
    reference = load_spec(REPO / "buildspec" / "reference.toml")
    steps = next_steps(reference, _options(tmp_path), out, None)
    assert steps[0].startswith("open ") and "scorecard.html" in steps[0]
    assert any("no [conformance.hardware]" in s for s in steps)
    assert steps[-1].endswith("--key /k/x.key.pub")
    tt = load_spec(REPO / "buildspec" / "tt.toml")
    steps = next_steps(tt, _options(tmp_path), out, None)
    assert any("nox -s conform-hardware -- --spec" in s for s in steps)
    lab = next_steps(tt, _options(tmp_path), Outcome(facts={"verdict": "lab"}), None)
    assert any("failed checks" in s for s in lab)


def test_on_a_terminal_parallel_steps_inside_a_stage_spinner_just_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """build-core runs two builds in threads inside its stage's spinner: no nested live
    display, no heartbeat lines (the spinner shows the step is alive)."""
    from concurrent.futures import ThreadPoolExecutor

    saved = dict(progress._mode)
    progress.configure(interactive=True, heartbeat=0.1)
    runner = LocalRunner(network_isolation="off")
    try:
        with progress.status("build-core: building"), ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda i: runner.run(_sleep(0.3), tmp_path / f"{i}.log"), [0, 1]))
    finally:
        progress._mode.update(saved)
    err = capsys.readouterr().err
    assert err.count("slow step: started (log: ") == 2 and "still running" not in err


def test_a_note_off_a_terminal_is_the_line_rich_prints_without_importing_it() -> None:
    """`progress.note` (`vpr manifest ledger`'s status line): in a subprocess whose stderr
    is a pipe, the plain line, and rich never imported; `info` prints the same line."""
    import subprocess

    code = (
        "import sys; from vllm_plugin_release.core import progress; "
        "progress.{}('ledger: 3 entries [ok] in /s'); "
        "print('rich' in sys.modules)"
    )
    for fn, imported in (("note", "False"), ("info", "True")):
        done = subprocess.run(
            [sys.executable, "-c", code.format(fn)], capture_output=True, text=True, check=True
        )
        assert done.stderr == "vpr ledger: 3 entries [ok] in /s\n", fn
        assert done.stdout.strip() == imported


def test_run_json_names_where_each_stage_ran_as_its_record_had_it(tmp_path: Path) -> None:
    """run.json's `release.ran_in`: each record's `backend` (read with the record, as the
    runner it describes: core/buildrecord, core/envrecord) written as the record had it
    (None where a record has none)."""
    from vllm_plugin_release.core import buildrecord
    from vllm_plugin_release.core.buildrecord import RunnerFacts
    from vllm_plugin_release.flows import release
    from vllm_plugin_release.flows.stagewalk import Walk

    spec = load_spec(REPO / "buildspec" / "reference.toml")
    opts = _options(tmp_path)
    docker = {"kind": "docker", "base_image": "python@sha256:" + "a" * 64, "image_id": "sha256:b"}
    out = Outcome(stages={"build-core": 1.0})
    out.ran_in["build-core"] = buildrecord.parse_runner(docker)
    out.ran_in["env"] = buildrecord.parse_runner({"kind": "local"})
    out.ran_in["build-plugin"] = None
    out.ran_in["publish (install proof)"] = RunnerFacts("local")
    dist = tmp_path / "dist" / spec.name
    dist.mkdir(parents=True)
    release._summary(spec, opts, out, Walk())
    ran_in = json.loads((dist / "run.json").read_text())["release"]["ran_in"]
    assert ran_in == {
        "build-core": docker,
        "env": {"kind": "local"},
        "build-plugin": None,
        "publish (install proof)": {"kind": "local"},
    }
