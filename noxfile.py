"""Sessions: one per stage, each a thin call of the `vpr` CLI.

nox -s release                 the whole pipeline for buildspec/reference.toml
nox -s release -- --spec buildspec/tt.toml
nox -s tests                   the test suite (what CI runs)
nox -s tests -- -m "not integration"   the fast loop: tests/unit/ only
nox -s lint                    ruff lint + format check
nox -s bench                   side-by-side benchmarks (ratios, medians)
nox -s lock                    re-resolve every hash-locked file under constraints/
nox -s build-core -- --spec FILE
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
PYTHON = "3.11"
DEV_CONSTRAINTS = "constraints/dev.txt"
DEFAULT_SPEC = "buildspec/reference.toml"


def install_project(session: nox.Session, *extras: str) -> None:
    """Every install goes through the constraints file: one place pins the tools."""
    target = f".[{','.join(extras)}]" if extras else "."
    session.install("-c", DEV_CONSTRAINTS, "-e", target)


def spec_args(session: nox.Session) -> list[str]:
    return spec_args_from(list(session.posargs))


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint + format) and the layer contracts (import-linter, see docs/architecture.md)."""
    install_project(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Everything (tests/unit/ and tests/integration/); posargs go to pytest."""
    install_project(session, "test")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def lock(session: nox.Session) -> None:
    """Re-resolve constraints/dev.txt and the spec's build lock."""
    session.install("-c", DEV_CONSTRAINTS, "uv")
    session.run(
        "uv",
        "pip",
        "compile",
        "pyproject.toml",
        "--extra",
        "test",
        "--extra",
        "lint",
        "--extra",
        "bench",
        "--python-version",
        PYTHON,
        "--no-header",
        "--quiet",
        "-o",
        DEV_CONSTRAINTS,
    )
    install_project(session)
    session.run("vpr", "lock", *spec_args(session))


@nox.session(name="build-core", python=PYTHON)
def build_core(session: nox.Session) -> None:
    install_project(session)
    session.run("vpr", "build-core", *spec_args(session))


@nox.session(python=PYTHON)
def release(session: nox.Session) -> None:
    """Every stage in order for one pairing; each stage reuses its cached result."""
    install_project(session)
    session.run("vpr", "release", *spec_args(session))


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    install_project(session, "bench")
    session.run("python", "-m", "benchmarks", *session.posargs)


# -- moving to a new core release, and the hardware runner (.github/workflows/) -----------


@nox.session(python=PYTHON)
def bump(session: nox.Session) -> None:
    """nox -s bump -- VERSION [--spec FILE] [--dry-run] [--with-api] [--with-tests] ..."""
    args = list(session.posargs)
    if not args or args[0].startswith("-"):
        session.error("usage: nox -s bump -- VERSION [--spec FILE] [vpr bump options]")
    install_project(session)
    session.run("vpr", "bump", "--core", args[0], *spec_args_from(args[1:]))


@nox.session(python=PYTHON)
def upstream(session: nox.Session) -> None:
    """Core releases newer than the pin: nox -s upstream -- [--spec FILE] [--json]."""
    install_project(session)
    session.run("vpr", "upstream", *spec_args(session))


@nox.session(name="conform-hardware", python=PYTHON)
def conform_hardware(session: nox.Session) -> None:
    """On the hardware runner: probe, hardware env, conform, -tp probe + live load test.

    nox -s conform-hardware -- --plan [--spec FILE] [--changed-since REF]   CI's job matrix
    """
    install_project(session)
    args = list(session.posargs)
    if "--plan" in args:
        args.remove("--plan")
        session.run("vpr", "hardware-plan", *args)
        return
    if "--spec" not in args:  # the spec names the hardware part; no vendor is the default
        session.error(
            "usage: nox -s conform-hardware -- --spec FILE [vpr conform-hardware options]"
        )
    session.run("vpr", "conform-hardware", *args)


@nox.session(python=PYTHON)
def publish(session: nox.Session) -> None:
    """Sign the manifest and publish the pairing (after conformance): nox -s publish -- --spec F.

    CI secrets: the PEM private key in $VPR_SIGNING_KEY_PEM (and its public half in
    $VPR_SIGNING_PUB_PEM) are written to private temporary files for `vpr`.
    """
    install_project(session)
    env = {}
    pem = os.environ.get("VPR_SIGNING_KEY_PEM")
    if pem:
        key = Path(session.create_tmp()) / "manifest-signing.key"
        for path, text in ((key, pem), (Path(f"{key}.pub"), os.environ.get("VPR_SIGNING_PUB_PEM"))):
            if text:
                path.touch(mode=0o600)
                path.write_text(text if text.endswith("\n") else text + "\n")
        env["VPR_SIGNING_KEY"] = str(key)
    args = spec_args(session)
    session.run("vpr", "manifest", "build", *args, env=env)
    session.run("vpr", "publish", *args, env=env)


@nox.session(name="pr-body", python=PYTHON)
def pr_body(session: nox.Session) -> None:
    """A bump pull request's body: nox -s pr-body -- --spec F --report R --out FILE."""
    install_project(session)
    session.run("vpr", "pr-body", *spec_args(session))


def spec_args_from(args: list[str], default: str = DEFAULT_SPEC) -> list[str]:
    return args if "--spec" in args else ["--spec", default, *args]
