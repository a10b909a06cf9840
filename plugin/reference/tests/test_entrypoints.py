"""Entry points: declared in the installed metadata, and their behaviour.

"Runtime absent" is produced here by blocking the import (`sys.modules[name]
= None`, Python's own mechanism) or by a runtime that fails to import. The
project's tests/test_reference_plugin.py installs the built wheels into fresh
environments with and without refrt for the end-to-end version.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import vllm_reference_plugin
from vllm_reference_plugin import PLATFORM_CLS, RUNTIME_MODULE, RUNTIME_MODULES
from vllm_reference_plugin.entrypoints import MODEL_ALIASES, platform_plugin, register

HAS_RUNTIME = importlib.util.find_spec(RUNTIME_MODULE) is not None


def _entry(group: str, name: str):
    found = [ep for ep in entry_points(group=group) if ep.name == name]
    assert len(found) == 1, f"{group}:{name} declared {len(found)} times"
    return found[0]


def test_entry_points_are_declared():
    platform = _entry("vllm.platform_plugins", "reference")
    assert platform.value == "vllm_reference_plugin.entrypoints:platform_plugin"
    assert platform.load() is platform_plugin
    general = _entry("vllm.general_plugins", "reference_model_aliases")
    assert general.load() is register
    assert platform.dist is not None and platform.dist.name == "vllm-reference-plugin"


def test_platform_plugin_follows_runtime_presence():
    assert platform_plugin() == (PLATFORM_CLS if HAS_RUNTIME else None)


def test_platform_plugin_is_none_without_runtime(monkeypatch):
    monkeypatch.setitem(sys.modules, RUNTIME_MODULE, None)  # import raises ImportError
    assert platform_plugin() is None


def test_platform_plugin_is_none_with_a_broken_runtime(monkeypatch, tmp_path):
    broken = tmp_path / RUNTIME_MODULE
    broken.mkdir()
    (broken / "__init__.py").write_text("raise OSError('libdevice.so: cannot open')\n")
    monkeypatch.delitem(sys.modules, RUNTIME_MODULE, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert platform_plugin() is None


def test_vllm_resolves_the_platform_from_the_entry_point(monkeypatch):
    from vllm.platforms import resolve_current_platform_cls_qualname
    from vllm.utils.import_utils import resolve_obj_by_qualname

    from vllm_reference_plugin.platform import ReferencePlatform

    assert resolve_obj_by_qualname(PLATFORM_CLS) is ReferencePlatform
    if HAS_RUNTIME:
        assert resolve_current_platform_cls_qualname() == PLATFORM_CLS
    monkeypatch.setitem(sys.modules, RUNTIME_MODULE, None)
    assert resolve_current_platform_cls_qualname() != PLATFORM_CLS


def test_general_plugin_registers_aliases_idempotently():
    from vllm import ModelRegistry
    from vllm.plugins import DEFAULT_PLUGINS_GROUP, load_plugins_by_group

    plugins = load_plugins_by_group(DEFAULT_PLUGINS_GROUP)
    assert plugins["reference_model_aliases"] is register
    register()
    first = {arch: ModelRegistry.models[arch] for arch in MODEL_ALIASES}
    register()
    for arch, target in MODEL_ALIASES.items():
        assert arch in ModelRegistry.get_supported_archs()
        assert ModelRegistry.models[arch] is first[arch]  # second call changed nothing
        module, cls = target.split(":")
        assert (ModelRegistry.models[arch].module_name, ModelRegistry.models[arch].class_name) == (
            module,
            cls,
        )


def _top_level_imports(path: Path) -> set[str]:
    """Modules imported at module level (not inside functions or TYPE_CHECKING)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_runtime_modules_are_declared_truthfully():
    package = Path(vllm_reference_plugin.__file__).parent
    needs_runtime = {
        f"vllm_reference_plugin.{p.stem}"
        for p in package.glob("*.py")
        if RUNTIME_MODULE in _top_level_imports(p)
    }
    assert needs_runtime == set(RUNTIME_MODULES)


@pytest.mark.skipif(HAS_RUNTIME, reason="refrt installed")
def test_runtime_modules_fail_to_import_without_runtime():
    for name in RUNTIME_MODULES:
        with pytest.raises(ImportError):
            importlib.import_module(name)
