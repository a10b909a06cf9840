"""Calls run side by side in forked children, inside the pairing environment.

Staged beside the inenv script that uses it (`edges/envrun.stage_module`); standard
library only, like every inenv module. The children are forked after the caller's
imports, so they share them (vLLM's import is seconds; a replay of one scheduler is one
call), and each ends with everything it changed gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def forked(
    calls: list[Callable[[], dict[str, Any]]], errors: tuple[type[Exception], ...] = ()
) -> list[dict[str, Any]]:
    """Each call in its own forked child, all at once; their results (JSON objects) in
    order. An exception of `errors` raised in a child is raised here, as that class; a
    child that fails otherwise, or dies, is a RuntimeError."""
    sys.stdout.flush()
    sys.stderr.flush()
    kids = []
    for call in calls:
        fd, path = tempfile.mkstemp(prefix="vpr-forked-", suffix=".json")
        pid = os.fork()
        if pid == 0:
            with contextlib.suppress(Exception):  # dies with the caller (PR_SET_PDEATHSIG)
                ctypes.CDLL(None).prctl(1, signal.SIGKILL)
            try:
                out: dict[str, Any] = {"ok": call()}
            except errors as exc:
                out = {"raise": type(exc).__name__, "message": str(exc)}
            except BaseException:
                out = {"raise": "", "message": traceback.format_exc()}
            with os.fdopen(fd, "w") as f:
                json.dump(out, f, separators=(",", ":"))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)  # no interpreter teardown in the child
        os.close(fd)
        kids.append((pid, Path(path)))
    outs = []
    for pid, path in kids:
        _, status = os.waitpid(pid, 0)
        text = path.read_text()
        path.unlink()
        outs.append(json.loads(text) if text else {"raise": "", "message": f"status {status}"})
    by_name = {cls.__name__: cls for cls in errors}
    for out in outs:
        if "raise" in out:
            raise by_name.get(out["raise"], RuntimeError)(out["message"])
    return [out["ok"] for out in outs]
