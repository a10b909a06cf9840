"""Which untyped records cross a layer: `python3 scripts/dictcross.py [SRC] [--count]`.

Lists every public function, method or class of the package whose signature (or, for a
class, whose fields other than `raw`) holds `dict[str, Any]`, `dict[str, object]` or
`Mapping[str, Any]`, and that a module of another layer (`vllm_plugin_release.<layer>`)
imports or reaches through a module alias, as `module:name <- users`; the count goes to
stderr. The aim is none. Left out: private fields; `raw` fields, which keep the
document as written for canonical bytes and signing (BuildRecord, EnvRecord, Manifest);
and `to_json` methods, a typed record's JSON form made only to be written.

Two kinds are listed apart, not counted: a parser (`parse*`, `from_data`) whose answer is
typed, whose input is the JSON it turns into a record (the one place it is untyped, by
design; shown as `name()`), and the names in
OPEN, whose value is an open JSON document by nature (a JSON Schema, an OpenAPI contract),
each with its reason.

Static and approximate by design (stdlib `ast` only, no import of the package): a method
counts when its class is imported or reached by another layer.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

PACKAGE = "vllm_plugin_release"
SCHEMA_BUILDERS = ("table", "string", "integer", "number", "array")
# Open JSON documents by nature: typing them would be re-describing JSON Schema/OpenAPI.
OPEN = {
    "buildspec.model:render": "a JSON Schema document (the spec's), rendered as Markdown",
    "buildspec.load:validate": "checks a TOML document against a JSON Schema",
    "buildspec.model:full_schema": "builds the spec's JSON Schema",
    "conform.registry:spec_schema": "the spec's JSON Schema",
    "core.bounded:packaged_json_object": "the package's JSON Schema files",
    "conform.lib.apicontract:load_contract": "an OpenAPI document and JSON Schema models",
    "conform.lib.apicontract:dump_contract": "an OpenAPI document and JSON Schema models",
    "conform.lib.apicontract:contract_from_capture": "an OpenAPI document and JSON Schema models",
    "conform.lib.apidiff:diff_contracts": "two OpenAPI documents",
    "core.cardrecord:CheckResult": "each check's own details and thresholds",
    "buildspec.model:Spec.conformance": "a [conformance.*] table, typed by its one owner",
    **{f"buildspec.model:{name}": "builds a JSON Schema node" for name in SCHEMA_BUILDERS},
}
UNTYPED = re.compile(r"\b(dict|Mapping|MutableMapping)\[str, (Any|object)\]")


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _parser(name: str) -> bool:
    return name.startswith("parse") or name == "from_data"


def _function_untyped(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = node.args
    annotations = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    annotations += [args.vararg and args.vararg.annotation, args.kwarg and args.kwarg.annotation]
    annotations.append(node.returns)
    return any(a is not None and UNTYPED.search(ast.unparse(a)) for a in annotations)


def _class_untyped(node: ast.ClassDef) -> bool:
    return any(
        isinstance(item, ast.AnnAssign)
        and isinstance(item.target, ast.Name)
        and item.target.id != "raw"
        and not item.target.id.startswith("_")  # a private field is no interface
        and UNTYPED.search(ast.unparse(item.annotation))
        for item in node.body
    )


def _typed_parser(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A parser whose answer is typed: its untyped input is the JSON it checks."""
    returns = node.returns is not None and UNTYPED.search(ast.unparse(node.returns))
    return _parser(node.name) and node.returns is not None and not returns


def untyped_names(tree: ast.Module) -> list[str]:
    """Public top-level names (and Class.method) of one module whose types are untyped; a
    parser with a typed answer is named with a trailing "()"."""
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if not node.name.startswith("_") and _function_untyped(node):
                names.append(node.name + ("()" if _typed_parser(node) else ""))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            if _class_untyped(node):
                names.append(node.name)
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    public = not item.name.startswith("_") and item.name != "to_json"
                    if public and _function_untyped(item):
                        names.append(f"{node.name}.{item.name}")
    return names


def _source_of(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def crossings(src: Path) -> dict[str, set[str]]:
    """`module:name` -> the modules of other layers that use it."""
    paths = {_module_name(p, src): p for p in sorted((src / PACKAGE).rglob("*.py"))}
    trees = {m: ast.parse(p.read_text(encoding="utf-8"), str(p)) for m, p in paths.items()}
    untyped = {m: untyped_names(t) for m, t in trees.items()}
    found: dict[str, set[str]] = {}

    def use(source: str, name: str, user: str) -> None:
        if _layer(source) == _layer(user):
            return
        for item in untyped.get(source, ()):
            if item.removesuffix("()") == name or item.startswith(name + "."):
                found.setdefault(f"{source}:{item}", set()).add(user)

    for module, tree in trees.items():
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _source_of(module, paths[module].name == "__init__.py", node)
                for alias in node.names:
                    if f"{source}.{alias.name}" in paths:
                        aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
                    else:
                        use(source, alias.name, module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in paths and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                use(aliases[node.value.id], node.attr, module)
    return found


def split(found: dict[str, set[str]]) -> tuple[list[str], list[str], list[str]]:
    """The crossings as (counted, parsers, open documents), each sorted."""
    short = sorted(name.removeprefix(PACKAGE + ".") for name in found)
    parsers = [n for n in short if n.endswith("()")]
    documents = [n for n in short if n in OPEN]
    return [n for n in short if n not in parsers and n not in documents], parsers, documents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", type=Path, default=Path(__file__).parents[1] / "src")
    parser.add_argument("--count", action="store_true", help="print only the count")
    args = parser.parse_args(argv)
    if not (args.src / PACKAGE).is_dir():
        print(f"dictcross: {args.src / PACKAGE}: no such package folder", file=sys.stderr)
        return 2
    found = crossings(args.src)
    counted, parsers, documents = split(found)
    if args.count:
        print(len(counted))
        return 0
    for name in counted:
        users = sorted(u.removeprefix(PACKAGE + ".") for u in found[f"{PACKAGE}.{name}"])
        print(f"{name}  <- {', '.join(users)}")
    print(f"parsers (their input is the JSON they check): {', '.join(parsers) or 'none'}")
    for name in documents:
        print(f"open document: {name} ({OPEN[name]})")
    print(
        f"{len(counted)} untyped signatures cross a layer (and {len(parsers)} parsers, "
        f"{len(documents)} open documents)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
