"""`git`, run as a subprocess: the one place that calls it (no prompts, never a shell)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from vllm_plugin_release.core.errors import OutsideFailure


def git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `git ARGS` in `cwd`; the caller reads the return code and the output."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise OutsideFailure("git is not installed", hint="install git")
