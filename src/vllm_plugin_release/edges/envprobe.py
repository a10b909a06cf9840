"""Ask an installed Python environment what it holds (for `vpr manifest check-env`)."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.core.buildrecord import field_shown
from vllm_plugin_release.core.errors import BadInput, OutsideFailure

# Runs inside the environment being checked: standard library only, Python 3.8+.
_PROBE = r"""
import base64, csv, hashlib, json, sys
import importlib.metadata as md
out = {}
for name in json.loads(sys.argv[1]):
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        out[name] = None
        continue
    entries, bad = {}, []
    for row in csv.reader((d.read_text("RECORD") or "").splitlines()):
        if len(row) < 2 or not row[1].startswith("sha256="):
            continue
        try:
            with open(d.locate_file(row[0]), "rb") as f:
                data = f.read()
        except OSError:
            bad.append([row[0], "missing"])
            continue
        got = "sha256=" + base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if got != row[1]:
            bad.append([row[0], "modified"])
        entries[row[0]] = got  # what is on disk, not what RECORD claims
    eps = {}
    for ep in d.entry_points:
        eps.setdefault(ep.group, {})[ep.name] = ep.value
    direct = d.read_text("direct_url.json")
    out[name] = {"version": d.version, "record": entries, "bad": bad, "entry_points": eps,
                 "direct_url": json.loads(direct) if direct else None,
                 "location": str(d.locate_file(""))}
if len(sys.argv) > 2 and sys.argv[2] == "all":
    every = {}
    for d in md.distributions():
        name = d.metadata["Name"]
        if name:
            every.setdefault(name, d.version)
    out = {"dists": out, "installed": every}
