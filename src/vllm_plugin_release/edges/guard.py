"""The guard's wheel (`guard/`, its own distribution), built by its in-tree PEP 517
backend through `pyproject_hooks` in a child process, as any front end would.

Where its source is: `$VPR_GUARD_SOURCE`, else `guard/` beside the project's `src/`
(this checkout of vllm-plugin-release).
"""

from __future__ import annotations

import os
from pathlib import Path

from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.edges import settings

SOURCE_ENV = "VPR_GUARD_SOURCE"
CHECKOUT = Path(__file__).resolve().parents[3] / "guard"


def guard_source() -> Path:
    """The guard's source folder (its pyproject.toml); BadInput naming where it looked."""
    given = settings.text(SOURCE_ENV)
    folder = Path(given) if given else CHECKOUT
    if not (folder / "pyproject.toml").is_file():
        raise BadInput(
            f"{folder}: the guard's source (guard/pyproject.toml) is not there",
            hint=f"run vpr from a checkout of vllm-plugin-release, or set ${SOURCE_ENV} to its "
            "guard/ folder",
        )
    return folder


def build_wheel(source: Path, out: Path) -> Path:
    """One build of the guard's wheel into `out` (a fresh folder); the wheel's path.
    SOURCE_DATE_EPOCH is left unset: the backend then stamps every member 1980-01-01."""
    import subprocess
    import sys

    from pyproject_hooks import BuildBackendHookCaller

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    system = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))
    build = system.get("build-system", {})
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}

    def run(cmd: list[str], cwd: str | None = None, extra_environ: dict | None = None) -> None:
        done = subprocess.run(
            cmd, cwd=cwd, env={**env, **(extra_environ or {})}, capture_output=True, text=True
        )
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-6:]
            raise GateFailed(f"{source}: building the guard's wheel failed:\n" + "\n".join(tail))

    caller = BuildBackendHookCaller(
        str(source),
        build["build-backend"],
        backend_path=build.get("backend-path"),
        runner=run,
        python_executable=sys.executable,
    )
    out.mkdir(parents=True, exist_ok=True)
    return out / caller.build_wheel(str(out))
