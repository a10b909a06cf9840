"""The API coupling diff (static): the plugin's uses of the core's API against an old and a
new core tree; `trace_failures` measures a report against observed failures."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vllm_plugin_release.conform.lib.apicore import (
    CoreTree,
    FactsCache,
    Found,
    Oracle,
    Signature,
    lines_changed,
)
from vllm_plugin_release.conform.lib.apiuses import (
    PluginGraph,
    Unresolved,
    Use,
    plugin_uses,
)


@dataclass(frozen=True)
class Change:
    id: str
    kind: str
    symbol: str
    detail: str
    uses: tuple[str, ...]

    def to_json(self) -> dict[str, str | list[str]]:
        return {**asdict(self), "uses": list(self.uses)}


@dataclass(frozen=True, slots=True)
class CouplingReport:
    """The API coupling diff: the core symbols the plugin uses, those that cannot be told
    statically (with why), every breaking change (by id) and the changes to review."""

    symbols: int
    unresolved: tuple[Unresolved, ...]
    changes: tuple[Change, ...]
    review: tuple[Change, ...] = ()
    graph: PluginGraph = field(default_factory=PluginGraph)

    def to_json(self) -> dict[str, Any]:
        """The bump report's `api_coupling` part as written: these keys, in this order."""
        return {
            "status": "run",
            "symbols": self.symbols,
            "unresolved": [u.to_json() for u in self.unresolved],
            "breaking": len(self.changes),
            "changes": [c.to_json() for c in self.changes],
            "review": [c.to_json() for c in self.review],
        }


# ---------------------------------------------------------------------------
# The diff


def resolve_use(oracle: Oracle, use: Use) -> Found | None:
    """What a use names in the oracle's tree: its dotted symbol, or its chain from a class."""
    tree = oracle.tree
    assert tree is not None
    if not use.chain:
        return tree.resolve(use.symbol)
    owner = oracle.klass((use.root, use.chain[:-1]))
    if owner is None:
        base = tree.resolve(use.root)
        if base is None:
            return Found(
                "unknown", use.root, reason=f"its class {use.root} is not in {oracle.name}"
            )
        return Found("unknown", use.root, reason=f"the class of {use.path()} is not known")
    return tree.member(owner, use.chain[-1])


def _missing_module(tree: CoreTree, symbol: str) -> str | None:
    """The first module on `symbol`'s dotted path that `tree` lacks (None: its modules are
    all there, a name in one is what is missing)."""
    parts = symbol.split(".")
    if tree.module(symbol) is not None:
        return None
    for cut in range(len(parts) - 1, 0, -1):
        if tree.module(".".join(parts[:cut])) is not None:
            first = ".".join(parts[: cut + 1])
            return first if tree.resolve(first) is None else None
    return None


def _removed_detail(
    tree: CoreTree, symbol: str, group: list[Use], before: Found, versions: tuple[str, str]
) -> str:
    old, new = versions
    detail = f"{symbol}: missing in {new} ({before.where} in {old})"
    module = _missing_module(tree, symbol)
    if module is not None and module != symbol:
        detail += f"; the module {module} is gone"
    hows = {u.how for u in group}
    if hows <= {"override", "subclass"} and "override" in hows:
        detail += "; the plugin overrides it, the new core no longer calls it"
    elif hows & {"write"} and not hows & {"read", "call", "import", "attribute"}:
        detail += "; the plugin sets it, the new core no longer reads it"
    return detail


