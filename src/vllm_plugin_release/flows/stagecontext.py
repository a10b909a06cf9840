"""What a stage added to the flows' graphs (flows/extrastages) is given when it runs. Its
own module, so that a stage's module and the list of extras both import it, and neither
the other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the spec module loads jsonschema: keep it off `vpr --help`
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.core.cache import Cache


@dataclass(frozen=True)
class Context:
    """The graph walked ("release", "pairing", "hardware") and its pairing (for "pairing",
    the derived spec of the core it builds, known once core-source ran)."""

    graph: str
    spec: Spec
    cache: Cache
    dist_root: Path
