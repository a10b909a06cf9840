"""Where the cache folder is: --cache-dir, else $VPR_CACHE_DIR, else .vpr."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_plugin_release.core.cache import Cache

DEFAULT = ".vpr"


def from_env(default: Path | str = DEFAULT) -> Cache:
    """$VPR_CACHE_DIR, else `default`."""
    from vllm_plugin_release.core.cache import Cache  # here: the CLI's modules import us

    return Cache(os.environ.get("VPR_CACHE_DIR", default))


def from_args(args: Any) -> Cache:
    """--cache-dir, else $VPR_CACHE_DIR, else .vpr (every command the same way)."""
    from vllm_plugin_release.core.cache import Cache

    given = getattr(args, "cache_dir", None)
    return Cache(given) if given else from_env()