def _call_changes(
    symbol: str, calls: list[Use], before: Signature, after: Signature
) -> list[Change]:
    out: dict[str, Change] = {}
    shown = f"{before.shown()} is now {after.shown()}"
    for use in calls:
        where = (use.where,)
        for keyword in use.keywords:
            if before.accepts(keyword) and not after.accepts(keyword):
                cid = f"keyword:{symbol}:{keyword}"
                detail = (
                    f"{symbol} no longer takes the keyword {keyword!r} the plugin passes: {shown}"
                )
                if keyword not in before.by_keyword:
                    detail += " (it went through **kwargs, which is gone)"
                elif keyword in after.names:
                    detail += f" ({keyword!r} became positional-only)"
                _add(out, Change(cid, "keyword", symbol, detail, where))
        if use.positional < 0:
            continue
        moved = _positional_moves(symbol, use, before, after, shown)
        for change in moved:
            _add(out, change)
        if use.splat:
            continue  # the keywords a **mapping gives are not known
        given = set(after.positional[: use.positional]) | set(use.keywords)
        was = set(before.positional[: use.positional]) | set(use.keywords)
        for name in after.required:
            if name in given or (name in before.required and name not in was):
                continue
            cid = f"required:{symbol}:{name}"
            if name in before.defaults:
                why = f": {name!r} lost its default, and the plugin's call does not give it"
            else:
                why = f" now requires {name!r}, which the plugin's call does not give"
            detail = f"{symbol}{why}: {shown}"
            _add(out, Change(cid, "required", symbol, detail, where))
        most = len(after.positional)
        if (
            not moved
            and not after.varargs
            and use.positional > most >= 0
            and (before.varargs or use.positional <= len(before.positional))
        ):
            cid = f"required:{symbol}:positional"
            detail = (
                f"{symbol} now takes at most {most} positional argument(s); the plugin "
                f"passes {use.positional}: {shown}"
            )
            _add(out, Change(cid, "required", symbol, detail, where))
    return list(out.values())


def _positional_moves(
    symbol: str, use: Use, before: Signature, after: Signature, shown: str
) -> list[Change]:
    """Parameters the plugin gives by position that the new core made keyword-only or moved
    to another position (the value would go to another parameter)."""
    out = []
    for i, name in enumerate(before.positional[: use.positional]):
        now = after.positional[i] if i < len(after.positional) else None
        if now == name or name not in after.names:
            continue
        if name in after.kw_only:
            why = f"{name!r} became keyword-only; the plugin passes it by position ({i + 1})"
        elif now is not None:
            why = f"the plugin's argument {i + 1} ({name!r} before) now goes to {now!r}"
        else:
            continue
        out.append(Change(f"positional:{symbol}:{name}", "positional", symbol,
                          f"{symbol}: {why}: {shown}", (use.where,)))  # fmt: skip
    return out


def places(wheres: Iterable[str]) -> tuple[str, ...]:
    """Plugin places (`file:line`) once each, by file then line number."""

    def key(where: str) -> tuple[str, int]:
        path, _, line = where.rpartition(":")
        return (path, int(line)) if line.isdigit() else (where, 0)

    return tuple(sorted(set(wheres), key=key))


def _add(out: dict[str, Change], change: Change) -> None:
    """`change` into `out` by its id, its uses merged with those already there."""
    have = out.get(change.id)
    if have is not None:
        uses = places([*have.uses, *change.uses])
        change = Change(have.id, have.kind, have.symbol, have.detail, uses)
    out[change.id] = change


def _misfits(override: Signature, base: Signature) -> set[str]:
    """How the plugin's override does not take the calls the core may make with `base`."""
    out = set()
    if override.varargs and override.varkw:
        return out
    for i, name in enumerate(base.names):
        by_name = name in override.by_keyword or override.varkw
        in_slot = name in base.positional and (i < len(override.positional) or override.varargs)
        if name in base.kw_only and not by_name:
            out.add(f"{name!r} is keyword-only in the core, the override has no such parameter")
        elif not (by_name or in_slot):
            out.add(f"the core may pass {name!r}, which the override does not take")
        elif name in base.defaults and name in override.required:
            out.add(f"{name!r} has a default in the core, which may leave it out; the "
                    "override requires it")  # fmt: skip
    for i, name in enumerate(override.positional):
        if name in override.required and name not in base.names and i >= len(base.positional):
            out.add(f"the override requires {name!r}, which the core does not pass")
    return out


