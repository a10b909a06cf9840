"""Drift between a pairing's hash lock and an installed environment (pure).

Every pin of the lock, plus the core and plugin versions of the manifest, is compared
with what the environment holds: a pin not installed is `missing`, installed at
another version `different`, and a distribution installed but pinned nowhere
`extra`. The installer seeds of a venv (pip, setuptools, wheel) are compared when the
lock pins them and otherwise listed as not compared, never as extra: `python -m venv`
puts them there without the lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.utils import canonicalize_name

SEEDS = frozenset({"pip", "setuptools", "wheel"})


@dataclass
class Drift:
    missing: list[tuple[str, str]] = field(default_factory=list)  # (name, pinned)
    different: list[tuple[str, str, str]] = field(default_factory=list)  # (name, pinned, have)
    extra: list[tuple[str, str]] = field(default_factory=list)  # (name, installed)
    compared: int = 0
    seeds: list[str] = field(default_factory=list)  # installer seeds, not compared

    @property
    def clean(self) -> bool:
        return not (self.missing or self.different or self.extra)

    def lines(self) -> list[str]:
        out = [f"pin {n}: missing (lock {v})" for n, v in self.missing]
        out += [f"pin {n}: installed {have}, lock {want}" for n, want, have in self.different]
        out += [f"extra {n} {v}: installed but not in the lock" for n, v in self.extra]
        return out


def same_version(a: str, b: str) -> bool:
    """Equal as versions (PEP 440), else as text."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def drift(pins: dict[str, str], installed: dict[str, str]) -> Drift:
    """Compare `pins` (name -> version) with `installed` (name -> version); names are
    normalised (PEP 503) on both sides."""
    want = {canonicalize_name(k): v for k, v in pins.items()}
    have = {canonicalize_name(k): v for k, v in installed.items()}
    out = Drift(compared=len(want))
    for name in sorted(want):
        if name not in have:
            out.missing.append((name, want[name]))
        elif not same_version(have[name], want[name]):
            out.different.append((name, want[name], have[name]))
    for name in sorted(set(have) - set(want)):
        if name in SEEDS:
            out.seeds.append(name)
        else:
            out.extra.append((name, have[name]))
    return out
