"""Each rule of the API coupling report on a small core and plugin written by the test: its
clean case, and the mutation of the core it must find (imports, attributes, signatures,
review items, unresolved names, the facts cache, trace_failures)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from vllm_plugin_release.conform.lib import apicore
from vllm_plugin_release.conform.lib import apicoupling as ac
from vllm_plugin_release.flows.bump import _coupling_section


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def report(
    tmp_path: Path,
    old: dict[str, str],
    new: dict[str, str],
    plugin: str | dict[str, str],
    **kw,
) -> ac.CouplingReport:
    """The report for a plugin (its package `demo`) between core 1.0.0 and 1.1.0."""
    files = {"src/demo/__init__.py": plugin} if isinstance(plugin, str) else plugin
    root = write(tmp_path / "plugin", files)
    return ac.coupling(
        root, write(tmp_path / "vllm-1.0.0", old), write(tmp_path / "vllm-1.1.0", new), **kw
    )


def ids(r: ac.CouplingReport) -> list[str]:
    return [c.id for c in r.changes]


def review(r: ac.CouplingReport) -> list[str]:
    return [c.id for c in r.review]


def by_id(r: ac.CouplingReport) -> dict[str, ac.Change]:
    return {c.id: c for c in (*r.changes, *r.review)}


PKG = {"vllm/__init__.py": "", "vllm/engine/__init__.py": ""}


# -- 1. imports ------------------------------------------------------------------------

ENGINE = {**PKG, "vllm/engine/utils.py": "class Launcher:\n    pass\n\nclass Plan:\n    pass\n"}
LAUNCH = "from vllm.engine.utils import Launcher, Plan\nfrom vllm.engine.hooks import Hook\n"


def test_an_import_the_new_core_lacks_breaks_even_when_the_old_lacked_it(tmp_path: Path):
    old_without_plan = {**PKG, "vllm/engine/utils.py": "class Launcher:\n    pass\n"}
    hooks = {"vllm/engine/hooks.py": "class Hook:\n    pass\n"}
    clean = report(tmp_path / "a", old_without_plan, {**ENGINE, **hooks}, LAUNCH)
    assert ids(clean) == []  # the new core defines them: what the old lacked is not a break
    broken = report(tmp_path / "b", old_without_plan, {**PKG, "vllm/engine/utils.py": ""}, LAUNCH)
    assert ids(broken) == [
        "missing:vllm.engine.hooks",  # a module neither core has
        "missing:vllm.engine.hooks.Hook",
        "missing:vllm.engine.utils.Plan",
        "removed:vllm.engine.utils.Launcher",
    ]
    found = by_id(broken)
    assert found["missing:vllm.engine.hooks.Hook"].detail == (
        "vllm.engine.hooks.Hook: missing in 1.1.0 (the module vllm.engine.hooks is not there); "
        "missing in the old core too (1.0.0)"
    )
    assert found["missing:vllm.engine.utils.Plan"].detail == (
        "vllm.engine.utils.Plan: missing in 1.1.0; missing in the old core too (1.0.0)"
    )
    assert found["removed:vllm.engine.utils.Launcher"].detail.startswith(
        "vllm.engine.utils.Launcher: missing in 1.1.0 (vllm/engine/utils.py:1 in 1.0.0)"
    )
    assert found["missing:vllm.engine.utils.Plan"].uses == ("src/demo/__init__.py:1",)


def test_a_vanished_module_breaks(tmp_path: Path):
    old = {**PKG, "vllm/openai/__init__.py": "", "vllm/openai/engine/__init__.py": "",
           "vllm/openai/engine/protocol.py": "class DeltaMessage:\n    pass\n"}  # fmt: skip
    plugin = "from vllm.openai.engine.protocol import DeltaMessage\nimport vllm.openai\n"
    moved = {**PKG, "vllm/openai/__init__.py": "",
             "vllm/openai/engine/protocol.py": "class DeltaMessage:\n    pass\n"}  # fmt: skip
    assert ids(report(tmp_path / "a", old, moved, plugin)) == []  # a namespace package now
    gone = {**PKG, "vllm/openai/__init__.py": ""}
    broken = report(tmp_path / "b", old, gone, plugin)
    assert ids(broken) == [
        "removed:vllm.openai.engine.protocol",
        "removed:vllm.openai.engine.protocol.DeltaMessage",
    ]
    assert by_id(broken)["removed:vllm.openai.engine.protocol"].detail.endswith(
        "; the module vllm.openai.engine is gone"
    )


def test_names_served_by_a_module_getattr_or_a_star_import_are_defined(tmp_path: Path):
    old = {
        **PKG,
        "vllm/lazy.py": """
            _NAMES = {"Served": "vllm.impl:Served"}

            def __getattr__(name):
                if name in _NAMES:
                    return 1
                raise AttributeError(name)
        """,
        "vllm/impl.py": "class Served:\n    pass\n\nclass Starred:\n    pass\n",
        "vllm/api.py": "from vllm.impl import *\n",
    }
    plugin = "from vllm.lazy import Served\nfrom vllm.api import Starred\n"
    assert ids(report(tmp_path / "a", old, old, plugin)) == []
    new = {**old, "vllm/lazy.py": "def __getattr__(name):\n    raise AttributeError(name)\n",
           "vllm/impl.py": "class Served:\n    pass\n"}  # fmt: skip
    broken = report(tmp_path / "b", old, new, plugin)
    assert ids(broken) == ["removed:vllm.api.Starred"]  # gone from the module it star-imports
    unresolved = {u.symbol: u.reason for u in broken.unresolved}
    assert unresolved == {"vllm.lazy.Served": "in 1.1.0: vllm.lazy has a module __getattr__"}


def test_a_fallback_import_and_a_typing_only_import_are_review_items(tmp_path: Path):
    old = {**PKG, "vllm/api.py": "class Old:\n    pass\n\nclass Hint:\n    pass\n"}
    new = {**PKG, "vllm/api.py": ""}
    plugin = """
        from typing import TYPE_CHECKING

        try:
            from vllm.api import Old
        except ImportError:
            Old = None

        if TYPE_CHECKING:
            from vllm.api import Hint
    """
    assert ids(report(tmp_path / "a", old, old, plugin)) == []
    guarded = report(tmp_path / "b", old, new, plugin)
    assert ids(guarded) == []
    assert review(guarded) == ["fallback:vllm.api.Old", "typing:vllm.api.Hint"]
    assert "not breaking at run time" in by_id(guarded)["typing:vllm.api.Hint"].detail
    assert "try/except ImportError" in by_id(guarded)["fallback:vllm.api.Old"].detail
    bare = "from vllm.api import Old\nfrom vllm.api import Hint\n"
    assert ids(report(tmp_path / "c", old, new, bare)) == [
        "removed:vllm.api.Hint",
        "removed:vllm.api.Old",
    ]


def test_a_name_the_core_binds_only_for_type_checkers_is_missing_at_run_time(tmp_path: Path):
    old = {**PKG, "vllm/types.py": "class Spec:\n    pass\n",
           "vllm/api.py": "from vllm.types import Spec\n"}  # fmt: skip
    new = {**old, "vllm/api.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from vllm.types import Spec\n"}  # fmt: skip
    plugin = "from vllm.api import Spec\n"
    assert ids(report(tmp_path / "a", old, old, plugin)) == []
    assert ids(report(tmp_path / "b", old, new, plugin)) == ["removed:vllm.api.Spec"]


# -- 2. attributes -------------------------------------------------------------------

CORE = {
    **PKG,
    "vllm/cfg.py": """
        from dataclasses import dataclass

        @dataclass
        class Parallel:
            rank: int = 0
            world: int = 1

        class Config:
            def __init__(self) -> None:
                self.size = 1
                self.parallel: Parallel = Parallel()

        def get_config() -> Config:
            return Config()
    """,
    "vllm/base.py": """
        from vllm.cfg import Config

        class Device:
            index: int = 0
            name: str = "cpu"

        class Base:
            def __init__(self, config: Config) -> None:
                self.config = config

            @property
            def device(self) -> Device:
                return Device()

            def prepare(self) -> None:
                pass
    """,
}
ATTR_PLUGIN = """
    from vllm.base import Base
    from vllm.cfg import Config, Parallel, get_config


    def by_annotation(c: Config):
        return c.size


    def by_return():
        return get_config().parallel.rank


    def by_narrowing(x):
        if isinstance(x, Parallel):
            return x.world
        return None


    def writes(c: Config):
        c.size = 3


    class Worker(Base):
        def step(self):
            self.prepare()
            return self.config.size, self.device.index