def _override_change(
    symbol: str, uses: list[Use], before: Signature, after: Signature
) -> Change | None:
    """A method the plugin overrides that the new core calls in a way the override does not
    take (and the old core did not)."""
    if before == after:
        return None
    stale: list[Use] = []
    why: set[str] = set()
    for use in uses:
        if use.sig is None:
            continue
        new = _misfits(use.sig, after) - _misfits(use.sig, before)
        if new:
            stale.append(use)
            why |= new
    if not stale:
        return None  # the plugin follows the new signature already
    ours = "(" + ", ".join(stale[0].names) + ")"
    detail = (
        f"{symbol}{before.shown()} is now {symbol}{after.shown()}: the core calls the "
        f"plugin's override {ours} with the new signature ({'; '.join(sorted(why))})"
    )
    return Change(
        f"signature:{symbol}", "signature", symbol, detail, places(u.where for u in stale)
    )


@dataclass
class _Diff:
    old: CoreTree
    new: CoreTree
    versions: tuple[str, str]
    changes: list[Change] = field(default_factory=list)
    review: list[Change] = field(default_factory=list)
    unresolved: list[Unresolved] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.was = Oracle(self.old, self.versions[0])
        self.now = Oracle(self.new, self.versions[1])

    def group(self, uses: list[Use]) -> dict[str, list[tuple[Use, Found | None]]]:
        """Uses by the symbol a change names: its dotted name, or for an object's attribute
        the class the old core defines it in (one id however the plugin reaches it)."""
        out: dict[str, list[tuple[Use, Found | None]]] = {}
        for use in uses:
            before = resolve_use(self.was, use)
            key = use.symbol
            if use.chain and before is not None and before.kind not in ("unknown", "external"):
                key = before.name
            elif use.chain and before is None:
                owner = self._owner(use)
                key = f"{owner.name}.{use.chain[-1]}" if owner is not None else key
            out.setdefault(key, []).append((use, before))
        return out

    def symbol(self, key: str, pairs: list[tuple[Use, Found | None]]) -> None:
        group = [u for u, _ in pairs]
        befores = [f for _, f in pairs if f is not None]
        before = next((f for f in befores if f.kind != "unknown"), befores[0] if befores else None)
        afters = [resolve_use(self.now, u) for u in group]
        after = next((f for f in afters if f is not None and f.kind != "unknown"), None)
        if after is None and any(f is not None for f in afters):
            after = next(f for f in afters if f is not None)
        wheres = places(u.where for u in group)
        new_v = self.versions[1]
        imports = [u for u in group if u.how in ("import", "module")]
        if before is None or before.kind == "unknown":
            if after is None and imports:
                self._missing(key, group, before)
            elif any(u.how == "write" for u in group) or all(u.how == "override" for u in group):
                return  # the plugin's own method or attribute, not the core's
            elif before is None and after is None and self._owner_known(group):
                self._missing(key, group, None)  # read on a class or module that lacks it
            else:
                reason = before.reason if before is not None else self._why_not(group)
                if before is None and after is not None and after.reason:
                    reason = f"{reason}; in {new_v}: {after.reason}"
                self.unresolved.append(Unresolved(key, reason, wheres))
            return
        if after is None:
            self._gone(key, group, before)
            return
        if after.kind == "unknown":
            why = after.reason if new_v in after.reason else f"in {new_v}: {after.reason}"
            self.unresolved.append(Unresolved(key, why, wheres))
            return
        if "external" in (before.kind, after.kind):
            return
        self._signatures(key, group, before, after)
        if before.kind == "class" and after.kind == "class":
            self._subclass(key, group, before, after)

    def _owner(self, use: Use) -> Found | None:
        """The module or class of the old core a use looks its name up in."""
        if use.chain:
            return self.was.klass((use.root, use.chain[:-1]))
        owner = self.old.resolve(use.symbol.rpartition(".")[0])
        return owner if owner is not None and owner.kind in ("module", "class") else None

    def _owner_known(self, group: list[Use]) -> bool:
        return all(self._owner(u) is not None for u in group)

    def _why_not(self, group: list[Use]) -> str:
        use = group[0]
        owner = use.path().rpartition(".")[0]
        if self._owner(use) is None:
            return f"{owner} is not a module or class of {self.versions[0]}"
        return f"not defined statically in {self.versions[0]}"

    def _missing(self, key: str, group: list[Use], before: Found | None) -> None:
        """A name the plugin imports (or reads on a module or class that lacks it) that
        neither core defines (statically)."""
        old_v, new_v = self.versions
        detail = f"{key}: missing in {new_v}"
        module = _missing_module(self.new, key)
        if module is not None and module != key:
            detail += f" (the module {module} is not there)"
        group = [u for u in group if u.how != "override"]  # the plugin's own methods
        if before is None:
            detail += f"; missing in the old core too ({old_v})"
        else:
            detail += f"; {old_v} may have provided it at run time ({before.reason})"
        self._report(key, "missing", detail, group)

    def _gone(self, key: str, group: list[Use], before: Found) -> None:
        detail = _removed_detail(self.new, key, group, before, self.versions)
        kind = "attribute" if all(u.chain for u in group) else "removed"
        self._report(key, kind, detail, group)

    def _report(self, key: str, kind: str, detail: str, group: list[Use]) -> None:
        """The change, breaking for the uses at run time, else to review (typing-only,
        guarded by except ImportError, read through getattr/hasattr)."""
        if any(not u.context for u in group):
            wheres = places(u.where for u in group)
            self.changes.append(Change(f"{kind}:{key}", kind, key, detail, wheres))
            return
        for context, review, note in (
            ("typing", "typing", "imported only under `if TYPE_CHECKING:`: not breaking at "
             "run time"),
            ("try", "fallback", "imported inside try/except ImportError: the plugin's "
             "fallback runs instead; check that it still does the job"),
            ("guard", "guarded", "read through getattr/hasattr: the plugin's default takes "
             "over; check that it still does the job"),
        ):  # fmt: skip
            uses = [u for u in group if u.context == context]
            if uses:
                wheres = places(u.where for u in uses)
                self.review.append(Change(f"{review}:{key}", review, key, f"{detail}; {note}",
                                          wheres))  # fmt: skip

    def _signatures(self, key: str, group: list[Use], before: Found, after: Found) -> None:
        old_sig, new_sig = self.old.signature(before), self.new.signature(after)
        if old_sig is None or new_sig is None:
            return
        calls = [u for u in group if u.how == "call"]
        target = f"{key}.__init__" if after.kind == "class" else key
        self.changes.extend(_call_changes(target, calls, old_sig, new_sig))
        overrides = [u for u in group if u.how == "override"]
        if overrides and after.kind == "function" and before.kind == "function":
            change = _override_change(key, overrides, old_sig, new_sig)
            if change is not None:
                self.changes.append(change)
            old_body, new_body = self.old.body_text(before), self.new.body_text(after)
            if old_body is not None and new_body is not None and old_body != new_body:
                n = lines_changed(old_body, new_body)
                old_v, new_v = self.versions
                detail = (
                    f"{key}: the plugin overrides it and the core's own body changed from "
                    f"{old_v} to {new_v} ({n} line(s) changed); check whether the override "
                    "should follow"
                )
                wheres = places(u.where for u in overrides)
                self.review.append(Change(f"body:{key}", "body", key, detail, wheres))

    def _subclass(self, key: str, group: list[Use], before: Found, after: Found) -> None:
        added = self.new.abstract(after) - self.old.abstract(before)
        enforced = self.new.is_abc(after)
        old_methods, new_methods = self.old.methods(before), self.new.methods(after)
        for use in (u for u in group if u.how == "subclass"):
            for name in sorted(added - set(use.names)):
                if enforced:
                    detail = (
                        f"{key} has a new abstract method {name!r} that the plugin's subclass "
                        "does not define: the class can no longer be instantiated"
                    )
                    self.changes.append(
                        Change(f"abstract:{key}.{name}", "abstract", key, detail, (use.where,))
                    )
                else:
                    detail = (
                        f"{key}.{name} became abstract in {self.versions[1]} and the plugin's "
                        f"subclass does not define it (not enforced: {key} is not an ABC)"
                    )
                    self.review.append(Change(f"unimplemented:{key}.{name}", "unimplemented",
                                              f"{key}.{name}", detail, (use.where,)))  # fmt: skip
            for name, method in sorted(new_methods.items()):
                if name in use.names or name in added or not method.entry["fn"]["nie"]:
                    continue
                was = old_methods.get(name)
                if was is not None and was.entry["fn"]["nie"]:
                    continue
                detail = (
                    f"{key}.{name} now raises NotImplementedError in {self.versions[1]} "
                    f"({method.where}) and the plugin's subclass does not override it"
                )
                self.review.append(Change(f"unimplemented:{key}.{name}", "unimplemented",
                                          f"{key}.{name}", detail, (use.where,)))  # fmt: skip


