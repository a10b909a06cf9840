"""vpr-guard from vpr's side: its wheel built from `guard/` ($VPR_GUARD_SOURCE) by its own
PEP 517 backend, and its snapshot and check asked of an installed environment's python."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.guardstate import GuardCheck, Snapshot, parse_check, parse_snapshot
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

    from vllm_plugin_release.core.bounded import tomllib

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


def _ask(python: Path, args: list[str], what: str) -> tuple[int, Any]:
    from vllm_plugin_release.edges.container import runner_of

    done = runner_of(python).call(
        [str(python), "-I", "-m", "vpr_guard", *args], network=False, timeout=300
    )
    try:
        return done.returncode, json.loads(done.stdout)
    except ValueError:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-6:])
        raise GateFailed(
            f"{python}: vpr-guard's {what} did not answer (exit {done.returncode}):\n{tail}",
            hint="the guard is installed with the pairing; run `vpr install` again",
        )


def snapshot(python: Path, roles: dict[str, str]) -> Snapshot:
    """Every distribution of the environment (version, RECORD sha256) and the file stats of
    the distributions in `roles`, as the guard reads them at start-up."""
    args = ["snapshot", *(f"--role={role}={name}" for role, name in sorted(roles.items()))]
    code, answer = _ask(python, args, "snapshot")
    try:
        if code != 0:
            raise ValueError(f"exit {code}")
        return parse_snapshot(answer)
    except ValueError as exc:
        raise GateFailed(f"{python}: vpr-guard's snapshot is not what vpr install expects: {exc}")


def check(python: Path, env_dir: Path) -> GuardCheck:
    """The guard's own comparison of the environment with its certified record: whether it
    is as certified (`ok`) and what it found."""
    _, answer = _ask(python, ["check", "--json", f"--prefix={env_dir}"], "check")
    try:
        return parse_check(answer)
    except ValueError as exc:
        raise GateFailed(f"{python}: vpr-guard's check is not what vpr install expects: {exc}")
