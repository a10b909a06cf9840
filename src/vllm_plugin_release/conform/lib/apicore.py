"""The core's side of the API coupling diff: a core source tree read statically, each module
reduced once to plain facts, cached by the file's sha256 and validated when read back."""

from __future__ import annotations

import ast
import builtins
import contextlib
import difflib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.errors import BadInput

FORMAT = 1  # of a module's facts: a cache entry of another format is read again
MAX_DEPTH = 12  # re-exports, base classes and annotations followed at most this deep
MAX_SOURCE = 8 * bounded.MiB  # the largest core module read
MAX_FACTS = 32 * bounded.MiB  # the largest cached facts read back
MAX_ANNOTATION = 400  # a string annotation longer than this is not parsed
# Bases that give a class no attribute a plugin reads from it.
PLAIN_BASES = frozenset({"object", "abc.ABC", "Generic", "Protocol", "typing_extensions.Protocol"})
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")
UNCLEAR = "?"  # a parameter annotated with a union or a generic: no one class


# ---------------------------------------------------------------------------
# A module's facts, from its source text (pure)


def dotted(node: ast.AST | None) -> str | None:
    """`a.b.c` for a Name or an Attribute chain of Names, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _is_none(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or (
        isinstance(node, ast.Name) and node.id == "None"
    )


def annotation_type(node: ast.AST | None, depth: int = 0) -> str | None:
    """The one class an annotation names (`X`, `"X"`, `X | None`, `Optional[X]`,
    `ClassVar[X]`, `Annotated[X, ...]`), as written; None for anything else."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if len(node.value) > MAX_ANNOTATION:
            return None
        try:
            node = ast.parse(node.value.strip(), mode="eval").body
        except (SyntaxError, ValueError):
            return None
        return annotation_type(node, depth + 1)
    if isinstance(node, ast.Name | ast.Attribute):
        return dotted(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [p for p in _union(node) if not _is_none(p)]
        return annotation_type(parts[0], depth + 1) if len(parts) == 1 else None
    if isinstance(node, ast.Subscript):
        head = (dotted(node.value) or "").rpartition(".")[2]
        inner = node.slice
        if head in ("Optional", "ClassVar", "Final", "InitVar"):
            return annotation_type(inner, depth + 1)
        if head == "Annotated" and isinstance(inner, ast.Tuple) and inner.elts:
            return annotation_type(inner.elts[0], depth + 1)
        if head == "Union":
            elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            parts = [p for p in elts if not _is_none(p)]
            return annotation_type(parts[0], depth + 1) if len(parts) == 1 else None
    return None


def _union(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_union(node.left), *_union(node.right)]
    return [node]


def union_members(node: ast.AST) -> list[ast.AST]:
    """The members of a union annotation but None (`X | Y`, `Union[X, Y]`, `Optional[...]`);
    any other annotation is its own one member."""
    if isinstance(node, ast.Subscript):
        head = (dotted(node.value) or "").rpartition(".")[2]
        if head in ("Union", "Optional"):
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return [m for e in elts for m in union_members(e)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [m for part in _union(node) for m in union_members(part)]
    return [] if _is_none(node) else [node]


def decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    """The decorators as written (`abc.abstractmethod`, `x.setter`); a call by what it calls."""
    out = []
    for d in node.decorator_list:
        name = dotted(d.func if isinstance(d, ast.Call) else d)
        if name:
            out.append(name)
    return out


def _raises_not_implemented(body: list[ast.stmt]) -> bool:
    """The body raises NotImplementedError unconditionally (a statement of its own)."""
    for stmt in body:
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            if dotted(exc) == "NotImplementedError":
                return True
    return False


def function_facts(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> dict[str, Any]:
    """A function's signature and what the diff asks of its body, as plain data. `params`:
    [name, kind (p positional-only, n either, k keyword-only), has a default, type]."""
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    first_default = len(positional) - len(a.defaults)
    params: list[list[Any]] = []
    for i, p in enumerate(positional):
        kind = "p" if i < len(a.posonlyargs) else "n"
        params.append([p.arg, kind, i >= first_default, _param_type(p.annotation)])
    for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        params.append([p.arg, "k", d is not None, _param_type(p.annotation)])
    decorators = decorator_names(node)
    last = {d.rpartition(".")[2] for d in decorators}
    return {
        "line": node.lineno,
        "end": node.end_lineno or node.lineno,
        "params": params,
        "varargs": a.vararg is not None,
        "varkw": a.kwarg is not None,
        "returns": annotation_type(node.returns),
        "decorators": decorators,
        "method": method,
        "static": "staticmethod" in last,
        "abstract": "abstractmethod" in last,
        "nie": _raises_not_implemented(node.body),
    }


def _param_type(annotation: ast.AST | None) -> str | None:
    """A parameter's class as written; `?` when it is annotated with no single class."""
    if annotation is None:
        return None
    return annotation_type(annotation) or UNCLEAR


def _binding(kind: str, line: int, typing: bool, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"k": kind, "line": line, **more}
    if typing:
        out["tc"] = True
    return out


def absolute_module(module: str, is_package: bool, relative: str | None, level: int) -> str:
    """The absolute module a `from ... import` in `module` names."""
    if not level:
        return relative or ""
    parts = (module if is_package else module.rpartition(".")[0]).split(".")
    parts = parts[: max(0, len(parts) - (level - 1))]
    return ".".join([*parts, *([relative] if relative else [])])


def is_type_checking(test: ast.expr) -> bool:
    return (dotted(test) or "").rpartition(".")[2] == "TYPE_CHECKING"


def _value_binding(value: ast.AST | None, annotation: ast.AST | None, line: int, typing: bool):
    """What a module or class level `NAME = value` (or `NAME: T = value`) binds."""
    if annotation is None and isinstance(value, ast.Name | ast.Attribute):
        return _binding("alias", line, typing, target=dotted(value))
    call = dotted(value.func) if isinstance(value, ast.Call) else None
    return _binding("value", line, typing, type=annotation_type(annotation), call=call)


def _strings(node: ast.AST) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and _IDENT.match(sub.value):
            yield sub.value


class _Reader:
    """Walks a module's statements into its facts."""

    def __init__(self) -> None:
        self.names: dict[str, list[dict[str, Any]]] = {}
        self.classes: dict[str, dict[str, Any]] = {}
        self.stars: list[list[Any]] = []
        self.getattr = False
        self.lazy: set[str] = set()
        self.values: list[ast.AST] = []
        self.dynamic = False

    def facts(self) -> dict[str, Any]:
        return {
            "v": FORMAT,
            "names": self.names,
            "classes": self.classes,
            "stars": self.stars,
            "getattr": self.getattr,
            "lazy": sorted(self.lazy | {n for v in self.values for n in _strings(v)})
            if self.getattr
            else [],
            "dynamic": self.dynamic,
        }

    def body(self, body: list[ast.stmt], out: dict[str, list], qual: str, typing: bool) -> None:
        """Bindings of `body` into `out` (a module's names, or a class's members)."""
        in_class = bool(qual)
        for stmt in body:
            self.statement(stmt, out, qual, typing, in_class)

    def add(self, out: dict[str, list], name: str, entry: dict[str, Any]) -> None:
        out.setdefault(name, []).append(entry)

    def statement(
        self, stmt: ast.stmt, out: dict[str, list], qual: str, typing: bool, in_class: bool
    ) -> None:
        line = stmt.lineno
        if isinstance(stmt, ast.ClassDef):
            inner = f"{qual}.{stmt.name}" if qual else stmt.name
            self.add(out, stmt.name, _binding("class", line, typing, qual=inner))
            self.klass(stmt, inner)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            fn = function_facts(stmt, in_class)
            last = {d.rpartition(".")[2] for d in fn["decorators"]}
            if in_class and last & {"setter", "deleter"}:
                return  # the property's other half: the getter is its binding
            kind = "property" if in_class and last & {"property", "cached_property"} else "function"
            self.add(out, stmt.name, _binding(kind, line, typing, fn=fn))
            if not in_class and stmt.name == "__getattr__":
                self.getattr = True
                self.lazy.update(_strings(stmt))
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            self.assignment(stmt, out, typing, in_class)
        elif isinstance(stmt, ast.AugAssign | ast.For | ast.AsyncFor | ast.With | ast.AsyncWith):
            targets = (
                [stmt.target]
                if isinstance(stmt, ast.AugAssign | ast.For | ast.AsyncFor)
                else [i.optional_vars for i in stmt.items if i.optional_vars is not None]
            )
            for target in targets:
                for name in _names(target):
                    self.add(out, name, _binding("value", line, typing, type=None, call=None))
            if not isinstance(stmt, ast.AugAssign):
                self.body(stmt.body, out, qual, typing)
        elif isinstance(stmt, ast.Import | ast.ImportFrom) and not in_class:
            self.imports(stmt, out, typing)
        elif isinstance(stmt, ast.If):
            checking = is_type_checking(stmt.test)
            self.body(stmt.body, out, qual, typing or checking)
            self.body(stmt.orelse, out, qual, typing and not checking)
        elif isinstance(stmt, ast.Try | getattr(ast, "TryStar", ast.Try)):
            for block in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse):
                self.body(block, out, qual, typing)
            self.body(stmt.finalbody, out, qual, typing)
        elif isinstance(stmt, ast.Expr) and not in_class:
            for sub in ast.walk(stmt):
                if isinstance(sub, ast.Call) and dotted(sub.func) in ("globals", "setattr"):
                    self.dynamic = True

    def assignment(
        self, stmt: ast.Assign | ast.AnnAssign, out: dict[str, list], typing: bool, in_class: bool
    ) -> None:
        """The names an assignment binds (a class's annotated ones are fields)."""
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        annotation = stmt.annotation if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None and not in_class:
            return  # `x: int` at module level binds nothing
        for target in targets:
            for name in _names(target):
                value = stmt.value if isinstance(target, ast.Name) else None
                entry = _value_binding(value, annotation, stmt.lineno, typing)
                if in_class and isinstance(stmt, ast.AnnAssign):
                    default = stmt.value is not None and not _no_default(stmt.value)
                    entry["field"] = [default, annotation_kind(stmt.annotation)]
                self.add(out, name, entry)
        if not in_class and stmt.value is not None:
            self.values.append(stmt.value)  # names a module __getattr__ may serve

    def imports(
        self, stmt: ast.Import | ast.ImportFrom, out: dict[str, list], typing: bool
    ) -> None:
        """The names a module-level import binds; a star import is kept to follow later."""
        line = stmt.lineno
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    self.add(out, alias.asname, _binding("module", line, typing, target=alias.name))
                else:
                    top = alias.name.split(".")[0]
                    self.add(out, top, _binding("module", line, typing, target=top))
            return
        for alias in stmt.names:
            if alias.name == "*":
                self.stars.append([stmt.module or "", stmt.level])
                continue
            entry = _binding(
                "import", line, typing, module=stmt.module or "", level=stmt.level,
                name=alias.name,
            )  # fmt: skip
            self.add(out, alias.asname or alias.name, entry)

    def klass(self, node: ast.ClassDef, qual: str) -> None:
        members: dict[str, list[dict[str, Any]]] = {}
        meta = next((dotted(k.value) for k in node.keywords if k.arg == "metaclass"), None)
        info: dict[str, Any] = {
            "line": node.lineno,
            "bases": [
                dotted(b.value if isinstance(b, ast.Subscript) else b) or "?" for b in node.bases
            ],
            "meta": meta,
            "decorators": decorator_names(node),
            "kw_only": any(
                k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True
                for d in node.decorator_list
                if isinstance(d, ast.Call)
                for k in d.keywords
            ),
            "members": members,
            "attrs": {},
            "getattr": False,
        }
        self.classes[qual] = info
        self.body(node.body, members, qual, False)
        info["getattr"] = bool({"__getattr__", "__getattribute__"} & set(members))
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                instance_attrs(stmt, info["attrs"])


def annotation_kind(node: ast.AST) -> str:
    """`classvar`, `kw_only` (the KW_ONLY marker) or `field` for a class-level annotation."""
    head = dotted(node.value if isinstance(node, ast.Subscript) else node) or ""
    last = head.rpartition(".")[2]
    if last == "ClassVar":
        return "classvar"
    if last == "KW_ONLY":
        return "kw_only"
    return "field"


def _no_default(value: ast.AST) -> bool:
    """`field()` (or `Field()`) without a default: a required dataclass field."""
    if not isinstance(value, ast.Call) or (dotted(value.func) or "").rpartition(".")[2] not in (
        "field",
        "Field",
    ):
        return False
    names = {k.arg for k in value.keywords}
    return not (names & {"default", "default_factory"}) and not value.args


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body, into its compound statements but not into a nested
    function or class (whose `self` is another)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from _statements(inner)
        for part in [*getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])]:
            yield from _statements(part.body)


