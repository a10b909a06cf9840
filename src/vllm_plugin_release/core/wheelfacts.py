"""Facts about a wheel that a manifest records and an installation is checked against, and
how two wheels differ."""

from __future__ import annotations

import base64
import configparser
import hashlib
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from vllm_plugin_release.core.errors import BadInput, GateFailed


def record_hash(data: bytes) -> str:
    """A file's hash as RECORD writes it: sha256=<urlsafe base64, no padding>."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def installed_path(wheel_path: str) -> str | None:
    """Where an installer puts a wheel entry in site-packages; None for what it does not put
    there unchanged (.dist-info, scripts, headers, data, byte-code caches)."""
    parts = PurePosixPath(wheel_path).parts
    if not parts or ".." in parts or "__pycache__" in parts:
        return None
    top = parts[0]
    if top.endswith(".dist-info"):
        return None
    if top.endswith(".data"):
        if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
            return "/".join(parts[2:])
        return None
    return "/".join(parts)


def installed_files(record: Mapping[str, str]) -> dict[str, str]:
    """The covered subset of an installed RECORD (same rule as `installed_path`)."""
    out = {}
    for path, digest in record.items():
        parts = PurePosixPath(path).parts
        if (
            not parts
            or path.startswith("/")
            or ".." in parts
            or "__pycache__" in parts
            or parts[0].endswith(".dist-info")
        ):
            continue
        out["/".join(parts)] = digest
    return out


def files_digest(entries: dict[str, str]) -> str:
    """sha256 over sorted `path,hash` lines (hash as RECORD writes it: sha256=<b64>)."""
    text = "".join(f"{path},{entries[path]}\n" for path in sorted(entries))
    return hashlib.sha256(text.encode()).hexdigest()


def parse_record(text: str) -> dict[str, str]:
    """RECORD (csv) -> {path: 'sha256=...'} for the rows that carry a sha256 hash."""
    import csv
    import io

    out: dict[str, str] = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 2 and row[1].startswith("sha256="):
            out[row[0]] = row[1]
    return out


def wheel_version(path: Path) -> str:
    """The Version field of a wheel's METADATA (what an installer reports)."""
    from email.parser import HeaderParser

    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            if len(names) != 1:
                raise GateFailed(f"{path}: expected one .dist-info/METADATA, found {len(names)}")
            headers = HeaderParser().parsestr(zf.read(names[0]).decode("utf-8"))
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError) as exc:
        raise GateFailed(f"{path}: not a readable wheel ({exc})", hint="rebuild the wheel")
    version = headers.get("Version")
    if not version:
        raise GateFailed(f"{path}: METADATA has no Version")
    return str(version)


def wheel_files(path: Path) -> dict[str, str]:
    """{installed path: 'sha256=...'}; GateFailed if its RECORD does not match its contents."""
    try:
        with zipfile.ZipFile(path) as zf:
            records = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
            if len(records) != 1:
                raise GateFailed(f"{path}: expected one .dist-info/RECORD, found {len(records)}")
            recorded = parse_record(zf.read(records[0]).decode("utf-8"))
            out: dict[str, str] = {}
            for info in zf.infolist():
                if info.is_dir() or info.filename == records[0]:
                    continue
                actual = record_hash(zf.read(info))
                want = recorded.get(info.filename)
                if want is None:
                    raise GateFailed(f"{path}: {info.filename} is not listed in the wheel's RECORD")
                if want != actual:
                    raise GateFailed(
                        f"{path}: {info.filename} does not match the wheel's RECORD "
                        f"({want} recorded, {actual} in the archive)",
                        hint="the wheel is corrupt; rebuild it",
                    )
                target = installed_path(info.filename)
                if target is not None:
                    out[target] = actual
            return out
    except (zipfile.BadZipFile, OSError, KeyError) as exc:
        raise GateFailed(f"{path}: not a readable wheel ({exc})", hint="rebuild the wheel")


def wheel_tags(filename: str) -> dict[str, str]:
    parts = filename[: -len(".whl")].split("-")
    if len(parts) < 5:
        raise BadInput(f"{filename}: not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM.whl)")
    python, abi, platform = parts[-3:]
    return {"python": python, "abi": abi, "platform": platform}


def wheel_entry_points(wheel: Path) -> dict[str, dict[str, str]]:
    """group -> {name: value} from the wheel's *.dist-info/entry_points.txt."""
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        if not names:
            return {}
        text = zf.read(names[0]).decode("utf-8")
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return {group: dict(parser.items(group)) for group in parser.sections()}


class WheelMeta(NamedTuple):
    """A wheel's METADATA: its name, version and Requires-Dist (sorted)."""

    name: str
    version: str
    requires_dist: tuple[str, ...]


def wheel_metadata(wheel: Path) -> WheelMeta:
    """Name, version and Requires-Dist from the wheel's METADATA; GateFailed when it lacks one."""
    from email.parser import Parser

    with zipfile.ZipFile(wheel) as zf:
        found = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        if not found:
            raise GateFailed(f"{wheel.name}: the wheel has no .dist-info/METADATA")
        msg = Parser().parsestr(zf.read(found[0]).decode("utf-8"))
    name, version = msg["Name"], msg["Version"]
    if not name or not version:
        missing = "Name" if not name else "Version"
        raise GateFailed(f"{wheel.name}: its METADATA has no {missing}")
    return WheelMeta(str(name), str(version), tuple(sorted(msg.get_all("Requires-Dist") or [])))


def diff_wheels(a: Path, b: Path) -> list[str]:
    """Human-readable differences between two wheel archives, member by member."""
    out: list[str] = []
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        ia = {i.filename: i for i in za.infolist()}
        ib = {i.filename: i for i in zb.infolist()}
        for name in sorted(set(ia) - set(ib)):
            out.append(f"{name}: only in the first build")
        for name in sorted(set(ib) - set(ia)):
            out.append(f"{name}: only in the second build")
        if [n for n in ia if n in ib] != [n for n in ib if n in ia]:
            out.append("(member order differs)")
        for name in sorted(set(ia) & set(ib)):
            x, y = ia[name], ib[name]
            if x.CRC != y.CRC or x.file_size != y.file_size:
                out.append(f"{name}: content differs")
            elif x.date_time != y.date_time:
                out.append(f"{name}: timestamp differs ({x.date_time} vs {y.date_time})")
            elif x.external_attr != y.external_attr:
                out.append(f"{name}: permissions differ")
            elif x.compress_type != y.compress_type:
                out.append(f"{name}: compression differs")
    return out or ["(archives differ only in zip metadata)"]
