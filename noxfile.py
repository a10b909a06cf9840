"""Sessions: one per stage, each a thin call of the `vpr` CLI.

nox -s release                 the whole pipeline for buildspec/reference.toml
nox -s release -- --spec buildspec/tt.toml
nox -s tests                   the test suite (what CI runs)
nox -s tests -- -m "not integration"   the fast loop: tests/unit/ only
nox -s lint                    ruff lint + format check
nox -s mutants [-- FILE...]    the mutation gate over tests/mutants.toml (its sites in FILEs)
nox -s bench                   side-by-side benchmarks (ratios, medians)
nox -s lock                    re-resolve constraints/dev.txt; write the spec's missing or
                               stale locks (-- --upgrade: resolve the current ones again too)
nox -s build-core -- --spec FILE
nox -s bisect -- --spec FILE --good A --bad B   the first breaking core version or commit
nox -s nightly -- --spec FILE --repo URL        the plugin against core main (backs off)
nox -s matrix -- --spec FILE                    the version matrix (-- assemble --spec FILE: CI's)
nox -s spec -- set FILE KEY VALUE               edit one key of a buildspec
nox -s site -- --out DIR [--store S] [--shots DIR]   the compatibility site, checked in Chromium
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


OUTSIDE_FAILURE = 3  # vpr's exit code for a network, index or engine failure


def vpr(session: nox.Session, *args: str, env: dict[str, str] | None = None) -> None:
    """Run `vpr ARGS`; an outside failure (exit 3) is retried once, and a failure ends nox
    with vpr's own exit code (1 gate failed, 2 bad input, 3 outside failure), not nox's 1,
    so CI can tell them apart. Finished stages are cached: a retry redoes only the rest."""
    for attempt in (1, 2):
        try:
            session.run("vpr", *args, env=env)
            return
        except nox.command.CommandFailed as exc:
            code = exc.return_code or 1
            if code == OUTSIDE_FAILURE and attempt == 1:
                session.warn("vpr: outside failure (exit 3); retrying once")
                continue
            session.warn(f"vpr exited {code}; nox exits {code} too")
            raise SystemExit(code) from None


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint + format), the layer contracts (import-linter), actionlint (workflows)."""
    install_project(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")
    session.run("actionlint")  # offline: .github/workflows/ with .github/actionlint.yaml


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Everything (tests/unit/ and tests/integration/); posargs go to pytest.

    The container tests need an engine: where none is reachable and podman is installable
    (root with apt), scripts/engine.sh starts one for the run (as .ci/run did) and stops it
    at the end, and then a container test that skips fails (VPR_REQUIRE_ENGINE=1).
    VPR_ENGINE=off never starts one; a selection without integration tests does not."""
    install_project(session, "test")
    engine = start_engine(session) if wants_engine(session.posargs) else {}
    try:
        session.run("pytest", *session.posargs, env=engine)
    finally:
        if engine:
            run_engine_script("stop", engine["VPR_ENGINE_PID"], engine["VPR_ENGINE_DIR"])


@nox.session(python=PYTHON)
def mutants(session: nox.Session) -> None:
    """The mutation gate: cosmic-ray mutates each guarantee site of tests/mutants.toml and
    runs that site's own tests against every mutant; one that survives fails the session.
    nox -s mutants -- FILE...   only the sites in those files (none: nothing runs)."""
    install_project(session, "test", "mutants")
    session.run("python", "-m", "tests.mutants", *session.posargs)


ENGINE_SCRIPT = ROOT / "scripts" / "engine.sh"


def wants_engine(posargs: list[str]) -> bool:
    """Whether this pytest selection can hold a container test (they are integration)."""
    if os.environ.get("VPR_ENGINE", "").lower() in ("off", "0", "no"):
        return False
    if "-m" in posargs[:-1]:  # a marker expression: docker tests are docker and integration
        expr = posargs[posargs.index("-m") + 1]
        if "docker" not in expr and ("integration" not in expr or "not integration" in expr):
            return False
    paths = [a.split("::")[0].rstrip("/") for a in posargs if a.startswith("tests")]
    return not paths or any(
        p in ("tests", "tests/integration") or "integration/" in p for p in paths
    )


def run_engine_script(*args: str) -> str:
    import subprocess

    done = subprocess.run(["bash", str(ENGINE_SCRIPT), *args], stdout=subprocess.PIPE, text=True)
    return done.stdout if done.returncode == 0 else ""


def start_engine(session: nox.Session) -> dict[str, str]:
    """The run's engine environment from scripts/engine.sh start (empty: none started)."""
    out = run_engine_script("start")
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    if env:
        session.log(f"container engine for this run: {env['DOCKER_HOST']}")
    return env


@nox.session(python=PYTHON)
def lock(session: nox.Session) -> None:
    """Re-resolve constraints/dev.txt; write the spec's locks that are missing or stale (a
    current one is left as it is: -- --upgrade resolves it again)."""
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
        "--extra",
        "mutants",
        "--python-version",
        PYTHON,
        "--no-header",
        "--quiet",
        "-o",
        DEV_CONSTRAINTS,
    )
    install_project(session)
    vpr(session, "lock", *spec_args(session))