def _flat(target: ast.AST) -> list[ast.AST]:
    if isinstance(target, ast.Tuple | ast.List):
        return [t for elt in target.elts for t in _flat(elt)]
    if isinstance(target, ast.Starred):
        return _flat(target.value)
    return [target]


def _names(target: ast.AST) -> list[str]:
    return [t.id for t in _flat(target) if isinstance(t, ast.Name)]


def _assigned(stmt: ast.stmt, me: str) -> list[tuple[ast.AST, ast.AST | None, ast.AST | None]]:
    """(target, value, annotation) of what a statement assigns."""
    if isinstance(stmt, ast.Assign):
        single = len(stmt.targets) == 1 and not isinstance(stmt.targets[0], ast.Tuple | ast.List)
        value = stmt.value if single else None
        return [(t, value, None) for target in stmt.targets for t in _flat(target)]
    if isinstance(stmt, ast.AnnAssign):
        return [(stmt.target, stmt.value, stmt.annotation)]
    if isinstance(stmt, ast.AugAssign):
        return [(stmt.target, None, None)]
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if (
        isinstance(call, ast.Call)
        and dotted(call.func) == "setattr"
        and len(call.args) == 3
        and dotted(call.args[0]) == me
        and isinstance(call.args[1], ast.Constant)
        and isinstance(call.args[1].value, str)
    ):
        target = ast.Attribute(value=ast.Name(id=me), attr=call.args[1].value)
        return [(ast.copy_location(target, call), call.args[2], None)]
    return []


