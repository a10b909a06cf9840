"""The container runner: refusals that need no engine, and the real thing where an engine
runs (here: Podman's Docker API, started by `nox -s tests` through scripts/engine.sh).
Without one they skip, saying why; where the run started one, a skip fails (tests/required.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC, REPO, vpr
from vllm_plugin_release.core.errors import OutsideFailure
from vllm_plugin_release.edges.container import LABEL, connect, owner_label


def engine_reason() -> str | None:
    try:
        connect()
    except OutsideFailure as exc:
        return exc.message
    return None


NO_ENGINE = engine_reason()
needs_engine = pytest.mark.skipif(NO_ENGINE is not None, reason=f"no container engine: {NO_ENGINE}")
# Where an engine is reachable but mmdebstrap is not (GitHub's runners: Docker, no root
# apt), the tests of the image made here skip saying so; that skip has nothing to do with
# the engine, so VPR_REQUIRE_ENGINE=1 lets it through (tests/required.py, `may_skip`).
NO_MMDEBSTRAP = "no mmdebstrap here to make the Debian-based image"
PINNED = next(
    line.split("=", 1)[1].strip().strip('"')
    for line in REFERENCE_SPEC.read_text().splitlines()
    if line.startswith("base_image")
)


def docker_spec(
    tmp_path: Path, dockerfile: str | None = None, *, image: str = PINNED, python: str = "3.11"
) -> Path:
    text = REFERENCE_SPEC.read_text().replace('backend = "local"', 'backend = "docker"', 1)
    text = text.replace(PINNED, image, 1).replace('python = "3.11"', f'python = "{python}"', 1)
    path = REPO / "docker" / "build.Dockerfile"
    if dockerfile is not None:
        path = tmp_path / "bad.Dockerfile"
        path.write_text(dockerfile)
    lock = REPO / "constraints" / "build-core-py311.txt"
    text = text.replace(
        'constraints = "constraints/build-core-py311.txt"',
        f'constraints = "{lock}"\ndockerfile = "{path}"',
    )
    spec = tmp_path / "docker.toml"
    spec.write_text(text)
    return spec


def build_core(
    spec: Path, cache_root: Path, dist: Path, *extra: str
) -> subprocess.CompletedProcess:
    return vpr(
        "build-core",
        "--spec",
        str(spec),
        "--cache-dir",
        str(cache_root),
        "--dist",
        str(dist),
        *extra,
        check=False,
    )


@pytest.fixture(scope="session")
def pinned_image(cache_root: Path) -> subprocess.CompletedProcess:
    """`vpr image build` of the reference spec, once per session (about a minute and a
    half): it exits 1 unless the image made here has the digest the spec pins."""
    if NO_ENGINE is not None:
        pytest.skip(f"no container engine: {NO_ENGINE}")
    done = vpr(
        "image", "build", "--spec", str(REFERENCE_SPEC), "--cache-dir", str(cache_root), check=False
    )
    if done.returncode == 3:  # no mmdebstrap or no Debian mirror here: say so, do not fail
        why = done.stderr.strip()[-400:]
        if "mmdebstrap is not installed" in done.stderr:
            pytest.skip(f"{NO_MMDEBSTRAP}: {why}")
        pytest.skip(f"the Debian-based image cannot be made here: {why}")
    return done


def test_unpinned_from_is_refused_with_its_line(tmp_path: Path, cache_root: Path) -> None:
    spec = docker_spec(tmp_path, "# build image\nARG X=1\nFROM python:3.11-slim\nRUN true\n")
    done = build_core(spec, cache_root, tmp_path / "dist")
    assert done.returncode == 2, done.stderr
    assert f"{tmp_path / 'bad.Dockerfile'}:3: FROM python:3.11-slim is not pinned by digest" in (
        done.stderr
    )
    assert not (tmp_path / "dist").exists()


@pytest.mark.skipif(NO_ENGINE is None, reason="a container engine is reachable here")
def test_no_engine_is_an_outside_failure(tmp_path: Path, cache_root: Path) -> None:
    done = build_core(docker_spec(tmp_path), cache_root, tmp_path / "dist")
    assert done.returncode == 3, done.stderr
    assert "no reachable container engine" in done.stderr
    assert "podman system service" in done.stderr  # what to start
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "dist").exists()


@pytest.mark.docker(may_skip=NO_MMDEBSTRAP)
@needs_engine
def test_debian_image_has_the_pinned_digest(pinned_image: subprocess.CompletedProcess) -> None:
    """Made from Debian packages here, the image's digest is the one the spec records."""
    assert pinned_image.returncode == 0, pinned_image.stderr
    assert pinned_image.stdout.strip() == PINNED


