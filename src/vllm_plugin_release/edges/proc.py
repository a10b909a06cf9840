"""Child processes for stages and checks that need one outside a runner: the one place
that starts them (plugin tests, interpreter questions, the stand-in wheel build).

Errors are said plainly: a program that cannot be started, or does not finish in
time, is an outside failure (exit 3) naming what was being done.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.errors import OutsideFailure


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
    except subprocess.TimeoutExpired:
        raise OutsideFailure(f"{what} did not finish within {timeout:g} s")
    except OSError as exc:
        raise OutsideFailure(f"{what}: cannot start {argv[0]!s}: {exc.strerror or exc}")


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
