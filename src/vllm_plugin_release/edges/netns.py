"""Whether this machine can run a command with no network (`unshare -n`): one probe per
process, light to import (a warm `vpr build-core` asks it before anything else loads, so
the probe is spawned with `os.posix_spawn`, not through `subprocess`)."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import time

PROBE_SECONDS = 10.0


@functools.lru_cache(maxsize=1)
def can_unshare_network() -> bool:
    """True when `unshare -n` works here (root or user namespaces)."""
    unshare = shutil.which("unshare")
    if not unshare:
        return False
    quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
    try:
        pid = os.posix_spawn(unshare, [unshare, "-n", "true"], os.environ, file_actions=quiet)
    except OSError:
        return False
    deadline = time.monotonic() + PROBE_SECONDS
    delay = 0.0005
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        if time.monotonic() > deadline:  # a probe that hangs: no isolation
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
