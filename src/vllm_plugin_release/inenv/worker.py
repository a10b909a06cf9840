"""A warm interpreter in the pairing environment: the heavy imports once, each job a forked
copy, so each job starts warm and ends with everything it changed gone."""

# Protocol, one JSON object per line. Stdout: {"ready": true, "preloaded", "skipped"}, then
# {"id", "pid"} when a job starts and {"id", "rc"} when it ends. Stdin: {"id", "script",
# "argv", "env", "cwd", "log", "early", "site_first"} runs a job (an early one once the
# `first` preload list is in); {"kill": ID} stops one; end of stdin: wait, then exit.
# vLLM and the plugin are never preloaded: importing them reads what a job sets.

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import sys
import traceback
from typing import Any


def preload(names: list[str]) -> dict[str, Any]:
    loaded, skipped = [], {}
    for name in names:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception as exc:  # an environment without it: the job imports what it needs
            skipped[name] = f"{type(exc).__name__}: {exc}"
    return {"ready": True, "preloaded": loaded, "skipped": skipped}


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


_PROTOCOL: dict[str, int] = {}


def run_job(job: dict[str, Any]) -> int:
    """In the forked child: become `python SCRIPT ARGV...` and run it; the exit code."""
    log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the worker's job stream and answers are not the job's
    os.close(null)
    if "fd" in _PROTOCOL:
        os.close(_PROTOCOL["fd"])
    os.environ.clear()
    os.environ.update(job["env"])
    if job.get("cwd"):
        os.chdir(job["cwd"])
    script = job["script"]
    sys.argv = [script, *job["argv"]]
    sys.path[0] = os.path.dirname(script)  # what `python SCRIPT` puts first
    if job.get("site_first"):
        refused = layer_first(job["site_first"])
        if refused:  # the overlay's python must run it: its modules would not be these
            print(f"{LAYER_REFUSED_TEXT}: {', '.join(refused)}", file=sys.stderr)
            return LAYER_REFUSED
    # Files installed after the worker looked at a folder (the pairing env's wheels go in
    # while it imports torch): seen as a new interpreter would see them, whatever the
    # folder's mtime says (finders and importlib.metadata cache listings by it).
    importlib.invalidate_caches()
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    return code


# A job with `site_first` whose folder brings a module this worker has imported already
# ends with this code (EX_TEMPFAIL) before it runs: the caller runs it in a new interpreter.
LAYER_REFUSED = 75
LAYER_REFUSED_TEXT = "not run as the overlay's python here (its own python runs it)"


def layer_first(site_dir: str) -> list[str]:
    """sys.path as the python of a venv layered on this environment has it (`site_dir` and
    its .pth lines after the standard library); with nothing changed, why it is refused
    when that python would not import what this worker has imported."""
    names = set()
    with contextlib.suppress(OSError):
        for entry in os.listdir(site_dir):
            stem = entry.split(".")[0]
            if entry.endswith((".dist-info", ".pth")) or not stem.isidentifier():
                continue
            names.add(stem)
    shadowed = sorted(name for name in names if name in sys.modules)
    if shadowed:
        return [f"{name} (imported by the worker already)" for name in shadowed]
    import site

    before = list(sys.path)
    at = next((i for i, p in enumerate(before) if os.path.basename(p) == "site-packages"), None)
    if at is None:
        return ["(this environment has no site-packages on its path)"]
    sys.path[:] = before[:at]
    site.addsitedir(site_dir)  # its own .pth files, as that python's `site` reads them
    if before[at] not in sys.path:
        sys.path[:] = before
        return [f"(no .pth line of {site_dir} names {before[at]})"]
    return []


def _start(job: dict[str, Any], running: dict[int, Any], reply: Any) -> None:
    """Fork the job's process, note it in `running` and say it started."""
    pid = os.fork()
    if pid == 0:
        code = 70  # EX_SOFTWARE: run_job itself failed (e.g. the log cannot be opened)
        try:
            code = run_job(job)
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)  # never back into the worker's loop; no interpreter teardown
    running[pid] = job["id"]
    reply({"id": job["id"], "pid": pid})


def serve(reply: Any, later: list[str] | None = None) -> None:
    """Read jobs from stdin until it closes; answer each with its exit code. A job marked
    `early` starts at once; any other once `later` is imported, which the worker does one
    module at a time whenever no job is waiting to be read."""
    later = list(later or [])
    running: dict[int, Any] = {}  # pid -> job id
    waiting: list[dict[str, Any]] = []  # jobs that start once `later` is imported
    pending = b""
    open_ = True
    while open_ or running or waiting:
        while waiting and not later:
            _start(waiting.pop(0), running, reply)
        ready = open_ and select.select([0], [], [], 0 if later else 0.05)[0]
        if ready:
            chunk = os.read(0, 65536)
            open_ = bool(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in filter(None, lines):
                message = json.loads(line)
                if "kill" in message:  # a job past its time: only one still running here
                    for pid, job_id in running.items():
                        if job_id == message["kill"]:
                            os.kill(pid, signal.SIGKILL)
                    if any(job["id"] == message["kill"] for job in waiting):  # never started
                        waiting = [job for job in waiting if job["id"] != message["kill"]]
                        reply({"id": message["kill"], "rc": -signal.SIGKILL})
                    continue
                if later and not message.get("early"):
                    waiting.append(message)
                    continue
                _start(message, running, reply)
        elif later:  # one module of the second list, between jobs (a later fork has it)
            for name, why in preload([later.pop(0)])["skipped"].items():
                print(f"preload {name}: skipped ({why})", file=sys.stderr)
        block = not open_ and not later and not waiting
        while running:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            if pid == 0:
                break
            reply({"id": running.pop(pid), "rc": os.waitstatus_to_exitcode(status)})


def main(argv: list[str]) -> int:
    # The protocol keeps the real stdout; anything printed by a preloaded module (or by
    # this loop) goes to stderr instead.
    _PROTOCOL["fd"] = os.dup(1)
    out = os.fdopen(_PROTOCOL["fd"], "w")
    os.dup2(2, 1)

    def reply(message: dict[str, Any]) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    with open(argv[1]) as f:
        names = json.load(f)
    if isinstance(names, list):  # one list: all of it before the first job
        names = {"first": names, "then": []}
    reply(preload(list(names["first"])))
    serve(reply, list(names["then"]))
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # torch's teardown is slow; every answer is written
