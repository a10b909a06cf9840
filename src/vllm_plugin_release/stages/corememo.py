"""A warm `vpr build-core`: what the last full run checked, remembered, and a hit only where
every part of it still holds (a helper module, not a stage; light to import).

A full run reads and validates the spec, checks the source tree, checks the lock against
the tree's build requirements, makes the stage key and reuses or builds. Most of its time
on a warm run is those imports and checks. When it ends well it writes a memo, named by
the hash of what the command line gave it (the spec's path, project folder and bytes,
`--backend`, `--interpreter`) and of the code that decides (every file of this package,
by size and mtime, and the Python running it). The memo says what that run found: the
lock's path and sha256, the stamps of the verified source tree, whether `unshare -n`
worked (part of the stage key), the stage key and the sha256 of the record's bytes.

The next `vpr build-core` with the same command line checks each of them again: the lock's
bytes, one stat per file of the source tree (as `core.cache.tree_intact` does), the
`unshare -n` probe, the record's bytes and the wheel's sha256 against the record; then it
delivers the cached wheel and record with the full path's own `deliver`. Any difference,
and anything odd in the memo (it is in the cache: hostile input, read bounded), is a miss:
the full path runs and decides (rebuilds, repairs, or fails as it always did). Only a
local build of an sdist source is remembered.
"""

from __future__ import annotations

import hashlib
import json
import stat
import string
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from vllm_plugin_release.buildspec.root import project_root
from vllm_plugin_release.core import bounded, progress, records
from vllm_plugin_release.core.buildrecord import BuildRecord, RecordProblem
from vllm_plugin_release.core.buildrecord import parse as parse_record
from vllm_plugin_release.core.cache import (
    TREE_MANIFEST,
    Cache,
    key_of,
    sha256_file,
    stamps_digest,
    tree_stamps,
    write_json,
)
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.treewalk import walk
from vllm_plugin_release.edges.proc import can_unshare_network
from vllm_plugin_release.stages.delivery import StageResult, deliver

if TYPE_CHECKING:
    from vllm_plugin_release.buildspec.model import Spec

STAGE = "build-core"  # stages/build_core.STAGE (a stage is not imported here: it is heavy)
RECORD = records.BUILD_CORE
MEMOS = "build-core-memo"  # .vpr/stages/build-core-memo/<memo>.json
MEMO_VERSION = 2  # 2: the spec's python, for an interpreter named on the command line
MAX_MEMO = 64 << 10
PACKAGE = Path(__file__).resolve().parent.parent
_HEX = frozenset(string.hexdigits.lower())

_SHAPE = bounded.shape(
    (
        ("memo", (int,)),
        ("name", (str,)),
        ("python", (str,)),
        ("lock", (str,)),
        ("lock_sha256", (str,)),
        ("source_sha256", (str,)),
        ("tree_stamps", (str,)),
        ("network_isolation", (str,)),
        ("isolated", (bool,)),
        ("stage_key", (str,)),
        ("record_sha256", (str,)),
    )
)


class Ask(NamedTuple):
    """What the command line asks for: the spec as given, `--backend`, `--interpreter`."""

    spec: Path
    backend: str | None = None
    interpreter: str | None = None

    @property
    def named(self) -> tuple[str, str] | None:
        """(path, --interpreter or VPR_INTERPRETER) of the interpreter named, if one is."""
        from vllm_plugin_release.edges.interpreters import named_by

        return named_by(self.interpreter)


def memo_name(ask: Ask) -> str | None:
    """The name of the memo for this command line and this code; None when the spec
    cannot be read (the full path says why)."""
    try:
        spec = ask.spec.resolve()
        text = bounded.read_file(spec, bounded.MAX_SPEC, "buildspec")
    except (OSError, BadInput):
        return None
    return key_of(
        {
            "memo": MEMO_VERSION,
            "spec": str(spec),
            "root": str(project_root(spec)),
            "spec_sha256": hashlib.sha256(text).hexdigest(),
            "backend": ask.backend,
            "interpreter": ask.named,
            "python": [sys.version, sys.executable],
            "code": code_stamps(),
        }
    )


