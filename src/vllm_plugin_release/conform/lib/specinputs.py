"""What a spec names of the plugin for the analysers: its source folder and the installer
inputs (`[plugin] installer`, `overrides`, `[conformance.pinning] files`) that the
pinning and cadence checks (and `vpr matrix`, `vpr plugin-tests`) scan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform.lib.installer.analyzer import InputFile
from vllm_plugin_release.core.errors import BadInput


def plugin_root_for(spec: Spec, plugin_root: Path | str | None) -> Path:
    """The plugin source folder: given, or [plugin.source] path for kind = path."""
    if plugin_root is not None:
        return Path(plugin_root)
    source = spec.plugin.get("source") or {}
    if source.get("kind") == "path" and source.get("path"):
        return Path(spec.resolve(source["path"]))
    raise BadInput(
        f"{spec.path}: [plugin.source] is not a local path; "
        "the check needs the plugin's source folder",
        hint="fetch the plugin first and pass its checkout (plugin_root)",
    )


def input_files(spec: Spec, files: Sequence[str | Mapping[str, str]] = ()) -> list[InputFile]:
    """The installer inputs to scan: `[plugin] installer` and `overrides`, then `files`
    (`[conformance.pinning] files`: a path, or {path, kind})."""
    plugin = spec.plugin
    out: list[InputFile] = []
    if plugin.get("installer"):
        out.append(InputFile(plugin["installer"], "", "installer", "[plugin] installer"))
    if plugin.get("overrides"):
        out.append(InputFile(plugin["overrides"], "requirements", "override", "[plugin] overrides"))
    for entry in files:
        if isinstance(entry, str):
            out.append(InputFile(entry, "", "requirements", "[conformance.pinning] files"))
        else:
            out.append(
                InputFile(
                    entry["path"],
                    entry.get("kind", ""),
                    "requirements",
                    "[conformance.pinning] files",
                )
            )
    return out
