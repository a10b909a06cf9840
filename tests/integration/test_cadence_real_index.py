"""Cadence against vLLM's real release history on PyPI."""

from __future__ import annotations

import pytest
from packaging.version import Version

from vllm_plugin_release.conform.checks import cadence
from vllm_plugin_release.core.errors import OutsideFailure


def test_real_pypi_index() -> None:
    """vLLM's real release history; skipped when PyPI is unreachable."""
    try:
        releases = cadence.core_releases_from_index("https://pypi.org/simple", "vllm")
    except OutsideFailure as exc:
        pytest.skip(f"PyPI unreachable: {exc}")
    versions = {str(r.version) for r in releases}
    assert {"0.25.1", "0.26.0"} <= versions
    assert all(r.date is not None for r in releases if r.version >= Version("0.20.0"))