def diff(
    uses: list[Use],
    old: CoreTree,
    new: CoreTree,
    *,
    versions: tuple[str, str] = ("the old core", "the new core"),
    unresolved: Iterable[Unresolved] = (),
    graph: PluginGraph | None = None,
) -> CouplingReport:
    """The report of `uses` against the old and the new core (each part sorted by id)."""
    d = _Diff(old, new, versions)
    groups = d.group(uses)
    for key, pairs in sorted(groups.items()):
        d.symbol(key, pairs)
    merged: dict[str, Change] = {}
    for change in d.changes:
        _add(merged, change)
    review: dict[str, Change] = {}
    for change in d.review:
        if change.id not in merged:
            _add(review, change)
    missing = {u.symbol: u for u in d.unresolved}
    for u in unresolved:
        have = missing.get(u.symbol)
        uses_ = places([*u.uses, *(have.uses if have else ())])
        missing[u.symbol] = Unresolved(u.symbol, have.reason if have else u.reason, uses_)
    return CouplingReport(
        len(groups),
        tuple(sorted(missing.values(), key=lambda u: u.symbol)),
        tuple(sorted(merged.values(), key=lambda c: c.id)),
        tuple(sorted(review.values(), key=lambda c: c.id)),
        graph or PluginGraph(),
    )


