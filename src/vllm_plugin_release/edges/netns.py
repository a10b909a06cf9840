"""Whether this machine can run a command with no network (`unshare -n`): one probe per
process, light to import (a warm `vpr build-core` asks it before anything else loads)."""

from __future__ import annotations

import contextlib
import functools
import shutil
import subprocess


@functools.lru_cache(maxsize=1)
def can_unshare_network() -> bool:
    """True when `unshare -n` works here (root or user namespaces)."""
    if not shutil.which("unshare"):
        return False
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10)
        return done.returncode == 0
    return False
