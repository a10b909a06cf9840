"""What an API contract diff is made of: change kinds and the `Change` record.

Shared by the differ (`apidiff`), the check and its allow list (`api`) and the
reports (`apireport`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

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
        out: dict[str, Any] = {
            "kind": self.kind,
            "location": self.location,
            "breaking": self.breaking,
            "detail": self.detail,
        }
        if self.via:
            out["via"] = self.via
        return out

    def line(self) -> str:
        tag = "BREAKING" if self.breaking else "info"
        via = f" (via {self.via})" if self.via and self.via != self.location else ""
        return f"[{tag}] {self.kind} {self.location}{via}: {self.detail}"
