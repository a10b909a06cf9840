"""A wheel's METADATA read once into WheelMeta; a wheel that names no Name or Version, or
has no METADATA, is refused naming the wheel (it used to fail with a bare TypeError)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.core.wheelfacts import WheelMeta, wheel_metadata


def _wheel(tmp_path: Path, metadata: str | None) -> Path:
    path = tmp_path / "p-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("p/__init__.py", "")
        if metadata is not None:
            zf.writestr("p-1.0.dist-info/METADATA", metadata)
    return path


GOOD = "Metadata-Version: 2.1\nName: p\nVersion: 1.0\nRequires-Dist: b\nRequires-Dist: a>1\n"


def test_metadata_is_typed_and_requires_sorted(tmp_path: Path) -> None:
    assert wheel_metadata(_wheel(tmp_path, GOOD)) == WheelMeta("p", "1.0", ("a>1", "b"))
    bare = "Metadata-Version: 2.1\nName: p\nVersion: 1.0\n"
    assert wheel_metadata(_wheel(tmp_path, bare)).requires_dist == ()


@pytest.mark.parametrize(
    ("metadata", "named"),
    [
        (None, "has no .dist-info/METADATA"),
        (GOOD.replace("Name: p\n", ""), "METADATA has no Name"),
        (GOOD.replace("Version: 1.0\n", ""), "METADATA has no Version"),
    ],
)
def test_a_wheel_without_a_name_or_version_is_refused(
    tmp_path: Path, metadata: str | None, named: str
) -> None:
    with pytest.raises(GateFailed, match=f"p-1.0-py3-none-any.whl: .*{named}"):
        wheel_metadata(_wheel(tmp_path, metadata))