def code_stamps() -> list[list[Any]]:
    """[path, size, mtime_ns] of every source file of this package: an edited module (or
    another install of it) names another memo."""
    stamps = []
    for rel, entry in walk(PACKAGE, frozenset({"__pycache__"})):
        if rel.endswith((".py", ".json")):
            st = entry.stat(follow_symlinks=False)
            stamps.append([rel, st.st_size, st.st_mtime_ns])
    return stamps


def _memo_path(cache: Cache, name: str) -> Path:
    return cache.root / "stages" / MEMOS / f"{name}.json"


def _hex(value: str, length: int = 64) -> bool:
    return len(value) == length and set(value) <= _HEX


def _plain_name(value: str) -> bool:
    """A file or folder name, nothing that reaches outside the folder it is joined to."""
    return bool(value) and "/" not in value and "\0" not in value and value not in (".", "..")


def _loads(data: bytes) -> Any:
    """JSON from the cache, small and bounded in bytes already; None when it is not JSON
    (the standard library's parser: importing orjson would cost a warm run more than it saves)."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _read_memo(cache: Cache, name: str) -> dict[str, Any] | None:
    """The memo, when there is one of the shape this code writes; else None."""
    try:
        memo = _loads(bounded.read_file(_memo_path(cache, name), MAX_MEMO, "memo"))
    except (OSError, BadInput):
        return None
    if bounded.shape_problem(memo, _SHAPE) or memo["memo"] != MEMO_VERSION:
        return None
    hexes = ("lock_sha256", "source_sha256", "tree_stamps", "stage_key", "record_sha256")
    if not all(_hex(memo[k]) for k in hexes) or not _plain_name(memo["name"]):
        return None
    return memo


def _isolation_holds(memo: dict[str, Any]) -> bool:
    """Whether the runner would isolate the builds as the remembered run's did (the stage
    key says which): `unshare -n` is probed again unless the spec turns isolation off."""
    if memo["network_isolation"] == "off":
        return memo["isolated"] is False
    return can_unshare_network() is memo["isolated"]


def _inputs_hold(cache: Cache, memo: dict[str, Any]) -> bool:
    """The lock's bytes and the source tree's stamps, as the remembered run found them."""
    try:
        lock = bounded.read_file(Path(memo["lock"]), bounded.MAX_DOCUMENT, "lock")
    except (OSError, BadInput):
        return False
    if hashlib.sha256(lock).hexdigest() != memo["lock_sha256"]:
        return False
    try:
        stamps = tree_stamps(cache.src_dir(memo["source_sha256"]))
    except OSError:
        return False
    return stamps_digest(stamps) == memo["tree_stamps"]


def _cached_record(stage_dir: Path, memo: dict[str, Any]) -> BuildRecord | None:
    """The cached record, when its bytes are the remembered ones and the wheel it names
    holds the sha256 it records."""
    try:
        data = bounded.read_file(stage_dir / RECORD, records.MAX_RECORD, "record")
    except (OSError, BadInput):
        return None
    if hashlib.sha256(data).hexdigest() != memo["record_sha256"]:
        return None
    record = _loads(data)
    try:  # checked as the full path's reader checks it (a bare *.whl name, a sha256)
        typed = parse_record(record, RECORD) if isinstance(record, dict) else None
    except RecordProblem:
        return None
    if typed is None:
        return None
    wheel = stage_dir / typed.wheel.filename
    try:  # a regular file (as `is_file` says on the full path): never a fifo or a device
        if not stat.S_ISREG(wheel.stat().st_mode) or sha256_file(wheel) != typed.wheel.sha256:
            return None
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return None
    return typed


def _named_holds(named: tuple[str, str] | None, memo: dict[str, Any], made: Any) -> bool:
    """Whether the interpreter named on the command line (`Ask.named`) is still a CPython
    of the spec's version with the fingerprint of the one the cached wheel was built with
    (the path may now hold another, or nothing: the full path says which)."""
    if named is None:
        return True
    from vllm_plugin_release.core.errors import VprError
    from vllm_plugin_release.edges.interpreters import explicit

    try:
        found = explicit(named[0], memo["python"], named[1])
    except VprError:
        return False
    return made is not None and made.sha256 == found.sha256


def warm_hit(
    cache: Cache, name: str, dist_root: Path, named: tuple[str, str] | None = None
) -> StageResult | None:
    """The cached build-core result delivered into dist/NAME when everything the memo
    `name` remembers still holds, the interpreter `named` on the command line included;
    None (nothing written) when anything differs."""
    memo = _read_memo(cache, name)
    if memo is None or not _isolation_holds(memo) or not _inputs_hold(cache, memo):
        return None
    stage_dir = cache.stage_dir(STAGE, memo["stage_key"])
    record = _cached_record(stage_dir, memo)
    if record is None or not _named_holds(named, memo, record.interpreter):
        return None
    wheel, rec = deliver(stage_dir, records.dist_dir(dist_root, memo["name"]), record, RECORD)
    progress.note(f"{STAGE}: cached result reused ({wheel.name})")
    return StageResult(wheel, rec, record, cached=True, stage_dir=stage_dir)


def remember(cache: Cache, name: str, spec: Spec, result: StageResult) -> bool:
    """Write memo `name` for a full run of `spec` that ended in `result`; False (nothing
    written) where a warm run could not check it all: another backend, a git source, a
    tree without stamps, a record or lock that changed since the run read them."""
    from vllm_plugin_release.buildspec.model import SdistSource

    source, stage_dir, data = spec.core.source, result.stage_dir, result.data.raw
    if spec.build.backend != "local" or not isinstance(source, SdistSource) or not stage_dir:
        return False
    lock = spec.resolve(spec.build.constraints).absolute()
    try:
        lock_sha = sha256_file(lock)
    except OSError:
        return False
    tree = _checked_stamps(cache.src_dir(source.sha256))
    record = _record_bytes(stage_dir, data)
    build_env = data.get("build_env")
    if (
        tree is None
        or record is None
        or stage_dir != cache.stage_dir(STAGE, stage_dir.name)
        or not isinstance(build_env, dict)
        or build_env.get("lock_sha256") != lock_sha  # the lock the stage key was made of
        or not isinstance(data.get("isolated"), bool)
    ):
        return False
    memo = {
        "memo": MEMO_VERSION,
        "name": spec.name,
        "python": spec.build.python,
        "lock": str(lock),
        "lock_sha256": lock_sha,
        "source_sha256": source.sha256,
        "tree_stamps": tree,
        "network_isolation": spec.build.network_isolation,
        "isolated": data["isolated"],
        "stage_key": stage_dir.name,
        "record_sha256": hashlib.sha256(record).hexdigest(),
    }
    try:
        write_json(_memo_path(cache, name), memo)
    except OSError:  # a read-only cache: every run takes the full path
        return False
    return True


def _checked_stamps(root: Path) -> str | None:
    """`stamps_digest` of the tree at `root` when its stamps are still those its manifest
    holds (the ones the full run's `tree_intact` found or wrote); else None."""
    try:
        manifest = bounded.loads(
            bounded.read_file(root / TREE_MANIFEST, bounded.MAX_INDEX, "tree manifest")
        )
        now = tree_stamps(root)
    except (OSError, ValueError, BadInput):
        return None
    if not isinstance(manifest, dict) or manifest.get("stamps") != now:
        return None
    return stamps_digest(now)


def _record_bytes(stage_dir: Path, data: Mapping[str, Any]) -> bytes | None:
    """The cached record's bytes, when they still say what the full run delivered (`data`
    as JSON gives it back: a fresh build's record holds tuples where JSON has lists)."""
    try:
        record = bounded.read_file(stage_dir / RECORD, records.MAX_RECORD, "record")
        delivered = json.loads(json.dumps(data))
    except (OSError, BadInput, TypeError, ValueError):
        return None
    return record if _loads(record) == delivered else None
