"""The warm worker (inenv/worker.py + edges/envrun.py) in a real venv without our package.

A job run by the worker must behave as the same inenv script started on its own: same
result, nothing of ours importable, nothing left over from an earlier job; it differs
only in starting with the preloaded modules already imported.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.unit import test_envrun
from tests.unit.test_envrun import Probe
from vllm_plugin_release.core import jobanswer
from vllm_plugin_release.core.errors import BadInput, JobFailed, OutsideFailure, output_tail
from vllm_plugin_release.edges import envrun, proc
from vllm_plugin_release.edges.envrun import workers

SRC = Path(envrun.__file__).resolve().parents[2]

PROBE = """
import json, os, sys, time
request = json.load(open(sys.argv[1]))
try:
    import vllm_plugin_release  # noqa: F401
    ours = True
except ImportError:
    ours = False
seen = {
    "ours_importable": ours,
    "leak_module": "vpr_probe_leak" in sys.modules,
    "leak_env": "VPR_PROBE_LEAK" in os.environ,
    "preloaded": "colorsys" in sys.modules,
    "later": "wave" in sys.modules,
    "path0": sys.path[0],
    "argv0": os.path.basename(sys.argv[0]),
    "name": __name__,
    "cwd": os.getcwd(),
    "hashseed": os.environ.get("PYTHONHASHSEED"),
}
sys.modules["vpr_probe_leak"] = sys
os.environ["VPR_PROBE_LEAK"] = "1"
print("probe says hello on stdout")
if request.get("sleep"):
    print("the probe sleeps", file=sys.stderr, flush=True)
time.sleep(request.get("sleep", 0))
if request.get("bad"):
    json.dump({"error": "bad request: " + request["bad"]}, open(sys.argv[2], "w"))
    sys.exit(2)
if request.get("missing"):  # a module it names does not import here
    json.dump({"error": "no module " + request["missing"]}, open(sys.argv[2], "w"))
    sys.exit(3)
if request.get("exit"):
    print("the probe broke", file=sys.stderr)
    sys.exit(request["exit"])
if request.get("die"):  # as a plugin's code can end the job: no answer, or garbage
    print("the probe dies: " + request["die"], file=sys.stderr, flush=True)
    if request["die"] == "garbage":
        open(sys.argv[2], "w").write("}{ not JSON")
    if request["die"] == "list":
        json.dump(["an", "answer", "of", "another", "shape"], open(sys.argv[2], "w"))
    if request["die"] == "segv":
        import signal
        os.kill(os.getpid(), signal.SIGSEGV)
    os._exit(0)
json.dump({**seen, "tag": request.get("tag")}, open(sys.argv[2], "w"))
"""


# A real venv without this package (what a pairing env looks like to us), shared.
bare_python = test_envrun.bare_python


@pytest.fixture
def inenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An inenv folder with the real worker and the probe; `colorsys` is preloaded."""
    folder = tmp_path / "inenv"
    folder.mkdir()
    shutil.copyfile(envrun.INENV / "worker.py", folder / "worker.py")
    (folder / "probe.py").write_text(PROBE)
    monkeypatch.setattr(envrun, "INENV", folder)
    monkeypatch.setattr(envrun, "PRELOAD", ("colorsys", "no_such_module_here"))
    monkeypatch.setattr(envrun, "PRELOAD_LATER", ())
    return folder