print(json.dumps(out))
"""


class InstalledDist(NamedTuple):
    """One installed distribution as the probe found it, its answer checked (`parse_dists`)."""

    version: str
    location: str  # the folder it is installed into
    record: Mapping[str, str]  # RECORD path -> the sha256 of the file on disk
    bad: tuple[tuple[str, str], ...]  # (path, missing | modified) against RECORD's hash
    entry_points: Mapping[str, Mapping[str, str]]  # group -> name -> object reference
    archive_hashes: Mapping[str, str]  # the wheel it came from (direct_url.json): algo -> hex


def probe_environment(python: Path | str, names: list[str]) -> dict[str, InstalledDist | None]:
    """Installed version, RECORD (verified against the files) and entry points per name
    (None: not installed)."""
    return parse_dists(_probe(python, [json.dumps(names)]), names, python)


def probe_with_installed(
    python: Path | str, names: list[str]
) -> tuple[dict[str, InstalledDist | None], dict[str, str]]:
    """`probe_environment`, and every installed distribution (name -> version), in one run."""
    data = _probe(python, [json.dumps(names), "all"])
    if not isinstance(data, dict):
        raise _refused(python, "the answer", data, "an object")
    installed = data.get("installed")
    if not isinstance(installed, dict) or not all(isinstance(v, str) for v in installed.values()):
        raise _refused(python, "'installed'", installed, "names and versions")
    return parse_dists(data.get("dists"), names, python), installed


def _refused(python: Path | str, key: str, value: object, expected: str) -> BadInput:
    return BadInput(
        f"--python {python}: the environment probe answered {key} = {field_shown(value)}, "
        f"expected {expected}",
        hint="pass the python of a virtual environment (Python >= 3.8)",
    )


def parse_dists(
    data: object, names: list[str], python: Path | str
) -> dict[str, InstalledDist | None]:
    """The probe's answer for `names`, each key checked once; BadInput naming the python,
    the distribution and the key otherwise."""
    if not isinstance(data, dict) or set(data) != set(names):
        raise _refused(python, "the distributions", data, f"an object of {names}")
    return {name: _dist(data[name], f"{name!r}", python) for name in names}


def _dist(data: object, name: str, python: Path | str) -> InstalledDist | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise _refused(python, name, data, "an object")

    def text(key: str) -> str:  # a version may be empty (a mismatch, not a refusal)
        value = data.get(key)
        if not isinstance(value, str) or not (value or key == "version"):
            raise _refused(python, f"{name}.{key}", value, "text")
        return value

    record, bad, eps = data.get("record"), data.get("bad"), data.get("entry_points")
    if not _texts(record):
        raise _refused(python, f"{name}.record", record, "paths and hashes")
    if not isinstance(bad, list) or not all(
        isinstance(b, list) and len(b) == 2 and all(isinstance(x, str) for x in b) for b in bad
    ):
        raise _refused(python, f"{name}.bad", bad, "[path, problem] pairs")
    if not isinstance(eps, dict) or not all(_texts(group) for group in eps.values()):
        raise _refused(python, f"{name}.entry_points", eps, "groups of text")
    hashes = _archive_hashes(data.get("direct_url"))
    if hashes is None:
        raise _refused(python, f"{name}.direct_url", data.get("direct_url"), "PEP 610's object")
    bad_pairs = tuple((path, problem) for path, problem in bad)
    return InstalledDist(text("version"), text("location"), record, bad_pairs, eps, hashes)


def _texts(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _archive_hashes(direct_url: object) -> dict[str, str] | None:
    """The wheel's hashes (algo -> hex) a direct_url.json names (`archive_info.hashes`, and
    the older `archive_info.hash`); {} when it names none; None when it is not an object."""
    if direct_url is None:
        return {}
    if not isinstance(direct_url, dict):
        return None
    archive = direct_url.get("archive_info") or {}
    if not isinstance(archive, dict) or not _texts(archive.get("hashes") or {}):
        return None
    hashes = dict(archive.get("hashes") or {})
    single = archive.get("hash")
    if isinstance(single, str) and "=" in single:
        algo, value = single.split("=", 1)
        hashes.setdefault(algo, value)
    return hashes


def _probe(python: Path | str, argv: list[str]) -> Any:
    """Run the probe with `python`, where its environment runs (`container.runner_of`: in
    the pinned image for an environment a container runner made, else here)."""
    from vllm_plugin_release.edges.container import runner_of

    python = check_python(python)
    try:
        done = runner_of(python).call(
            [str(python), "-I", "-c", _PROBE, *argv], network=False, timeout=300
        )
    except OSError as exc:
        if exc.errno in (errno.ENOEXEC, errno.EACCES, errno.EISDIR, errno.ENOTDIR):
            raise BadInput(
                f"--python {python}: not a program this machine can run ({exc.strerror})"
            )
        raise OutsideFailure(f"--python {python}: could not run it ({exc})")
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise BadInput(
            f"--python {python}: the environment probe failed:\n{tail}",
            hint="pass the python of a virtual environment (Python >= 3.8)",
        )
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise BadInput(
            f"--python {python}: did not answer as a Python interpreter does",
            hint="pass the python of a virtual environment (Python >= 3.8)",
        )


def check_python(python: Path | str) -> Path:
    """`python` when it can be an interpreter to run: a file (or a container env's link,
    whose target is the image's) that this user may execute; BadInput naming it otherwise."""
    python = Path(python)
    if python.is_dir():
        raise BadInput(
            f"--python {python}: a folder, not a Python interpreter",
            hint="pass the interpreter itself, e.g. VENV/bin/python",
        )
    if not (python.exists() or python.is_symlink()):  # a container env's link: its image's
        raise BadInput(f"--python {python}: interpreter not found")
    if python.exists() and not (os.access(python, os.X_OK) and _runnable(python)):
        raise BadInput(
            f"--python {python}: not an executable program (a binary or a #! script), so "
            "not a Python interpreter",
            hint="pass the interpreter itself, e.g. VENV/bin/python",
        )
    return python


def _runnable(path: Path) -> bool:
    """Whether the kernel would start `path`: an ELF binary or a `#!` script."""
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return head == b"\x7fELF" or head.startswith(b"#!")
