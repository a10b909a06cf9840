"""The `api` contract differ (pure): two contracts in, each difference classified from the
client's side (breaking or information), and the text and Markdown reports of a diff."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from vllm_plugin_release.conform.lib.apicontract import (
    LOWER_BOUNDS,
    OTHER_CONSTRAINTS,
    UPPER_BOUNDS,
    accepts,
    as_dict,
    branches,
    canonical,
    deref,
    enum_values,
    normal,
    normalize_contract,
    number,
    ref_name,
    resolve,
    types_of,
    value_type,
)

Direction = Literal["request", "response"]

# kind -> what it means (docs, `vpr api-diff`); whether a change is breaking is
# decided per change (a tightened constraint breaks requests, not responses).
KINDS: dict[str, str] = {
    "removed-path": "a path clients call is gone",
    "removed-operation": "a method on a path is gone",
    "removed-success-status": "a 2xx response status is gone",
    "removed-media-type": "a media type of a success response is gone",
    "removed-request-media-type": "a request body media type is no longer accepted",
    "removed-response-property": "a response property is gone",
    "retyped-response-property": "a response value may now have a type clients do not expect",
    "response-property-optional": "a required response property became optional",
    "response-property-nullable": "a response property may now be null",
    "new-required-request-field": "a request field (or the body) is newly required",
    "new-required-parameter": "a parameter is newly required",
    "removed-request-field": "a request field is gone (extra fields are ignored: silent)",
    "removed-parameter": "a parameter is gone",
    "retyped-request-field": "a request value of a type clients send is no longer accepted",
    "removed-enum-value": "an enum value is gone",
    "tightened-constraint": "a constraint became stricter",
    "removed-model": "an exported request/response model is gone",
    # additive or neutral (information)
    "added-path": "a new path",
    "added-operation": "a new method on a path",
    "added-status": "a new response status",
    "removed-error-status": "a non-2xx response status is no longer declared",
    "added-media-type": "a new media type",
    "added-response-property": "a new response property",
    "added-request-field": "a new optional request field",
    "added-parameter": "a new optional parameter",
    "added-enum-value": "a new enum value",
    "added-model": "a new exported model",
    "loosened-constraint": "a constraint became looser",
    "widened-request-type": "a request value accepts more types",
    "narrowed-response-type": "a response value has fewer possible types",
    "response-property-required": "an optional response property became required",
    "response-property-not-nullable": "a response property is no longer nullable",
    "request-field-optional": "a required request field became optional",
    "changed-default": "a request field's default changed",
    "deprecated": "a field or operation is now deprecated",
}


@dataclass(frozen=True)
class Change:
    """One difference between two contracts, from the client's side."""

    kind: str
    location: str
    breaking: bool
    detail: str
    via: str = ""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.via:
            del out["via"]
        return out

    def line(self) -> str:
        tag = "BREAKING" if self.breaking else "info"
        via = f" (via {self.via})" if self.via and self.via != self.location else ""
        return f"[{tag}] {self.kind} {self.location}{via}: {self.detail}"


METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


@dataclass
class _Side:
    schema: Any
    root: Any


@dataclass(frozen=True)
class _At:
    """Where the walk is, and the operation or model that reached it (`via`)."""

    direction: Direction
    loc: str
    via: str
    depth: int = 0

    def down(self, loc: str | None = None) -> _At:
        return replace(self, loc=self.loc if loc is None else loc, depth=self.depth + 1)


def _split_branches(bs: list[dict]) -> tuple[dict[str, dict], list[dict], list[dict]]:
    """Union branches as (referenced components by name, enum-like, typed)."""
    refs: dict[str, dict] = {}
    enums: list[dict] = []
    typed: list[dict] = []
    for b in bs:
        if "$ref" in b:
            refs[ref_name(b["$ref"])] = b
        elif enum_values(b) is not None:
            enums.append(b)
        else:
            typed.append(b)
    return refs, enums, typed


def _by_type(bs: list[dict]) -> dict[str, dict]:
    return {",".join(sorted(types_of(b))): b for b in bs}


def _union_types(bs: list[dict]) -> set[str]:
    return set().union(*(types_of(b) for b in bs)) if bs else set()