def test_the_later_modules_are_imported_between_jobs(
    bare_python: Path, inenv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ready after PRELOAD; PRELOAD_LATER follows while no job waits, so a later job
    starts with it too (and a module that is missing is skipped)."""
    monkeypatch.setattr(envrun, "PRELOAD_LATER", ("no_such_module_later", "wave"))
    with envrun.warm(bare_python) as worker:
        assert worker is not None and worker.wait_ready(60)
        assert worker.ready is not None and worker.ready["preloaded"] == ["colorsys"]
        # A job that is not early starts once the later list is in.
        assert envrun.run_in_env(bare_python, Probe("probe", {}))["later"] is True
        monkeypatch.setattr(envrun, "EARLY_JOBS", ("probe",))
        early = envrun.run_in_env(bare_python, Probe("probe", {"tag": "early"}))
        assert early["tag"] == "early" and early["preloaded"] is True
    assert envrun.run_in_env(bare_python, Probe("probe", {}))["later"] is False  # alone: not there


def test_a_job_in_the_worker_is_the_script_run_alone(
    bare_python: Path, inenv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(SRC))  # must not leak into either
    alone = envrun.run_in_env(bare_python, Probe("probe", {"tag": "a"}))
    with envrun.warm(bare_python) as worker:
        assert worker is not None
        warm = envrun.run_in_env(bare_python, Probe("probe", {"tag": "a"}))
        again = envrun.run_in_env(bare_python, Probe("probe", {"tag": "a"}))
        assert worker.ready is not None
        assert worker.ready["preloaded"] == ["colorsys"]
        assert "no_such_module_here" in worker.ready["skipped"]
    # Known-bad first: only the worker's jobs start with the preloaded module, so the
    # comparison below is between a worker job and a fresh interpreter.
    assert alone["preloaded"] is False
    assert warm["preloaded"] is True and again["preloaded"] is True
    for result in (warm, again):
        for key in (
            "ours_importable",
            "leak_module",
            "leak_env",
            "argv0",
            "name",
            "hashseed",
            "cwd",
        ):
            assert result[key] == alone[key], key
        assert Path(result["path0"]).name.startswith("vpr-inenv-")
    assert alone["ours_importable"] is False
    assert alone["name"] == "__main__"
    # The first job's changes (a module, a variable) are gone for the next one.
    assert again["leak_module"] is False and again["leak_env"] is False


def test_the_worker_answers_jobs_from_several_threads(bare_python: Path, inenv: Path) -> None:
    results: dict[int, dict] = {}

    def job(n: int) -> None:
        results[n] = envrun.run_in_env(bare_python, Probe("probe", {"tag": n, "sleep": 0.2}))

    with envrun.warm(bare_python):
        threads = [threading.Thread(target=job, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert {n: r["tag"] for n, r in results.items()} == {0: 0, 1: 1, 2: 2, 3: 3}
    assert all(r["preloaded"] for r in results.values())


def test_exit_codes_mean_the_same_in_the_worker(bare_python: Path, inenv: Path) -> None:
    with envrun.warm(bare_python):
        with pytest.raises(BadInput, match="bad request: nope"):
            envrun.run_in_env(bare_python, Probe("probe", {"bad": "nope"}))
        with pytest.raises(OutsideFailure, match=r"exit 3\):\n(.|\n)*no module refrt") as out:
            envrun.run_in_env(bare_python, Probe("probe", {"missing": "refrt"}))
        assert not isinstance(out.value, JobFailed)  # the one exit a check defers for
        with pytest.raises(JobFailed, match=r"exited 3, without an answer:\n(.|\n)*probe broke"):
            envrun.run_in_env(bare_python, Probe("probe", {"exit": 3}))
        # The worker survives a failed job.
        assert envrun.run_in_env(bare_python, Probe("probe", {"tag": 1}))["preloaded"] is True


# How a plugin's code can end the job it runs in, and what the caller is told.
DEATHS = {
    "segv": "inenv probe was killed by SIGSEGV, without an answer",
    "exit0": "inenv probe exited 0, without an answer",
    "garbage": "inenv probe: its answer is unreadable",
    "list": "inenv probe: its answer is not a JSON object",
}


@pytest.mark.parametrize("warm", [False, True], ids=["new interpreter", "warm worker"])
@pytest.mark.parametrize("how", DEATHS)
def test_a_job_that_dies_or_answers_garbage_is_a_failure_with_its_output(
    bare_python: Path, inenv: Path, how: str, warm: bool
) -> None:
    """Not an outside failure (a check would be deferred): JobFailed (exit 1), its last
    output lines kept for the check's evidence, no path of the job's folder in them."""
    with envrun.warm(bare_python) if warm else contextlib.nullcontext():
        with pytest.raises(JobFailed) as failed:
            envrun.run_in_env(bare_python, Probe("probe", {"die": how}))
        if warm:  # the worker serves on
            assert envrun.run_in_env(bare_python, Probe("probe", {"tag": 3}))["tag"] == 3
    exc = failed.value
    assert exc.message.startswith(DEATHS[how]) and exc.exit_code == 1
    assert f"the probe dies: {how}" in exc.log and "vpr-inenv-" not in exc.message + exc.log
    assert exc.hint == f"it ran in {bare_python}"


def test_the_output_kept_of_a_dead_job_skips_a_native_stack_dump() -> None:
    """torch's crash handler prints hundreds of C frames on SIGSEGV: the lines the job
    wrote before them are what the check's evidence keeps; Python frames stay."""
    said = "reference platform: validate_request ends the job"
    python_frame = '  File "/env/site-packages/vllm_reference_plugin/platform.py", line 9, in f'
    native = [f'  File "Python/ceval.c", line {n}, in _PyEval_EvalFrameDefault' for n in range(300)]
    native += ['  File "<unknown>", line 0, in 0xffffffffffffffff']
    output = "\n".join(["warming up", python_frame, said, "!!! Segfault encountered !!!", *native])
    assert output_tail(output, 3).splitlines() == [
        python_frame,
        said,
        "!!! Segfault encountered !!!",
    ]


def test_an_answer_its_job_cannot_read_is_a_failure_naming_the_key(
    bare_python: Path, inenv: Path
) -> None:
    class Strict(Probe):
        def parse_answer(self, answer: Any) -> Any:
            raise jobanswer.problem("probe", "platform", answer.get("platform"), "text")

    with pytest.raises(JobFailed, match=r"inenv probe: the answer's 'platform' is missing"):
        envrun.run_in_env(bare_python, Strict("probe", {}))


def test_a_job_past_its_time_is_killed_and_the_worker_serves_on(
    bare_python: Path, inenv: Path
) -> None:
    with envrun.warm(bare_python) as worker:
        assert worker is not None
        with pytest.raises(JobFailed, match=r"did not finish within 0\.5 s") as late:
            envrun.run_in_env(bare_python, Probe("probe", {"sleep": 60}), timeout=0.5)
        assert "the probe sleeps" in late.value.log
        assert envrun.run_in_env(bare_python, Probe("probe", {"tag": 2}))["tag"] == 2
        assert _jobs_of(worker) == []  # the sleeping job was killed and reaped


def test_a_new_interpreter_past_its_time_is_a_failure_with_its_output(
    bare_python: Path, inenv: Path
) -> None:
    with pytest.raises(JobFailed, match=r"inenv probe did not finish within 1 s") as late:
        envrun.run_in_env(bare_python, Probe("probe", {"sleep": 60}), timeout=1)
    assert "the probe sleeps" in late.value.log


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _jobs_of(worker) -> list[int]:
    """The worker's own children (its running jobs); the guard's one child is the worker."""
    (worker_pid,) = _children(worker._popen.pid)
    return _children(worker_pid)


def test_a_call_with_its_own_environment_starts_a_fresh_interpreter(
    bare_python: Path, inenv: Path
) -> None:
    with envrun.warm(bare_python):
        result = envrun.run_in_env(bare_python, Probe("probe", {}), env={"PYTHONPATH": str(SRC)})
    assert result["preloaded"] is False
    assert result["ours_importable"] is True  # PYTHONPATH took effect: a new interpreter


def test_the_worker_stops_with_its_block_unless_a_session_keeps_it(
    bare_python: Path, inenv: Path
) -> None:
    with envrun.warm(bare_python) as worker:
        assert worker is not None
        popen = worker._popen
        assert popen.pid in proc._LIVE
    assert popen.poll() is not None
    assert popen.pid not in proc._LIVE
    assert not worker.folder.exists()
    assert workers.get(bare_python) is None

    with envrun.session():
        with envrun.warm(bare_python, for_session=True) as first:
            assert first is not None
        with envrun.warm(bare_python) as second:
            assert second is first  # kept between the two stages
        assert first._popen.poll() is None
    assert first._popen.poll() is not None

    with envrun.warm(bare_python, for_session=True) as none:
        assert none is None  # no session: one job alone does not start a worker


def test_the_worker_dies_with_a_killed_run(bare_python: Path, inenv: Path, tmp_path: Path) -> None:
    """SIGKILL the run that holds a worker: the death guard takes the worker with it."""
    script = tmp_path / "run.py"
    script.write_text(
        "import sys, time\n"
        "from pathlib import Path\n"
        "from vllm_plugin_release.edges import envrun\n"
        f"envrun.INENV = Path({str(inenv)!r})\n"
        "envrun.PRELOAD = ()\n"
        f"with envrun.warm(Path({str(bare_python)!r})) as w:\n"
        "    print(w._popen.pid, flush=True)\n"
        "    time.sleep(60)\n"
    )
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert run.stdout is not None
    guard = int(run.stdout.readline())
    run.kill()
    run.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(guard, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the worker's process group outlived the killed run")


LATE = """
import json, sys
try:
    import vpr_installed_late
    seen = vpr_installed_late.VALUE
except ImportError as exc:
    seen = f"ImportError: {exc}"
json.dump({"seen": seen, "in_worker": "vpr_installed_early" in sys.modules}, open(sys.argv[2], "w"))
"""


def test_a_job_sees_what_was_installed_after_the_worker_started(
    bare_python: Path, inenv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pairing env's wheels are installed while its worker imports torch: a job must
    see them as a new interpreter would, even when the folder's mtime did not move (the
    import system and importlib.metadata cache a folder's listing by its mtime)."""
    site = next((bare_python.parent.parent / "lib").glob("python3.*/site-packages"))
    early, late = site / "vpr_installed_early.py", site / "vpr_installed_late.py"
    (inenv / "late.py").write_text(LATE)
    monkeypatch.setattr(envrun, "PRELOAD", ("vpr_installed_early",))
    try:
        early.write_text("VALUE = 'early'\n")
        before = site.stat()  # what the worker's import system sees when it lists `site`
        with envrun.warm(bare_python) as worker:
            assert worker is not None and worker.wait_ready(60)
            assert worker.ready is not None
            assert worker.ready["preloaded"] == ["vpr_installed_early"]  # site listed
            late.write_text("VALUE = 'late'\n")
            os.utime(site, ns=(before.st_atime_ns, before.st_mtime_ns))  # the same tick
            result = envrun.run_in_env(bare_python, Probe("late", {}))
            assert result == {"seen": "late", "in_worker": True}
    finally:
        early.unlink(missing_ok=True)
        late.unlink(missing_ok=True)


def test_a_wheel_with_a_pth_file_is_told_apart(tmp_path: Path) -> None:
    """The pairing env's worker starts before the two wheels are installed unless one
    brings a top-level .pth file (read only by an interpreter started after it)."""
    import zipfile

    from vllm_plugin_release.stages.pairing_env import _has_pth

    plain, with_pth = tmp_path / "a-1-py3-none-any.whl", tmp_path / "b-1-py3-none-any.whl"
    for wheel, names in ((plain, ["a/__init__.py", "a/x.pth"]), (with_pth, ["b.pth", "b/m.py"])):
        with zipfile.ZipFile(wheel, "w") as zf:
            for name in names:
                zf.writestr(name, "")
    assert not _has_pth(plain) and _has_pth(with_pth)
    broken = tmp_path / "c-1-py3-none-any.whl"
    broken.write_bytes(b"not a zip")
    assert _has_pth(broken)  # started after the install, which reports the bad wheel