def instance_attrs(fn: ast.FunctionDef | ast.AsyncFunctionDef, out: dict[str, Any]) -> None:
    """`self.NAME = ...` (and `self.NAME: T = ...`, `setattr(self, "NAME", ...)`) in a
    method: the attribute, where, and its type when the method says it."""
    args = [*fn.args.posonlyargs, *fn.args.args]
    if not args or "staticmethod" in decorator_names(fn):
        return
    me = args[0].arg
    typed = {p.arg: annotation_type(p.annotation) for p in [*args, *fn.args.kwonlyargs]}
    for stmt in _statements(fn.body):
        for target, value, annotation in _assigned(stmt, me):
            if not (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == me
            ):
                continue
            have = out.get(target.attr)
            if have is not None and have["in"] == "__init__" and fn.name != "__init__":
                continue  # __init__'s own says most about it
            kind = annotation_type(annotation)
            if kind is None and isinstance(value, ast.Name):
                kind = typed.get(value.id)
            call = dotted(value.func) if isinstance(value, ast.Call) else None
            if have is not None and have["in"] == fn.name:
                kind, call = kind or have["type"], call or have["call"]
            out[target.attr] = {"line": target.lineno, "type": kind, "call": call,
                                "in": fn.name}  # fmt: skip


def module_facts(text: str) -> dict[str, Any] | None:
    """The facts of a module's source (None: it does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    reader = _Reader()
    reader.body(tree.body, reader.names, "", False)
    return reader.facts()


# ---------------------------------------------------------------------------
# A cache entry read back: validated, never trusted


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(what)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _check_fn(fn: Any) -> None:
    _check(isinstance(fn, dict), "function")
    for key in ("line", "end"):
        _check(type(fn.get(key)) is int and fn[key] >= 1, key)
    for key in ("varargs", "varkw", "method", "static", "abstract", "nie"):
        _check(type(fn.get(key)) is bool, key)
    _check(_opt_str(fn.get("returns")), "returns")
    _check(isinstance(fn.get("decorators"), list) and all(map(_is_str, fn["decorators"])), "dec")
    params = fn.get("params")
    _check(isinstance(params, list), "params")
    for p in params:
        _check(isinstance(p, list) and len(p) == 4, "param")
        _check(_is_str(p[0]) and p[1] in ("p", "n", "k") and type(p[2]) is bool, "param")
        _check(_opt_str(p[3]), "param type")


_KINDS = {"class", "function", "property", "value", "alias", "module", "import"}


def _check_bindings(names: Any) -> None:
    _check(isinstance(names, dict), "names")
    for name, entries in names.items():
        _check(_is_str(name) and isinstance(entries, list) and entries, "binding")
        for e in entries:
            _check(isinstance(e, dict) and e.get("k") in _KINDS, "binding kind")
            _check(type(e.get("line")) is int, "line")
            _check(e.get("tc", False) is True or "tc" not in e, "tc")
            kind = e["k"]
            if kind == "class":
                _check(_is_str(e.get("qual")), "qual")
            elif kind in ("function", "property"):
                _check_fn(e.get("fn"))
            elif kind == "value":
                _check(_opt_str(e.get("type")) and _opt_str(e.get("call")), "value")
                if "field" in e:
                    f = e["field"]
                    _check(isinstance(f, list) and len(f) == 2 and type(f[0]) is bool, "field")
                    _check(f[1] in ("classvar", "kw_only", "field"), "field kind")
            elif kind in ("alias", "module"):
                _check(_opt_str(e.get("target")), "target")
            else:
                _check(_is_str(e.get("module")) and _is_str(e.get("name")), "import")
                _check(type(e.get("level")) is int and e["level"] >= 0, "level")


def validate_facts(facts: Any) -> dict[str, Any]:
    """`facts` when it has the shape `module_facts` gives; else ValueError naming the part."""
    _check(isinstance(facts, dict) and facts.get("v") == FORMAT, "format")
    _check_bindings(facts.get("names"))
    classes = facts.get("classes")
    _check(isinstance(classes, dict), "classes")
    for qual, info in classes.items():
        _check(_is_str(qual) and isinstance(info, dict), "class")
        _check(type(info.get("line")) is int, "class line")
        _check(isinstance(info.get("bases"), list) and all(map(_is_str, info["bases"])), "bases")
        _check(_opt_str(info.get("meta")), "meta")
        _check(isinstance(info.get("decorators"), list), "decorators")
        _check(all(map(_is_str, info["decorators"])), "decorators")
        _check(type(info.get("kw_only")) is bool and type(info.get("getattr")) is bool, "flags")
        _check_bindings(info.get("members"))
        attrs = info.get("attrs")
        _check(isinstance(attrs, dict), "attrs")
        for name, a in attrs.items():
            _check(_is_str(name) and isinstance(a, dict) and type(a.get("line")) is int, "attr")
            _check(_opt_str(a.get("type")) and _opt_str(a.get("call")), "attr type")
            _check(_is_str(a.get("in")), "attr in")
    stars = facts.get("stars")
    _check(isinstance(stars, list), "stars")
    for star in stars:
        _check(isinstance(star, list) and len(star) == 2 and _is_str(star[0]), "star")
        _check(type(star[1]) is int and star[1] >= 0, "star level")
    _check(type(facts.get("getattr")) is bool and type(facts.get("dynamic")) is bool, "flags")
    _check(isinstance(facts.get("lazy"), list) and all(map(_is_str, facts["lazy"])), "lazy")
    return facts


class FactsCache:
    """Module facts by the sha256 of the module's bytes: in memory for this run (the two
    cores share most files), and on disk under `root` when one is given."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self.memory: dict[str, dict[str, Any] | None] = {}
        self.parsed = 0  # modules parsed in this run (not found in a cache)

    def _path(self, sha: str) -> Path:
        assert self.root is not None and re.fullmatch(r"[0-9a-f]{64}", sha)
        return self.root / sha[:2] / f"{sha}.json"

    def facts(self, data: bytes) -> dict[str, Any] | None:
        sha = hashlib.sha256(data).hexdigest()
        if sha in self.memory:
            return self.memory[sha]
        facts = self._read(sha)
        if facts is None:
            self.parsed += 1
            try:
                facts = module_facts(data.decode("utf-8"))
            except UnicodeDecodeError:
                facts = None
            self._write(sha, facts)
        self.memory[sha] = facts
        return facts

    def _read(self, sha: str) -> dict[str, Any] | None:
        if self.root is None:
            return None
        try:
            raw = bounded.read_file(self._path(sha), MAX_FACTS, "coupling cache entry")
            return validate_facts(json.loads(raw))
        except (OSError, ValueError, RecursionError, BadInput):
            return None  # absent, unreadable or not ours: parsed again and rewritten

    def _write(self, sha: str, facts: dict[str, Any] | None) -> None:
        """Renamed into place whole; not synced: an entry lost in a crash is made again."""
        if self.root is None or facts is None:
            return
        path = self._path(sha)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(facts, separators=(",", ":")))
            os.replace(tmp, path)
        except OSError:  # a read-only cache: the facts are made again next time
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


