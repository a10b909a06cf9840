"""Where a stage's commands ran, as a typed, frozen value (what `Runner.describe()` gives):
written into the stage records with `to_json()`, read back by `parse`, each key checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vllm_plugin_release.core.errors import RecordProblem, field_shown


@dataclass(frozen=True, slots=True)
class RunnerFacts:
    """A runner's kind (`local`, `docker`, ...) and, for one that runs in an image, its
    pinned base image and the ID of the image commands run in (both or neither)."""

    kind: str
    base_image: str | None = None
    image_id: str | None = None
    # the interpreter version some records' runner description carries (`parse_recorded`);
    # `describe()` never sets it
    python: str | None = None

    def __post_init__(self) -> None:
        if (self.base_image is None) != (self.image_id is None):
            raise ValueError("a runner's base_image and image_id go together")

    def to_json(self) -> dict[str, str | None]:
        """The object a record holds, as it was always written (same keys, same order)."""
        out: dict[str, str | None] = {"kind": self.kind}
        if self.base_image is not None:
            out |= {"base_image": self.base_image, "image_id": self.image_id}
        if self.python is not None:
            out["python"] = self.python
        return out


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


def parse_recorded(data: object) -> RunnerFacts:
    """The runner a stage's record names (build-*.json's and env.json's `backend`): as
    `parse`, and the `python` key a record may also carry (text) kept."""
    if not isinstance(data, Mapping) or "python" not in data:
        return parse(data)
    python = data["python"]
    if not isinstance(python, str):
        raise RecordProblem(f"'python' is {field_shown(python)}, expected text")
    rest = parse({k: v for k, v in data.items() if k != "python"})
    return RunnerFacts(rest.kind, rest.base_image, rest.image_id, python)
