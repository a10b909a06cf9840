"""What a CI system reads back from a step: GitHub Actions' `$GITHUB_OUTPUT` file."""

from __future__ import annotations

import json
import os
from typing import Any

from vllm_plugin_release.core.errors import BadInput


def github_output(values: dict[str, Any]) -> None:
    """Append key=value lines to the file GitHub Actions names in $GITHUB_OUTPUT."""
    target = os.environ.get("GITHUB_OUTPUT")
    if not target:
        raise BadInput(
            "--github-output: $GITHUB_OUTPUT is not set", hint="only use it inside GitHub Actions"
        )
    with open(target, "a", encoding="utf-8") as out:
        for key, value in values.items():
            text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
            if "\n" in text:
                raise BadInput(f"--github-output: value of {key} spans lines")
            out.write(f"{key}={text}\n")
