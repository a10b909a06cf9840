"""Run one of our `inenv` modules inside another Python environment (the pairing env).

Modules under `vllm_plugin_release.inenv` import only the standard library, vLLM
and the plugin, so they can run in an environment where this package is not
installed: we put this package's parent folder on PYTHONPATH for that one process.
They read a JSON request from argv[1] and write a JSON result to argv[2].
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.errors import BadInput, OutsideFailure

PACKAGE_PARENT = Path(__file__).resolve().parent.parent


def run_in_env(
    python: Path | str,
    module: str,
    request: dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run `python -m vllm_plugin_release.inenv.<module> req.json out.json`; return out.json.

    An inenv module exits 0 with a result, 2 for bad input (its result holds
    `error`), anything else is an outside failure; stderr is kept for the message.
    """
    python = Path(python)
    if not python.exists():
        raise BadInput(f"{python}: environment python not found", hint="run `vpr env` first")
    with tempfile.TemporaryDirectory(prefix="vpr-inenv-") as tmp:
        req = Path(tmp) / "request.json"
        out = Path(tmp) / "result.json"
        req.write_text(json.dumps(request))
        child_env = {**os.environ, **(env or {})}
        child_env["PYTHONPATH"] = os.pathsep.join(
            [str(PACKAGE_PARENT), *filter(None, [child_env.get("PYTHONPATH")])]
        )
        child_env.setdefault("PYTHONHASHSEED", "0")
        # Let the environment cache its bytecode: importing vLLM and torch from a cold
        # cache costs ~10 s per process when PYTHONDONTWRITEBYTECODE is set around us.
        child_env.pop("PYTHONDONTWRITEBYTECODE", None)
        try:
            done = subprocess.run(
                [str(python), "-m", f"vllm_plugin_release.inenv.{module}", str(req), str(out)],
                env=child_env,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise OutsideFailure(f"inenv {module}: no answer within {timeout} s")
        result = json.loads(out.read_text()) if out.exists() else None
        if done.returncode == 2 and result and "error" in result:
            raise BadInput(result["error"])
        if done.returncode != 0 or result is None:
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise OutsideFailure(
                f"inenv {module} failed in {python} (exit {done.returncode}):\n{tail}"
            )
        return result
