"""The warm worker of a pairing environment (`inenv/worker.py`), from our side.

One worker per environment python: started in its own process group behind the death
guard (`proc.guarded`), registered with the run's children, fed jobs as JSON lines
and stopped when no holder is left. Jobs may be sent from several threads at once (the
conformance checks run side by side); each waits for its own answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.errors import JobFailed, output_tail
from vllm_plugin_release.edges import proc
from vllm_plugin_release.edges.proc import spawn

# The exit code of a job refused its `site_first` (inenv/worker.LAYER_REFUSED: nothing
# imports inenv, so the number is written twice; tests/unit/test_worker_layer.py checks).
LAYER_REFUSED = 75


@dataclass(frozen=True)
class Job:
    """One script's run in the worker: `script argv...` with `env`, in `cwd` (None: the
    worker's); `what` names it in errors; `early` and `site_first` as `Worker.run` says."""

    script: Path
    argv: tuple[Path | str, ...]
    env: dict[str, str]
    cwd: Path | None
    what: str
    early: bool = False
    site_first: Path | None = None


class Worker:
    def __init__(
        self, python: Path, folder: Path, popen: subprocess.Popen[bytes], env: dict[str, str]
    ):
        self.python = python
        self.folder = folder
        self.env = env
        self._popen = popen
        self._lock = threading.Lock()
        self._answers: dict[int, dict[str, Any]] = {}
        self._events: dict[int, threading.Event] = {}
        self._next = 0
        self.ready: dict[str, Any] | None = None
        self._ready = threading.Event()
        self._gone = threading.Event()
        self._reader = threading.Thread(target=self._read, name="vpr-envworker", daemon=True)
        self._reader.start()

    @classmethod
    def start(
        cls,
        python: Path,
        stage: Callable[[Path], Path],
        preload: Sequence[str],
        env: dict[str, str],
        later: Sequence[str] = (),
    ) -> Worker:
        """Start the worker script that `stage(folder)` puts in a private folder; it is ready
        once `preload` is imported, and imports `later` between jobs."""
        folder = proc.owned_tmp("vpr-inenv-worker-")  # a killed run's is removed later
        try:
            script = stage(folder)
            names = {"first": list(preload), "then": list(later)}
            (folder / "preload.json").write_text(json.dumps(names))
            with open(folder / "worker.log", "wb") as log:
                popen = spawn(  # its own group: stopped as a whole with the run
                    [python.absolute(), script, folder / "preload.json"],
                    what=f"the warm worker in {python}",
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=env,
                    cwd=folder,
                )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return cls(python, folder, popen, env)

    def _read(self) -> None:
        assert self._popen.stdout is not None
        for line in self._popen.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("ready"):
                self.ready = message
                self._ready.set()
                continue
            if "rc" not in message:  # a job started ({"id", "pid"})
                continue
            with self._lock:
                self._answers[message["id"]] = message
                event = self._events.get(message["id"])
            if event is not None:
                event.set()
        self._gone.set()
        self._ready.set()
        with self._lock:
            for event in self._events.values():
                event.set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the preloaded imports are done (True), or the worker ended (False)."""
        self._ready.wait(timeout)
        return self.ready is not None

    def _log_tail(self, path: Path, lines: int = 15) -> str:
        try:
            return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return ""

    def run(self, job: Job, timeout: float | None) -> tuple[int, str]:
        """Run `job` in a forked copy of the worker: (exit code, its output).
        An `early` job starts once the first preload list is in, any other once both are.
        With `site_first` (the site-packages of a venv layered on this environment) it
        runs as that venv's python would (inenv/worker.layer_first), or ends with
        LAYER_REFUSED when that folder brings a module the worker has imported."""
        log = job.script.parent / "output.log"
        with self._lock:
            self._next += 1
            job_id = self._next
            event = self._events[job_id] = threading.Event()
        asked = {
            "id": job_id,
            "script": str(job.script),
            "argv": [str(a) for a in job.argv],
            "env": job.env,
            "cwd": str(job.cwd) if job.cwd else None,
            "log": str(log),
            "early": job.early,
            "site_first": str(job.site_first) if job.site_first else None,
        }
        try:
            assert self._popen.stdin is not None
            with self._lock:
                self._popen.stdin.write(json.dumps(asked).encode() + b"\n")
                self._popen.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            self._gone.set()
        try:
            if not event.wait(timeout) and not self._gone.is_set():
                self._kill_job(job_id, event)
                told = output_tail(self._log_tail(log, 200))
                raise JobFailed(
                    f"{job.what} did not finish within {timeout:g} s"
                    + (":\n" + told if told else ""),
                    log=told,
                )
            with self._lock:
                answer = self._answers.pop(job_id, None)
        finally:
            with self._lock:
                self._events.pop(job_id, None)
        if answer is None:  # the environment's interpreter died under the job
            told = output_tail(
                self._log_tail(log, 200) or self._log_tail(self.folder / "worker.log")
            )
            raise JobFailed(
                f"{job.what}: the warm worker in {self.python} ended, without an answer:\n" + told,
                log=told,
            )
        return int(answer["rc"]), self._log_tail(log, 200)

    def _kill_job(self, job_id: int, event: threading.Event) -> None:
        """Ask the worker to SIGKILL the job (it owns and reaps the pid: no race with
        reuse), then wait a little for its answer."""
        with contextlib.suppress(OSError, ValueError), self._lock:
            assert self._popen.stdin is not None
            self._popen.stdin.write(json.dumps({"kill": job_id}).encode() + b"\n")
            self._popen.stdin.flush()
        event.wait(10)

    def stop(self) -> None:
        """Close the job stream (the worker ends after its running jobs), then its group."""
        with contextlib.suppress(OSError, ValueError):
            if self._popen.stdin is not None:
                self._popen.stdin.close()
        try:
            self._popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill_group(self._popen.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, signal.SIGKILL)  # what the guard left in its group
        proc.forget(self._popen)
        self._gone.set()
        shutil.rmtree(self.folder, ignore_errors=True)


class Workers:
    """The run's warm workers, one per python, each kept while someone holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[Path, Worker] = {}
        self._holds: dict[Path, int] = {}
        self._sessions = 0

    def in_session(self) -> bool:
        with self._lock:
            return self._sessions > 0

    def get(self, python: Path) -> Worker | None:
        with self._lock:
            worker = self._live.get(Path(python))
        return None if worker is None or worker._gone.is_set() else worker

    def start(self, python: Path, make: Callable[[], Worker]) -> Worker:
        with self._lock:
            worker = self._live.get(python)
            if worker is None or worker._gone.is_set():
                worker = self._live[python] = make()
            self._holds[python] = self._holds.get(python, 0) + 1
            return worker

    def release(self, python: Path) -> None:
        with self._lock:
            self._holds[python] -= 1
            done = self._holds[python] == 0 and self._sessions == 0
            worker = self._live.pop(python) if done else None
        if worker is not None:
            worker.stop()

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Workers started inside the block stay until it ends (the stages of one run)."""
        with self._lock:
            self._sessions += 1
        try:
            yield
        finally:
            with self._lock:
                self._sessions -= 1
                idle = [] if self._sessions else [p for p in self._live if not self._holds.get(p)]
                stopping = [self._live.pop(p) for p in idle]
            for worker in stopping:
                worker.stop()


workers = Workers()
