"""A wheel stage's cached result and its delivery into dist/NAME (a helper module, not a
stage): light to import, so a warm `vpr build-core` (`stages/corememo`) delivers with
the very code the full path uses."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.buildrecord import BuildRecord
from vllm_plugin_release.core.cache import atomic_copy, sha256_file


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


def reuse(stage_dir: Path, dist: Path, record_name: str, stage: str) -> StageResult | None:
    """The cached result of a wheel stage, delivered into dist/NAME; None when there is none."""
    if not (stage_dir / record_name).exists():
        return None
    # A truncated or emptied cache entry is named, with the way out (never a KeyError).
    record = records.build_record(
        stage_dir, record_name, f"rm -r {stage_dir}` and `vpr {stage} --spec SPEC"
    )
    cached = stage_dir / record.wheel.filename
    if not cached.is_file() or sha256_file(cached) != record.wheel.sha256:
        # Never delivered: the cached wheel no longer matches its own record.
        progress.warn(f"{stage}: cached {cached.name} does not match its record; rebuilding")
        shutil.rmtree(stage_dir, ignore_errors=True)
        return None
    wheel, rec = deliver(stage_dir, dist, record, record_name)
    progress.info(f"{stage}: cached result reused ({wheel.name})")
    return StageResult(wheel, rec, record, cached=True, stage_dir=stage_dir)
