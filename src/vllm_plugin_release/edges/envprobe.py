"""Ask an installed Python environment what it holds (for `vpr manifest check-env`)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

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


def probe_environment(python: Path | str, names: list[str]) -> dict[str, Any]:
    """Installed version, RECORD (verified against the files) and entry points per name."""
    return _probe(python, [json.dumps(names)])


def probe_with_installed(
    python: Path | str, names: list[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """`probe_environment`, and every installed distribution (name -> version), in one run."""
    data = _probe(python, [json.dumps(names), "all"])
    return data["dists"], data["installed"]


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