# ---------------------------------------------------------------------------
# Lookups in one core tree


@dataclass(frozen=True, eq=False)
class Found:
    """Where a name is defined in a core tree. kind: module, class, function, property,
    value, external (bound to something outside the core), dynamic (served at run time:
    a module `__getattr__` names it), unknown (cannot be told statically: `reason`)."""

    kind: str
    where: str
    module: str = ""
    qual: str = ""  # the class (or class.member) inside `module`
    entry: Any = None  # the binding: facts of the function, class, value or module
    typing_only: bool = False  # bound only under `if TYPE_CHECKING:`
    reason: str = ""

    @property
    def name(self) -> str:
        return f"{self.module}.{self.qual}" if self.qual else self.module


@dataclass
class CoreTree:
    """A core source tree, its modules read on demand (only those a lookup reaches)."""

    root: Path
    cache: FactsCache = field(default_factory=FactsCache)
    modules: dict[str, tuple[dict[str, Any], Path] | None] = field(default_factory=dict)
    files: dict[str, Path | None] = field(default_factory=dict)
    compiled: frozenset[str] | None = None
    memo: dict[str, Found | None] = field(default_factory=dict)

    def _file(self, module: str) -> Path | None:
        if module in self.files:
            return self.files[module]
        found = None
        if all(_IDENT.match(p) for p in module.split(".")):
            base = self.root.joinpath(*module.split("."))
            for candidate in (base.with_suffix(".py"), base / "__init__.py", base):
                if candidate.is_file() or (candidate == base and base.is_dir()):
                    found = candidate  # a folder without __init__.py: a namespace package
                    break
        self.files[module] = found
        return found

    def module(self, dotted_name: str) -> dict[str, Any] | None:
        """The facts of a module of this tree (None: no such module, or it does not parse)."""
        if dotted_name not in self.modules:
            path = self._file(dotted_name)
            facts = None
            if path is not None and path.is_dir():
                facts = module_facts("")
            elif path is not None:
                try:
                    facts = self.cache.facts(bounded.read_file(path, MAX_SOURCE, "core module"))
                except (OSError, BadInput):
                    facts = None
            self.modules[dotted_name] = (facts, path) if facts is not None else None
        got = self.modules[dotted_name]
        return got[0] if got else None

    def is_package(self, module: str) -> bool:
        path = self._file(module)
        return path is not None and (path.is_dir() or path.name == "__init__.py")

    def where(self, module: str, line: int = 1) -> str:
        path = self._file(module)
        rel = path.relative_to(self.root).as_posix() if path else module
        return f"{rel}:{line}"

    def compiled_modules(self) -> frozenset[str]:
        """Modules the core builds from C++/CUDA (setup.py's `CMakeExtension(name=...)`):
        never in a source tree, so never missing from it."""
        if self.compiled is None:
            try:
                text = bounded.read_file(self.root / "setup.py", MAX_SOURCE, "setup.py").decode()
            except (OSError, BadInput, UnicodeDecodeError):
                text = ""
            self.compiled = frozenset(
                re.findall(r"""Extension\(\s*(?:name\s*=\s*)?["']([\w.]+)["']""", text)
            )
        return self.compiled

    def absolute(self, module: str, relative: str, level: int) -> str:
        return absolute_module(module, bool(level) and self.is_package(module), relative, level)

    # -- resolving names ------------------------------------------------------------

    def resolve(self, symbol: str, depth: int = 0) -> Found | None:
        """Where `symbol` (a dotted name: module, then members) is defined in this tree.
        None: it is not; Found(kind="unknown"): it cannot be told statically."""
        if depth == 0:
            if symbol not in self.memo:
                self.memo[symbol] = self._resolve(symbol, 0)
            return self.memo[symbol]
        return self._resolve(symbol, depth)

    def _resolve(self, symbol: str, depth: int) -> Found | None:
        if depth > MAX_DEPTH:
            return Found("unknown", symbol, reason="re-exported deeper than followed")
        parts = symbol.split(".")
        for cut in range(len(parts), 0, -1):
            name = ".".join(parts[:cut])
            if self.module(name) is None:
                if name in self.compiled_modules():
                    return Found("external", name, name, reason="a compiled extension module")
                continue
            found: Found | None = self.as_module(name)
            for attr in parts[cut:]:
                assert found is not None
                found = self.member(found, attr, depth)
                if found is None or found.kind in ("unknown", "external", "dynamic"):
                    return found
            return found
        return None

    def as_module(self, module: str) -> Found:
        return Found("module", self.where(module), module, "", self.module(module))

    def member(self, owner: Found, name: str, depth: int = 0) -> Found | None:
        if depth > MAX_DEPTH:
            return Found("unknown", f"{owner.name}.{name}", reason="followed too deep")
        if owner.kind == "module":
            return self._module_member(owner, name, depth)
        if owner.kind == "class":
            return self._class_member(owner, name, depth, set())
        if owner.kind == "value":
            cls = self.type_of(owner, depth + 1)
            if cls is not None and cls.kind == "class":
                return self._class_member(cls, name, depth + 1, set())
            return Found("unknown", owner.where, reason=f"{owner.name} is a value of no known type")
        return Found("unknown", owner.where, reason=f"{owner.name} is a {owner.kind}")

    def _module_member(self, owner: Found, name: str, depth: int) -> Found | None:
        facts = owner.entry
        found = self._binding(owner.module, facts["names"].get(name, []), depth, name)
        if found is not None and found.typing_only and not facts["getattr"]:
            found = None  # bound for type checkers only: not there at run time
        if found is not None and found.kind != "unknown":
            return found
        sub = f"{owner.module}.{name}"
        if self.module(sub) is not None:
            return self.as_module(sub)
        for relative, level in facts["stars"]:
            star = self.absolute(owner.module, relative, level)
            if self.module(star) is not None:
                got = self._module_member(self.as_module(star), name, depth + 1)
                if got is not None:
                    return got
            elif star.split(".")[0] != owner.module.split(".")[0]:
                return Found("unknown", owner.where, reason=f"star import from {star}")
        if found is not None:
            return found
        if facts["getattr"]:
            if name in facts["lazy"]:
                return Found("dynamic", owner.where, owner.module, name,
                             reason=f"served by {owner.module}.__getattr__")  # fmt: skip
            return Found("unknown", owner.where, owner.module,
                         reason=f"{owner.module} has a module __getattr__")  # fmt: skip
        if facts["dynamic"]:
            return Found("unknown", owner.where, owner.module,
                         reason=f"{owner.module} sets names at run time (globals())")  # fmt: skip
        return None

    def _binding(
        self, module: str, entries: list[dict[str, Any]], depth: int, qual: str
    ) -> Found | None:
        """What a name's bindings in `module` stand for: the last run-time binding that
        resolves (fallbacks in try/except come after), else a typing-only one."""
        runtime = [e for e in entries if not e.get("tc")]
        typing = [e for e in entries if e.get("tc")]
        for group, only in ((runtime, False), (typing, True)):
            unknown = None
            for entry in reversed(group):
                found = self._entry(module, entry, depth, qual)
                if found is None:
                    continue
                if found.kind == "unknown":
                    unknown = unknown or found
                    continue
                return replace(found, typing_only=True) if only else found
            if unknown is not None:
                return unknown
        return None

    def _entry(self, module: str, e: dict[str, Any], depth: int, qual: str) -> Found | None:
        where = self.where(module, e["line"])
        kind = e["k"]
        if kind == "class":
            info = self.module(module)["classes"].get(e["qual"])  # type: ignore[index]
            if info is None:
                return None
            return Found("class", self.where(module, info["line"]), module, e["qual"], info)
        if kind in ("function", "property", "value"):
            return Found(kind, where, module, qual, e)
        if kind == "module":
            target = e["target"]
            if self.module(target) is not None:
                return self.as_module(target)
            return Found("external", where, target, reason=f"bound to {target}")
        if kind == "alias":
            target = self.name_in(module, e["target"])
            return self._follow(target, where, depth) if target else None
        source = self.absolute(module, e["module"], e["level"])
        return self._follow(f"{source}.{e['name']}", where, depth)

    def _follow(self, target: str, where: str, depth: int) -> Found | None:
        if not self._ours(target):
            return Found("external", where, target, reason=f"bound to {target}")
        return self.resolve(target, depth + 1)

    def _ours(self, target: str) -> bool:
        top = target.split(".")[0]
        return self._file(top) is not None

    def name_in(self, module: str, name: str, depth: int = 0) -> str | None:
        """The absolute dotted name `name` (as written in `module`) stands for (aliases
        followed at most MAX_DEPTH deep: `A = B` and `B = A` are legal Python)."""
        head, _, rest = name.partition(".")
        facts = self.module(module)
        entries = (facts or {}).get("names", {}).get(head, [])
        if not entries and hasattr(builtins, head):
            return name  # int, object, Exception: not the core's
        base = f"{module}.{head}"
        for e in reversed(entries):
            if e["k"] == "import":
                base = f"{self.absolute(module, e['module'], e['level'])}.{e['name']}"
            elif e["k"] == "module":
                base = e["target"]
            elif e["k"] == "alias" and e["target"] and depth < MAX_DEPTH:
                base = self.name_in(module, e["target"], depth + 1) or base
            break
        return f"{base}.{rest}" if rest else base

    # -- classes --------------------------------------------------------------------

    def _class_member(self, cls: Found, name: str, depth: int, seen: set[str]) -> Found | None:
        if cls.name in seen:
            return None  # searched already (a diamond)
        if depth > MAX_DEPTH:
            return Found("unknown", cls.where, reason=f"{cls.name}: bases followed too deep")
        seen.add(cls.name)
        info = cls.entry
        entries = info["members"].get(name)
        if entries:
            found = self._binding(cls.module, entries, depth, f"{cls.qual}.{name}")
            if found is not None:
                return found
        attr = info["attrs"].get(name)
        if attr is not None:
            return Found("value", self.where(cls.module, attr["line"]), cls.module,
                         f"{cls.qual}.{name}", {"k": "value", **attr})  # fmt: skip
        unknown: Found | None = None
        for base in self.bases(cls, depth):
            if base.kind != "class":
                if base.qual not in PLAIN_BASES:
                    unknown = unknown or Found(
                        "unknown", cls.where, reason=f"{cls.name} derives from {base.qual}"
                    )
                continue
            got = self._class_member(base, name, depth + 1, seen)
            if got is not None and got.kind != "unknown":
                return got
            unknown = unknown or got
        if info["getattr"]:
            return Found("unknown", cls.where, reason=f"{cls.name} has __getattr__")
        return unknown

    def bases(self, cls: Found, depth: int = 0) -> list[Found]:
        """The classes `cls` derives from: Found(class) for the core's, Found(external,
        qual=the base as written) for others (and for a core base that is not found)."""
        out = []
        for base in cls.entry["bases"]:
            target = self.name_in(cls.module, base) if base != "?" else None
            found = self.resolve(target, depth + 1) if target and self._ours(target) else None
            if found is not None and found.kind == "class":
                out.append(found)
            else:
                out.append(Found("external", cls.where, qual=_plain(target or base)))
        return out

    def mro(self, cls: Found) -> list[Found]:
        """`cls` and its core base classes, depth first, each once."""
        out: list[Found] = []
        todo = [cls]
        while todo and len(out) < 64:
            c = todo.pop(0)
            if c.kind == "class" and all(c.name != o.name for o in out):
                out.append(c)
                todo = [b for b in self.bases(c) if b.kind == "class"] + todo
        return out

    def abstract(self, cls: Found) -> set[str]:
        """The abstract methods of a class (its core bases' included, less those defined)."""
        out: set[str] = set()
        for c in reversed(self.mro(cls)):
            for name, entries in c.entry["members"].items():
                fn = entries[-1].get("fn")
                if fn and fn["abstract"]:
                    out.add(name)
                else:
                    out.discard(name)
        return out

    def is_abc(self, cls: Found) -> bool:
        """Does `cls` (or a base) use ABCMeta, so that abstract methods are enforced?"""
        for c in self.mro(cls):
            if (c.entry["meta"] or "").rpartition(".")[2] == "ABCMeta":
                return True
            if any(b.kind == "external" and b.qual == "abc.ABC" for b in self.bases(c)):
                return True
        return False

    def methods(self, cls: Found) -> dict[str, Found]:
        """Every method of `cls` by name, the nearest definition (the core's MRO)."""
        out: dict[str, Found] = {}
        for c in self.mro(cls):
            for name, entries in c.entry["members"].items():
                entry = entries[-1]
                if name not in out and entry["k"] == "function":
                    out[name] = Found("function", self.where(c.module, entry["line"]), c.module,
                                      f"{c.qual}.{name}", entry)  # fmt: skip
        return out

    # -- types ------------------------------------------------------------------------

    def type_of(self, found: Found, depth: int = 0) -> Found | None:
        """The class of the object `found` names (a value's annotation or the class that
        made it, a property's or attribute's annotation); None when not known."""
        if depth > MAX_DEPTH or found.entry is None:
            return None
        if found.kind == "property":
            return self.class_named(found.module, found.entry["fn"]["returns"], depth)
        if found.kind == "value":
            by_type = self.class_named(found.module, found.entry.get("type"), depth)
            if by_type is not None:
                return by_type
            return self.call_result(found.module, found.entry.get("call"), depth)
        return None

    def class_named(self, module: str, name: str | None, depth: int = 0) -> Found | None:
        """The core class `name` (as written in `module`) stands for."""
        if not name or name == UNCLEAR or depth > MAX_DEPTH:
            return None
        target = self.name_in(module, name)
        if not target or not self._ours(target):
            return None
        found = self.resolve(target, depth + 1)
        return found if found is not None and found.kind == "class" else None

    def call_result(self, module: str, name: str | None, depth: int = 0) -> Found | None:
        """The class of what calling `name` (as written in `module`) gives."""
        if not name:
            return None
        target = self.name_in(module, name)
        found = self.resolve(target, depth + 1) if target and self._ours(target) else None
        return self.returns(found, depth) if found is not None else None

    def returns(self, found: Found, depth: int = 0) -> Found | None:
        """The class a call of `found` gives: a class's instance, a function's annotation."""
        if found.kind == "class":
            return found
        if found.kind == "function":
            return self.class_named(found.module, found.entry["fn"]["returns"], depth + 1)
        return None

    def param_type(self, method: Found, param: str) -> tuple[Found | None, str | None]:
        """The class a method's parameter is annotated with, and the annotation as written
        (None: not annotated; UNCLEAR: annotated with no one class)."""
        if method.kind != "function":
            return None, None
        for name, _, _, kind in method.entry["fn"]["params"]:
            if name == param:
                return self.class_named(method.module, kind), kind
        return None, None

    # -- signatures -----------------------------------------------------------------

    def signature(self, found: Found) -> Signature | None:
        """What a call of `found` accepts: a function's, a class's __init__ or dataclass fields."""
        if found.kind == "function":
            return Signature.of(found.entry["fn"])
        if found.kind != "class":
            return None
        for c in self.mro(found):
            init = c.entry["members"].get("__init__")
            if init and init[-1]["k"] == "function":
                return Signature.of(init[-1]["fn"])
            if self.dataclass_like(c):
                return self._fields(found)
        return None

    def dataclass_like(self, cls: Found) -> bool:
        """A dataclass, or a class made by a `dataclass_transform` decorator of the core."""
        for name in cls.entry["decorators"]:
            if name.rpartition(".")[2] == "dataclass":
                return True
            target = self.name_in(cls.module, name)
            fn = self.resolve(target) if target and self._ours(target) else None
            made = fn.entry["fn"]["decorators"] if fn is not None and fn.kind == "function" else []
            if any(d.rpartition(".")[2] == "dataclass_transform" for d in made):
                return True
        return False

    def _fields(self, cls: Found) -> Signature:
        params: list[list[Any]] = []
        for c in reversed(self.mro(cls)):
            if not self.dataclass_like(c):
                continue
            kw_only = c.entry["kw_only"]
            for name, entries in c.entry["members"].items():
                field_ = entries[-1].get("field")
                if field_ is None:
                    continue
                has_default, kind = field_
                if kind == "kw_only":
                    kw_only = True
                    continue
                if kind == "classvar":
                    continue
                params = [p for p in params if p[0] != name]
                params.append([name, "k" if kw_only else "n", has_default, None])
        return Signature.of({"params": params, "varargs": False, "varkw": False,
                             "method": False, "static": False})  # fmt: skip

    def body_text(self, found: Found) -> str | None:
        """A function's body (its docstring left out), unparsed: layout and comments do
        not count as a change."""
        got = self.modules.get(found.module)
        if not got or found.kind != "function":
            return None
        path = got[1]
        fn = found.entry["fn"]
        try:
            lines = bounded.read_file(path, MAX_SOURCE, "core module").decode().splitlines(True)
            node = ast.parse("if 1:\n" + "".join(lines[fn["line"] - 1 : fn["end"]])).body[0]
        except (OSError, BadInput, UnicodeDecodeError, SyntaxError, ValueError, IndexError):
            return None
        body = node.body[0].body if isinstance(node, ast.If) and node.body else []
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        return "\n".join(ast.unparse(stmt) for stmt in body)


