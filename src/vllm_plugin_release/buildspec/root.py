"""The project folder a spec's relative paths resolve against: a module of its own, light
to import (a warm `vpr build-core` asks it without loading the typed spec)."""

from __future__ import annotations

from pathlib import Path


def project_root(spec_path: Path) -> Path:
    """The nearest parent holding `buildspec/` or `pyproject.toml`, else the spec's folder."""
    here = spec_path.resolve().parent
    for candidate in (here, *here.parents):
        if (candidate / "pyproject.toml").exists() or (candidate / "buildspec").is_dir():
            if candidate.name == "buildspec":
                continue
            return candidate
    return here