def _version(tree: Path, core: str, fallback: str) -> str:
    match = re.fullmatch(rf"{re.escape(core)}-(\d[\w.+!-]*)", tree.name)
    return match.group(1) if match else fallback


def coupling(
    plugin_root: Path,
    old_tree: Path,
    new_tree: Path,
    core: str = "vllm",
    *,
    versions: tuple[str, str] | None = None,
    cache_dir: Path | None = None,
) -> CouplingReport:
    """The bump's API coupling diff (`versions` default to the trees' folder names)."""
    facts = FactsCache(cache_dir)
    old, new = CoreTree(old_tree, facts), CoreTree(new_tree, facts)
    if versions is None:
        versions = (
            _version(old_tree, core, "the old core"),
            _version(new_tree, core, "the new core"),
        )
    uses, unresolved, graph = plugin_uses(plugin_root, core, old)
    return diff(uses, old, new, versions=versions, unresolved=unresolved, graph=graph)


# ---------------------------------------------------------------------------
# Measuring the report against what the pairing did


@dataclass(frozen=True)
class Tracing:
    """Observed failures traced to reported changes: recall is traced / observed failures,
    precision confirmed / reported breaking changes (None when there is nothing to divide)."""

    traced: Mapping[str, tuple[str, ...]]
    missed: tuple[str, ...]
    confirmed: tuple[str, ...]
    unconfirmed: tuple[str, ...]
    recall: float | None
    precision: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "traced": {k: list(v) for k, v in self.traced.items()},
            "missed": list(self.missed),
            "confirmed": list(self.confirmed),
            "unconfirmed": list(self.unconfirmed),
            "recall": self.recall,
            "precision": self.precision,
        }


