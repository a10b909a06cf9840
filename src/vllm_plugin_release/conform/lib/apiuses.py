"""The plugin's side of the API coupling diff: its own modules parsed (never imported)
into every use of the core's API, typed with the old core's help, and its module graph."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vllm_plugin_release.conform.lib.apicore import (
    UNCLEAR,
    CoreTree,
    Oracle,
    Signature,
    Typ,
    absolute_module,
    annotation_type,
    decorator_names,
    dotted,
    function_facts,
    instance_attrs,
    is_type_checking,
    union_members,
)

SKIP_DIRS = {"tests", "test", "testing", "docs", "examples", "benchmarks", "build", "dist"}
TEST_DIRS = ("tests", "test", "testing")
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass(frozen=True)
class Use:
    symbol: str  # dotted, in the core (for a chain: the root class, then the attributes)
    how: str  # import | module | attribute | call | subclass | override | read | write
    where: str  # plugin file:line
    keywords: tuple[str, ...] = ()  # call: keyword names passed
    positional: int = 0  # call: positional arguments passed (-1: unknown, *args)
    names: tuple[str, ...] = ()  # override: its parameters; subclass: methods defined
    # "typing" (under if TYPE_CHECKING), "try" (an import whose except takes ImportError),
    # "guard" (read through getattr/hasattr, or under `if hasattr(...)`)
    context: str = ""
    chain: tuple[str, ...] = ()  # an object's attributes: the class is `root`
    root: str = ""
    splat: bool = False  # call: passes **mapping (its keywords are not known)
    sig: Signature | None = None  # override: the plugin's own signature

    def path(self) -> str:
        return ".".join([self.root, *self.chain]) if self.chain else self.symbol


@dataclass(frozen=True)
class Unresolved:
    """A core name the plugin uses that cannot be told statically, and why."""

    symbol: str
    reason: str
    uses: tuple[str, ...]

    def to_json(self) -> dict[str, str | list[str]]:
        return {**asdict(self), "uses": list(self.uses)}


@dataclass(frozen=True)
class PluginGraph:
    """The plugin's modules by file, the plugin modules each imports, and those each of its
    test modules imports: how `trace_failures` reaches a change from a failure."""

    modules: Mapping[str, str] = field(default_factory=dict)  # file -> module
    imports: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tests: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def closure(self, modules: Iterable[str]) -> set[str]:
        """`modules` and every plugin module they import, transitively (and their
        packages: importing a.b runs a/__init__.py first)."""
        todo, seen = list(modules), set()
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            parts = m.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))]
            todo += self.imports.get(m, ())
        return seen


def plugin_files(root: Path) -> tuple[list[Path], list[Path]]:
    """The plugin's own modules (every .py under `root` but tests, docs, examples and builds)
    and its test modules (under a tests folder, or test_*.py); hidden folders left out."""
    own, tests = [], []
    for path in sorted(root.rglob("*.py")):
        folders, name = path.relative_to(root).parts[:-1], path.name
        if any(p.startswith(".") for p in folders):
            continue
        if any(p in TEST_DIRS for p in folders) or name.startswith("test_"):
            tests.append(path)  # TEST_DIRS are among SKIP_DIRS: never one of its own
        elif not any(p in SKIP_DIRS for p in folders) and name not in ("setup.py", "conftest.py"):
            own.append(path)
    return own, tests


def module_name(root: Path, path: Path) -> str:
    """The dotted module a file is: its folders up to the first without __init__.py."""
    parts = [path.stem] if path.name != "__init__.py" else []
    folder = path.parent
    while folder != root and (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts) or path.parent.name


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
        return None


@dataclass
class _Class:
    """A class of the plugin, as the second pass types with it."""

    name: str
    bases: list[str]
    own: set[str]
    types: dict[str, Typ]
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    dataclass: bool


class _Plugin:
    """The plugin's modules read once: names each binds, its classes and functions."""

    def __init__(self, root: Path, core: str) -> None:
        self.root, self.core = root, core
        self.files: list[tuple[str, str, ast.Module, bool]] = []  # rel, module, tree, package
        own, self.tests = plugin_files(root)
        for path in own:
            tree = _parse(path)
            if tree is not None:
                rel = path.relative_to(root).as_posix()
                name = module_name(root, path)
                self.files.append((rel, name, tree, path.name == "__init__.py"))
        self.tops = {m.split(".")[0] for _, m, _, _ in self.files}
        self.aliases: dict[str, dict[str, str]] = {}
        self.classes: dict[str, _Class] = {}
        self.functions: dict[str, str | None] = {}  # plugin function -> its return class
        self.imports: dict[str, set[str]] = {}
        for _, module, tree, package in self.files:
            self.aliases[module] = self._aliases(tree, module, package)
        for _, module, tree, _ in self.files:
            self._index(tree.body, module, module)

    def is_core(self, name: str) -> bool:
        return name == self.core or name.startswith(self.core + ".")

    def is_ours(self, name: str) -> bool:
        return name.split(".")[0] in self.tops

    def _aliases(self, tree: ast.Module, module: str, package: bool) -> dict[str, str]:
        out: dict[str, str] = {}
        mine: set[str] = set()
        top_level = set(map(id, tree.body))
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        nodes.sort(key=lambda n: (id(n) in top_level, n.lineno))
        for node in nodes:  # a module-level binding wins over one in a function
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    out[alias.asname or top] = alias.name if alias.asname else top
                    mine.add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                base = absolute_module(module, package, node.module, node.level)
                for alias in node.names:
                    if alias.name != "*":
                        out[alias.asname or alias.name] = f"{base}.{alias.name}"
                        mine.add(f"{base}.{alias.name}")  # perhaps a submodule
                mine.add(base)
        for stmt in tree.body:
            if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                out[stmt.name] = f"{module}.{stmt.name}"
        self.imports[module] = {m for m in mine if self.is_ours(m)}
        return out

    def resolve_name(self, module: str, name: str | None) -> str | None:
        """The absolute dotted name `name` (as written in `module`) stands for."""
        if not name:
            return None
        head, _, rest = name.partition(".")
        base = self.aliases.get(module, {}).get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def _index(self, body: list[ast.stmt], module: str, prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                returns = self.resolve_name(module, annotation_type(stmt.returns))
                self.functions[f"{prefix}.{stmt.name}"] = returns
            elif isinstance(stmt, ast.ClassDef):
                self._class(stmt, module, f"{prefix}.{stmt.name}")

    def _class(self, node: ast.ClassDef, module: str, name: str) -> None:
        bases = []
        for b in node.bases:
            written = dotted(b.value if isinstance(b, ast.Subscript) else b)
            resolved = self.resolve_name(module, written)
            if resolved:
                bases.append(resolved)
        own: set[str] = set()
        types: dict[str, Typ] = {}
        methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                own.add(stmt.name)
                methods[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                own.add(stmt.name)
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        own.add(t.id)
                        if isinstance(stmt, ast.AnnAssign):
                            typed = self.resolve_name(module, annotation_type(stmt.annotation))
                            if typed:
                                types[t.id] = (typed, ())
        attrs: dict[str, Any] = {}
        for fn in methods.values():
            instance_attrs(fn, attrs)
        for attr, info in attrs.items():
            own.add(attr)
            typed = self.resolve_name(module, info["type"])
            if typed:
                types.setdefault(attr, (typed, ()))
            elif info["call"]:
                called = self.resolve_name(module, info["call"])
                if called and (self.is_core(called) or called in self.classes):
                    types.setdefault(attr, (called, ()))
        dataclass = any(d.rpartition(".")[2] == "dataclass" for d in decorator_names(node))
        self.classes[name] = _Class(name, bases, own, types, methods, dataclass)
        self._index(node.body, module, name)

    def chain(self, name: str) -> list[_Class]:
        """A plugin class and its plugin base classes, nearest first."""
        out: list[_Class] = []
        todo = [name]
        while todo and len(out) < 32:
            cls = self.classes.get(todo.pop(0))
            if cls is not None and cls not in out:
                out.append(cls)
                todo += [b for b in cls.bases if b in self.classes]
        return out

    def core_bases(self, name: str) -> list[str]:
        """The core classes a plugin class derives from, directly or through its own."""
        out: list[str] = []
        for cls in self.chain(name):
            out += [b for b in cls.bases if self.is_core(b) and b not in out]
        return out

    def owns(self, name: str, attr: str) -> bool:
        return any(attr in cls.own for cls in self.chain(name))

    def constructs(self, name: str) -> bool:
        """Does the plugin's own class (or a plugin base) make its instances' __init__?"""
        return any("__init__" in c.own or c.dataclass for c in self.chain(name))

    def graph(self) -> PluginGraph:
        modules = {rel: module for rel, module, _, _ in self.files}
        imports = {m: tuple(sorted(self._plugin_modules(i) - {m})) for m, i in self.imports.items()}
        tests: dict[str, tuple[str, ...]] = {}
        for path in self.tests:
            tree = _parse(path)
            if tree is None:
                continue
            rel = path.relative_to(self.root).with_suffix("").as_posix()
            found: set[str] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found |= {a.name for a in node.names if self.is_ours(a.name)}
                elif (
                    isinstance(node, ast.ImportFrom)
                    and node.module
                    and not node.level
                    and self.is_ours(node.module)
                ):
                    found.add(node.module)
                    found |= {f"{node.module}.{a.name}" for a in node.names}
            tests[rel.replace("/", ".")] = tuple(sorted(self._plugin_modules(found)))
        return PluginGraph(modules, imports, tests)

    def _plugin_modules(self, names: Iterable[str]) -> set[str]:
        """The plugin modules among dotted names (a name imported from a module: that module)."""
        known = {m for _, m, _, _ in self.files}
        out = set()
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                out.add(name)
        return out


_UNTYPED = ("", ("<untyped>",))  # a parameter of an override the core calls, with no type


class _Uses(ast.NodeVisitor):
    def __init__(self, plugin: _Plugin, module: str, where: str, oracle: Oracle) -> None:
        self.plugin, self.module, self.where, self.oracle = plugin, module, where, oracle
        self.uses: list[Use] = []
        self.unresolved: list[Unresolved] = []
        self.scopes: list[dict[str, Typ | None]] = [{}]
        self.untyped: dict[str, tuple[str, str]] = {}  # parameter -> its function, why
        self.classes: list[str] = []  # the plugin classes being visited, innermost last
        self.frames: list[str] = []  # "class" or "function", innermost last
        self.context: list[str] = []
        self.guards: list[set[tuple[str, str]]] = []  # `if hasattr(obj, name):` in force

    def _at(self, node: ast.AST) -> str:
        return f"{self.where}:{getattr(node, 'lineno', 0)}"

    def _ours(self, name: str | None) -> bool:
        return bool(name) and self.plugin.is_core(name)  # type: ignore[arg-type]

    def use(self, node: ast.AST, symbol: str, how: str, **more: Any) -> None:
        self.uses.append(Use(symbol, how, self._at(node), **more))

    def guarded(self, obj: ast.AST, attr: str) -> str:
        """ "guard" when an enclosing `if hasattr(obj, attr):` checks this very attribute."""
        key = (ast.dump(obj), attr)
        return "guard" if any(key in g for g in self.guards) else ""

    # -- imports --------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self._ours(alias.name):
                self.use(node, alias.name, "import", context=(self.context or [""])[-1])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module or not self._ours(node.module):
            return
        context = (self.context or [""])[-1]
        self.use(node, node.module, "module", context=context)
        for alias in node.names:
            if alias.name == "*":
                self.unresolved.append(Unresolved(
                    f"{node.module}.*", "star import: the names it brings are not followed",
                    (self._at(node),),
                ))  # fmt: skip
                continue
            self.use(node, f"{node.module}.{alias.name}", "import", context=context)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        checking = is_type_checking(node.test)
        narrowed = self._narrowed(node.test)
        if checking:
            self.context.append("typing")
        self.scopes.append(narrowed)
        self.guards.append(_hasattr_guards(node.test))
        for stmt in node.body:
            self.visit(stmt)
        self.guards.pop()
        self.scopes.pop()
        if checking:
            self.context.pop()
        for stmt in node.orelse:
            self.visit(stmt)

    def visit_Try(self, node: ast.Try) -> None:
        guarded = any(_catches_import_error(h.type) for h in node.handlers)
        if guarded:
            self.context.append("try")
        for stmt in node.body:
            self.visit(stmt)
        if guarded:
            self.context.pop()
        for stmt in [*[s for h in node.handlers for s in h.body], *node.orelse, *node.finalbody]:
            self.visit(stmt)

    visit_TryStar = visit_Try

    # -- types ----------------------------------------------------------------------

    def name_of(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for through the module's imports."""
        written = dotted(node)
        if written is None:
            return None
        head = written.split(".")[0]
        if any(head in scope for scope in self.scopes[1:]):
            return None  # a local variable shadows the import
        return self.plugin.resolve_name(self.module, written)

    def _annotated(self, annotation: ast.AST | None) -> Typ | None:
        name = self.plugin.resolve_name(self.module, annotation_type(annotation))
        if name and (self._ours(name) or name in self.plugin.classes):
            return (name, ())
        return None

    def lookup(self, name: str) -> Typ | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def typ(self, node: ast.AST) -> Typ | None:
        """The class of the object an expression gives, when the plugin or the core says."""
        if isinstance(node, ast.Name):
            found = self.lookup(node.id)
            if found is not None or any(node.id in s for s in self.scopes[1:]):
                return found
            name = self.name_of(node)
            if name and self._ours(name):
                return self._module_value(name)
            return None
        if isinstance(node, ast.Attribute):
            name = self.name_of(node)
            if name and self._ours(name):
                return self._module_value(name)
            owner = self.typ(node.value)
            return self._member_typ(owner, node.attr) if owner else None
        if isinstance(node, ast.Call):
            return self._call_typ(node)
        if isinstance(node, ast.NamedExpr):
            return self.typ(node.value)
        return None

    def _module_value(self, name: str) -> Typ | None:
        """A module-level object of the core (`current_platform`): its class."""
        found = self.oracle.tree.resolve(name) if self.oracle.tree else None
        if found is None or found.kind in ("class", "module", "function"):
            return None  # a class itself, not an instance of one
        cls = self.oracle.klass((name, ()))
        return (cls.name, ()) if cls is not None else None

    def _member_typ(self, owner: Typ, attr: str) -> Typ | None:
        root, chain = owner
        if owner == _UNTYPED:
            return None
        if root in self.plugin.classes and not chain:
            for cls in self.plugin.chain(root):
                if attr in cls.own:
                    return cls.types.get(attr)
            bases = self.plugin.core_bases(root)
            if not bases:
                return None
            root, chain = bases[0], ()
        if not self._ours(root):
            return None
        nxt = (root, (*chain, attr))
        return nxt if self.oracle.klass(nxt) is not None else None

    def _call_typ(self, node: ast.Call) -> Typ | None:
        func = node.func
        name = self.name_of(func)
        if name and self._ours(name):
            found = self.oracle.tree.resolve(name) if self.oracle.tree else None
            if found is not None and found.kind == "class":
                return (name, ())
            return self.oracle.result(found)
        if name in self.plugin.classes:
            return (name, ())
        if name in self.plugin.functions:
            returns = self.plugin.functions[name]
            return (returns, ()) if returns else None
        if isinstance(func, ast.Attribute):
            target = self._super_target(func) or self._typed_target(func)
            if target is not None:
                return self.oracle.result(self.oracle.member(*target))
        return None

    def _super_target(self, func: ast.Attribute) -> tuple[Typ, str] | None:
        if not (isinstance(func.value, ast.Call) and dotted(func.value.func) == "super"):
            return None
        if not self.classes:
            return None
        base = self._core_base_for(self.classes[-1], func.attr)
        return ((base, ()), func.attr) if base else None

    def _typed_target(self, func: ast.Attribute) -> tuple[Typ, str] | None:
        owner = self.typ(func.value)
        if owner is None or owner == _UNTYPED:
            return None
        core = self._core_owner(owner, func.attr)
        return (core, func.attr) if core is not None else None

    def _core_owner(self, owner: Typ, attr: str) -> Typ | None:
        """The object of the core whose `attr` an object of `owner` reads: itself, or the
        core base of a plugin class (None: the plugin's own attribute, or not the core's)."""
        root, chain = owner
        if root in self.plugin.classes and not chain:
            if self.plugin.owns(root, attr):
                return None
            bases = self.plugin.core_bases(root)
            return (bases[0], ()) if bases else None
        return owner if self._ours(root) else None

    def _core_base_for(self, cls: str, method: str) -> str | None:
        """The core class a `super().method` of plugin class `cls` reaches (None: one of
        the plugin's own classes defines it first)."""
        for plugin_cls in self.plugin.chain(cls)[1:]:
            if method in plugin_cls.own:
                return None
        bases = self.plugin.core_bases(cls)
        return bases[0] if bases else None

    def _names_core(self, annotation: ast.AST) -> bool:
        """Is an annotation a union one of whose members is a class of the core?"""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except (SyntaxError, ValueError):
                return False
        members = union_members(annotation)
        return len(members) > 1 and any(self._ours(self.name_of(m)) for m in members)

    def _narrowed(self, test: ast.AST) -> dict[str, Typ | None]:
        """The names an `isinstance` test (or an `and` of them) narrows to a class."""
        out: dict[str, Typ | None] = {}
        for call in _tests(test, "isinstance"):
            name = self.name_of(call.args[1])
            known = name and (self._ours(name) or name in self.plugin.classes)
            if isinstance(call.args[0], ast.Name) and known:
                out[call.args[0].id] = (name, ())
        return out

    # -- definitions ----------------------------------------------------------------

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        name = f"{self.module}.{node.name}" if not self.classes else None
        name = name or f"{self.classes[-1]}.{node.name}"
        cls = self.plugin.classes.get(name)
        direct = [b for b in (cls.bases if cls else []) if self._ours(b)]
        methods = [
            item for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        defined = sorted({m for c in self.plugin.chain(name) for m in c.methods})
        for base in direct or self.plugin.core_bases(name)[:1]:
            self.use(node, base, "subclass", names=tuple(defined))
        for base in self.plugin.core_bases(name):
            for method in methods:
                facts = function_facts(method, True)
                sig = Signature.of(facts)
                self.use(method, f"{base}.{method.name}", "override", names=sig.names, sig=sig)
        for decorator in node.decorator_list:
            self.visit(decorator)
        for base in node.bases:
            self.visit(base)
        self.classes.append(name)
        self.frames.append("class")
        self.scopes.append({})
        for item in node.body:
            self.visit(item)
        self.scopes.pop()
        self.frames.pop()
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
            self.visit(default)
        scope: dict[str, Typ | None] = {}
        params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        cls = self.classes[-1] if self.frames and self.frames[-1] == "class" else None
        static = "staticmethod" in {d.rpartition(".")[2] for d in decorator_names(node)}
        base = self._core_base_for(cls, node.name) if cls else None
        base_method = self.oracle.member((base, ()), node.name) if base else None
        if base_method is not None and base_method.kind != "function":
            base_method = None
        first = [*node.args.posonlyargs, *node.args.args][:1]
        for p in params:
            if cls and not static and p in first:
                scope[p.arg] = (cls, ())
                continue
            typed = self._annotated(p.annotation)
            if typed is None and p.annotation is not None and self._names_core(p.annotation):
                scope[p.arg] = _UNTYPED  # `SamplingParams | PoolingParams`: which one?
                own = f"{cls or self.module}.{node.name}"
                self.untyped[p.arg] = (own, "annotated with no one class in the plugin's own")
                continue
            if typed is None and p.annotation is None and base_method and self.oracle.tree:
                found, written = self.oracle.tree.param_type(base_method, p.arg)
                typed = (found.name, ()) if found is not None else None
                if typed is None and written in (None, UNCLEAR):
                    scope[p.arg] = _UNTYPED
                    how = "untyped" if written is None else "annotated with no one class"
                    self.untyped[p.arg] = (f"{base}.{node.name}", f"{how} in the core's")
                    continue
            scope[p.arg] = typed
        self.scopes.append(scope)
        self.frames.append("function")
        for stmt in node.body:
            self.visit(stmt)
        self.frames.pop()
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.scopes.append({a.arg: None for a in node.args.args})
        self.visit(node.body)
        self.scopes.pop()

    # -- statements that type names ---------------------------------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        typ = self.typ(node.value)
        for target in node.targets:
            self._store(target, typ)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        typ = self._annotated(node.annotation) or (self.typ(node.value) if node.value else None)
        self._store(node.target, typ)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self.visit(node.target)  # read first: a missing attribute fails there

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._store(node.target, None)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._store(item.optional_vars, None)
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncWith = visit_With

    def visit_Assert(self, node: ast.Assert) -> None:
        self.visit(node.test)
        self.scopes[-1].update(self._narrowed(node.test))

    def _store(self, target: ast.AST, typ: Typ | None) -> None:
        if isinstance(target, ast.Name):
            self.scopes[-1][target.id] = typ
        elif isinstance(target, ast.Tuple | ast.List):
            for elt in target.elts:
                self._store(elt, None)
        elif isinstance(target, ast.Starred):
            self._store(target.value, None)
        elif isinstance(target, ast.Attribute):
            self._attribute(target, "write")
        else:
            self.visit(target)

    # -- uses -------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._attribute(node, "read")

    def _attribute(self, node: ast.Attribute, how: str) -> None:
        name = self.name_of(node)
        if name and self._ours(name):
            self.use(node, name, "write" if how == "write" else "attribute")
            return
        self._typed_use(node, node.value, node.attr, how)
        self.visit(node.value)

    def _typed_use(self, node: ast.AST, value: ast.AST, attr: str, how: str) -> None:
        """A read, write or guarded read of `attr` on the object `value` gives."""
        owner = self.typ(value)
        if owner == _UNTYPED:
            assert isinstance(value, ast.Name)
            method, why = self.untyped.get(value.id, ("", ""))
            self.unresolved.append(Unresolved(
                f"{method}({value.id}).{attr}",
                f"untyped parameter: {value.id!r} is {why} {method}",
                (self._at(node),),
            ))  # fmt: skip
            return
        core = self._core_owner(owner, attr) if owner is not None else None
        if core is not None:
            root, chain = core
            path = ".".join([root, *chain, attr])
            context = "guard" if how == "guarded" else self.guarded(value, attr)
            how = "read" if how == "guarded" else how
            self.use(node, path, how, root=root, chain=(*chain, attr), context=context)

    def visit_Call(self, node: ast.Call) -> None:
        positional = -1 if any(isinstance(a, ast.Starred) for a in node.args) else len(node.args)
        keywords = tuple(sorted(k.arg for k in node.keywords if k.arg))
        splat = any(k.arg is None for k in node.keywords)
        more = {"keywords": keywords, "positional": positional, "splat": splat}
        func = node.func
        name = self.name_of(func)
        if name and self._ours(name):
            self.use(node, name, "call", **more)
        elif name in self.plugin.classes and not self.plugin.constructs(name):
            for base in self.plugin.core_bases(name)[:1]:  # the core's constructor
                self.use(node, base, "call", **more)
        elif isinstance(func, ast.Attribute):
            context = self.guarded(func.value, func.attr)
            target = self._super_target(func)
            if target is not None:
                self.use(node, f"{target[0][0]}.{target[1]}", "call", context=context, **more)
            else:
                target = self._typed_target(func)
                if target is not None:
                    (root, chain), attr = target
                    path = ".".join([root, *chain, attr])
                    self.use(node, path, "call", root=root, chain=(*chain, attr),
                             context=context, **more)  # fmt: skip
        builtin = dotted(func)
        if builtin in ("getattr", "hasattr", "setattr") and len(node.args) >= 2:
            self._dynamic(node, builtin)
        self.generic_visit(node)

    def _dynamic(self, node: ast.Call, builtin: str) -> None:
        obj, attr = node.args[0], node.args[1]
        if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
            guarded = builtin == "hasattr" or (builtin == "getattr" and len(node.args) > 2)
            how = "write" if builtin == "setattr" else ("guarded" if guarded else "read")
            name = self.name_of(obj)
            if name and self._ours(name):
                kind = "write" if how == "write" else "attribute"
                context = "guard" if how == "guarded" else ""
                self.use(node, f"{name}.{attr.value}", kind, context=context)
            else:
                self._typed_use(node, obj, attr.value, how)
            return
        owner = self.typ(obj)
        name = self.name_of(obj)
        if (owner and owner != _UNTYPED and self._ours(owner[0])) or (name and self._ours(name)):
            shown = name or ".".join([owner[0], *owner[1]])  # type: ignore[index]
            self.unresolved.append(Unresolved(
                f"{shown}.<{ast.unparse(attr)}>",
                f"dynamic attribute: {builtin}() with a name computed at run time",
                (self._at(node),),
            ))  # fmt: skip


def _tests(test: ast.AST, func: str) -> list[ast.Call]:
    """The two-argument calls of `func` (isinstance, hasattr) an if-test makes, alone or
    and-ed."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [call for value in test.values for call in _tests(value, func)]
    if isinstance(test, ast.Call) and dotted(test.func) == func and len(test.args) == 2:
        return [test]
    return []


def _hasattr_guards(test: ast.AST) -> set[tuple[str, str]]:
    """The (object, attribute) pairs an if-test checks with hasattr."""
    return {
        (ast.dump(call.args[0]), call.args[1].value)
        for call in _tests(test, "hasattr")
        if isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str)
    }


def _catches_import_error(node: ast.AST | None) -> bool:
    if node is None:
        return True
    names = node.elts if isinstance(node, ast.Tuple) else [node]
    return any((dotted(n) or "").rpartition(".")[2] in _IMPORT_ERRORS for n in names)


def plugin_uses(
    root: Path, core: str = "vllm", tree: CoreTree | None = None
) -> tuple[list[Use], list[Unresolved], PluginGraph]:
    """Every use of the core's API in the plugin's own modules (one that does not parse is
    skipped), what cannot be followed, and the module graph; `tree` (the old core) types."""
    plugin = _Plugin(root, core)
    oracle = Oracle(tree)
    uses: list[Use] = []
    unresolved: list[Unresolved] = []
    for rel, module, tree_, _ in plugin.files:
        visitor = _Uses(plugin, module, rel, oracle)
        visitor.visit(tree_)
        uses += visitor.uses
        unresolved += visitor.unresolved
    return uses, unresolved, plugin.graph()