@pytest.mark.docker(may_skip=NO_MMDEBSTRAP)
@needs_engine
def test_container_core_wheel_is_the_local_one(
    pinned_image: subprocess.CompletedProcess, core_build: dict, cache_root: Path, tmp_path: Path
) -> None:
    """build-core in the pinned container gives the same bytes as the local build."""
    assert pinned_image.returncode == 0, pinned_image.stderr
    done = build_core(REFERENCE_SPEC, cache_root, tmp_path / "dist", "--backend", "docker")
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "dist" / "reference" / "build-core.json").read_text())
    assert record["reproducible"] is True
    assert record["backend"]["kind"] == "docker"
    assert record["backend"]["image_id"] == "sha256:" + PINNED.split("@sha256:")[1]
    if record["wheel"]["sha256"] != core_build["wheel"]["sha256"]:
        from vllm_plugin_release.core.wheeldiff import diff_wheels

        wheel = tmp_path / "dist" / "reference" / record["wheel"]["filename"]
        members = diff_wheels(Path(core_build["_wheel_path"]), wheel)
        inputs = {
            k: (core_build[k], record[k]) for k in ("python", "env") if core_build[k] != record[k]
        }
        pytest.fail(f"container and local wheels differ; inputs {inputs}; members {members[:20]}")


