"""Which members of two wheels differ, and how (for the reproducibility report)."""

from __future__ import annotations

import zipfile
from pathlib import Path


def diff_wheels(a: Path, b: Path) -> list[str]:
    """Human-readable differences between two wheel archives, member by member."""
    out: list[str] = []
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        ia = {i.filename: i for i in za.infolist()}
        ib = {i.filename: i for i in zb.infolist()}
        for name in sorted(set(ia) - set(ib)):
            out.append(f"{name}: only in the first build")
        for name in sorted(set(ib) - set(ia)):
            out.append(f"{name}: only in the second build")
        if [n for n in ia if n in ib] != [n for n in ib if n in ia]:
            out.append("(member order differs)")
        for name in sorted(set(ia) & set(ib)):
            x, y = ia[name], ib[name]
            if x.CRC != y.CRC or x.file_size != y.file_size:
                out.append(f"{name}: content differs")
            elif x.date_time != y.date_time:
                out.append(f"{name}: timestamp differs ({x.date_time} vs {y.date_time})")
            elif x.external_attr != y.external_attr:
                out.append(f"{name}: permissions differ")
            elif x.compress_type != y.compress_type:
                out.append(f"{name}: compression differs")
    return out or ["(archives differ only in zip metadata)"]
