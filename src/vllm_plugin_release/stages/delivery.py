"""A wheel stage's cached result and its delivery into dist/NAME (a helper module, not a
stage): light to import, so a warm `vpr build-core` (`stages/corememo`) delivers with
the very code the full path uses."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.buildrecord import BuildRecord
from vllm_plugin_release.core.cache import atomic_copy, sha256_file

if TYPE_CHECKING:
    from vllm_plugin_release.edges.interpreters import Interpreter


class StageResult(NamedTuple):
    """A wheel stage's result, delivered into dist/NAME (build-core, build-plugin).
    `stage_dir`: the cache entry it was delivered from (None: not given). A named tuple,
    not a dataclass: a warm build-core does not load `dataclasses` (and `inspect`)."""

    wheel: Path
    record: Path
    data: BuildRecord  # the record, typed (its raw object as written: `data.raw`)
    cached: bool
    stage_dir: Path | None = None


def deliver(
    stage_dir: Path, dist: Path, record: BuildRecord, record_name: str
) -> tuple[Path, Path]:
    """Copy a finished stage result (wheel + record) into dist/NAME, each file atomically.

    An older wheel of the same distribution (an earlier pin) is removed, so dist/NAME
    never holds two candidates for one side of the pairing.
    """
    name = record.wheel.filename
    prefix = name.split("-", 1)[0] + "-"
    dist.mkdir(parents=True, exist_ok=True)
    for old in dist.glob(f"{prefix}*.whl"):
        if old.name != name:
            old.unlink()
    dest = dist / name
    if not dest.exists() or sha256_file(dest) != record.wheel.sha256:
        atomic_copy(stage_dir / name, dest)
    atomic_copy(stage_dir / record_name, dist / record_name)
    return dest, dist / record_name


def reuse(
    stage_dir: Path,
    dist: Path,
    record_name: str,
    stage: str,
    named: tuple[Interpreter, str] | None = None,
) -> StageResult | None:
    """The cached result of a wheel stage, delivered into dist/NAME; None when there is none,
    or when `named` (the interpreter --interpreter or VPR_INTERPRETER names, and which of
    them) is not the one it was built with: that is said, and the stage builds with it."""
    if not (stage_dir / record_name).exists():
        return None
    # A truncated or emptied cache entry is named, with the way out (never a KeyError).
    record = records.build_record(
        stage_dir, record_name, f"rm -r {stage_dir}` and `vpr {stage} --spec SPEC"
    )
    if named is not None and not _built_with(record, named, stage):
        return None
    cached = stage_dir / record.wheel.filename
    if not cached.is_file() or sha256_file(cached) != record.wheel.sha256:
        # Never delivered: the cached wheel no longer matches its own record.
        progress.warn(f"{stage}: cached {cached.name} does not match its record; rebuilding")
        shutil.rmtree(stage_dir, ignore_errors=True)
        return None
    wheel, rec = deliver(stage_dir, dist, record, record_name)
    progress.info(f"{stage}: cached result reused ({wheel.name})")
    return StageResult(wheel, rec, record, cached=True, stage_dir=stage_dir)


def _built_with(record: BuildRecord, named: tuple[Interpreter, str], stage: str) -> bool:
    """Whether the cached `record` was built with the interpreter `named` (its code: the
    fingerprint); when not, say which one it was built with."""
    wanted, source = named
    made = record.interpreter
    if made is not None and made.sha256 == wanted.sha256:
        return True
    was = (
        f"CPython {made.version} at {made.path} (fingerprint {made.sha256[:12]})"
        if made
        else "an interpreter it does not record"
    )
    progress.warn(
        f"{stage}: the cached result was built with {was}; {source} names {wanted.path} "
        f"(CPython {wanted.version}, fingerprint {wanted.sha256[:12]}): building with it"
    )
    return False
