"""Small network helpers: a free loopback port, and credentials kept out of messages."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable

# The user info of a URL ("scheme://USER:PASSWORD@"), up to the last "@" of the authority.
_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """Text meant for a person without credentials: each secret becomes ***, and the user
    info of every URL in it becomes ***@."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return _USERINFO.sub("***@", text)


def redact_url(url: str) -> str:
    """A URL as it may be shown: without its user info."""
    return scrub(url)
