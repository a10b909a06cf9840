"""What a spec names of the plugin for the analysers: its source folder and the installer
inputs (`[plugin] installer`, `overrides`, `[conformance.pinning] files`) that the
pinning and cadence checks (and `vpr matrix`, `vpr plugin-tests`) scan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform.lib.installscan import InputFile
from vllm_plugin_release.core.errors import BadInput


def plugin_root_for(spec: Spec, plugin_root: Path | str | None) -> Path:
    """The plugin source folder: given, or [plugin.source] path for kind = path."""
    if plugin_root is not None:
        return Path(plugin_root)
    source = spec.plugin.source if spec.plugin else None
    if source is not None and source.kind == "path" and source.path:
        return Path(spec.resolve(source.path))
    raise BadInput(
        f"{spec.path}: [plugin.source] is not a local path; "
        "the check needs the plugin's source folder",
        hint="fetch the plugin first and pass its checkout (plugin_root)",
    )


@dataclass(frozen=True, slots=True)
class PinningOptions:
    """`[conformance.pinning]` (validated with the spec) with its defaults: the installer
    inputs it adds (`files`), the build arguments Dockerfiles are read with, and the
    pinning check's verdict levels."""

    files: tuple[InputFile, ...] = ()
    build_args: dict[str, str] = field(default_factory=dict)
    unhashed_fetch: str = "warn"
    editable_install: str = "warn"
    unpinned: str = "warn"
    require_from_source: bool = True


def pinning_options(spec: Spec) -> PinningOptions:
    """The spec's `[conformance.pinning]`, typed (read here only; a path in `files` or
    {path, kind})."""
    table = (spec.raw.get("conformance") or {}).get("pinning") or {}
    key = "[conformance.pinning] files"
    return PinningOptions(
        files=tuple(
            InputFile(entry, "", "requirements", key)
            if isinstance(entry, str)
            else InputFile(entry["path"], entry.get("kind", ""), "requirements", key)
            for entry in table.get("files", [])
        ),
        build_args=dict(table.get("build_args") or {}),
        unhashed_fetch=str(table.get("unhashed_fetch", "warn")),
        editable_install=str(table.get("editable_install", "warn")),
        unpinned=str(table.get("unpinned", "warn")),
        require_from_source=table.get("require_from_source", True),
    )


def input_files(spec: Spec, files: Sequence[InputFile] = ()) -> list[InputFile]:
    """The installer inputs to scan: `[plugin] installer` and `overrides`, then `files`
    (`PinningOptions.files`, `[conformance.pinning] files`)."""
    plugin = spec.plugin
    out: list[InputFile] = []
    if plugin is not None and plugin.installer:
        out.append(InputFile(plugin.installer, "", "installer", "[plugin] installer"))
    if plugin is not None and plugin.overrides:
        out.append(InputFile(plugin.overrides, "requirements", "override", "[plugin] overrides"))
    return [*out, *files]
