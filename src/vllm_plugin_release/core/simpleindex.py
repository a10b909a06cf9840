"""The PEP 691 JSON body of a simple-index project page, checked before anyone reads it.

A package index is outside this project: a body that is not the documented shape is an
outside failure (exit 3) naming the URL, never a KeyError or TypeError later.
"""

from __future__ import annotations

import json
from typing import Any

from vllm_plugin_release.core.errors import OutsideFailure


def json_files(body: bytes, url: str) -> list[dict[str, Any]]:
    """The `files` entries of a PEP 691 page, each with a string `filename` and `url`."""

    def bad(what: str) -> OutsideFailure:
        return OutsideFailure(
            f"{url}: malformed PEP 691 index page ({what})",
            hint="check the [core.source] index URL; the index must serve the simple API",
        )

    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8
        raise bad(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise bad("not a JSON object")
    files = data.get("files", [])
    if not isinstance(files, list):
        raise bad("'files' is not a list")
    for number, entry in enumerate(files):
        if not isinstance(entry, dict):
            raise bad(f"files[{number}] is not an object")
        for key in ("filename", "url"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise bad(f"files[{number}] has no {key!r}")
        if not isinstance(entry.get("hashes", {}), dict):
            raise bad(f"files[{number}]: 'hashes' is not an object")
    return files
