"""Run one of our `inenv` modules inside another Python environment (the pairing env).

Modules under `vllm_plugin_release.inenv` import only the standard library, vLLM
and the plugin (a test keeps it so), so they run in an environment where this
package is not installed: the one module is copied into the run's private temporary
folder and started as a script, so nothing else of ours (nor the site-packages this
package is installed in) is on the environment's path. They read a JSON request
from argv[1] and write a JSON result to argv[2].
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.errors import BadInput, OutsideFailure
from vllm_plugin_release.edges import proc

INENV = Path(__file__).resolve().parent.parent / "inenv"


def stage_module(module: str, folder: Path) -> Path:
    """Copy inenv/<module>.py alone into `folder`; the script to start (a unique name,
    so it cannot shadow a module the environment imports)."""
    source = INENV / f"{module}.py"
    if not module.isidentifier() or not source.is_file():
        raise BadInput(f"no inenv module {module!r}")
    script = folder / f"vpr_inenv_{module}.py"
    shutil.copyfile(source, script)
    return script


def child_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ours without PYTHONPATH (it would put host packages on the
    locked environment's path), plus `env` (which may set one on purpose)."""
    # Without PYTHONDONTWRITEBYTECODE the environment caches its bytecode: importing vLLM
    # and torch from a cold cache costs ~10 s per process when it is set around us.
    child_env = proc.inherited(drop=("PYTHONPATH", "PYTHONDONTWRITEBYTECODE"))
    child_env.update(env or {})
    child_env.setdefault("PYTHONHASHSEED", "0")
    return child_env


def run_in_env(
    python: Path | str,
    module: str,
    request: dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run inenv/<module>.py as a script with `python`: `req.json out.json`; return out.json.

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
        script = stage_module(module, Path(tmp))
        done = proc.run(
            [python, script, req, out],
            what=f"inenv {module}",
            env=child_environment(env),
            cwd=cwd,
            timeout=timeout,
        )
        result = json.loads(out.read_text()) if out.exists() else None
        if done.returncode == 2 and result and "error" in result:
            raise BadInput(result["error"])
        if done.returncode != 0 or result is None:
            # The child's own traceback (in its result) says why; stderr may be empty.
            told = str((result or {}).get("error") or "") + "\n" + done.stderr
            tail = "\n".join(told.strip().splitlines()[-15:])
            raise OutsideFailure(
                f"inenv {module} failed in {python} (exit {done.returncode}):\n{tail}"
            )
        return result
