"""The API coupling diff (pure, static): which parts of the core's Python API the plugin
uses, and how a new core changes them for the plugin.

The plugin's own modules (not its tests, docs or examples) are parsed, never imported:
every name it imports from the core, every dotted attribute it reaches through one, every
call (with the keywords and the number of positional arguments it passes), every core
class it subclasses, with the methods it overrides, and its `super()` calls. Each used
symbol is then looked up in the two verified core source trees the bump has (old and new),
by parsing the modules that hold it: module files, top-level definitions, names
re-exported by `from ... import`, class bodies and their core base classes.

A change is breaking for the plugin when the new core:
  - no longer has a symbol the plugin uses (`removed`);
  - no longer takes a keyword the plugin passes to it (`keyword`), takes fewer positional
    arguments than it passes, or requires an argument its call does not give (`required`);
  - changes the signature of a method the plugin overrides: the core calls the override
    with the new one (`signature`);
  - adds an abstract method to a class the plugin subclasses and the plugin does not
    define it (`abstract`).
Each change has an id, `KIND:SYMBOL` (`keyword:...:NAME`), that an approval names.
Names the analysis cannot resolve in the old core (set at run time, say) are counted,
never guessed about.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SKIP_DIRS = {"tests", "test", "testing", "docs", "examples", "benchmarks", "build", "dist"}
MAX_DEPTH = 12  # re-exports and base classes followed at most this deep
BREAKING_KINDS = ("removed", "keyword", "required", "signature", "abstract")


@dataclass(frozen=True)
class Use:
    symbol: str  # dotted, in the core
    how: str  # import | attribute | call | subclass | override
    where: str  # plugin file:line
    keywords: tuple[str, ...] = ()  # call: keyword names passed
    positional: int = 0  # call: positional arguments passed (-1: unknown, *args)
    names: tuple[str, ...] = ()  # override: its parameters; subclass: methods defined


@dataclass(frozen=True)
class Change:
    id: str
    kind: str
    symbol: str
    detail: str
    uses: tuple[str, ...]

    def to_json(self) -> dict[str, str | list[str]]:
        return {
            "id": self.id,
            "kind": self.kind,
            "symbol": self.symbol,
            "detail": self.detail,
            "uses": list(self.uses),
        }


@dataclass(frozen=True, slots=True)
class CouplingReport:
    """The API coupling diff (`coupling`): how many core symbols the plugin uses, those the
    old core does not define statically, and every breaking change for it (by id)."""

    symbols: int
    unresolved: tuple[str, ...]
    changes: tuple[Change, ...]

    def to_json(self) -> dict[str, Any]:
        """The bump report's `api_coupling` part as written: these keys, in this order."""
        return {
            "status": "run",
            "symbols": self.symbols,
            "unresolved": list(self.unresolved),
            "breaking": len(self.changes),
            "changes": [c.to_json() for c in self.changes],
        }


# ---------------------------------------------------------------------------
# The plugin's side


def plugin_files(root: Path) -> list[Path]:
    """The plugin's own modules: every .py under `root` but tests, docs, examples, builds
    and hidden folders."""
    out = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(p in SKIP_DIRS or p.startswith(".") for p in parts[:-1]):
            continue
        if parts[-1] in ("setup.py", "conftest.py") or parts[-1].startswith("test_"):
            continue
        out.append(path)
    return out