def _plain(name: str) -> str:
    return name[len("typing.") :] if name.startswith("typing.") else name


def lines_changed(before: str, after: str) -> int:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return sum(1 for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---")))


@dataclass(frozen=True)
class Signature:
    """A signature as the diff reads it (self or cls left out for a method)."""

    names: tuple[str, ...]  # every parameter, in order
    positional: tuple[str, ...]  # those a call can give by position
    by_keyword: tuple[str, ...]  # those a call can give by keyword
    kw_only: tuple[str, ...]
    required: tuple[str, ...]
    defaults: tuple[str, ...]  # those with a default
    varargs: bool
    varkw: bool

    @classmethod
    def of(cls, fn: dict[str, Any]) -> Signature:
        params = list(fn["params"])
        if fn["method"] and not fn["static"] and params and params[0][1] != "k":
            params = params[1:]
        return cls(
            names=tuple(p[0] for p in params),
            positional=tuple(p[0] for p in params if p[1] in "pn"),
            by_keyword=tuple(p[0] for p in params if p[1] in "nk"),
            kw_only=tuple(p[0] for p in params if p[1] == "k"),
            required=tuple(p[0] for p in params if not p[2]),
            defaults=tuple(p[0] for p in params if p[2]),
            varargs=fn["varargs"],
            varkw=fn["varkw"],
        )

    def accepts(self, keyword: str) -> bool:
        return keyword in self.by_keyword or self.varkw

    def shown(self) -> str:
        names = [*self.names, *(["*args"] if self.varargs else []),
                 *(["**kwargs"] if self.varkw else [])]  # fmt: skip
        return "(" + ", ".join(names) + ")"


# ---------------------------------------------------------------------------
# Objects' classes

Typ = tuple[str, tuple[str, ...]]  # the object `root.chain...`: root a class (core or plugin)


class Oracle:
    """The class of an object reached along a chain of attributes from a class, in a core tree."""

    def __init__(self, tree: CoreTree | None, name: str = "this core") -> None:
        self.tree, self.name = tree, name
        self.memo: dict[Typ, Found | None] = {}

    def klass(self, typ: Typ) -> Found | None:
        """The core class of the object `typ` names (None: not known, or not a class)."""
        if self.tree is None:
            return None
        if typ not in self.memo:
            self.memo[typ] = None  # a chain that leads back to itself
            self.memo[typ] = self._klass(typ)
        return self.memo[typ]

    def _klass(self, typ: Typ) -> Found | None:
        assert self.tree is not None
        root, chain = typ
        if not chain:
            found = self.tree.resolve(root)
            if found is None or found.kind == "class":
                return found
            return self.tree.type_of(found)
        owner = self.klass((root, chain[:-1]))
        if owner is None:
            return None
        member = self.tree.member(owner, chain[-1])
        return self.tree.type_of(member) if member is not None else None

    def member(self, typ: Typ, attr: str) -> Found | None:
        owner = self.klass(typ)
        return self.tree.member(owner, attr) if owner and self.tree else None

    def result(self, found: Found | None) -> Typ | None:
        """The type of what calling `found` gives."""
        if found is None or self.tree is None:
            return None
        cls = self.tree.returns(found)
        return (cls.name, ()) if cls is not None else None