@nox.session(name="build-core", python=PYTHON)
def build_core(session: nox.Session) -> None:
    """Build the vLLM wheel (empty target) twice and compare: nox -s build-core -- --spec F."""
    install_project(session)
    vpr(session, "build-core", *spec_args(session))


@nox.session(python=PYTHON)
def release(session: nox.Session) -> None:
    """Every stage in order for one pairing; each stage reuses its cached result."""
    install_project(session)
    vpr(session, "release", *spec_args(session))


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Side-by-side benchmarks, medians and ratios: nox -s bench -- [build_core env ...]."""
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
    vpr(session, "bump", "--core", args[0], *spec_args_from(args[1:]))


@nox.session(python=PYTHON)
def upstream(session: nox.Session) -> None:
    """Core releases newer than the pin: nox -s upstream -- [--spec FILE] [--json]."""
    install_project(session)
    vpr(session, "upstream", *spec_args(session))


@nox.session(name="conform-hardware", python=PYTHON)
def conform_hardware(session: nox.Session) -> None:
    """On the hardware runner: probe, hardware env, conform, -tp probe + live load test.

    nox -s conform-hardware -- --plan [--spec FILE] [--changed-since REF]   CI's job matrix
    """
    install_project(session)
    args = list(session.posargs)
    if "--plan" in args:
        args.remove("--plan")
        vpr(session, "hardware", "plan", *args)
        return
    if "--spec" not in args:  # the spec names the hardware part; no vendor is the default
        session.error(
            "usage: nox -s conform-hardware -- --spec FILE [vpr hardware conform options]"
        )
    vpr(session, "hardware", "conform", *args)


@nox.session(python=PYTHON)
def publish(session: nox.Session) -> None:
    """Sign the manifest and publish the pairing (after conformance): nox -s publish -- --spec F.

    --sign-only: sign, and copy the wheels into dist/NAME/upload/ for trusted publishing
    (release.yml uploads them with PEP 740 attestations; `vpr publish` then finds them).
    CI secrets: the PEM private key in $VPR_SIGNING_KEY_PEM (and its public half in
    $VPR_SIGNING_PUB_PEM) are written to private temporary files for `vpr`.
    """
    install_project(session)
    env = _signing_env(session)
    args = spec_args(session)
    sign_only = "--sign-only" in args
    if sign_only:
        args.remove("--sign-only")
    vpr(session, "manifest", "build", *args, env=env)
    if sign_only:  # trusted publishing uploads next (release.yml); `vpr publish` after it
        session.log(f"wheels staged for upload in {stage_wheels(args)}")
        return
    vpr(session, "publish", *args, env=env)


def stage_wheels(args: list[str]) -> Path:
    """Copy dist/NAME/*.whl alone into dist/NAME/upload/ (an upload action takes a folder)."""
    import shutil

    import tomllib

    spec = Path(args[args.index("--spec") + 1])
    dist_root = Path(args[args.index("--dist") + 1]) if "--dist" in args else ROOT / "dist"
    dist = dist_root / tomllib.loads(spec.read_text())["name"]
    upload = dist / "upload"
    shutil.rmtree(upload, ignore_errors=True)
    upload.mkdir(parents=True)
    for wheel in sorted(dist.glob("*.whl")):
        shutil.copy2(wheel, upload / wheel.name)
    return upload


@nox.session(name="plugin-tests", python=PYTHON)
def plugin_tests(session: nox.Session) -> None:
    """The plugin's tests, with regressions against another core: -- --spec F --baseline V."""
    install_project(session)
    vpr(session, "plugin-tests", *spec_args(session))


@nox.session(python=PYTHON)
def bisect(session: nox.Session) -> None:
    """The first breaking core version or commit: -- --spec F --good A --bad B [--repo URL]."""
    install_project(session)
    vpr(session, "bisect", *spec_args(session))


@nox.session(python=PYTHON)
def matrix(session: nox.Session) -> None:
    """The version matrix (build-plugin first): -- --spec F [--lowest V] [--only V] [--repo URL];
    -- assemble --spec F [--store S]: the column records of CI's jobs into matrix.json and,
    with a store, the ledger (.github/workflows/plugin-matrix.yml).

    CI secrets as for `publish`: $VPR_SIGNING_KEY_PEM (and $VPR_SIGNING_PUB_PEM) sign the
    ledger entries."""
    install_project(session)
    env = _signing_env(session)
    args = list(session.posargs)
    if args[:1] == ["assemble"]:
        vpr(session, "matrix", "assemble", *spec_args_from(args[1:]), env=env)
        return
    args = spec_args_from(args)
    build = ["--spec", args[args.index("--spec") + 1]]
    for option in ("--plugin-source", "--dist"):
        if option in args:
            build += [option, args[args.index(option) + 1]]
    vpr(session, "build-plugin", *build, env=env)
    vpr(session, "matrix", "run", *args, env=env)


@nox.session(python=PYTHON)
def spec(session: nox.Session) -> None:
    """A buildspec: -- check FILE | set FILE KEY VALUE (plugin-matrix.yml pins the plugin
    commit it was called for: set FILE plugin.source.commit '"SHA"')."""
    install_project(session)
    vpr(session, "spec", *session.posargs)


@nox.session(python=PYTHON)
def nightly(session: nox.Session) -> None:
    """The plugin against core main (build-plugin first): -- --spec F --repo URL [--force].

    CI secrets as for `publish`: $VPR_SIGNING_KEY_PEM (and $VPR_SIGNING_PUB_PEM) sign the
    last-known-good pointer and the ledger entry."""
    install_project(session)
    env = _signing_env(session)
    args = spec_args(session)
    spec = args[args.index("--spec") + 1]
    vpr(session, "build-plugin", "--spec", spec, env=env)
    vpr(session, "nightly", *args, env=env)


@nox.session(python=PYTHON)
def site(session: nox.Session) -> None:
    """The compatibility site of a store, then Chromium's view of it at 390 and 1280 px:

    nox -s site -- --out DIR [--store S] [--key K.pub] [--store-url URL] [--shots DIR]

    CI: the store is $VPR_STORE, its public URL for the install lines $VPR_STORE_URL, the
    publisher's public key $VPR_SIGNING_PUB_PEM (written to a private temporary file)."""
    install_project(session)
    args = list(session.posargs)
    shots = "site-shots"
    if "--shots" in args:
        at = args.index("--shots")
        shots = args[at + 1]
        del args[at : at + 2]
    if "--out" not in args:
        session.error("usage: nox -s site -- --out DIR [vpr manifest site options] [--shots DIR]")
    pem = os.environ.get("VPR_SIGNING_PUB_PEM")
    if pem and "--key" not in args:
        key = Path(session.create_tmp()) / "publisher.pub"
        key.touch(mode=0o600)
        key.write_text(pem if pem.endswith("\n") else pem + "\n")
        args += ["--key", str(key)]
    url = os.environ.get("VPR_STORE_URL")
    if url and "--store-url" not in args:
        args += ["--store-url", url]
    vpr(session, "manifest", "site", *args)
    out = args[args.index("--out") + 1]
    session.run("python", "scripts/sitecheck.py", out, "-o", shots)


def _signing_env(session: nox.Session) -> dict[str, str]:
    """The signing key from CI secrets, written to private temporary files for `vpr`."""
    pem = os.environ.get("VPR_SIGNING_KEY_PEM")
    if not pem:
        return {}
    key = Path(session.create_tmp()) / "manifest-signing.key"
    for path, text in ((key, pem), (Path(f"{key}.pub"), os.environ.get("VPR_SIGNING_PUB_PEM"))):
        if text:
            path.touch(mode=0o600)
            path.write_text(text if text.endswith("\n") else text + "\n")
    return {"VPR_SIGNING_KEY": str(key)}


@nox.session(name="pr-body", python=PYTHON)
def pr_body(session: nox.Session) -> None:
    """A bump pull request's body: nox -s pr-body -- --spec F --report R --out FILE."""
    install_project(session)
    vpr(session, "pr-body", *spec_args(session))


def spec_args_from(args: list[str], default: str = DEFAULT_SPEC) -> list[str]:
    return args if "--spec" in args else ["--spec", default, *args]
