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
        if pid == 0:  # the child never leaves this block: it ends here, whatever happens
            try:
                with contextlib.suppress(Exception):  # dies with the caller (PDEATHSIG)
                    ctypes.CDLL(None).prctl(1, signal.SIGKILL)
                try:
                    text = json.dumps({"ok": call()}, separators=(",", ":"))
                except errors as exc:
                    text = json.dumps({"raise": type(exc).__name__, "message": str(exc)})
                except BaseException:
                    text = json.dumps({"raise": "", "message": traceback.format_exc()})
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(0)  # no interpreter teardown in the child
        os.close(fd)
        kids.append((pid, Path(path)))
    outs = []
    try:
        for pid, path in kids:
            _, status = os.waitpid(pid, 0)
            text = path.read_text()
            outs.append(json.loads(text) if text else {"raise": "", "message": f"status {status}"})
    finally:  # the result files go, whatever happened while waiting
        for _, path in kids:
            path.unlink(missing_ok=True)
    by_name = {cls.__name__: cls for cls in errors}
    for out in outs:
        if "raise" in out:
            raise by_name.get(out["raise"], RuntimeError)(out["message"])
    return [out["ok"] for out in outs]
