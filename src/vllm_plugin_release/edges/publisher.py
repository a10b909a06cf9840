"""Uploading to a package index and installing from it: twine and pip (or uv) subprocesses,
every line of their output that reaches a message scrubbed of credentials (`index.redact`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.edges import settings
from vllm_plugin_release.edges.index import IndexTarget, Transient, redact
from vllm_plugin_release.edges.runner import HOST_NETWORK, Runner, host_env


def _not_an_option(url: str) -> str:
    """An index URL for a command line: one starting with '-' would be read as an option."""
    if url.startswith("-"):
        raise BadInput(
            f"index URL {redact(url)!r} starts with '-' and would be read as an option",
            hint="set --index / $VPR_INDEX to an http(s) URL",
        )
    return url


def _twine_env(target: IndexTarget) -> dict[str, str]:
    env = {**os.environ, "TWINE_NON_INTERACTIVE": "1"}
    if target.local:  # pypiserver with auth off still wants a user name from twine
        env.update(
            TWINE_USERNAME="vpr",
            TWINE_PASSWORD="local-index",
            PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        )
    return env


def twine_check_command(wheels: list[Path]) -> list[str]:
    return [sys.executable, "-m", "twine", "check", "--strict", "--", *map(str, wheels)]


def twine_check(wheels: list[Path]) -> None:
    """`twine check --strict` of `wheels`, run now; GateFailed when it fails."""
    twine_check_verdict(
        subprocess.run(twine_check_command(wheels), capture_output=True, text=True, check=False)
    )


def twine_check_verdict(done: subprocess.CompletedProcess[str]) -> None:
    """GateFailed when that `twine check --strict` run failed."""
    if done.returncode != 0:
        out = redact((done.stdout + done.stderr).strip())
        raise GateFailed(
            f"`twine check --strict` failed:\n{out}",
            hint="fix the package metadata (long description, content type) and rebuild",
        )


def twine_upload(target: IndexTarget, wheels: list[Path]) -> None:
    """One `twine upload` of `wheels`, in their order. Transient: worth another attempt (including
    400/409, often "file already exists", which the caller settles by asking the index)."""
    names = ", ".join(w.name for w in wheels)
    argv = [sys.executable, "-m", "twine", "upload", "--non-interactive", "--disable-progress-bar"]
    argv += ["--repository-url", _not_an_option(target.upload_url), "--", *map(str, wheels)]
    env = _twine_env(target)
    try:
        with progress.working(f"upload of {names} (twine)"):
            done = subprocess.run(
                argv, capture_output=True, text=True, check=False, env=env, timeout=1800
            )
    except subprocess.TimeoutExpired:
        raise Transient(f"upload of {names} timed out")
    if done.returncode == 0:
        return
    out = redact((done.stdout + done.stderr).strip())
    last = "\n".join(out.splitlines()[-6:])
    if "Credential not found" in out:  # twine, non-interactive, with no user or password
        raise OutsideFailure(
            f"{redact(target.upload_url)}: no credentials for the upload of {names}",
            hint="set TWINE_USERNAME / TWINE_PASSWORD or store them in the keyring",
        )
    status = re.search(r"HTTPError: (\d{3})", out)
    code = int(status.group(1)) if status else None
    if code is None or code >= 500 or "ConnectionError" in out or "timed out" in out.lower():
        raise Transient(f"upload of {names}: {last}")
    if code in (401, 403):
        raise OutsideFailure(
            f"{redact(target.upload_url)} refused the upload of {names} (HTTP {code})",
            hint="set TWINE_USERNAME / TWINE_PASSWORD or store them in the keyring",
        )
    if code in (400, 409):  # often "file already exists": the caller re-checks the digest
        raise Transient(f"upload of {names} refused (HTTP {code}): {last}")
    raise OutsideFailure(f"upload of {names} failed (HTTP {code}):\n{last}")


def make_venv(venv: Path, runner: Runner, python: str | None = None) -> Path:
    """A new virtual environment without pip at `venv`, made and marked where `runner` runs commands
    (so its python later runs there too); its python."""
    argv = [runner.uv, "venv", "--no-config", "--no-python-downloads", "--quiet"]
    argv += ["--python", python] if python else []
    made = runner.call([*argv, "--", str(venv)], network=False, timeout=300)
    if made.returncode != 0:
        raise OutsideFailure(
            f"install proof: could not create a venv in {venv}:\n{made.stdout}{made.stderr}"
        )
    runner.mark(venv)
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def install_with_hashes(
    python: Path, simple_url: str, requirements: Path, runner: Runner
) -> subprocess.CompletedProcess[str]:
    """`uv pip install --no-deps --require-hashes` of `requirements` into `python`'s environment
    from `simple_url` only (no cache, no configuration: no other source is consulted)."""
    argv = [runner.uv, "pip", "install", "--python", str(python), "--no-cache", "--no-config"]
    argv += ["--no-deps", "--require-hashes", "--index-url", _not_an_option(simple_url)]
    argv += ["-r", str(requirements)]
    env = {**host_env(), **_INSTALL_ENV}
    env.pop("UV_CACHE_DIR", None)
    with progress.working("install proof: uv pip install --require-hashes"):
        return runner.call(argv, env=env, network=HOST_NETWORK)


_INSTALL_ENV = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1"}


def targets_from_environ() -> tuple[str | None, str | None]:
    """($VPR_INDEX, $VPR_STORE): the environment's defaults for the upload index and store."""
    return settings.text("VPR_INDEX") or None, settings.text("VPR_STORE") or None
