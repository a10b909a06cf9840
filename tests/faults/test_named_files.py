"""Every file named on the command line is read bounded: `/dev/zero`, a fifo nobody writes
to, or an endless pipe (`--spec /dev/stdin` fed by `yes`) as the spec, a key, a contract or
a report is exit 2 naming the file, never a hang, a MemoryError or a traceback.

The CLI runs in a subprocess with its address space limited to 1 GiB (an unbounded read
fails fast instead of filling the machine's memory); the subprocess timeout is only the
failure of a hang, nothing here measures time."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pairing import SRC
from tests.support import REFERENCE_SPEC

MEMORY = 1 << 30
HANG = 120  # seconds: a read that blocks or never ends fails the test here

# (command line, with FILE where the hostile path goes); each reads FILE first.
COMMANDS = {
    "release --graph": ("release", "--spec", "FILE", "--graph"),
    "spec check": ("spec", "check", "FILE"),
    "spec set": ("spec", "set", "FILE", "core.version", '"0.26.0"'),
    "build-core": ("build-core", "--spec", "FILE"),
    "lock --check": ("lock", "--check", "--spec", "FILE"),
    "api-diff": ("api-diff", "FILE", "FILE"),
    "manifest query --key": ("manifest", "query", "--store", "store", "--key", "FILE"),
    "sign-store --signing-key": (
        "manifest",
        "sign-store",
        "--store",
        "store",
        "--signing-key",
        "FILE",
    ),
    "pr-body --report": ("pr-body", "--spec", str(REFERENCE_SPEC), "--report", "FILE"),
}


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _hostile(kind: str, tmp_path: Path) -> tuple[str, subprocess.Popen[bytes] | None]:
    """The path to hand the command, and the writer feeding it (an endless pipe)."""
    if kind == "dev-zero":
        return "/dev/zero", None
    if kind == "fifo":
        fifo = tmp_path / "spec.toml"
        os.mkfifo(fifo)
        return str(fifo), None
    feeder = subprocess.Popen(["yes", "version = 1"], stdout=subprocess.PIPE)
    return "/dev/stdin", feeder


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "endless-pipe"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_named_file_that_is_not_a_regular_file_is_bad_input(
    tmp_path: Path, command: str, kind: str
) -> None:
    (tmp_path / "store").mkdir()
    path, feeder = _hostile(kind, tmp_path)
    argv = [path if arg == "FILE" else arg for arg in COMMANDS[command]]
    env = {**os.environ, "PYTHONPATH": str(SRC), "VPR_CACHE_DIR": str(tmp_path / ".vpr")}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "vllm_plugin_release", *argv],
            cwd=tmp_path,
            env=env,
            stdin=feeder.stdout if feeder else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=HANG,
            preexec_fn=_limited,
        )
    finally:
        if feeder:
            feeder.kill()
            feeder.wait()
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "Traceback" not in said and "MemoryError" not in said, said
    assert path in said and "not a regular file" in said, said