class _Uses(ast.NodeVisitor):
    def __init__(self, core: str, where: str) -> None:
        self.core, self.where = core, where
        self.aliases: dict[str, str] = {}
        self.uses: list[Use] = []
        self.bases: list[list[str]] = []  # the core bases of the classes being visited

    def _at(self, node: ast.AST) -> str:
        return f"{self.where}:{getattr(node, 'lineno', 0)}"

    def _ours(self, dotted: str) -> bool:
        return dotted == self.core or dotted.startswith(self.core + ".")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self._ours(alias.name):
                bound = alias.asname or alias.name.split(".")[0]
                self.aliases[bound] = alias.name if alias.asname else alias.name.split(".")[0]
                self.uses.append(Use(alias.name, "import", self._at(node)))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module or not self._ours(node.module):
            return
        for alias in node.names:
            if alias.name == "*":
                continue
            dotted = f"{node.module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = dotted
            self.uses.append(Use(dotted, "import", self._at(node)))

    def dotted(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self.dotted(node)
        if dotted:
            self.uses.append(Use(dotted, "attribute", self._at(node)))
        else:
            self.generic_visit(node)

    def _call_target(self, func: ast.AST) -> list[str]:
        """The core symbols a call reaches: a dotted name, or `super().m` in a subclass."""
        dotted = self.dotted(func)
        if dotted:
            return [dotted]
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
            and self.bases
        ):
            return [f"{base}.{func.attr}" for base in self.bases[-1][:1]]
        return []

    def visit_Call(self, node: ast.Call) -> None:
        positional = -1 if any(isinstance(a, ast.Starred) for a in node.args) else len(node.args)
        keywords = tuple(sorted(k.arg for k in node.keywords if k.arg))
        for symbol in self._call_target(node.func):
            self.uses.append(Use(symbol, "call", self._at(node), keywords, positional))
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = [b for b in (self.dotted(base) for base in node.bases) if b]
        methods = [
            item for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        names = tuple(sorted(m.name for m in methods))
        for base in bases:
            self.uses.append(Use(base, "subclass", self._at(node), names=names))
            for method in methods:
                params = tuple(_params(method, _decorators(method))["names"])
                self.uses.append(
                    Use(f"{base}.{method.name}", "override", self._at(method), names=params)
                )
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.bases.append(bases)
        for item in node.body:
            self.visit(item)
        self.bases.pop()


def plugin_uses(root: Path, core: str = "vllm") -> list[Use]:
    """Every use of the core's API in the plugin's own modules (a module that does not
    parse is skipped: the plugin's own tests say so)."""
    uses: list[Use] = []
    for path in plugin_files(root):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        visitor = _Uses(core, path.relative_to(root).as_posix())
        visitor.visit(tree)
        uses += visitor.uses
    return uses


# ---------------------------------------------------------------------------
# The core's side


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    out = set()
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Name):
            out.add(target.id)
        elif isinstance(target, ast.Attribute):
            out.add(target.attr)
    return out


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef, decorators: set[str]) -> dict[str, Any]:
    """A signature as data: names in order (self/cls left out for methods), which of them
    can be given by keyword, which are required, and *args/**kwargs."""
    a = node.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    defaults = len(a.defaults)
    required = set(positional[: len(positional) - defaults])
    required |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None}
    by_keyword = [p.arg for p in a.args] + [p.arg for p in a.kwonlyargs]
    names = positional + [p.arg for p in a.kwonlyargs]
    skip = positional[:1] if "staticmethod" not in decorators and positional else []
    if skip and skip[0] in ("self", "cls"):
        positional, names = positional[1:], names[1:]
        by_keyword = [n for n in by_keyword if n != skip[0]]
        required.discard(skip[0])
    return {
        "names": names,
        "positional": positional,
        "by_keyword": by_keyword,
        "required": sorted(required),
        "varargs": a.vararg is not None,
        "varkw": a.kwarg is not None,
    }


@dataclass(frozen=True)
class Found:
    kind: str  # module | class | function | value
    where: str  # file:line in the core tree
    node: Any = None
    module: str = ""  # the dotted module the node is defined in


