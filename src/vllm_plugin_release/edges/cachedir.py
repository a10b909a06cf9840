"""Where the cache folder is: --cache-dir, else $VPR_CACHE_DIR, else .vpr; and where
local builds make their scratch: $VPR_BUILD_SCRATCH, else /dev/shm (in memory)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.edges import settings

if TYPE_CHECKING:
    from vllm_plugin_release.core.cache import Cache


def build_scratch_root(*, create: bool = True) -> Path | None:
    """This user's private folder for local builds' scratch (`core.cache.
    private_scratch_root` in $VPR_BUILD_SCRATCH, default /dev/shm), or None: `.vpr/tmp`."""
    from vllm_plugin_release.core.cache import private_scratch_root

    base = settings.text("VPR_BUILD_SCRATCH") or ""
    if base.strip().lower() in ("", "off", "0", "no"):
        return None
    return private_scratch_root(Path(base), create=create)


def from_env() -> Cache:
    """$VPR_CACHE_DIR, else .vpr."""
    return _opened(settings.text("VPR_CACHE_DIR") or "")


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
