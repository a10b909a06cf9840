"""Vendor symbols, the allowlist, and the matcher that finds them in file bytes.

Matching rule (identifier boundaries, case-insensitive, like `rg -i` but on words)
--------------------------------------------------------------------------------
A symbol is cut into words the way code spells identifiers: at `_ - . /` and at
CamelCase humps (`TTPlatform` -> tt, platform; `vllm_tt_plugin` -> vllm, tt, plugin).

* A symbol matches text that spells its words in order, case-insensitively,
  joined by nothing or by one of `_ - . /`, where the matched span *starts and
  ends on a word boundary* of the text: the edge of an identifier, a separator,
  or a CamelCase hump.  So `ttnn` matches `import ttnn`, `ttnn.open_device`,
  `is_ttnn_available`, `TTNNOps` and `"TTNN_CACHE"`, but not the `ttnN` inside
  `AttnNvfp4QuantPattern` (no boundary before `t`); `ascend` matches
  `AscendPlatform` and `vllm_ascend` but not `ascending`; `tt_metal`, `tt-metal`
  and `TtMetal` are one symbol, and it matches `TT_METAL_HOME`.
* A symbol spelled like an environment variable (ALL CAPS with underscores,
  e.g. `MESH_DEVICE`, `TT_VISIBLE_DEVICES`) names one variable and matches the
  whole token only: `"MESH_DEVICE"`, `os.environ["MESH_DEVICE"]`, `$MESH_DEVICE`,
  but not `MESH_DEVICE_COUNT` or `create_mesh_device`.

The matcher makes one multi-pattern pass (the Rust aho-corasick crate, through
`ahocorasick_rs`) over the lower-cased bytes for every spelling of every symbol,
then keeps the candidates whose span sits on word boundaries of the raw bytes.
An allowlist entry (`path` glob + `symbol` + `reason`) names a known hit.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple

from vllm_plugin_release.core.errors import BadInput

# The Tenstorrent symbol set (the TT buildspec lists these, or more).
TT_SYMBOLS: tuple[str, ...] = (
    "ttnn",
    "tt_metal",
    "tt-metal",
    "tenstorrent",
    "TTPlatform",
    "MESH_DEVICE",
    "TT_VISIBLE_DEVICES",
    "vllm_tt_plugin",
)

# The kinds of hit and their severity (`symbolkinds` classifies; they live here so that a
# report with no hit never loads the classifier).
Kind = Literal["import", "code", "string", "comment", "docs"]
KINDS: tuple[Kind, ...] = ("import", "code", "string", "comment", "docs")
SEVERITY: dict[str, str] = {
    "import": "fail",
    "code": "fail",
    "string": "warn",
    "comment": "info",
    "docs": "info",
}

SYMBOL_RE = re.compile(r"^[A-Za-z0-9_./-]*[A-Za-z0-9][A-Za-z0-9_./-]*$")
_ENV_STYLE_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_JOINERS: tuple[str, ...] = ("", "_", "-", ".", "/")
MAX_WORDS = 5  # 5 joiners ** (words - 1) spellings per symbol; 625 at most


# ---------------------------------------------------------------------------
# Symbols and the allowlist


def split_words(identifier: str) -> tuple[str, ...]:
    """Lower-cased words of an identifier: split at non-alphanumerics and CamelCase humps."""
    words: list[str] = []
    for part in re.split(r"[^A-Za-z0-9]+", identifier):
        if not part:
            continue
        start = 0
        for i in range(1, len(part)):
            if _hump(part, i):
                words.append(part[start:i])
                start = i
        words.append(part[start:])
    return tuple(w.lower() for w in words)


def _hump(s: str, i: int) -> bool:
    a, b = s[i - 1], s[i]
    if b.isupper() and (a.islower() or a.isdigit()):
        return True
    return a.isupper() and b.isupper() and i + 1 < len(s) and s[i + 1].islower()


# The records here and in symbolscan are NamedTuples, not dataclasses: `vpr scan-core`
# then never imports dataclasses (and inspect, its import), a large share of its start-up.


class Symbol(NamedTuple):
    """A vendor symbol as written in the spec, with its matching rule."""

    name: str
    words: tuple[str, ...]
    exact: bool  # environment-variable style: whole token only

    @classmethod
    def parse(cls, name: str) -> Symbol:
        if not isinstance(name, str) or not SYMBOL_RE.match(name):
            raise ValueError(
                f"{name!r} is not a symbol: use letters, digits and `_ . - /` "
                "(e.g. ttnn, tt_metal, TTPlatform)"
            )
        words = split_words(name)
        if len(words) > MAX_WORDS:
            raise ValueError(f"{name!r} has {len(words)} words; at most {MAX_WORDS}")
        return cls(name=name, words=words, exact=bool(_ENV_STYLE_RE.match(name)))

    @property
    def key(self) -> tuple[tuple[str, ...], bool]:
        return self.words, self.exact

    def spellings(self) -> list[str]:
        """Lower-case spellings the matcher searches for."""
        if self.exact:
            return [self.name.lower()]
        out = []
        for seps in itertools.product(_JOINERS, repeat=len(self.words) - 1):
            text = self.words[0]
            for sep, word in zip(seps, self.words[1:]):
                text += sep + word
            out.append(text)
        return out


class AllowEntry(NamedTuple):
    path: str
    symbol: str
    reason: str

    def matches(self, hit_path: str, symbol: Symbol) -> bool:
        if self.symbol != "*" and split_words(self.symbol) != symbol.words:
            return False
        return hit_path == self.path or fnmatch.fnmatchcase(hit_path, self.path)

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "symbol": self.symbol, "reason": self.reason}


def parse_symbols(names: Iterable[str]) -> list[Symbol]:
    """Symbols, deduplicated by their words (`tt_metal` and `tt-metal` are one)."""
    seen: dict[tuple[tuple[str, ...], bool], Symbol] = {}
    for name in names:
        symbol = Symbol.parse(name)
        seen.setdefault(symbol.key, symbol)
    return list(seen.values())


# ---------------------------------------------------------------------------
# The matcher: one multi-pattern pass, then boundary checks on the raw bytes


def _automaton(patterns: list[bytes]) -> Any:
    """ahocorasick_rs (the Rust aho-corasick crate) when installed, else a plain fallback."""
    try:
        import ahocorasick_rs
    except ImportError:  # pragma: no cover - the dependency is declared
        return _PlainFinder(patterns)
    return ahocorasick_rs.BytesAhoCorasick(patterns)


class _PlainFinder:
    """Same interface as BytesAhoCorasick, with bytes.find (slower, no dependency)."""

    def __init__(self, patterns: list[bytes]) -> None:
        self.patterns = patterns

    def find_matches_as_indexes(
        self, data: bytes, overlapping: bool = False
    ) -> list[tuple[int, int, int]]:
        out = []
        for index, pattern in enumerate(self.patterns):
            start = data.find(pattern)
            while start >= 0:
                out.append((index, start, start + len(pattern)))
                start = data.find(pattern, start + 1)
        return out


# byte classes, ASCII only (non-ASCII bytes count as separators)
_UPPER = frozenset(range(65, 91))
_LOWER = frozenset(range(97, 123))
_DIGIT = frozenset(range(48, 58))
_ALNUM = _UPPER | _LOWER | _DIGIT
_IDENT = _ALNUM | {95}  # and `_`: the characters of an environment variable name


def _boundary(data: bytes, i: int) -> bool:
    """Is byte offset i a word boundary (edge, separator or CamelCase hump)?"""
    if i <= 0 or i >= len(data):
        return True
    a, b = data[i - 1], data[i]
    if a not in _ALNUM or b not in _ALNUM:
        return True
    if b in _UPPER and (a in _LOWER or a in _DIGIT):
        return True
    return a in _UPPER and b in _UPPER and i + 1 < len(data) and data[i + 1] in _LOWER


class Matcher:
    """Compiled symbol set: finds verified symbol spans in file bytes."""

    def __init__(self, symbols: Sequence[Symbol]) -> None:
        if not symbols:
            raise BadInput("no vendor symbols to search for", hint="pass --symbols A,B or --spec")
        self.symbols = list(symbols)
        self._owner: list[int] = []
        patterns: list[bytes] = []
        for index, symbol in enumerate(self.symbols):
            for spelling in symbol.spellings():
                patterns.append(spelling.encode("ascii"))
                self._owner.append(index)
        self._ac = _automaton(patterns)

    def candidates(self, lowered: bytes) -> list[tuple[int, int, int]]:
        """(symbol index, start, end) of every spelling in lower-cased bytes (unverified)."""
        return [
            (self._owner[p], s, e)
            for p, s, e in self._ac.find_matches_as_indexes(lowered, overlapping=True)
        ]

    def verify(
        self, data: bytes, found: Iterable[tuple[int, int, int]]
    ) -> list[tuple[int, int, int]]:
        out = []
        for index, start, end in found:
            if not (_boundary(data, start) and _boundary(data, end)):
                continue
            if self.symbols[index].exact and (
                (start > 0 and data[start - 1] in _IDENT)
                or (end < len(data) and data[end] in _IDENT)
            ):
                continue
            out.append((index, start, end))
        # a span inside a longer hit (`ascend` in `vllm_ascend`) is that hit, not another
        out.sort(key=lambda t: (t[1], -t[2], t[0]))
        kept = []
        reach = -1
        for span in out:
            if span[2] > reach:
                kept.append(span)
                reach = span[2]
        return kept