"""


def _without(text: str, line: str) -> str:
    assert line in text
    return text.replace(line, "")


@pytest.mark.parametrize(
    ("file", "line", "expected", "lines"),
    [
        ("vllm/cfg.py", "        self.size = 1\n", "attribute:vllm.cfg.Config.size",
         [7, 21, 27]),  # a parameter's annotation, a write, self.config's type (Base's __init__)
        ("vllm/cfg.py", "    rank: int = 0\n", "attribute:vllm.cfg.Parallel.rank",
         [11]),  # get_config()'s return annotation, then Config.parallel's annotation
        ("vllm/cfg.py", "    world: int = 1\n", "attribute:vllm.cfg.Parallel.world",
         [16]),  # isinstance narrowing
        ("vllm/base.py", "    @property\n    def device(self) -> Device:\n"  # self, a property
         "        return Device()\n", "attribute:vllm.base.Base.device", [27]),
        ("vllm/base.py", "    index: int = 0\n", "attribute:vllm.base.Device.index",
         [27]),  # the property's return annotation
        ("vllm/base.py", "    def prepare(self) -> None:\n        pass\n",
         "attribute:vllm.base.Base.prepare", [26]),  # a method through self
    ],
)  # fmt: skip
def test_an_attribute_the_new_core_no_longer_sets_breaks(
    tmp_path: Path, file: str, line: str, expected: str, lines: list[int]
):
    assert ids(report(tmp_path / "a", CORE, CORE, ATTR_PLUGIN)) == []
    new = {**CORE, file: _without(textwrap.dedent(CORE[file]), line)}
    broken = report(tmp_path / "b", CORE, new, ATTR_PLUGIN)
    assert ids(broken) == [expected]
    found = by_id(broken)[expected]
    assert found.detail.startswith(f"{expected.split(':')[1]}: missing in 1.1.0")
    assert sorted(int(u.rpartition(":")[2]) for u in found.uses) == lines


def test_a_write_to_an_attribute_the_core_dropped_says_so(tmp_path: Path):
    plugin = "from vllm.cfg import Config\n\ndef f(c: Config):\n    c.size = 3\n"
    new = {**CORE, "vllm/cfg.py": _without(textwrap.dedent(CORE["vllm/cfg.py"]),
                                           "        self.size = 1\n")}  # fmt: skip
    broken = report(tmp_path, CORE, new, plugin)
    assert ids(broken) == ["attribute:vllm.cfg.Config.size"]
    assert "the plugin sets it, the new core no longer reads it" in broken.changes[0].detail


def test_a_read_the_plugin_guards_with_hasattr_is_a_review_item(tmp_path: Path):
    plugin = """
        from vllm.cfg import Config

        def f(c: Config):
            if hasattr(c, "size"):
                return c.size
            return getattr(c, "size", 0)
    """
    new = {**CORE, "vllm/cfg.py": _without(textwrap.dedent(CORE["vllm/cfg.py"]),
                                           "        self.size = 1\n")}  # fmt: skip
    assert review(report(tmp_path / "a", CORE, CORE, plugin)) == []
    guarded = report(tmp_path / "b", CORE, new, plugin)
    assert ids(guarded) == [] and review(guarded) == ["guarded:vllm.cfg.Config.size"]


# -- 3. signatures -------------------------------------------------------------------

API = """
    def build(name, size=1, **kwargs):
        return name

    def make(a, b):
        return a