@pytest.mark.docker(may_skip=NO_MMDEBSTRAP)
@needs_engine
def test_container_plugin_wheel_is_the_local_one(
    pinned_image: subprocess.CompletedProcess, cache_root: Path, tmp_path: Path
) -> None:
    assert pinned_image.returncode == 0, pinned_image.stderr
    records = {}
    for backend in ("local", "docker"):
        dist = tmp_path / backend
        done = vpr(
            "build-plugin",
            "--spec",
            str(REFERENCE_SPEC),
            "--cache-dir",
            str(cache_root),
            "--dist",
            str(dist),
            "--backend",
            backend,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        records[backend] = json.loads((dist / "reference" / "build-plugin.json").read_text())
    assert records["docker"]["backend"]["image_id"] == "sha256:" + PINNED.split("@sha256:")[1]
    assert records["local"]["backend"] == {"kind": "local"}
    assert records["docker"]["wheel"] == records["local"]["wheel"]  # name and sha256


@pytest.mark.docker(may_skip=NO_MMDEBSTRAP)
@needs_engine
def test_another_digest_is_refused_naming_both(
    pinned_image: subprocess.CompletedProcess, cache_root: Path, tmp_path: Path
) -> None:
    assert pinned_image.returncode == 0, pinned_image.stderr
    name, digest = PINNED.split("@sha256:")
    wrong = "0" * 64
    done = build_core(
        docker_spec(tmp_path, image=f"{name}@sha256:{wrong}"), cache_root, tmp_path / "d"
    )
    assert done.returncode == 1, done.stderr
    assert f"sha256:{digest} is not the pinned sha256:{wrong}" in done.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.docker
@needs_engine
def test_an_absent_image_says_how_to_get_it(cache_root: Path, tmp_path: Path) -> None:
    absent = "localhost/vpr-absent:1@sha256:" + "1" * 64
    done = build_core(docker_spec(tmp_path, image=absent), cache_root, tmp_path / "d")
    assert done.returncode == 3, done.stderr
    assert f"image {absent} is not in the container engine" in done.stderr
    assert "vpr image build" in done.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.docker(may_skip=NO_MMDEBSTRAP)
@needs_engine
def test_an_image_without_the_spec_python_is_named(
    pinned_image: subprocess.CompletedProcess, cache_root: Path, tmp_path: Path
) -> None:
    assert pinned_image.returncode == 0, pinned_image.stderr
    done = build_core(docker_spec(tmp_path, python="3.12"), cache_root, tmp_path / "d")
    assert done.returncode == 3, done.stderr
    assert f"image {PINNED} has no CPython 3.12" in done.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.docker(may_skip=NO_MMDEBSTRAP)
@needs_engine
@pytest.mark.timeout(900)
def test_a_killed_run_leaves_no_container(
    pinned_image: subprocess.CompletedProcess, cache_root: Path, tmp_path: Path
) -> None:
    """SIGKILL mid-build: nothing in dist/, and the next run removes the orphan container."""
    assert pinned_image.returncode == 0, pinned_image.stderr
    client = connect()
    spec = docker_spec(tmp_path)
    dist = tmp_path / "dist"
    argv = [sys.executable, "-m", "vllm_plugin_release", "build-core", "--spec", str(spec)]
    argv += ["--cache-dir", str(cache_root), "--dist", str(dist), "--force"]
    child = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    owner = {"label": f"{LABEL}={owner_label(child.pid)}"}

    def wheel_builds() -> list:  # the long step: short ones (python --version) come and go
        running = client.containers.list(filters=owner)
        return [c for c in running if "--wheel" in (c.attrs["Config"].get("Cmd") or [])]

    while not wheel_builds():  # the event; a hang is pytest-timeout's (this test's bound)
        assert child.poll() is None, "the build ended before a container started"
        time.sleep(0.5)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert not dist.exists()
    # The next run (here one that is refused at once) removes what the killed one left.
    build_core(
        docker_spec(tmp_path, image=PINNED.split("@")[0] + "@sha256:" + "0" * 64),
        cache_root,
        tmp_path / "d2",
    )
    assert client.containers.list(all=True, filters=owner) == []


@pytest.mark.docker(may_skip=NO_MMDEBSTRAP)
@needs_engine
def test_release_in_the_pinned_container_is_pilot(
    pinned_image: subprocess.CompletedProcess, cache_root: Path, tmp_path: Path
) -> None:
    """`vpr release --backend docker`: every stage that runs core or plugin code ran
    in the pinned image (run.json), the install proof of publish included (its scratch venv
    and `uv pip install --require-hashes` in the image, on the host network to reach the
    loopback index); the manifest records the image, and the verdict is pilot. A proof made
    in the image is never reused for the local runner."""
    import shutil

    assert pinned_image.returncode == 0, pinned_image.stderr
    # The proof must run in this test, not be read back from an earlier run's note.
    shutil.rmtree(cache_root / "index" / ".vpr-proofs", ignore_errors=True)
    dist = tmp_path / "dist"
    done = vpr(
        "release",
        "--spec",
        str(REFERENCE_SPEC),
        "--backend",
        "docker",
        "--store",
        str(tmp_path / "store"),
        "--cache-dir",
        str(cache_root),
        "--dist",
        str(dist),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = dist / "reference"
    image_id = "sha256:" + PINNED.split("@sha256:")[1]
    in_image = {"kind": "docker", "base_image": PINNED, "image_id": image_id}
    run = json.loads((out / "run.json").read_text())
    ran_in = run["release"]["ran_in"]
    assert set(ran_in) == {
        "build-core",
        "build-plugin",
        "env",
        "conform (in-env parts)",
        "publish (install proof)",
    }
    for stage, backend in ran_in.items():
        assert backend == in_image, stage
    assert run["publish"]["install_proof_ran_in"] == in_image
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["container"]["image_id"] == image_id
    assert json.loads((out / "scorecard.json").read_text())["verdict"] == "pilot"

    # The same wheels published with the local backend: proven on this machine (now or by
    # an earlier local run), never by the note the image's proof left.
    local = vpr(
        "publish",
        "--spec",
        str(REFERENCE_SPEC),
        "--store",
        str(tmp_path / "store"),
        "--cache-dir",
        str(cache_root),
        "--dist",
        str(dist),
        "--json",
        check=False,
    )
    assert local.returncode == 0, local.stderr[-3000:]
    assert json.loads(local.stdout)["proven_in"] == {"kind": "local"}


@pytest.mark.docker(may_skip=NO_MMDEBSTRAP)
@needs_engine
def test_install_proof_in_the_image_refuses_other_bytes(
    pinned_image: subprocess.CompletedProcess, cache_root: Path, tmp_path: Path
) -> None:
    """Known-bad for the proof in the pinned image: the index serves the wheels, the
    requirement hashes are not theirs; uv in the container refuses (exit 1, nothing made)."""
    from tests.pairing import write_wheel
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.cache import Cache, sha256_file
    from vllm_plugin_release.core.errors import GateFailed
    from vllm_plugin_release.edges.index import LocalIndex
    from vllm_plugin_release.stages.publish import prove_install
    from vllm_plugin_release.stages.wheelbuild import runner_for

    assert pinned_image.returncode == 0, pinned_image.stderr
    index = tmp_path / "index"
    index.mkdir()
    wheels = {
        role: write_wheel(index, name, "1.0", {f"{name.replace('-', '_')}/__init__.py": "X = 1\n"})
        for role, name in (("core", "demo-core"), ("plugin", "demo-plugin"))
    }
    import dataclasses

    from tests.pairing import ledger_manifest

    # What the proof reads of a manifest: each part's name, wheel version and sha256 (a
    # digest these wheels do not have), the core's Python.
    base = ledger_manifest("0" * 64, ("1.0", None), ("demo_plugin", None), "pilot")
    wheel = dataclasses.replace(base.core.wheel, version="1.0", sha256="0" * 64)
    parts = {
        role: dataclasses.replace(
            getattr(base, role), name=w.name.split("-")[0], version="1.0", wheel=wheel
        )
        for role, w in wheels.items()
    }
    parts["core"] = dataclasses.replace(parts["core"], python="3.11.2")
    manifest = dataclasses.replace(base, **parts)
    runner = runner_for(load_spec(docker_spec(tmp_path)), Cache(cache_root), folders=(tmp_path,))
    work = tmp_path / "work"
    work.mkdir()
    with LocalIndex(index) as target, pytest.raises(GateFailed) as err:
        prove_install(target, manifest, index, work, runner)
    assert "--require-hashes did not work" in err.value.message
    assert "hash" in err.value.message.lower()
    # The venv was made in the image (its marker names it), never on this machine.
    marker = json.loads((work / "venv" / ".vpr-runner.json").read_text())
    assert marker["base_image"] == PINNED
    # Known-good counterpart: the right hashes install in the image.
    good = tmp_path / "good"
    good.mkdir()
    with LocalIndex(index) as target:
        from vllm_plugin_release.edges.publisher import install_with_hashes, make_venv

        python = make_venv(good / "venv", runner, "3.11")
        req = good / "req.txt"
        req.write_text(
            "".join(
                f"{w.name.split('-')[0]}==1.0 --hash=sha256:{sha256_file(w)}\n"
                for w in wheels.values()
            )
        )
        done = install_with_hashes(python, target.simple_url, req, runner)
    assert done.returncode == 0, done.stderr


@pytest.mark.docker(may_skip=NO_MMDEBSTRAP)
@needs_engine
@pytest.mark.timeout(600)
def test_a_container_steps_output_reaches_its_log_while_it_runs(
    pinned_image: subprocess.CompletedProcess, tmp_path: Path
) -> None:
    """Streamed, not written at the end: the step prints, then waits for a file the test
    makes only once that line is in the log; then it ends. (pytest-timeout guards a hang.)
    The lines are joined at run time, so the command echoed in the log does not hold them."""
    import threading

    from vllm_plugin_release.edges.container import ContainerRunner
    from vllm_plugin_release.edges.runner import Command

    assert pinned_image.returncode == 0, pinned_image.stderr
    runner = ContainerRunner(PINNED, REPO / "docker" / "build.Dockerfile", [tmp_path])
    go = tmp_path / "go"
    script = (
        "import os, time\nprint('-'.join(['ready', '1']), flush=True)\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
        "print('-'.join(['done', '2']))\n"
    )
    log = tmp_path / "step.log"
    done: list[BaseException | None] = []

    def step() -> None:
        try:
            runner.run(Command("stream", ("python3", "-c", script), network=False), log)
            done.append(None)
        except BaseException as exc:
            done.append(exc)

    thread = threading.Thread(target=step)
    thread.start()
    try:
        # the event: the first line in the log; a step that ended first fails here, and a
        # hang is pytest-timeout's (this test's bound)
        while "ready-1" not in (log.read_text() if log.exists() else ""):
            assert not done, f"the step ended before its first line reached the log: {done}"
            time.sleep(0.05)
        assert not done and "done-2" not in log.read_text()  # in the log while it runs
    finally:
        go.touch()  # let the step end, whatever happened
        thread.join(120)
    assert done == [None] and "done-2" in log.read_text()


@pytest.mark.docker(may_skip=NO_MMDEBSTRAP)
@needs_engine
def test_the_image_s_python_is_asked_once_per_image(
    pinned_image: subprocess.CompletedProcess, tmp_path: Path
) -> None:
    """The answer is kept by the image's ID: a later runner reads it (no container; a kept
    answer edited here is what it returns), and one that is unreadable or names another
    Python is asked again."""
    from vllm_plugin_release.edges.container import ContainerRunner

    assert pinned_image.returncode == 0, pinned_image.stderr
    probes = tmp_path / "probes"

    def runner() -> ContainerRunner:
        return ContainerRunner(
            PINNED, REPO / "docker" / "build.Dockerfile", [tmp_path], probes=probes
        )

    with runner() as first:
        asked = first.interpreter("3.11")
        kept = probes / f"{first.image_id.removeprefix('sha256:')}-py3.11.json"
    assert asked.found_by == "image" and asked.version.startswith("3.11.")
    assert json.loads(kept.read_text())["sha256"] == asked.sha256
    answer = json.loads(kept.read_text())
    kept.write_text(json.dumps({**answer, "executable": "/kept/python3.11"}))
    with runner() as later:
        assert later.interpreter("3.11").path == "/kept/python3.11"  # read, not asked
    for bad in ("{not json", json.dumps({**answer, "version": "3.12.1"}), "[]"):
        kept.write_text(bad)
        with runner() as again:
            assert again.interpreter("3.11") == asked  # asked again: the container's answer
        assert json.loads(kept.read_text()) == answer  # and kept again