_WORD = re.compile(r"[A-Za-z_][\w.]*")
_GENERIC = {"__init__", "__call__", "self", "vllm", "positional"}


def _tokens(change: Change) -> tuple[set[str], str]:
    """The names in a change that an error about it would show: the symbol's own name
    (its class for a constructor), the keyword or parameter it is about; and its symbol."""
    parts = change.id.split(":", 1)[1].split(":")
    symbol = parts[0]
    names = {p for p in parts[1:] if p not in _GENERIC}
    pieces = [p for p in symbol.split(".") if p not in _GENERIC]
    if pieces:
        names.add(pieces[-1])
    return {n for n in names if len(n) >= 3}, symbol


def _explains(change: Change, text: str) -> bool:
    """Does an error text name the change: one of its names as a word, or a module path
    the change's symbol lies under (`No module named 'vllm.x'`)?"""
    names, symbol = _tokens(change)
    words = set()
    for word in _WORD.findall(text):
        word = word.rstrip(".")
        words.add(word)
        words.update(word.split("."))
        if "." in word and (symbol == word or symbol.startswith(word + ".")):
            return True
    return bool(names & words)


def _test_modules(test_id: str, graph: PluginGraph) -> set[str]:
    """The plugin modules the test module of `tests.test_x.TestY::test_z` imports."""
    dotted_id = test_id.split("::")[0].replace("/", ".")
    dotted_id = dotted_id[:-3] if dotted_id.endswith(".py") else dotted_id
    parts = dotted_id.split(".")
    for cut in range(len(parts), 0, -1):
        found = graph.tests.get(".".join(parts[:cut]))
        if found is not None:
            return set(found)
    return set()


def trace_failures(
    report: CouplingReport,
    import_failures: Mapping[str, str],
    regressions: Mapping[str, str],
) -> Tracing:
    """Which observed failures of a pairing the report's changes explain (pure). A failure
    is traced to a change used in the failing module or a plugin module it imports, when
    its error text names the change."""
    graph = report.graph
    changes = [*report.changes, *report.review]
    by_module: dict[str, list[Change]] = {}
    for change in changes:
        for where in change.uses:
            module = graph.modules.get(where.rpartition(":")[0])
            if module is not None:
                by_module.setdefault(module, []).append(change)
    observed: list[tuple[str, set[str], str]] = [
        (module, {module}, text) for module, text in sorted(import_failures.items())
    ]
    observed += [
        (test, _test_modules(test, graph), text) for test, text in sorted(regressions.items())
    ]
    traced: dict[str, tuple[str, ...]] = {}
    missed: list[str] = []
    for failure, modules, text in observed:
        reach = graph.closure(modules)
        candidates = {c.id: c for m in reach for c in by_module.get(m, [])}
        ids = sorted(cid for cid, c in candidates.items() if _explains(c, text))
        if ids:
            traced[failure] = tuple(ids)
        else:
            missed.append(failure)
    breaking = [c.id for c in report.changes]
    hit = {cid for ids in traced.values() for cid in ids}
    confirmed = tuple(sorted(cid for cid in breaking if cid in hit))
    total = len(observed)
    return Tracing(
        traced=traced,
        missed=tuple(missed),
        confirmed=confirmed,
        unconfirmed=tuple(sorted(cid for cid in breaking if cid not in hit)),
        recall=len(traced) / total if total else None,
        precision=len(confirmed) / len(breaking) if breaking else None,
    )
