"""Data files shipped inside the package (`schemas/*.json`), read where it is installed."""

from __future__ import annotations

import json
from typing import Any

from vllm_plugin_release.core.errors import OutsideFailure


def packaged_json_object(relpath: str) -> dict[str, Any]:
    """The JSON object in the package's file `relpath` (e.g. `schemas/manifest.schema.json`).

    A file that cannot be read or is not a JSON object means a broken installation: an
    outside failure (exit 3) that says to reinstall, not a traceback."""
    from importlib.resources import files

    where = f"vllm_plugin_release/{relpath}"
    try:
        data = json.loads(files("vllm_plugin_release").joinpath(relpath).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise OutsideFailure(
            f"{where}: a file of the installed package cannot be read ({exc})",
            hint="reinstall vllm-plugin-release",
        )
    if not isinstance(data, dict):
        raise OutsideFailure(
            f"{where}: not a JSON object in the installed package",
            hint="reinstall vllm-plugin-release",
        )
    return data
