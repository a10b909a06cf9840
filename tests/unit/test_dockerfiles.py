"""The Dockerfiles under docker/: linted statically (the base image in a real engine:
tests/integration/test_dockerfiles_engine.py).

Rules (`vllm_plugin_release.core.image`): every FROM pinned by digest, no `latest`, no
`curl | sh`, no unpinned `pip install`, no BuildKit-only `RUN --mount` (the docker SDK
cannot use it). Each rule is also shown to fire, on the right line, on a known-bad edit.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import REPO
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.image import ARG_LINE, DIGEST, lint, lint_file

DOCKER = REPO / "docker"
DOCKERFILES = sorted(DOCKER.glob("*Dockerfile*"))
TT = DOCKER / "tt-runtime.Dockerfile"
TT_REQUIREMENTS = DOCKER / "tt-runtime-requirements.txt"


def test_there_are_dockerfiles() -> None:
    names = {p.name for p in DOCKERFILES}
    assert {"build.Dockerfile", "tt-runtime.Dockerfile"} <= names


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_is_clean(path: Path) -> None:
    assert lint_file(path) == [], f"{path.name}: {lint_file(path)}"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_every_base_is_pinned_by_digest_and_no_curl_pipe(path: Path) -> None:
    text = path.read_text()
    args = {m.group(1): m.group(2) for m in map(ARG_LINE.match, text.splitlines()) if m}
    froms = [line for line in text.splitlines() if line.upper().startswith("FROM ")]
    assert froms
    for line in froms:
        image = line.split()[1]
        resolved = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1)) or "", image)
        assert DIGEST.search(resolved), line
        assert ":latest" not in resolved
    assert "--mount" not in text
    assert not re.search(r"(curl|wget)[^\n|]*\|\s*(ba)?sh", text)


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def problems_at(text: str) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for p in lint(text):
        found.setdefault(p.line, []).append(p.message)
    return found


def test_known_bad_edits_are_flagged_on_their_line() -> None:
    good = TT.read_text()
    from_line = line_of(good, "FROM ${BASE_IMAGE}")
    arg = next(line for line in good.splitlines() if line.startswith("ARG BASE_IMAGE="))

    unpinned = good.replace(arg, "ARG BASE_IMAGE=docker.io/library/python:3.10-slim-bookworm")
    assert any("not pinned by digest" in m for m in problems_at(unpinned)[from_line])

    latest = good.replace("FROM ${BASE_IMAGE}", "FROM python:latest")
    messages = problems_at(latest)[from_line]
    assert any("'latest'" in m for m in messages) and any("digest" in m for m in messages)

    workdir = line_of(good, "WORKDIR /workspace")
    piped = good.replace(
        "WORKDIR /workspace", "RUN curl -fsSL https://example.invalid/install.sh | sh"
    )
    assert any("curl | sh" in m for m in problems_at(piped)[workdir])

    loose = good.replace("WORKDIR /workspace", "RUN python -m pip install ttnn")
    assert any("unpinned 'ttnn'" in m for m in problems_at(loose)[workdir])

    no_hashes = good.replace("--require-hashes --no-deps", "--no-deps")
    install = line_of(good, "RUN python3.10 -m venv /opt/tt-runtime")
    assert any("-r (no --require-hashes)" in m for m in problems_at(no_hashes)[install])

    mount = good.replace(
        "RUN python3.10 -m venv /opt/tt-runtime",
        "RUN --mount type=cache,target=/root/.cache python3.10 -m venv /opt/tt-runtime",
    )
    assert any("--mount" in m for m in problems_at(mount)[install])


def test_run_mount_with_equals_is_flagged() -> None:
    good = TT.read_text()
    install = line_of(good, "RUN python3.10 -m venv /opt/tt-runtime")
    mount = good.replace(
        "RUN python3.10 -m venv /opt/tt-runtime",
        "RUN --mount=type=cache,target=/root/.cache python3.10 -m venv /opt/tt-runtime",
    )
    assert any("--mount" in m for m in problems_at(mount).get(install, []))


def test_tt_runtime_python_and_ttnn_pin() -> None:
    """ttnn ships CPython 3.10/3.12 wheels only: the image's Python is one of them, and
    ttnn comes from a hash-locked file (every requirement pinned, every one hashed)."""
    text = TT.read_text()
    base = next(line for line in text.splitlines() if line.startswith("ARG BASE_IMAGE="))
    # the image `vpr build-image --spec buildspec/tt.toml` makes (and tt.toml pins): Debian
    # with the pinned CPython 3.10 copied in, made here again to the same digest
    spec = load_spec(REPO / "buildspec" / "tt.toml")
    assert base.split("=", 1)[1] == spec.build.base_image
    assert spec.build.python in ("3.10", "3.12") and spec.build.image_python_sha256
    assert "tt-runtime-requirements.txt" in text and "--require-hashes" in text
    reqs = TT_REQUIREMENTS.read_text()
    entries = [b for b in re.split(r"\n(?=[a-z0-9])", reqs) if b and not b.startswith("#")]
    assert entries
    for entry in entries:
        head = entry.splitlines()[0]
        assert re.match(r"^[a-z0-9][a-z0-9._-]*==[^\s]+ \\$", head), head
        assert "--hash=sha256:" in entry, head
    assert re.search(r"^ttnn==\d+\.\d+\.\d+ \\$", reqs, re.M)