"""
CALLS = """
    from vllm.api import build, make

    def f():
        build("x", colour="red")
        build("y")
        make(1, 2)
"""


@pytest.mark.parametrize(
    ("new_api", "expected", "says"),
    [
        ("def build(name, size, **kwargs):\n    return name\n",
         "required:vllm.api.build:size", "'size' lost its default"),
        ("def build(name, size=1):\n    return name\n",
         "keyword:vllm.api.build:colour", "it went through **kwargs, which is gone"),
        ("def make(a, *, b):\n    return a\n",
         "positional:vllm.api.make:b", "'b' became keyword-only; the plugin passes it by "
         "position (2)"),
        ("def make(b, a):\n    return a\n",
         "positional:vllm.api.make:a", "the plugin's argument 1 ('a' before) now goes to 'b'"),
    ],
)  # fmt: skip
def test_a_call_that_no_longer_fits_breaks(tmp_path: Path, new_api: str, expected: str, says):
    old = {**PKG, "vllm/api.py": API}
    assert ids(report(tmp_path / "a", old, old, CALLS)) == []
    name = new_api.split("(")[0].removeprefix("def ")
    kept = [b for b in textwrap.dedent(API).split("\n\n") if not b.startswith(f"def {name}(")]
    new = {**PKG, "vllm/api.py": "\n\n".join([*kept, new_api])}
    broken = report(tmp_path / "b", old, new, CALLS)
    assert expected in ids(broken)
    assert says in by_id(broken)[expected].detail


HOOK = "class Hook:\n    def run(self, batch, budget):\n        return batch\n"


@pytest.mark.parametrize(
    ("new_run", "override", "expected"),
    [
        ("def run(self, batch, budget, *, deadline=None):", "def run(self, batch, budget):",
         "'deadline' is keyword-only in the core, the override has no such parameter"),
        ("def run(self, batch, budget=None):", "def run(self, batch, budget):",
         "'budget' has a default in the core, which may leave it out; the override requires it"),
        ("def run(self, batch, budget, extra):", "def run(self, batch, budget):",
         "the core may pass 'extra', which the override does not take"),
    ],
)  # fmt: skip
def test_an_override_the_new_core_calls_differently_breaks(
    tmp_path: Path, new_run: str, override: str, expected: str
):
    old = {**PKG, "vllm/hook.py": HOOK}
    new = {**PKG, "vllm/hook.py": HOOK.replace("def run(self, batch, budget):", new_run)}
    plugin = f"from vllm.hook import Hook\n\nclass Mine(Hook):\n    {override}\n        return 1\n"
    assert ids(report(tmp_path / "a", old, old, plugin)) == []
    broken = report(tmp_path / "b", old, new, plugin)
    assert ids(broken) == ["signature:vllm.hook.Hook.run"]
    assert expected in broken.changes[0].detail
    takes_all = plugin.replace(override, "def run(self, *args, **kwargs):")
    assert ids(report(tmp_path / "c", old, new, takes_all)) == []  # it takes any call


# -- 4. review items -----------------------------------------------------------------

PLATFORM = """
    import abc

    class Platform:
        def check(self):
            return None

        def setup(self, device):
            device.open()
            return device
