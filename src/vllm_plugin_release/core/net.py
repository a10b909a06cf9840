"""Credentials kept out of messages: one URL redaction and one scrubber for the package."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable

# The user info of a URL ("scheme://USER:PASSWORD@"), up to the last "@" of the authority.
_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """Text meant for a person without credentials: each secret becomes ***, and the user
    info of every URL in it becomes ***@."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return _USERINFO.sub("***@", text)


def redact_url(url: str) -> str:
    """A URL as it may be shown: without its user info."""
    return scrub(url)


Origin = tuple[str, str, int | None]


def origin(url: str) -> Origin:
    """(scheme, host, port) of `url`, the default port filled in."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return (
        scheme,
        (parts.hostname or "").lower(),
        parts.port or {"http": 80, "https": 443}.get(scheme),
    )
