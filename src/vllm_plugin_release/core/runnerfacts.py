"""Where a stage's commands ran, as a typed, frozen value: what `Runner.describe()` gives.

A stage writes it into its record (build-core.json's `backend`, env.json's `backend`,
build-plugin.json's `build_env.runner`, run.json's `install_proof_ran_in`) with
`to_json()`, the object it always wrote: `{"kind": "local"}` for this machine, the kind,
pinned base image and image ID for a runner that runs in an image. `parse` reads one back
(publish's note of an earlier install proof), each key checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vllm_plugin_release.core.buildrecord import RecordProblem, field_shown


@dataclass(frozen=True, slots=True)
class RunnerFacts:
    """A runner's kind (`local`, `docker`, ...) and, for one that runs in an image, its
    pinned base image and the ID of the image commands run in (both or neither)."""

    kind: str
    base_image: str | None = None
    image_id: str | None = None

    def __post_init__(self) -> None:
        if (self.base_image is None) != (self.image_id is None):
            raise ValueError("a runner's base_image and image_id go together")

    def to_json(self) -> dict[str, str | None]:
        """The object a record holds, as it was always written (same keys, same order)."""
        if self.base_image is None:
            return {"kind": self.kind}
        return {"kind": self.kind, "base_image": self.base_image, "image_id": self.image_id}


def parse(data: object) -> RunnerFacts:
    """The runner described by `data` (a record's JSON object); RecordProblem naming the
    first key missing or of another type, or a key it does not know."""
    if not isinstance(data, Mapping):
        raise RecordProblem(f"the runner is {field_shown(data)}, expected an object")
    unknown = sorted(str(k) for k in data if k not in ("kind", "base_image", "image_id"))
    if unknown:
        raise RecordProblem(f"the runner has an unknown key {unknown[0]!r}")
    kind = data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise RecordProblem(f"'kind' is {field_shown(kind)}, expected non-empty text")
    image = [data.get("base_image"), data.get("image_id")]
    if image == [None, None] and len(data) == 1:
        return RunnerFacts(kind)
    for key, value in zip(("base_image", "image_id"), image, strict=True):
        if not isinstance(value, str) or not value:
            raise RecordProblem(f"{key!r} is {field_shown(value)}, expected non-empty text")
    return RunnerFacts(kind, image[0], image[1])
