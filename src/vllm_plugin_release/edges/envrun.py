"""Our code in the pairing env: an `inenv` module run as a script or by the env's warm
worker, the probe of what the env holds (`check-env`), and its bytecode kept for the next
env of its lock (`.vpr/bytecode/<key>/`; the plugin's packages are never kept)."""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

from vllm_plugin_release.core import bounded, progress, records
from vllm_plugin_release.core.buildrecord import field_shown
from vllm_plugin_release.core.errors import (
    BadInput,
    JobFailed,
    OutsideFailure,
    TimedOut,
    output_tail,
)
from vllm_plugin_release.edges import proc
from vllm_plugin_release.edges.container import marker_of, runner_of
from vllm_plugin_release.edges.proc import spawn

INENV = Path(__file__).resolve().parent.parent / "inenv"

Answer = TypeVar("Answer", covariant=True)


class InEnvJob(Protocol[Answer]):
    """One job of an inenv module (inenv/<module>.py), owned by the module of ours that asks
    it: its request (argv[1]) and the parser of its JSON answer (argv[2], read bounded), which
    raises JobFailed (or BadInput, which `run_in_env` makes one) for an answer that is not one."""

    @property
    def module(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...

    def parse_answer(self, answer: Any) -> Answer: ...


# The inenv modules a script imports, staged beside it under the same unique prefix.
COMPANIONS = {"replay": ("steploop", "workload")}


def stage_module(module: str, folder: Path) -> Path:
    """Copy inenv/<module>.py (and its COMPANIONS) alone into `folder`; the script to
    start (a unique name, so it cannot shadow a module the environment imports)."""
    source = INENV / f"{module}.py"
    if not module.isidentifier() or not source.is_file():
        raise BadInput(f"no inenv module {module!r}")
    for companion in COMPANIONS.get(module, ()):
        shutil.copyfile(INENV / f"{companion}.py", folder / f"vpr_inenv_{companion}.py")
    script = folder / f"vpr_inenv_{module}.py"
    shutil.copyfile(source, script)
    return script


def child_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ours without PYTHONPATH (it would put host packages on the
    locked environment's path), plus `env` (which may set one on purpose)."""
    # Without PYTHONDONTWRITEBYTECODE the environment caches its bytecode: importing vLLM
    # and torch from a cold cache compiles them again in every process when it is set around us.
    child_env = proc.inherited(drop=("PYTHONPATH", "PYTHONDONTWRITEBYTECODE"))
    child_env.update(env or {})
    child_env.setdefault("PYTHONHASHSEED", "0")
    return child_env


# Wide on purpose: after the job, `subprocess.run`'s own keyword options
# (env, timeout, cwd) and the overlay to run it as, each independent of the others.
def run_in_env(
    python: Path | str,
    job: InEnvJob[Answer],
    *,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
    overlay: Path | None = None,
) -> Answer:
    """Run inenv/<job.module>.py with `python` as `SCRIPT req.json out.json`; out.json as
    the job parses it. In a forked copy of the warm worker for `python` when one was started
    and the call sets no environment of its own, else in a new interpreter. With `overlay`
    (a venv layered on `python`'s environment through a .pth file) it runs as the overlay's
    python: in the worker with the overlay's site-packages first, or by that python itself.

    Exit 2 with `error` is BadInput, exit 3 with `error` an OutsideFailure (a module it names
    does not import here). Anything else without an answer, garbage, or past `timeout` is
    JobFailed with its last output lines: the plugin's code runs in it, so the check fails.
    """
    python, module = Path(python), job.module
    if not (python.exists() or python.is_symlink()):  # a container env's: its image's python
        raise BadInput(f"{python}: environment python not found", hint="run `vpr env` first")
    with _job_folder() as tmp:
        req = Path(tmp) / "request.json"
        out = Path(tmp) / "result.json"
        req.write_text(json.dumps(job.to_json()))
        run = _Job(module, stage_module(module, Path(tmp)), req, out, child_environment(env))
        try:
            return _answer(job, run, python, warm=env is None, how=(cwd, timeout, overlay))
        except JobFailed as exc:  # its output, without this machine's folders
            message, log = (_scrub(text, tmp, python) for text in (exc.message, exc.log))
            raise JobFailed(message, log=log, hint=exc.hint or f"it ran in {python}") from None


def _answer(
    job: InEnvJob[Answer],
    run: _Job,
    python: Path,
    *,
    warm: bool,
    how: tuple[Path | None, float | None, Path | None],
) -> Answer:
    """`run` in the warm worker (when `warm`) or a new interpreter; `how`: cwd, timeout, overlay."""
    cwd, timeout, overlay = how
    worker = workers.get(python) if warm else None
    returncode, stderr = (None, "")
    if worker is not None:
        returncode, stderr = _in_worker(worker, run, cwd, timeout, overlay)
    if returncode is None:
        if overlay is not None:
            python = overlay / "bin" / "python"
        try:
            with progress.working(f"inenv {run.module}"):
                done = runner_of(python).call(
                    [python, run.script, run.req, run.out], env=run.env, cwd=cwd, timeout=timeout
                )
        except TimedOut as exc:
            raise _failed(f"inenv {run.module} did not finish within {timeout:g} s", exc.output)
        returncode, stderr = done.returncode, done.stderr
    result = _result(run, python, returncode, stderr)
    try:
        return job.parse_answer(result)
    except (BadInput, JobFailed) as exc:  # an answer that is not one: garbage from the env
        raise JobFailed(exc.message, log=output_tail(stderr), hint=exc.hint) from None


def _scrub(text: str, folder: str, python: Path) -> str:
    """`text` without the job's folder and the environment's root (paths of this machine)."""
    env = str(python.parent.parent)
    return text.replace(folder.rstrip("/") + "/", "").replace(env.rstrip("/") + "/", "ENV/")


@dataclass(frozen=True)
class _Job:
    """One inenv module's run: the staged script, its request and result files, its env."""

    module: str
    script: Path
    req: Path
    out: Path
    env: dict[str, str]


def _in_worker(
    worker: Worker, job: _Job, cwd: Path | None, timeout: float | None, overlay: Path | None
) -> tuple[int | None, str]:
    """The job in a forked copy of the warm `worker`: (exit status, stderr), or (None, "")
    when it must run in an interpreter of its own."""
    site_first = site_packages(overlay) if overlay is not None else None
    if worker.env != job.env or (overlay is not None and not site_first):
        return None, ""
    # The job's folder is ours, as a new interpreter's would be (not the worker's).
    run = Job(
        job.script,
        (job.req, job.out),
        job.env,
        cwd or Path.cwd(),
        what=f"inenv {job.module}",
        early=job.module in EARLY_JOBS and overlay is None,
        site_first=site_first,
    )
    returncode, stderr = worker.run(run, timeout)
    if overlay is not None and returncode == LAYER_REFUSED:
        return None, ""  # the overlay's own python runs it
    return returncode, stderr


def _read_result(job: _Job, stderr: str) -> dict[str, Any] | None:
    """The module's JSON result, read bounded (the plugin's code runs beside it); None when it
    wrote none; JobFailed for one too large or not a JSON object."""
    if not job.out.exists():
        return None
    try:
        result = json.loads(bounded.read_file(job.out, records.MAX_RECORD, "result"))
    except (OSError, ValueError, RecursionError, BadInput) as exc:
        message = exc.message if isinstance(exc, BadInput) else str(exc)
        raise _failed(f"inenv {job.module}: its answer is unreadable: {message}", stderr)
    if not isinstance(result, dict):
        raise _failed(f"inenv {job.module}: its answer is not a JSON object", stderr)
    return result


def _result(job: _Job, python: Path, returncode: int | None, stderr: str) -> dict[str, Any]:
    """The module's result, or the error its exit status says (`run_in_env`)."""
    result = _read_result(job, stderr)
    error = str(result.get("error") or "") if result else ""
    if returncode == 2 and error:
        raise BadInput(error)
    if returncode == 3 and error:  # its own traceback (in its result) says why
        told = output_tail(error + "\n" + stderr)
        raise OutsideFailure(f"inenv {job.module} failed in {python} (exit 3):\n{told}")
    if returncode != 0 or result is None:
        how = proc.ended(returncode) + ("" if result else ", without an answer")
        raise _failed(f"inenv {job.module} {how}", error + "\n" + stderr)
    return result


def _failed(headline: str, output: str) -> JobFailed:
    """JobFailed: `headline`, then the job's last output lines."""
    told = output_tail(output)
    return JobFailed(headline + (":\n" + told if told else ""), log=told)


# The third-party modules vLLM's import spends its time in, imported once by the warm
# worker; never vLLM or the plugin (their import reads the variables a job sets). PRELOAD
# is what `import vllm` and the plugin's platform need (the worker is then ready);
# PRELOAD_LATER what vLLM's engine modules add, imported once it is ready.
PRELOAD = (
    "torch",
    "torch._dynamo",
    "torch._inductor.config",
    # what vllm.env_override imports of inductor (its graph lowering: costly in every job)
    "torch._inductor.graph",
    "torch._inductor.scheduler",
    "torch._inductor.codegen.wrapper",
    "torch.distributed.fsdp",
    "torch.distributed.tensor",
    "triton",
    "sympy",
    "networkx",
)
# The inenv modules started as soon as the worker is ready; the others wait for
# PRELOAD_LATER. An overlay's check is never early: it would import PRELOAD_LATER again
# through the plugin's modules while the worker does.
EARLY_JOBS = ("envcheck",)
PRELOAD_LATER = (
    "transformers",
    "transformers.configuration_utils",
    "transformers.tokenization_utils_base",
    "transformers.modeling_utils",
    "transformers.processing_utils",
    "transformers.models.auto",
    "pydantic",
    "huggingface_hub",
    "tokenizers",
    "msgspec",
    "zmq",
    "aiohttp",
    "openai",
    "mistral_common",
    "xgrammar",
    "fastapi",
)


@contextlib.contextmanager
def _job_folder() -> Iterator[str]:
    """A private folder for one in-environment job, removed after it (`proc.owned_tmp`)."""
    folder = proc.owned_tmp("vpr-inenv-")
    try:
        yield str(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def warm(
    python: Path | str, *, for_session: bool = False, runtime: str | None = None
) -> Iterator[Worker | None]:
    """Keep one warm worker for `python` during the block (inside `session()`, until it ends);
    `run_in_env` calls for it go there. `runtime`: the vendor runtime module (ttnn) the worker
    imports once. Yields None for a `python` that does not exist or runs in a container, or
    with `for_session` outside a session (one job alone gains nothing from a worker)."""
    python = Path(python)
    in_container = marker_of(python).is_file()  # runs in its image, not here
    if not python.exists() or in_container or (for_session and not workers.in_session()):
        yield None
        return
    worker = workers.start(
        python,
        lambda: Worker.start(
            python,
            lambda folder: stage_module("worker", folder),
            (*PRELOAD, *((runtime,) if runtime else ())),
            child_environment(),
            PRELOAD_LATER,
        ),
    )
    try:
        yield worker
    finally:
        workers.release(python)


PYCACHE = "__pycache__"
# The number each CPython writes at the head of its bytecode, by cache tag (stable within
# a minor version): a pairing env may run another Python than vpr's own (the TT pairing's
# 3.10 under vpr on 3.11), and its pyc carry its number, not ours.
PYC_MAGIC = {"cpython-310": 3439, "cpython-311": 3495, "cpython-312": 3531, "cpython-313": 3571}
_MAX_POINTER = 64 * 1024  # bytes read of the pointer file (it holds two paths)
_PYC_TIMESTAMP = 0  # the flags of a pyc checked by its source's mtime and size


def site_packages(env: Path) -> Path | None:
    """The environment's site-packages (POSIX layout), or None."""
    found = sorted(env.glob("lib/python3*/site-packages"))
    return found[0] if len(found) == 1 else None


def _pyc_name(name: str) -> tuple[str, str] | None:
    """`mod.cpython-311.pyc` -> ("mod", "cpython-311"); None for an optimised or other file."""
    parts = name.split(".")
    if len(parts) != 3 or parts[2] != "pyc":
        return None
    return parts[0], parts[1]


def pyc_magic(tag: str) -> bytes | None:
    """The head of a pyc for cache tag `tag` ("cpython-310"); None for an unknown tag."""
    if tag == sys.implementation.cache_tag:
        return importlib.util.MAGIC_NUMBER
    number = PYC_MAGIC.get(tag)
    return None if number is None else number.to_bytes(2, "little") + b"\r\n"


def pyc_current(pyc: Path, source: Path, head_magic: bytes = importlib.util.MAGIC_NUMBER) -> bool:
    """`pyc` is bytecode of magic number `head_magic` for `source` as it is now (the header
    Python itself checks: version, then the source's mtime and size)."""
    with pyc.open("rb") as f:
        head = f.read(16)
    st = source.stat()
    return (
        len(head) == 16
        and head[:4] == head_magic
        and int.from_bytes(head[4:8], "little") == _PYC_TIMESTAMP
        and int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF
    )


def _link_file(source: Path, dest: Path, *, copy: bool = True) -> bool:
    """Hard-link `source` to `dest` (else, when `copy`, copy it there whole); False when
    not done or when `dest` appeared meanwhile (never written over)."""
    try:
        os.link(source, dest)
    except FileExistsError:
        return False
    except OSError:
        if not copy:
            return False
        part = dest.with_name(f".{dest.name}.{os.getpid()}.part")
        try:
            shutil.copyfile(source, part)
            os.replace(part, dest)
        except OSError:
            part.unlink(missing_ok=True)
            return False
    return True


def keep_pyc(site: Path, store: Path, skip: tuple[str, ...] = ()) -> int:
    """Link into `store` the current bytecode in `site` that it lacks (not already a link), with
    its source, except under the top-level folders `skip` (the plugin's); how many files."""
    kept = 0
    top = str(site)
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath == top:
            dirnames[:] = [d for d in dirnames if d not in skip]
        if os.path.basename(dirpath) != PYCACHE:
            continue
        dirnames.clear()
        pkg = os.path.dirname(dirpath)
        kept_pkg = os.path.join(store, os.path.relpath(pkg, top))
        for name in filenames:
            parsed = _pyc_name(name)
            head = None if parsed is None else pyc_magic(parsed[1])
            if parsed is None or head is None:
                continue
            pyc, source = os.path.join(dirpath, name), os.path.join(pkg, parsed[0] + ".py")
            dest = os.path.join(kept_pkg, PYCACHE, name)
            with contextlib.suppress(OSError):
                if os.stat(pyc).st_nlink > 1 or os.path.exists(dest):
                    continue
                if os.path.isfile(source) and pyc_current(Path(pyc), Path(source), head):
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    kept_source = Path(kept_pkg, parsed[0] + ".py")
                    if kept_source.exists() or _link_file(Path(source), kept_source, copy=False):
                        kept += _link_file(Path(pyc), Path(dest))
    return kept


def _cache_tag(site: Path) -> str | None:
    """`lib/python3.11/site-packages` -> "cpython-311"; None for another layout."""
    version = site.parent.name.removeprefix("python")
    major, _, minor = version.partition(".")
    return f"cpython-{major}{minor}" if major.isdigit() and minor.isdigit() else None


def restore_pyc(store: Path, site: Path) -> int:
    """Link the kept bytecode of this Python into `site` beside the very files it was written
    for (the same inode as the kept source); how many files. Bytecode already there stays."""
    restored = 0
    tag = _cache_tag(site)
    top = str(store)
    for dirpath, dirnames, filenames in os.walk(top):
        if os.path.basename(dirpath) != PYCACHE:
            continue
        dirnames.clear()
        kept_pkg = os.path.dirname(dirpath)
        pkg = os.path.join(site, os.path.relpath(kept_pkg, top))
        target_dir = os.path.join(pkg, PYCACHE)
        made = os.path.isdir(target_dir)
        for name in filenames:
            parsed = _pyc_name(name)
            if parsed is None or (tag and parsed[1] != tag):
                continue
            source = parsed[0] + ".py"
            try:
                if not os.path.samefile(os.path.join(pkg, source), os.path.join(kept_pkg, source)):
                    continue
                if not made:
                    os.mkdir(target_dir)
                    made = True
            except OSError:  # no such file here (another package set): nothing to put back
                continue
            restored += _link_file(Path(dirpath, name), Path(target_dir, name))
    return restored


# Beside an environment's marker: where its bytecode is kept, and what is not kept.
PYC_POINTER = ".vpr-bytecode.json"


def remember_pyc_store(env: Path, store: Path, skip: tuple[str, ...]) -> None:
    """Note in `env` where its bytecode goes (`keep_pyc_for` reads it after later imports)."""
    (env / PYC_POINTER).write_text(json.dumps({"store": str(store), "skip": list(skip)}))


def keep_pyc_for(env: Path) -> int:
    """`keep_pyc` for an environment made by `vpr env` (0 for any other environment)."""
    site = site_packages(env)
    try:
        with open(env / PYC_POINTER, "rb") as f:  # bounded: a pointer is a line of JSON
            text = f.read(_MAX_POINTER + 1)
        if len(text) > _MAX_POINTER:  # not a pointer vpr wrote
            return 0
        noted = json.loads(text)
        store, skip = Path(noted["store"]), tuple(noted["skip"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    return keep_pyc(site, store, skip) if site is not None else 0


_keeping: list[threading.Thread] = []


@contextlib.contextmanager
def session() -> Iterator[None]:
    """The stages of one run (`vpr release`): a warm worker started inside stays until the
    block ends; bytecode kept in the background is finished when it ends."""
    with workers.session():
        try:
            yield
        finally:
            while _keeping:
                _keeping.pop().join()


def keep_bytecode(python: Path | str) -> None:
    """Keep the pairing env's new bytecode for the next env of the same lock (`keep_pyc_for`):
    inside a session in the background, else now."""
    env = Path(python).parent.parent
    if not workers.in_session():
        keep_pyc_for(env)
        return
    thread = threading.Thread(target=keep_pyc_for, args=(env,), name="vpr-bytecode")
    thread.start()
    _keeping.append(thread)


# The exit code of a job refused its `site_first` (inenv/worker.LAYER_REFUSED: nothing
# imports inenv, so the number is written twice; tests/unit/test_worker_layer.py checks).
LAYER_REFUSED = 75


@dataclass(frozen=True)
class Job:
    """One script's run in the worker: `script argv...` with `env` in `cwd`; `what` names it in
    errors; `early` and `site_first` as `Worker.run` says."""

    script: Path
    argv: tuple[Path | str, ...]
    env: dict[str, str]
    cwd: Path | None
    what: str
    early: bool = False
    site_first: Path | None = None


class Worker:
    """The warm worker of one environment python (`inenv/worker.py`) behind the death guard,
    fed jobs as JSON lines; several threads may send jobs, each waits for its own answer."""

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
        self._reader = threading.Thread(target=self._read, name="vpr-warm-worker", daemon=True)
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
        """Start the worker script `stage(folder)` puts in a private folder; it is ready once
        `preload` is imported, and imports `later` between jobs."""
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
        """Run `job` in a forked copy of the worker: (exit code, its output). An `early` job
        starts once the first preload list is in. With `site_first` (a layered venv's
        site-packages) it runs as that venv's python would, or ends with LAYER_REFUSED."""
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


# Runs inside the environment being checked: standard library only, Python 3.8+.
_PROBE = r"""
import base64, csv, hashlib, json, sys
import importlib.metadata as md
out = {}
for name in json.loads(sys.argv[1]):
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        out[name] = None
        continue
    entries, bad = {}, []
    for row in csv.reader((d.read_text("RECORD") or "").splitlines()):
        if len(row) < 2 or not row[1].startswith("sha256="):
            continue
        try:
            with open(d.locate_file(row[0]), "rb") as f:
                data = f.read()
        except OSError:
            bad.append([row[0], "missing"])
            continue
        got = "sha256=" + base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if got != row[1]:
            bad.append([row[0], "modified"])
        entries[row[0]] = got  # what is on disk, not what RECORD claims
    eps = {}
    for ep in d.entry_points:
        eps.setdefault(ep.group, {})[ep.name] = ep.value
    direct = d.read_text("direct_url.json")
    out[name] = {"version": d.version, "record": entries, "bad": bad, "entry_points": eps,
                 "direct_url": json.loads(direct) if direct else None,
                 "location": str(d.locate_file(""))}
if len(sys.argv) > 2 and sys.argv[2] == "all":
    every = {}
    for d in md.distributions():
        name = d.metadata["Name"]
        if name:
            every.setdefault(name, d.version)
    out = {"dists": out, "installed": every}
print(json.dumps(out))
"""


class InstalledDist(NamedTuple):
    """One installed distribution as the probe found it, its answer checked (`parse_dists`)."""

    version: str
    location: str  # the folder it is installed into
    record: Mapping[str, str]  # RECORD path -> the sha256 of the file on disk
    bad: tuple[tuple[str, str], ...]  # (path, missing | modified) against RECORD's hash
    entry_points: Mapping[str, Mapping[str, str]]  # group -> name -> object reference
    archive_hashes: Mapping[str, str]  # the wheel it came from (direct_url.json): algo -> hex


def probe_environment(python: Path | str, names: list[str]) -> dict[str, InstalledDist | None]:
    """Installed version, RECORD (verified) and entry points per name (None: not installed)."""
    return parse_dists(_probe(python, [json.dumps(names)]), names, python)


def probe_with_installed(
    python: Path | str, names: list[str]
) -> tuple[dict[str, InstalledDist | None], dict[str, str]]:
    """`probe_environment`, and every installed distribution (name -> version), in one run."""
    data = _probe(python, [json.dumps(names), "all"])
    if not isinstance(data, dict):
        raise _refused(python, "the answer", data, "an object")
    installed = data.get("installed")
    if not isinstance(installed, dict) or not all(isinstance(v, str) for v in installed.values()):
        raise _refused(python, "'installed'", installed, "names and versions")
    return parse_dists(data.get("dists"), names, python), installed


def _refused(python: Path | str, key: str, value: object, expected: str) -> BadInput:
    return BadInput(
        f"--python {python}: the environment probe answered {key} = {field_shown(value)}, "
        f"expected {expected}",
        hint="pass the python of a virtual environment (Python >= 3.8)",
    )


def parse_dists(
    data: object, names: list[str], python: Path | str
) -> dict[str, InstalledDist | None]:
    """The probe's answer for `names`, checked; BadInput naming the python, name and key."""
    if not isinstance(data, dict) or set(data) != set(names):
        raise _refused(python, "the distributions", data, f"an object of {names}")
    return {name: _dist(data[name], f"{name!r}", python) for name in names}


def _dist(data: object, name: str, python: Path | str) -> InstalledDist | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise _refused(python, name, data, "an object")

    def text(key: str) -> str:  # a version may be empty (a mismatch, not a refusal)
        value = data.get(key)
        if not isinstance(value, str) or not (value or key == "version"):
            raise _refused(python, f"{name}.{key}", value, "text")
        return value

    record, bad, eps = data.get("record"), data.get("bad"), data.get("entry_points")
    if not _texts(record):
        raise _refused(python, f"{name}.record", record, "paths and hashes")
    if not isinstance(bad, list) or not all(
        isinstance(b, list) and len(b) == 2 and all(isinstance(x, str) for x in b) for b in bad
    ):
        raise _refused(python, f"{name}.bad", bad, "[path, problem] pairs")
    if not isinstance(eps, dict) or not all(_texts(group) for group in eps.values()):
        raise _refused(python, f"{name}.entry_points", eps, "groups of text")
    hashes = _archive_hashes(data.get("direct_url"))
    if hashes is None:
        raise _refused(python, f"{name}.direct_url", data.get("direct_url"), "PEP 610's object")
    bad_pairs = tuple((path, problem) for path, problem in bad)
    return InstalledDist(text("version"), text("location"), record, bad_pairs, eps, hashes)


def _texts(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _archive_hashes(direct_url: object) -> dict[str, str] | None:
    """The wheel's hashes (algo -> hex) a direct_url.json names ({} when none); None when it
    is not an object."""
    if direct_url is None:
        return {}
    if not isinstance(direct_url, dict):
        return None
    archive = direct_url.get("archive_info") or {}
    if not isinstance(archive, dict) or not _texts(archive.get("hashes") or {}):
        return None
    hashes = dict(archive.get("hashes") or {})
    single = archive.get("hash")
    if isinstance(single, str) and "=" in single:
        algo, value = single.split("=", 1)
        hashes.setdefault(algo, value)
    return hashes


def _probe(python: Path | str, argv: list[str]) -> Any:
    """Run the probe with `python`, where its environment runs (`container.runner_of`)."""
    python = check_python(python)
    try:
        done = runner_of(python).call(
            [str(python), "-I", "-c", _PROBE, *argv], network=False, timeout=300
        )
    except OSError as exc:
        if exc.errno in (errno.ENOEXEC, errno.EACCES, errno.EISDIR, errno.ENOTDIR):
            raise BadInput(
                f"--python {python}: not a program this machine can run ({exc.strerror})"
            )
        raise OutsideFailure(f"--python {python}: could not run it ({exc})")
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise BadInput(
            f"--python {python}: the environment probe failed:\n{tail}",
            hint="pass the python of a virtual environment (Python >= 3.8)",
        )
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise BadInput(
            f"--python {python}: did not answer as a Python interpreter does",
            hint="pass the python of a virtual environment (Python >= 3.8)",
        )


def check_python(python: Path | str) -> Path:
    """`python` when it is a program this user may run (or a container env's link to the
    image's); BadInput naming it otherwise."""
    python = Path(python)
    if python.is_dir():
        raise BadInput(
            f"--python {python}: a folder, not a Python interpreter",
            hint="pass the interpreter itself, e.g. VENV/bin/python",
        )
    if not (python.exists() or python.is_symlink()):  # a container env's link: its image's
        raise BadInput(f"--python {python}: interpreter not found")
    if python.exists() and not (os.access(python, os.X_OK) and _runnable(python)):
        raise BadInput(
            f"--python {python}: not an executable program (a binary or a #! script), so "
            "not a Python interpreter",
            hint="pass the interpreter itself, e.g. VENV/bin/python",
        )
    return python


def _runnable(path: Path) -> bool:
    """Whether the kernel would start `path`: an ELF binary or a `#!` script."""
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return head == b"\x7fELF" or head.startswith(b"#!")