"""
SUBCLASS = """
    from vllm.platform import Platform

    class Mine(Platform):
        def setup(self, device):
            return device
"""


def test_a_base_method_that_now_raises_or_became_abstract_is_a_review_item(tmp_path: Path):
    old = {**PKG, "vllm/platform.py": PLATFORM}
    raises = PLATFORM.replace("            return None\n",
                              "            raise NotImplementedError('say so')\n")  # fmt: skip
    abstract = PLATFORM.replace(
        "        def check(self):\n", "        @abc.abstractmethod\n        def check(self):\n"
    )
    assert review(report(tmp_path / "a", old, old, SUBCLASS)) == []
    for i, text in enumerate((raises, abstract)):
        found = report(tmp_path / f"b{i}", old, {**PKG, "vllm/platform.py": text}, SUBCLASS)
        assert ids(found) == [] and review(found) == ["unimplemented:vllm.platform.Platform.check"]
    overrides = SUBCLASS + "\n        def check(self):\n            return True\n"
    quiet = report(tmp_path / "c", old, {**PKG, "vllm/platform.py": raises}, overrides)
    assert review(quiet) == ["body:vllm.platform.Platform.check"]  # overridden: its body
    # on an ABC an abstract method the subclass lacks stops instantiation: breaking
    abc_old = PLATFORM.replace("class Platform:", "class Platform(abc.ABC):")
    abc_new = abstract.replace("class Platform:", "class Platform(abc.ABC):")
    enforced = report(tmp_path / "d", {**PKG, "vllm/platform.py": abc_old},
                      {**PKG, "vllm/platform.py": abc_new}, SUBCLASS)  # fmt: skip
    assert ids(enforced) == ["abstract:vllm.platform.Platform.check"]


def test_an_overridden_method_whose_core_body_changed_is_a_review_item(tmp_path: Path):
    old = {**PKG, "vllm/platform.py": PLATFORM}
    layout = PLATFORM.replace("device.open()", "device.open(  )  # the same call")
    assert review(report(tmp_path / "a", old, {**PKG, "vllm/platform.py": layout}, SUBCLASS)) == []
    changed = PLATFORM.replace("device.open()", "device.open(fast=True)\n            device.warm()")
    found = report(tmp_path / "b", old, {**PKG, "vllm/platform.py": changed}, SUBCLASS)
    assert review(found) == ["body:vllm.platform.Platform.setup"]
    assert "(3 line(s) changed)" in found.review[0].detail


# -- 5. unresolved names ---------------------------------------------------------------


def test_what_cannot_be_told_statically_is_listed_with_its_reason(tmp_path: Path):
    core = {
        **PKG,
        "vllm/hook.py": """
            import torch

            class Hook:
                def run(self, batch):
                    return batch

            class Module(torch.nn.Module):
                pass
        """,
        "vllm/stars.py": "x = 1\n",
    }
    typed = """
        from vllm.hook import Hook, Module
        from vllm.stars import *

        class Mine(Hook):
            def run(self, batch: Hook):
                name = "run"
                return batch.run, getattr(batch, name)

        def f(m: Module):
            return m.parameters
    """
    found = report(tmp_path / "a", core, core, typed)
    reasons = {u.symbol: u.reason for u in found.unresolved}
    assert reasons == {
        "vllm.hook.Hook.<name>": "dynamic attribute: getattr() with a name computed at run time",
        "vllm.hook.Module.parameters": "vllm.hook.Module derives from torch.nn.Module",
        "vllm.stars.*": "star import: the names it brings are not followed",
    }
    untyped = typed.replace("batch: Hook", "batch")
    reasons = {u.symbol: u.reason for u in report(tmp_path / "b", core, core, untyped).unresolved}
    assert reasons["vllm.hook.Hook.run(batch).run"] == (
        "untyped parameter: 'batch' is untyped in the core's vllm.hook.Hook.run"
    )


def test_names_that_alias_each_other_in_a_loop_are_unresolved_not_a_crash(tmp_path: Path):
    core = {**PKG, "vllm/x.py": "A = B\nB = A\n"}
    found = report(
        tmp_path, core, core, "from vllm.x import A\n\ndef f(a: A):\n    return a.size\n"
    )
    assert ids(found) == [] and "vllm.x.A" in {u.symbol for u in found.unresolved}


# -- the facts cache ---------------------------------------------------------------------


def test_cached_facts_are_reused_and_a_tampered_entry_is_read_again(tmp_path: Path):
    old = {**PKG, "vllm/api.py": API}
    new = {**PKG, "vllm/api.py": "def build(name, size=1):\n    return name\n\ndef make(a, b):\n"
                                 "    return a\n"}  # fmt: skip
    cache = tmp_path / "cache"
    first = report(tmp_path / "a", old, new, CALLS, cache_dir=cache)
    entries = sorted(cache.rglob("*.json"))
    assert len(entries) == 2  # the old and the new vllm/api.py: the modules reached
    for entry in entries:
        apicore.validate_facts(json.loads(entry.read_text()))
    tampered = json.loads(entries[0].read_text())
    tampered["names"] = {"build": [{"k": "import", "line": "1"}]}
    with pytest.raises(ValueError):
        apicore.validate_facts(tampered)
    for entry in entries:  # every entry hostile: the wrong shape, or not JSON at all
        entry.write_text(json.dumps(tampered) if entry != entries[-1] else "{[")
    again = report(tmp_path / "b", old, new, CALLS, cache_dir=cache)
    assert ids(again) == ids(first) == ["keyword:vllm.api.build:colour"]
    for entry in entries:  # read again, and written back whole
        apicore.validate_facts(json.loads(entry.read_text()))
    warm = apicore.FactsCache(cache)
    tree = apicore.CoreTree(tmp_path / "b" / "vllm-1.0.0", warm)
    assert tree.resolve("vllm.api.build") is not None and warm.parsed == 0


# -- 6. tracing observed failures --------------------------------------------------------


def test_failures_are_traced_to_the_changes_that_explain_them(tmp_path: Path):
    old = {**PKG, "vllm/api.py": API, "vllm/engine/utils.py": "class Launcher:\n    pass\n"}
    new = {**PKG, "vllm/api.py": "def build(name, size=1):\n    return name\n\ndef make(a, b):\n"
                                 "    return a\n", "vllm/engine/utils.py": ""}  # fmt: skip
    plugin = {
        "src/demo/__init__.py": "",
        "src/demo/launcher.py": "from vllm.engine.utils import Launcher\n",
        "src/demo/server.py": "from demo import launcher\n",
        "src/demo/calls.py": textwrap.dedent(CALLS),
        "tests/test_calls.py": "from demo.calls import f\n",
        "tests/test_server.py": "import demo.server\n",
    }
    found = report(tmp_path, old, new, plugin)
    assert ids(found) == ["keyword:vllm.api.build:colour", "removed:vllm.engine.utils.Launcher"]
    launcher_error = "ImportError: cannot import name 'Launcher' from 'vllm.engine.utils'"
    traced = ac.trace_failures(
        found,
        {"demo.server": launcher_error},  # fails through the plugin module it imports
        {
            "tests.test_calls.TestF::test_f": "TypeError: build() got an unexpected keyword "
            "argument 'colour'",
            "tests.test_calls::test_g": "AssertionError: 1 != 2",  # nothing names a change
            "tests.test_server::test_s": "TypeError: build() got an unexpected keyword "
            "argument 'colour'",  # names a change its modules do not use
        },
    )
    assert dict(traced.traced) == {
        "demo.server": ("removed:vllm.engine.utils.Launcher",),
        "tests.test_calls.TestF::test_f": ("keyword:vllm.api.build:colour",),
    }
    assert traced.missed == ("tests.test_calls::test_g", "tests.test_server::test_s")
    assert traced.confirmed == (
        "keyword:vllm.api.build:colour",
        "removed:vllm.engine.utils.Launcher",
    )
    assert traced.recall == 0.5 and traced.precision == 1.0
    only_import = ac.trace_failures(found, {"demo.launcher": launcher_error}, {})
    assert only_import.recall == 1.0 and only_import.precision == 0.5
    assert only_import.unconfirmed == ("keyword:vllm.api.build:colour",)
    vanished = ac.trace_failures(
        found, {"demo.launcher": "ModuleNotFoundError: No module named 'vllm.engine'"}, {}
    )
    assert vanished.traced == {"demo.launcher": ("removed:vllm.engine.utils.Launcher",)}
    nothing = ac.trace_failures(found, {}, {})
    assert nothing.recall is None and nothing.precision == 0.0
    assert json.loads(json.dumps(traced.to_json()))["recall"] == 0.5


# -- the migration report's section ------------------------------------------------------


def test_the_migration_report_lists_breaking_review_and_unresolved(tmp_path: Path):
    old = {**PKG, "vllm/api.py": "class Old:\n    pass\n\nclass Hint:\n    pass\n",
           "vllm/stars.py": ""}  # fmt: skip
    plugin = """
        from typing import TYPE_CHECKING
        from vllm.api import Old
        from vllm.stars import *

        if TYPE_CHECKING:
            from vllm.api import Hint
    """
    found = report(tmp_path, old, {**PKG, "vllm/api.py": "", "vllm/stars.py": ""}, plugin)
    text = "\n".join(_coupling_section(found.to_json()))
    assert "1 breaking change(s) for the plugin; 1 to review; 1 not resolvable statically" in text
    assert "| `removed:vllm.api.Old` | vllm.api.Old: missing in 1.1.0" in text
    assert "To review (not breaking" in text and "| `typing:vllm.api.Hint` |" in text
    assert "- `vllm.stars.*`: star import: the names it brings are not followed" in text
