"""The PEP 517 build backend of vpr-guard (standard library only, in-tree).

The wheel is a function of the files in this folder: members sorted, every file time
SOURCE_DATE_EPOCH (default 1980-01-01, the earliest a zip can hold), mode 0644, one
compression level. `vpr build-guard` builds it twice and compares the sha256; `pip wheel
guard/` makes the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # the guard/ folder
EARLIEST = 315532800  # 1980-01-01T00:00:00Z


def _project() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _epoch() -> int:
    return max(EARLIEST, int(os.environ.get("SOURCE_DATE_EPOCH", EARLIEST)))


def _dist(project: dict) -> str:
    return project["name"].replace("-", "_")


def _metadata(project: dict) -> str:
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {project['name']}\n"
        f"Version: {project['version']}\n"
        f"Summary: {project['description']}\n"
        f"License: {project['license']}\n"
        f"Requires-Python: {project['requires-python']}\n"
        "Description-Content-Type: text/markdown\n\n" + readme
    )


def _entry_points(project: dict) -> str:
    out = []
    for group, entries in sorted(project.get("entry-points", {}).items()):
        out.append(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in sorted(entries.items())))
    return "\n".join(out)


def _members(project: dict) -> dict[str, bytes]:
    """Archive path -> bytes: the package's modules, then the .dist-info files."""
    package = HERE / "src" / "vpr_guard"
    members = {
        f"vpr_guard/{p.name}": p.read_bytes() for p in sorted(package.glob("*.py"))
    }
    info = f"{_dist(project)}-{project['version']}.dist-info"
    members[f"{info}/METADATA"] = _metadata(project).encode()
    members[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: vpr_guard_build\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n"
    ).encode()
    members[f"{info}/entry_points.txt"] = _entry_points(project).encode()
    record = "".join(
        f"{path},sha256={_b64(data)},{len(data)}\n" for path, data in members.items()
    )
    members[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    return members


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _zip_time() -> tuple[int, int, int, int, int, int]:
    return time.gmtime(_epoch())[:6]


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    project = _project()
    name = f"{_dist(project)}-{project['version']}-py3-none-any.whl"
    when = _zip_time()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for path, data in _members(project).items():
            info = zipfile.ZipInfo(path, date_time=when)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data, compresslevel=9)
    Path(wheel_directory, name).write_bytes(buffer.getvalue())
    return name


def build_sdist(sdist_directory, config_settings=None) -> str:
    project = _project()
    base = f"{_dist(project)}-{project['version']}"
    files = ["pyproject.toml", "README.md", "_build/vpr_guard_build.py"]
    files += [f"src/vpr_guard/{p.name}" for p in sorted((HERE / "src" / "vpr_guard").glob("*.py"))]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for relative in files:
            data = (HERE / relative).read_bytes()
            info = tarfile.TarInfo(f"{base}/{relative}")
            info.size, info.mtime, info.mode = len(data), _epoch(), 0o644
            tar.addfile(info, io.BytesIO(data))
    import gzip

    name = f"{base}.tar.gz"
    with open(Path(sdist_directory, name), "wb") as out:
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=_epoch()) as gz:
            gz.write(buffer.getvalue())
    return name
