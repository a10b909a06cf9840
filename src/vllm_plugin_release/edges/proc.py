"""Child processes for stages and checks that need one outside a runner (plugin tests,
interpreter questions, the stand-in wheel build), and `spawn`, the one place that starts
a process that outlives the call (the runner's commands, the warm worker, the local
index, `vllm serve`, `Started`).

Errors are said plainly: a program that cannot be started, or does not finish in
time (`TimedOut`, with what it had written), is an outside failure (exit 3) naming what
was being done; a caller whose command runs the plugin's code makes a timeout JobFailed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.errors import OutsideFailure, TimedOut
from vllm_plugin_release.edges import children


def inherited(*, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment for a child, without the variables named in `drop`."""
    return {k: v for k, v in os.environ.items() if k not in drop}


def run(
    argv: Sequence[str | Path],
    *,
    what: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    announce: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` to completion with its output captured as text (never raises on exit
    status: the caller decides what an exit code means). `announce`: a long step, said
    when it starts and with a heartbeat while it runs (`progress.working`)."""
    shown = progress.working(what) if announce else contextlib.nullcontext()
    try:
        with shown:
            return subprocess.run(
                [str(a) for a in argv],
                cwd=cwd,
                env=dict(env) if env is not None else None,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
    except subprocess.TimeoutExpired as exc:
        told = _text(exc.stdout) + _text(exc.stderr)
        raise TimedOut(f"{what} did not finish within {timeout:g} s", output=told) from None
    except OSError as exc:
        raise OutsideFailure(f"{what}: cannot start {argv[0]!s}: {exc.strerror or exc}")


def ended(returncode: int | None) -> str:
    """How a process ended, from its exit status (negative: the signal that killed it)."""
    if returncode is not None and returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited {returncode}"


def _text(output: bytes | str | None) -> str:
    """What a timed-out command had written (subprocess gives bytes, even for text=True)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


# Wide on purpose: stdout/stderr/stdin/env/cwd are subprocess.Popen's own independent options.
def spawn(
    argv: Sequence[str | Path],
    *,
    what: str,
    stdout: Any,
    stderr: Any = subprocess.STDOUT,
    stdin: Any = subprocess.DEVNULL,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    guard: bool = True,
) -> subprocess.Popen[bytes]:
    """Start `argv` in its own process group (a new session) and register it with the run,
    which stops the group on SIGINT or SIGTERM: the one way the edges start a process that
    outlives the call. `guard`: behind the death guard (`children.guarded`: the group dies
    with a SIGKILLed run). A program that cannot be started is an outside failure naming
    `what`: with the guard, it is looked for first (the guard would start, and fail, in
    its place)."""
    args = [str(a) for a in argv]
    if guard and shutil.which(args[0]) is None:
        raise OutsideFailure(f"{what}: cannot start {args[0]}: no such program")
    try:
        popen = subprocess.Popen(
            children.guarded(args) if guard else args,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    except OSError as exc:
        raise OutsideFailure(f"{what}: cannot start {args[0]}: {exc.strerror or exc}") from None
    children.register(popen)
    return popen


class Started:
    """A command started now and waited for later (`finish`), or stopped (`cancel`). It
    runs in its own process group, registered with the run (stopped with it on SIGINT
    or SIGTERM) and behind the death guard (its group dies with a SIGKILLed run); its
    output goes to two files in `folder`, which must outlive it."""

    def __init__(
        self,
        argv: Sequence[str | Path],
        *,
        what: str,
        folder: Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        background: bool = False,
    ) -> None:
        self.what = what
        self.argv = [str(a) for a in argv]
        self.started = time.monotonic()
        self._out, self._err = folder / "stdout.txt", folder / "stderr.txt"
        with self._out.open("wb") as out, self._err.open("wb") as err:
            self.popen = spawn(self.argv, what=what, stdout=out, stderr=err, env=env, cwd=cwd)
        if background:  # the whole group: the guard and the command it starts
            with contextlib.suppress(OSError, AttributeError):  # not on every platform
                os.setpriority(os.PRIO_PGRP, self.popen.pid, 19)

    def finish(self, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Its exit status and output, once it ends; `timeout` counts from its start (an
        outside failure past it, the command stopped)."""
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - self.started))
        try:
            code = self.popen.wait(left)
        except subprocess.TimeoutExpired:
            self.cancel()
            told = "".join(p.read_text(errors="replace") for p in (self._out, self._err))
            raise TimedOut(
                f"{self.what} did not finish within {timeout:g} s", output=told
            ) from None
        children.forget(self.popen)
        out, err = (p.read_text(errors="replace") for p in (self._out, self._err))
        return subprocess.CompletedProcess(self.argv, code, out, err)

    def cancel(self) -> None:
        """Stop its whole group (SIGTERM, then SIGKILL) and reap it, unless it has ended."""
        if self.popen.poll() is None:
            children.kill_group(self.popen.pid, grace=2.0)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(5)
        children.forget(self.popen)


@dataclass
class Taken:
    """A run started ahead, taken by the step it was started for: read its result
    (`started.finish`), then `close` it."""

    started: Started
    scratch: contextlib.ExitStack  # the folder its output goes to
    data: Any = None  # what the starter noted for the taker

    def close(self) -> None:
        """Stop it unless it has ended, and remove its folder."""
        try:
            self.started.cancel()
        finally:
            self.scratch.close()


class Ahead:
    """Commands one walk started before the step that wants their result (within `vpr
    release`: the plugin's tests, publish's `twine check`), each held under that step's
    name and a key that says exactly what it runs. The step takes the run for its very
    key, or runs the command itself; its other runs are stopped. Leaving the `with` block
    (the walk's end) stops every run nobody took."""

    def __init__(self) -> None:
        self._runs: list[tuple[str, object, Taken]] = []

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()

    def add(
        self,
        step: str,
        key: object,
        started: Started,
        scratch: contextlib.ExitStack,
        data: Any = None,
    ) -> None:
        self._runs.append((step, key, Taken(started, scratch, data)))

    def started(self) -> list[Started]:
        """The runs held now."""
        return [run.started for _, _, run in self._runs]

    def take(self, step: str, key: object, *, ended: bool = False) -> Taken | None:
        """The run started for `step` with `key` (with `ended`: only if it has ended),
        which the caller closes; every other run for `step` is stopped."""
        found = None
        try:
            for at in reversed(range(len(self._runs))):
                held_step, held, run = self._runs[at]
                if held_step != step:
                    continue
                del self._runs[at]
                if (
                    found is None
                    and held == key
                    and (not ended or run.started.popen.poll() is not None)
                ):
                    found = run
                else:
                    run.close()
        except BaseException:
            if found is not None:
                found.close()
            raise
        return found

    def cancel(self, step: str | None = None) -> None:
        """Stop every run held (for `step` only, when given)."""
        for at in reversed(range(len(self._runs))):
            if step is None or self._runs[at][0] == step:
                self._runs.pop(at)[2].close()


def ask_python(python: Path, code: str, *, what: str) -> str | None:
    """What `python -c code` prints (stripped), or None when it exits non-zero."""
    done = run([python, "-c", code], what=what)
    return done.stdout.strip() if done.returncode == 0 else None


def copy_tree(src: Path, dst: Path) -> None:
    """`src` copied to the new folder `dst`, links as links, times and modes kept. With
    `cp -a` where there is one: a process, so copies made from threads (the two builds'
    trees) run side by side and at C speed, not one at a time under the GIL."""
    cp = shutil.which("cp")
    if cp is None:
        shutil.copytree(src, dst, symlinks=True)
        return
    dst.parent.mkdir(parents=True, exist_ok=True)  # as copytree does
    done = run([cp, "-a", "--", src, dst], what=f"copying {src}")
    if done.returncode != 0:
        raise OutsideFailure(f"copying {src} to {dst} failed: {done.stderr.strip()[-500:]}")
