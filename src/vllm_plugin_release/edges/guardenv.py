"""vpr-guard in an installed environment: its snapshot and its check, asked of the
environment's own python (`python -I -m vpr_guard ...`), where that environment runs
(`container.runner_of`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.core.guardstate import GuardCheck, Snapshot, parse_check, parse_snapshot


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