@dataclass
class CoreTree:
    """A core source tree, its modules parsed on demand."""

    root: Path
    modules: dict[str, ast.Module | None] = field(default_factory=dict)

    def _file(self, dotted: str) -> Path | None:
        base = self.root.joinpath(*dotted.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def module(self, dotted: str) -> ast.Module | None:
        if dotted not in self.modules:
            path = self._file(dotted)
            try:
                self.modules[dotted] = ast.parse(path.read_text(encoding="utf-8")) if path else None
            except (SyntaxError, UnicodeDecodeError, ValueError):
                self.modules[dotted] = None
        return self.modules[dotted]

    def _where(self, dotted: str, node: ast.AST | None = None) -> str:
        path = self._file(dotted)
        rel = path.relative_to(self.root).as_posix() if path else dotted
        return f"{rel}:{getattr(node, 'lineno', 1)}"

    def resolve(self, symbol: str, depth: int = 0) -> Found | None:
        """Where `symbol` is defined in this tree, or None."""
        if depth > MAX_DEPTH:
            return None
        parts = symbol.split(".")
        for cut in range(len(parts), 0, -1):
            name = ".".join(parts[:cut])
            if self.module(name) is not None:
                found = Found("module", self._where(name), self.module(name), name)
                for attr in parts[cut:]:
                    found = self._member(found, attr, depth)
                    if found is None:
                        return None
                return found
        return None

    def _member(self, owner: Found, name: str, depth: int) -> Found | None:
        if owner.kind == "module":
            submodule = f"{owner.module}.{name}"
            if self.module(submodule) is not None:
                return Found("module", self._where(submodule), self.module(submodule), submodule)
            return self._in_body(owner.node.body, owner.module, name, depth)
        if owner.kind == "value" and isinstance(getattr(owner.node, "value", None), ast.Call):
            made_by = self._name_in(owner.module, owner.node.value.func)  # an instance:
            cls = self.resolve(made_by, depth + 1) if made_by else None  # its class's member
            return self._member(cls, name, depth + 1) if cls and cls.kind == "class" else None
        if owner.kind == "class":
            own = self._in_body(owner.node.body, owner.module, name, depth, in_class=True)
            if own is not None:
                return own
            for base in self.bases(owner, depth):
                found = self._member(base, name, depth + 1)
                if found is not None:
                    return found
        return None

    def bases(self, cls: Found, depth: int) -> list[Found]:
        """The core classes `cls` derives from (those this tree can resolve)."""
        out = []
        for base in cls.node.bases:
            dotted = self._name_in(cls.module, base)
            found = self.resolve(dotted, depth + 1) if dotted else None
            if found is not None and found.kind == "class":
                out.append(found)
        return out

    def _name_in(self, module: str, node: ast.AST) -> str | None:
        """The dotted name an expression in `module` stands for (its imports followed)."""
        if isinstance(node, ast.Attribute):
            base = self._name_in(module, node.value)
            return f"{base}.{node.attr}" if base else None
        if not isinstance(node, ast.Name):
            return None
        tree = self.module(module)
        for stmt in tree.body if tree else []:
            if isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if (alias.asname or alias.name) == node.id:
                        return f"{self.absolute(module, stmt)}.{alias.name}"
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if (alias.asname or alias.name.split(".")[0]) == node.id:
                        return alias.name if alias.asname else node.id
            elif isinstance(stmt, ast.ClassDef | ast.FunctionDef) and stmt.name == node.id:
                return f"{module}.{node.id}"
        return f"{module}.{node.id}"

    def absolute(self, module: str, stmt: ast.ImportFrom) -> str:
        """The absolute module a `from ... import` in `module` names."""
        if not stmt.level:
            return stmt.module or ""
        path = self._file(module)
        package = (
            module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]
        )
        parts = package.split(".")
        parts = parts[: len(parts) - (stmt.level - 1)]
        return ".".join([*parts, *([stmt.module] if stmt.module else [])])

    def abstract(self, cls: Found, depth: int = 0) -> set[str]:
        """The abstract methods of a class, its core bases' included (less those it defines)."""
        if depth > MAX_DEPTH:
            return set()
        out: set[str] = set()
        for base in self.bases(cls, depth):
            out |= self.abstract(base, depth + 1)
        for stmt in cls.node.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                if "abstractmethod" in _decorators(stmt):
                    out.add(stmt.name)
                else:
                    out.discard(stmt.name)
        return out

    def _in_body(
        self, body: list[ast.stmt], module: str, name: str, depth: int, *, in_class: bool = False
    ) -> Found | None:
        found: Found | None = None
        for stmt in body:  # the last binding wins, as at run time
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                found = Found("class", self._where(module, stmt), stmt, module)
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
                found = Found("function", self._where(module, stmt), stmt, module)
            elif isinstance(stmt, ast.Assign | ast.AnnAssign) and name in _targets(stmt):
                found = Found("value", self._where(module, stmt), stmt, module)
            elif not in_class and isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name:
                        origin = self.resolve(
                            f"{self.absolute(module, stmt)}.{alias.name}", depth + 1
                        )
                        found = origin or found
            elif not in_class and isinstance(stmt, ast.If | ast.Try):  # TYPE_CHECKING, fallbacks
                inner = [s for block in _blocks(stmt) for s in block]
                found = self._in_body(inner, module, name, depth) or found
        return found


