"""Where the cache folder is: --cache-dir, else $VPR_CACHE_DIR, else .vpr; and where
local builds make their scratch: $VPR_BUILD_SCRATCH, else /dev/shm (in memory)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_plugin_release.core.cache import Cache

DEFAULT = ".vpr"
BUILD_SCRATCH_ENV = "VPR_BUILD_SCRATCH"  # a folder, or 'off' for .vpr/tmp
BUILD_SCRATCH_DEFAULT = "/dev/shm"


def build_scratch_root(*, create: bool = True) -> Path | None:
    """This user's private folder for local builds' scratch (`core.cache.
    private_scratch_root` in $VPR_BUILD_SCRATCH, default /dev/shm), or None: `.vpr/tmp`."""
    from vllm_plugin_release.core.cache import private_scratch_root

    base = os.environ.get(BUILD_SCRATCH_ENV, BUILD_SCRATCH_DEFAULT)
    if base.strip().lower() in ("", "off", "0", "no"):
        return None
    return private_scratch_root(Path(base), create=create)


def from_env(default: Path | str = DEFAULT) -> Cache:
    """$VPR_CACHE_DIR, else `default`."""
    return _opened(os.environ.get("VPR_CACHE_DIR", default))


def from_args(args: Any) -> Cache:
    """--cache-dir, else $VPR_CACHE_DIR, else .vpr (every command the same way)."""
    given = getattr(args, "cache_dir", None)
    return _opened(given) if given else from_env()


def _opened(root: Path | str) -> Cache:
    """The cache at `root`; what killed runs left in the build scratch goes too (the
    cache's own `tmp/` is swept by `Cache`)."""
    from vllm_plugin_release.core.cache import Cache, sweep_once  # the CLI's modules import us

    cache = Cache(root)
    sweep_once(build_scratch_root(create=False))
    return cache
