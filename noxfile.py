"""Sessions: one per stage, each a thin call of the `vpr` CLI.

nox -s release                 the whole pipeline for buildspec/reference.toml
nox -s release -- --spec buildspec/tt.toml
nox -s tests                   the test suite (what CI runs)
nox -s lint                    ruff lint + format check
nox -s bench                   side-by-side benchmarks (ratios, medians)
nox -s lock                    re-resolve every hash-locked file under constraints/
nox -s build-core -- --spec FILE
"""

from __future__ import annotations

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
    args = list(session.posargs)
    if "--spec" not in args:
        args = ["--spec", DEFAULT_SPEC, *args]
    return args


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("-c", DEV_CONSTRAINTS, "ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
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