def _blocks(stmt: ast.If | ast.Try) -> list[list[ast.stmt]]:
    if isinstance(stmt, ast.If):
        return [stmt.body, stmt.orelse]
    return [stmt.body, *(h.body for h in stmt.handlers), stmt.orelse]


def _targets(stmt: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


# ---------------------------------------------------------------------------
# The diff


def signature(tree: CoreTree, found: Found) -> dict[str, Any] | None:
    """What a call of `found` accepts: a function's parameters, a class's __init__."""
    if found.kind == "class":
        init = tree._member(found, "__init__", 0)
        return signature(tree, init) if init is not None and init.kind == "function" else None
    if found.kind == "function":
        return _params(found.node, _decorators(found.node))
    return None


def _shown(sig: dict[str, Any]) -> str:
    names = (
        list(sig["names"])
        + (["*args"] if sig["varargs"] else [])
        + (["**kwargs"] if sig["varkw"] else [])
    )
    return "(" + ", ".join(names) + ")"


def _accepts(sig: dict[str, Any], keyword: str) -> bool:
    return keyword in sig["by_keyword"] or sig["varkw"]


def _call_changes(
    symbol: str, calls: list[Use], before: dict[str, Any], after: dict[str, Any]
) -> list[Change]:
    out: dict[str, Change] = {}
    for use in calls:
        where = (use.where,)
        for keyword in use.keywords:
            if _accepts(before, keyword) and not _accepts(after, keyword):
                cid = f"keyword:{symbol}:{keyword}"
                detail = (
                    f"{symbol} no longer takes the keyword {keyword!r} the plugin passes: "
                    f"{_shown(before)} is now {_shown(after)}"
                )
                _add(out, Change(cid, "keyword", symbol, detail, where))
        if use.positional < 0:
            continue
        given = set(after["positional"][: use.positional]) | set(use.keywords)
        was = set(before["positional"][: use.positional]) | set(use.keywords)
        for name in after["required"]:
            if name not in given and (name not in before["required"] or name in was):
                cid = f"required:{symbol}:{name}"
                detail = (
                    f"{symbol} now requires {name!r}, which the plugin's call does not "
                    f"give: {_shown(before)} is now {_shown(after)}"
                )
                _add(out, Change(cid, "required", symbol, detail, where))
        most = len(after["positional"])
        if (
            not after["varargs"]
            and use.positional > most >= 0
            and (before["varargs"] or use.positional <= len(before["positional"]))
        ):
            cid = f"required:{symbol}:positional"
            detail = (
                f"{symbol} now takes at most {most} positional argument(s); the plugin "
                f"passes {use.positional}: {_shown(before)} is now {_shown(after)}"
            )
            _add(out, Change(cid, "required", symbol, detail, where))
    return list(out.values())


def _add(out: dict[str, Change], change: Change) -> None:
    """`change` into `out` by its id, its uses merged with those already there."""
    have = out.get(change.id)
    if have is not None:
        uses = tuple(sorted(set(have.uses) | set(change.uses)))
        change = Change(have.id, have.kind, have.symbol, have.detail, uses)
    out[change.id] = change


def _override_change(
    symbol: str, uses: list[Use], before: dict[str, Any], after: dict[str, Any]
) -> Change | None:
    """A method the plugin overrides whose signature the core changed, where the plugin's
    override is not already the new one."""
    if (before["names"], before["varargs"], before["varkw"]) == (
        after["names"],
        after["varargs"],
        after["varkw"],
    ):
        return None
    stale = [u for u in uses if list(u.names) != list(after["names"])]
    if not stale:
        return None  # the plugin follows the new signature already
    ours = "(" + ", ".join(stale[0].names) + ")"
    detail = (
        f"{symbol}{_shown(before)} is now {symbol}{_shown(after)}: the core calls the "
        f"plugin's override {ours} with the new signature"
    )
    return Change(
        f"signature:{symbol}", "signature", symbol, detail, tuple(sorted({u.where for u in stale}))
    )


def diff(uses: list[Use], old: CoreTree, new: CoreTree) -> CouplingReport:
    """The report: symbols used, those the old core does not define statically
    (`unresolved`), and every breaking change for the plugin (sorted by id)."""
    by_symbol: dict[str, list[Use]] = {}
    for use in uses:
        by_symbol.setdefault(use.symbol, []).append(use)
    changes: list[Change] = []
    unresolved: list[str] = []
    for symbol, group in sorted(by_symbol.items()):
        before = old.resolve(symbol)
        if before is None:
            if any(u.how != "override" for u in group):  # a plugin's own method is no use
                unresolved.append(symbol)
            continue
        after = new.resolve(symbol)
        wheres = tuple(sorted({u.where for u in group}))
        if after is None:
            detail = f"{symbol} ({before.where} in the old core) is not in the new core"
            changes.append(Change(f"removed:{symbol}", "removed", symbol, detail, wheres))
            continue
        old_sig, new_sig = signature(old, before), signature(new, after)
        if old_sig and new_sig:
            calls = [u for u in group if u.how == "call"]
            target = f"{symbol}.__init__" if after.kind == "class" else symbol
            changes += _call_changes(target, calls, old_sig, new_sig)
            overrides = [u for u in group if u.how == "override"]
            if overrides and after.kind == "function":
                change = _override_change(symbol, overrides, old_sig, new_sig)
                changes += [change] if change else []
        if before.kind == "class" and after.kind == "class":
            changes += _abstract_changes(symbol, group, old, new, before, after)
    changes.sort(key=lambda c: c.id)
    return CouplingReport(len(by_symbol), tuple(unresolved), tuple(changes))


def _abstract_changes(
    symbol: str, group: list[Use], old: CoreTree, new: CoreTree, before: Found, after: Found
) -> list[Change]:
    added = new.abstract(after) - old.abstract(before)
    out = []
    for use in (u for u in group if u.how == "subclass"):
        for name in sorted(added - set(use.names)):
            cid = f"abstract:{symbol}.{name}"
            detail = (
                f"{symbol} has a new abstract method {name!r} that the plugin's subclass "
                "does not define: the class can no longer be instantiated"
            )
            out.append(Change(cid, "abstract", symbol, detail, (use.where,)))
    return out


def coupling(
    plugin_root: Path, old_tree: Path, new_tree: Path, core: str = "vllm"
) -> CouplingReport:
    """The bump's API coupling diff: the plugin's uses against the old and the new core."""
    return diff(plugin_uses(plugin_root, core), CoreTree(old_tree), CoreTree(new_tree))
