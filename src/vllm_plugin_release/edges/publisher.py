"""Uploading to a package index and installing from it: twine and pip (or uv) subprocesses.

Every line of their output that reaches a message is scrubbed of credentials
(`edges.index.redact`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.edges.index import IndexTarget, Transient, redact
from vllm_plugin_release.edges.runner import HOST_NETWORK, Runner, host_env
from vllm_plugin_release.edges.uv import uv_bin

# ---------------------------------------------------------------------------
# twine


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


def twine_check(wheels: list[Path]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, wheels)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        out = redact((done.stdout + done.stderr).strip())
        raise GateFailed(
            f"`twine check --strict` failed:\n{out}",
            hint="fix the package metadata (long description, content type) and rebuild",
        )


def twine_upload(target: IndexTarget, wheel: Path) -> None:
    try:
        with progress.working(f"upload of {wheel.name} (twine)"):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "twine",
                    "upload",
                    "--non-interactive",
                    "--disable-progress-bar",
                    "--repository-url",
                    _not_an_option(target.upload_url),
                    str(wheel),
                ],
                capture_output=True,
                text=True,
                check=False,
                env=_twine_env(target),
                timeout=1800,
            )
    except subprocess.TimeoutExpired:
        raise Transient(f"upload of {wheel.name} timed out")
    if done.returncode == 0:
        return
    out = redact((done.stdout + done.stderr).strip())
    last = "\n".join(out.splitlines()[-6:])
    status = re.search(r"HTTPError: (\d{3})", out)
    code = int(status.group(1)) if status else None
    if code is None or code >= 500 or "ConnectionError" in out or "timed out" in out.lower():
        raise Transient(f"upload of {wheel.name}: {last}")
    if code in (401, 403):
        raise OutsideFailure(
            f"{redact(target.upload_url)} refused the upload of {wheel.name} (HTTP {code})",
            hint="set TWINE_USERNAME / TWINE_PASSWORD or store them in the keyring",
        )
    if code in (400, 409):  # often "file already exists": the caller re-checks the digest
        raise Transient(f"upload of {wheel.name} refused (HTTP {code}): {last}")
    raise OutsideFailure(f"upload of {wheel.name} failed (HTTP {code}):\n{last}")


# ---------------------------------------------------------------------------
# Installing from an index (the install proof)


def make_venv(venv: Path, runner: Runner | None = None, python: str | None = None) -> Path:
    """A new virtual environment without pip at `venv`; returns its python.

    With a `runner`, made where that runner runs commands (`uv venv`, CPython `python`
    when given, no network) and marked as that runner's (`Runner.mark`), so whoever runs
    its python later runs it there too; else with the python that runs vpr."""
    if runner is None:
        made = subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)],
            capture_output=True,
            text=True,
            check=False,
        )
    else:
        argv = [runner.uv, "venv", "--no-config", "--no-python-downloads", "--quiet"]
        argv += ["--python", python] if python else []
        made = runner.call([*argv, "--", str(venv)], network=False, timeout=300)
    if made.returncode != 0:
        raise OutsideFailure(
            f"install proof: could not create a venv in {venv}:\n{made.stdout}{made.stderr}"
        )
    if runner is not None:
        runner.mark(venv)
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _pip_has_python_option() -> bool:
    """pip >= 22.3 can install into another interpreter (`pip --python`)."""
    try:
        import pip
    except ImportError:
        return False
    try:
        major, minor = (int(x) for x in pip.__version__.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (22, 3)


def install_with_hashes(
    python: Path, simple_url: str, requirements: Path, runner: Runner | None = None
) -> subprocess.CompletedProcess[str]:
    """`install --no-deps --require-hashes` of `requirements` into `python`'s environment,
    from `simple_url` only, with no download cache (the bytes come from the index).

    The installer is uv: the one the plugins' own installers use, and the fastest for
    this check (about 10x pip here: one small Rust binary against pip's start-up and
    resolver, for the same result). The check is the same with either: every downloaded
    wheel's sha256 must equal its requirement line's hash, else the install fails.
    With a `runner`: its uv, run where it runs commands, on this machine's network (the
    local index listens on its loopback). Without one, pip (`pip --python`, 22.3+) only
    when no uv binary can be found."""
    common = [
        "--no-deps",
        "--require-hashes",
        "--index-url",
        _not_an_option(simple_url),
        "-r",
        str(requirements),
    ]
    uv_args = ["pip", "install", "--python", str(python), "--no-cache", "--no-config"]
    if runner is not None:
        env = {**host_env(), **_INSTALL_ENV}
        env.pop("UV_CACHE_DIR", None)
        with progress.working("install proof: uv pip install --require-hashes"):
            return runner.call([runner.uv, *uv_args, *common], env=env, network=HOST_NETWORK)
    try:
        cmd = [uv_bin(), *uv_args]
    except OutsideFailure:
        if not _pip_has_python_option():
            raise OutsideFailure(
                "install proof: neither uv nor pip 22.3+ is available", hint="pip install uv"
            ) from None
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "--no-input",
        ]
    env = {**os.environ, **_INSTALL_ENV}
    for name in _OTHER_SOURCES:
        env.pop(name, None)  # the proof installs from this index only
    with progress.working(f"install proof: {Path(cmd[0]).name} install --require-hashes"):
        return subprocess.run([*cmd, *common], capture_output=True, text=True, check=False, env=env)


_INSTALL_ENV = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1"}
# Where else an installer would look for packages: never read by the proof.
_OTHER_SOURCES = ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_INDEX",
                  "UV_EXTRA_INDEX_URL", "UV_INDEX_URL")  # fmt: skip


def targets_from_environ() -> tuple[str | None, str | None]:
    """($VPR_INDEX, $VPR_STORE): the environment's defaults for the upload index and store."""
    return os.environ.get("VPR_INDEX") or None, os.environ.get("VPR_STORE") or None