@dataclass
class _Differ:
    changes: list[Change] = field(default_factory=list)
    seen: set[tuple[Any, ...]] = field(default_factory=set)

    def add(self, kind: str, loc: str, breaking: bool, detail: str, via: str) -> None:
        self.changes.append(Change(kind, loc, breaking, detail, via))

    def note(self, at: _At, kind: str, breaking: bool, detail: str) -> None:
        self.changes.append(Change(kind, at.loc, breaking, detail, at.via))

    # -- schemas ---------------------------------------------------------

    def schema(self, old: _Side, new: _Side, at: _At) -> None:
        if at.depth > 64:
            return
        ob, onull = branches(old.schema, old.root)
        nb, nnull = branches(new.schema, new.root)
        req = at.direction == "request"
        if onull and not nnull and ob:
            if req:
                self.note(at, "retyped-request-field", True, "no longer accepts null")
            else:
                self.note(at, "response-property-not-nullable", False, "no longer null")
        if nnull and not onull and nb:
            if req:
                self.note(at, "widened-request-type", False, "now also accepts null")
            else:
                detail = "may now be null (was never null)"
                self.note(at, "response-property-nullable", True, detail)
        if not ob or not nb:
            return
        if len(ob) == 1 and len(nb) == 1:
            self._single(_Side(ob[0], old.root), _Side(nb[0], new.root), at)
        else:
            self._union(_Side(ob, old.root), _Side(nb, new.root), at)

    def _union(self, old: _Side, new: _Side, at: _At) -> None:
        """A union on either side (`old.schema`/`new.schema` are the branch lists)."""
        orefs, oenums, otyped = _split_branches(old.schema)
        nrefs, nenums, ntyped = _split_branches(new.schema)
        self._union_enums((oenums, otyped), (nenums, ntyped), at)
        self._union_refs(_Side(orefs, old.root), _Side(nrefs, new.root), at)
        self._union_typed(_Side(otyped, old.root), _Side(ntyped, new.root), at)

    def _union_enums(
        self, old: tuple[list[dict], list[dict]], new: tuple[list[dict], list[dict]], at: _At
    ) -> None:
        """Enum-like branches of a union: one value set (`old`/`new`: (enum-like, typed))."""
        (oenums, otyped), (nenums, ntyped) = old, new
        otyped_types, ntyped_types = _union_types(otyped), _union_types(ntyped)
        ovals = {canonical(v): v for b in oenums for v in (enum_values(b) or [])}
        nvals = {canonical(v): v for b in nenums for v in (enum_values(b) or [])}
        if oenums and nenums:
            self._enum_diff(ovals, nvals, at)
        elif oenums:
            # the literals went; still fine if a plain type on the new side takes them
            if all(accepts(ntyped_types, value_type(v)) for v in ovals.values()):
                detail = f"no longer restricted to {', '.join(sorted(ovals))}"
                self.note(at, "loosened-constraint", False, detail)
            else:
                self._enum_diff(ovals, {}, at)
        elif nenums and not all(accepts(otyped_types, value_type(v)) for v in nvals.values()):
            shown = ", ".join(sorted(nvals))
            if at.direction == "request":
                self.note(at, "widened-request-type", False, f"now also accepts {shown}")
            else:
                self.note(at, "retyped-response-property", True, f"may now be {shown}")

    def _union_refs(self, old: _Side, new: _Side, at: _At) -> None:
        """Referenced components of a union, by name (then a lone rename)."""
        orefs, nrefs, oroot, nroot = old.schema, new.schema, old.root, new.root
        req = at.direction == "request"
        for name in sorted(set(orefs) & set(nrefs)):
            self._single(_Side(orefs[name], oroot), _Side(nrefs[name], nroot), at)
        lost_refs = sorted(set(orefs) - set(nrefs))
        new_refs = sorted(set(nrefs) - set(orefs))
        if len(lost_refs) == 1 and len(new_refs) == 1:
            self._single(_Side(orefs[lost_refs[0]], oroot), _Side(nrefs[new_refs[0]], nroot), at)
            lost_refs, new_refs = [], []
        for name in lost_refs:
            if req:
                self.note(at, "retyped-request-field", True, f"no longer accepts {name}")
            else:
                self.note(at, "narrowed-response-type", False, f"no longer {name}")
        for name in new_refs:
            if req:
                self.note(at, "widened-request-type", False, f"now also accepts {name}")
            else:
                self.note(at, "retyped-response-property", True, f"may now be {name}")

    def _union_typed(self, old: _Side, new: _Side, at: _At) -> None:
        """Typed branches of a union (`old.schema`/`new.schema`), keyed by their type set."""
        otyped, ntyped = old.schema, new.schema
        req = at.direction == "request"
        otyped_types, ntyped_types = _union_types(otyped), _union_types(ntyped)
        ot, nt = _by_type(otyped), _by_type(ntyped)
        for key in sorted(set(ot) & set(nt)):
            self._single(_Side(ot[key], old.root), _Side(nt[key], new.root), at)
        for key in sorted(set(ot) - set(nt)):
            if req and not all(accepts(ntyped_types, t) for t in key.split(",")):
                self.note(at, "retyped-request-field", True, f"no longer accepts {key}")
            elif not req:
                self.note(at, "narrowed-response-type", False, f"no longer {key}")
        for key in sorted(set(nt) - set(ot)):
            if not req and not all(accepts(otyped_types, t) for t in key.split(",")):
                self.note(at, "retyped-response-property", True, f"may now be {key}")
            elif req:
                self.note(at, "widened-request-type", False, f"now also accepts {key}")

    def _enum_diff(self, ovals: dict[str, Any], nvals: dict[str, Any], at: _At) -> None:
        removed = sorted(set(ovals) - set(nvals))
        added = sorted(set(nvals) - set(ovals))
        if removed:
            what = "no longer accepted" if at.direction == "request" else "no longer produced"
            self.note(at, "removed-enum-value", True, f"{', '.join(removed)} {what}")
        if added:
            self.note(at, "added-enum-value", False, f"{', '.join(added)} added")

    def _single(self, old: _Side, new: _Side, at: _At) -> None:
        o = normal(old.schema, old.root)
        n = normal(new.schema, new.root)
        if "$ref" in o or "$ref" in n:
            self._single_ref(_Side(o, old.root), _Side(n, new.root), at)
            return
        if isinstance(o.get("anyOf") or o.get("oneOf"), list) or isinstance(
            n.get("anyOf") or n.get("oneOf"), list
        ):
            self.schema(_Side(o, old.root), _Side(n, new.root), at.down())
            return
        ot, nt = types_of(o), types_of(n)
        if self._untyped_change(ot, nt, at):
            return
        self._type_change(ot, nt, at)
        if not ot & nt and not any(accepts(nt, t) for t in ot):
            return  # retyped: nothing further in common
        self._enum_change(o, n, at)
        self._constraints(o, n, at)
        if n.get("deprecated") and not o.get("deprecated"):
            self.note(at, "deprecated", False, "now deprecated")
        if "object" in ot and "object" in nt:
            self._object(_Side(o, old.root), _Side(n, new.root), at)
        if "array" in ot and "array" in nt and ("items" in o or "items" in n):
            self.schema(
                _Side(o.get("items", {}), old.root),
                _Side(n.get("items", {}), new.root),
                at.down(f"{at.loc}[]"),
            )

    def _single_ref(self, old: _Side, new: _Side, at: _At) -> None:
        """A branch that is (or points at) a component: each component pair is walked once."""
        o, n = old.schema, new.schema
        oref, nref = o.get("$ref"), n.get("$ref")
        key = (at.direction, id(old.root), oref, id(new.root), nref)
        if oref and nref:
            if key in self.seen:
                return
            self.seen.add(key)
            oname, nname = ref_name(oref), ref_name(nref)
            loc = oname if oname == nname else f"{oname}->{nname}"
            at = replace(at, loc=loc, via=at.via or loc)
        o2 = resolve(o, old.root)
        n2 = resolve(n, new.root)
        self.schema(_Side(o2, old.root), _Side(n2, new.root), at.down())

    def _untyped_change(self, ot: set[str], nt: set[str], at: _At) -> bool:
        """A value that became (or stopped being) unconstrained; True: nothing more to compare."""
        req = at.direction == "request"
        if "any" in nt and "any" not in ot:
            if req:
                self.note(at, "widened-request-type", False, "now accepts any value")
            else:
                detail = f"no longer declared (any value); was {', '.join(sorted(ot))}"
                self.note(at, "retyped-response-property", True, detail)
            return True
        if "any" in ot and "any" not in nt:
            if req:
                detail = f"was any value, now only {', '.join(sorted(nt))}"
                self.note(at, "retyped-request-field", True, detail)
            else:
                detail = f"now declared as {', '.join(sorted(nt))}"
                self.note(at, "narrowed-response-type", False, detail)
            return True
        return "any" in ot  # both unconstrained

    def _type_change(self, ot: set[str], nt: set[str], at: _At) -> None:
        lost = sorted(t for t in ot if not accepts(nt, t))
        gained = sorted(t for t in nt if not accepts(ot, t))
        if at.direction == "request":
            if lost:
                detail = f"no longer accepts {', '.join(lost)} (now {', '.join(sorted(nt))})"
                self.note(at, "retyped-request-field", True, detail)
            if gained:
                detail = f"now also accepts {', '.join(gained)}"
                self.note(at, "widened-request-type", False, detail)
        else:
            if gained:
                detail = f"may now be {', '.join(gained)} (was {', '.join(sorted(ot))})"
                self.note(at, "retyped-response-property", True, detail)
            if lost:
                self.note(at, "narrowed-response-type", False, f"no longer {', '.join(lost)}")

    def _enum_change(self, o: dict[str, Any], n: dict[str, Any], at: _At) -> None:
        ov, nv = enum_values(o), enum_values(n)
        if ov is not None and nv is not None:
            self._enum_diff({canonical(v): v for v in ov}, {canonical(v): v for v in nv}, at)
        elif ov is None and nv is not None:
            detail = f"now restricted to {', '.join(sorted(canonical(v) for v in nv))}"
            self.note(at, "tightened-constraint", at.direction == "request", detail)
        elif ov is not None and nv is None:
            detail = f"no longer restricted to {', '.join(sorted(canonical(v) for v in ov))}"
            self.note(at, "loosened-constraint", False, detail)

    def _constraints(self, o: dict[str, Any], n: dict[str, Any], at: _At) -> None:
        req = at.direction == "request"

        def report(tight: bool, text: str) -> None:
            if tight:
                self.note(at, "tightened-constraint", req, text)
            else:
                self.note(at, "loosened-constraint", False, text)

        for k in (*UPPER_BOUNDS, *LOWER_BOUNDS, *OTHER_CONSTRAINTS):
            a, b = o.get(k), n.get(k)
            if a == b:
                continue
            na, nb = number(a), number(b)
            if a is None:
                report(True, f"{k} {b!r} added")
            elif b is None:
                report(False, f"{k} {a!r} removed")
            elif k in OTHER_CONSTRAINTS or na is None or nb is None:
                report(k in OTHER_CONSTRAINTS or bool(b), f"{k} {a!r} -> {b!r}")
            else:
                report(nb < na if k in UPPER_BOUNDS else nb > na, f"{k} {a!r} -> {b!r}")
        if bool(n.get("uniqueItems")) != bool(o.get("uniqueItems")):
            report(bool(n.get("uniqueItems")), f"uniqueItems -> {bool(n.get('uniqueItems'))}")

    def _object(self, old: _Side, new: _Side, at: _At) -> None:
        loc, via = at.loc, at.via
        o, n = old.schema, new.schema
        req = at.direction == "request"
        oprops: dict[str, Any] = o.get("properties") or {}
        nprops: dict[str, Any] = n.get("properties") or {}
        oreq, nreq = set(o.get("required") or []), set(n.get("required") or [])
        extra_ok = n.get("additionalProperties", True) is not False
        for name in sorted(oprops):
            child = f"{loc}.{name}"
            if name not in nprops:
                self._removed_property(child, req, extra_ok, via)
                continue
            if req:
                self._request_field(
                    child, name in oreq, name in nreq, oprops[name], nprops[name], via
                )
            else:
                self._response_property(child, name in oreq, name in nreq, via)
            self.schema(
                _Side(oprops[name], old.root), _Side(nprops[name], new.root), at.down(child)
            )
        for name in sorted(set(nprops) - set(oprops)):
            child = f"{loc}.{name}"
            if req and name in nreq:
                self.add("new-required-request-field", child, True, "new required field", via)
            elif req:
                self.add("added-request-field", child, False, "new optional field", via)
            else:
                self.add("added-response-property", child, False, "new property", via)
        self._extra_properties(old, new, at)

    def _removed_property(self, child: str, req: bool, extra_ok: bool, via: str) -> None:
        if req:
            detail = (
                "field removed; extra fields are allowed, so requests that send it are "
                "silently ignored"
                if extra_ok
                else "field removed; requests that send it are now rejected"
            )
            self.add("removed-request-field", child, True, detail, via)
        else:
            self.add("removed-response-property", child, True, "property removed", via)

    def _request_field(
        self, child: str, was_required: bool, is_required: bool, old: Any, new: Any, via: str
    ) -> None:
        """A request field on both sides: required or not, and its default."""
        if is_required and not was_required:
            self.add("new-required-request-field", child, True, "now required", via)
        elif was_required and not is_required:
            self.add("request-field-optional", child, False, "no longer required", via)
        od, nd = as_dict(old), as_dict(new)
        before, after = canonical(od.get("default")), canonical(nd.get("default"))
        if ("default" in od or "default" in nd) and before != after:
            self.add("changed-default", child, False, f"default {before} -> {after}", via)

    def _response_property(
        self, child: str, was_required: bool, is_required: bool, via: str
    ) -> None:
        if was_required and not is_required:
            detail = "no longer required (may be absent)"
            self.add("response-property-optional", child, True, detail, via)
        elif is_required and not was_required:
            self.add("response-property-required", child, False, "now required", via)

    def _extra_properties(self, old: _Side, new: _Side, at: _At) -> None:
        """`additionalProperties`: extra fields rejected or allowed, and their schema."""
        oap, nap = old.schema.get("additionalProperties"), new.schema.get("additionalProperties")
        if at.direction == "request" and oap is not False and nap is False:
            self.note(at, "tightened-constraint", True, "extra fields are now rejected")
        elif oap is False and nap not in (False, None):
            self.note(at, "loosened-constraint", False, "extra fields now allowed")
        if isinstance(oap, dict) and isinstance(nap, dict):
            self.schema(_Side(oap, old.root), _Side(nap, new.root), at.down(f"{at.loc}{{*}}"))

    # -- OpenAPI ---------------------------------------------------------

    def openapi(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        opaths, npaths = old.get("paths", {}), new.get("paths", {})
        for path in sorted(opaths):
            if path not in npaths:
                ops = [m.upper() for m in METHODS if m in opaths[path]]
                self.add("removed-path", path, True, f"path removed ({', '.join(ops)})", path)
                continue
            oitem, nitem = opaths[path], npaths[path]
            for method in METHODS:
                if method not in oitem:
                    continue
                op = f"{method.upper()} {path}"
                if method not in nitem:
                    self.add("removed-operation", op, True, "operation removed", op)
                    continue
                self._operation(old, new, oitem, nitem, method, op)
            for method in METHODS:
                if method in nitem and method not in oitem:
                    op = f"{method.upper()} {path}"
                    self.add("added-operation", op, False, "new operation", op)
        for path in sorted(set(npaths) - set(opaths)):
            ops = [m.upper() for m in METHODS if m in npaths[path]]
            self.add("added-path", path, False, f"new path ({', '.join(ops)})", path)

    def _operation(
        self, oroot: dict, nroot: dict, oitem: dict, nitem: dict, method: str, op: str
    ) -> None:
        o, n = deref(oitem[method], oroot), deref(nitem[method], nroot)
        if n.get("deprecated") and not o.get("deprecated"):
            self.add("deprecated", op, False, "operation now deprecated", op)
        self._parameters(
            _Side(_params(oitem, o, oroot), oroot), _Side(_params(nitem, n, nroot), nroot), op
        )
        self._request_body(_Side(o, oroot), _Side(n, nroot), op)
        self._responses(_Side(o, oroot), _Side(n, nroot), op)

    def _parameters(self, old: _Side, new: _Side, op: str) -> None:
        """An operation's parameters (`old.schema`/`new.schema`: by (in, name))."""
        opar, npar, oroot, nroot = old.schema, new.schema, old.root, new.root
        for key in sorted(opar):
            where, name = key
            loc = f"{op} {where} parameter {name}"
            if key not in npar:
                self.add("removed-parameter", loc, True, "parameter removed", op)
                continue
            if npar[key].get("required") and not opar[key].get("required"):
                self.add("new-required-parameter", loc, True, "now required", op)
            self.schema(
                _Side(opar[key].get("schema", {}), oroot),
                _Side(npar[key].get("schema", {}), nroot),
                _At("request", loc, op),
            )
        for key in sorted(set(npar) - set(opar)):
            where, name = key
            loc = f"{op} {where} parameter {name}"
            if npar[key].get("required"):
                self.add("new-required-parameter", loc, True, "new required parameter", op)
            else:
                self.add("added-parameter", loc, False, "new optional parameter", op)

    def _request_body(self, old: _Side, new: _Side, op: str) -> None:
        """The operation's request body (`old.schema`/`new.schema` are the operations)."""
        o, n, oroot, nroot = old.schema, new.schema, old.root, new.root
        obody = deref(o.get("requestBody"), oroot) if "requestBody" in o else None
        nbody = deref(n.get("requestBody"), nroot) if "requestBody" in n else None
        loc = f"{op} request body"
        if obody is not None and nbody is None:
            self.add("removed-request-field", loc, True, "request body no longer read", op)
        elif nbody is not None and obody is None:
            if nbody.get("required"):
                self.add("new-required-request-field", loc, True, "request body now required", op)
            else:
                self.add("added-request-field", loc, False, "optional request body", op)
        elif obody is not None and nbody is not None:
            if nbody.get("required") and not obody.get("required"):
                self.add("new-required-request-field", loc, True, "request body now required", op)
            self._media(
                _Side(obody.get("content") or {}, oroot),
                _Side(nbody.get("content") or {}, nroot),
                _At("request", loc, op),
                ("removed-request-media-type", True, "media type no longer accepted"),
            )

    def _media(self, old: _Side, new: _Side, at: _At, removed: tuple[str, bool, str]) -> None:
        """One body's media types (`old.schema`/`new.schema` are the `content` maps): each
        kept type's schema compared, a removed one reported as `removed`, new ones listed."""
        ocont, ncont = old.schema, new.schema
        for media in sorted(ocont):
            here = replace(at, loc=f"{at.loc} {media}")
            if media not in ncont:
                self.note(here, *removed)
                continue
            self.schema(
                _Side(as_dict(ocont[media]).get("schema", {}), old.root),
                _Side(as_dict(ncont[media]).get("schema", {}), new.root),
                here,
            )
        for media in sorted(set(ncont) - set(ocont)):
            self.add("added-media-type", f"{at.loc} {media}", False, "new media type", at.via)

    def _responses(self, old: _Side, new: _Side, op: str) -> None:
        """The operation's responses (`old.schema`/`new.schema` are the operations)."""
        oroot, nroot = old.root, new.root
        oresp, nresp = old.schema.get("responses") or {}, new.schema.get("responses") or {}
        for status in sorted(oresp):
            loc = f"{op} {status}"
            success = str(status).startswith("2")
            if status not in nresp:
                if success:
                    self.add("removed-success-status", loc, True, "success status removed", op)
                else:
                    self.add("removed-error-status", loc, False, "status no longer declared", op)
                continue
            removed_kind = "removed-media-type" if success else "removed-error-status"
            self._media(
                _Side(deref(oresp[status], oroot).get("content") or {}, oroot),
                _Side(deref(nresp[status], nroot).get("content") or {}, nroot),
                _At("response", loc, op),
                (removed_kind, success, "media type removed"),
            )
        for status in sorted(set(nresp) - set(oresp)):
            self.add("added-status", f"{op} {status}", False, "new response status", op)

    def models(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        for name in sorted(old):
            via = f"model {name}"
            if name not in new:
                self.add("removed-model", name, True, "model no longer exported", via)
                continue
            direction: Direction = "request" if name.endswith("Request") else "response"
            self.schema(
                _Side(old[name], old[name]), _Side(new[name], new[name]), _At(direction, name, via)
            )
        for name in sorted(set(new) - set(old)):
            self.add("added-model", name, False, "new model", f"model {name}")


def _params(item: dict, op: dict, root: Any) -> dict[tuple[str, str], dict]:
    """An operation's parameters (path-level ones first) by (in, name)."""
    out: dict[tuple[str, str], dict] = {}
    for p in [*(item.get("parameters") or []), *(op.get("parameters") or [])]:
        p = deref(p, root)
        if "name" in p:
            out[(str(p.get("in", "query")), str(p["name"]))] = p
    return out


def diff_contracts(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Every difference from contract `old` to `new` (normalized contracts or OpenAPI docs)."""
    old = normalize_contract(old, "old contract")
    new = normalize_contract(new, "new contract")
    d = _Differ()
    d.openapi(old["openapi"], new["openapi"])
    d.models(old.get("models", {}), new.get("models", {}))
    return _finish(d.changes)


def _finish(changes: list[Change]) -> list[Change]:
    unique: dict[tuple[str, str, bool, str], Change] = {}
    for c in changes:
        unique.setdefault((c.kind, c.location, c.breaking, c.detail), c)
    return sorted(unique.values(), key=lambda c: (not c.breaking, c.location, c.kind, c.detail))


def render_text(old: dict, new: dict, changes: list[Change], old_file: str, new_file: str) -> str:
    breaking = [c for c in changes if c.breaking]
    lines = [
        f"{old_file} (vllm {old['core']['version']}) -> {new_file} (vllm "
        f"{new['core']['version']}): {len(breaking)} breaking, "
        f"{len(changes) - len(breaking)} additive/neutral"
    ]
    lines += [f"  {c.line()}" for c in changes]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(
    old: dict, new: dict, changes: list[Change], old_file: str, new_file: str, command: str
) -> str:
    """A Markdown report of a contract diff (used for docs/api-diff-*.md)."""
    ov, nv = old["core"]["version"], new["core"]["version"]
    breaking = [c for c in changes if c.breaking]
    info = [c for c in changes if not c.breaking]
    out = [
        f"# API diff: vLLM {ov} -> {nv}",
        "",
        f"Generated by `{command}` (vllm-plugin-release).",
        "",
        f"- old contract: `{old_file}` (vLLM {ov})",
        f"- new contract: `{new_file}` (vLLM {nv})",
        f"- breaking changes: **{len(breaking)}**",
        f"- additive or neutral changes: **{len(info)}**",
        "",
    ]
    for doc, label in ((old, "old"), (new, "new")):
        cw = doc.get("captured_with") or {}
        if cw:
            plugins = ", ".join(cw.get("endpoint_plugins") or []) or "none"
            out.append(
                f"The {label} contract was captured for tasks {cw.get('tasks')} with "
                f"{cw.get('platform') or 'an unrecorded platform'}; endpoint plugins: {plugins}."
            )
    out.append("")
    if info or breaking:
        out += _summary_by_kind(changes)
    for title, group in (("Breaking changes", breaking), ("Additive and neutral changes", info)):
        out += [f"## {title}", ""]
        if not group:
            out += ["None.", ""]
            continue
        out += ["| kind | location | via | detail |", "|---|---|---|---|"]
        for c in group:
            via = c.via if c.via and c.via != c.location else ""
            out.append(f"| {c.kind} | `{_md(c.location)}` | {_md(via)} | {_md(c.detail)} |")
        out.append("")
    return "\n".join(out)


def _summary_by_kind(changes: list[Change]) -> list[str]:
    counts = Counter((c.kind, c.breaking) for c in changes)
    out = [
        "## Summary by kind",
        "",
        "| kind | breaking | count | meaning |",
        "|---|---|---|---|",
    ]
    for (kind, brk), n in sorted(counts.items(), key=lambda kv: (not kv[0][1], kv[0][0])):
        out.append(f"| {kind} | {'yes' if brk else 'no'} | {n} | {KINDS.get(kind, '')} |")
    out.append("")
    return out
