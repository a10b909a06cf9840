"""The step cost model of the replay: t_step = a + b * prefill_tokens + c * decode_requests
+ sum over slow paths P of d_P * (requests sampled on P in the step), and fitting it to
measured steps (a calibration CSV; a `path:NAME` column counts the step's requests on P)."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.errors import BadInput


@dataclass(frozen=True)
class CostModel:
    """t_step = a + b * prefill_tokens + c * decode_requests (seconds)."""

    a: float
    b: float
    c: float
    source: str = "default (illustrative, not measured)"
    # Seconds per request that takes slow path NAME in a step (its token sampled there).
    paths: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------
# Calibration.


PATH_COLUMN = "path:"  # a calibration column `path:NAME`: requests on slow path NAME


def read_calibration(path: Path) -> list[tuple[float, ...]]:
    """(prefill_tokens, decode_requests, seconds, *path counts) rows from a CSV with a
    header; the path columns (`path:NAME`, in header order) follow the three."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read calibration file: {exc.strerror or exc}") from None
    reader = csv.reader(lines)
    header = [h.strip() for h in next(reader, [])]
    wanted: tuple[str, ...] = ("prefill_tokens", "decode_requests", "seconds")
    if any(c not in header for c in wanted):
        raise BadInput(f"{path}:1: header must name {','.join(wanted)}")
    wanted += tuple(h for h in header if h.startswith(PATH_COLUMN) and len(h) > len(PATH_COLUMN))
    rows = []
    for number, fields in enumerate(reader, start=2):
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise BadInput(f"{path}:{number}: {len(fields)} fields, header has {len(header)}")
        record = dict(zip(header, fields))
        try:
            row = tuple(float(record[c]) for c in wanted)
        except ValueError:
            raise BadInput(f"{path}:{number}: {','.join(wanted)} must be numbers") from None
        if any(not math.isfinite(v) or v < 0 for v in row):
            raise BadInput(f"{path}:{number}: values must be finite and >= 0")
        rows.append(row)
    if len(rows) < 3:
        raise BadInput(f"{path}: need at least 3 measured steps to fit a, b and c")
    return rows  # type: ignore[return-value]


def calibration_paths(path: Path) -> list[str]:
    """The slow paths a calibration CSV measures (its `path:NAME` columns, in order)."""
    try:
        first = path.read_text(encoding="utf-8").splitlines()[:1]
    except OSError:
        return []
    header = next(csv.reader(first), [])
    return [h.strip()[len(PATH_COLUMN) :] for h in header if h.strip().startswith(PATH_COLUMN)]


def fit_cost_model(
    rows: Sequence[tuple[float, ...]], *, source: str = "fitted", paths: Sequence[str] = ()
) -> CostModel:
    """Least-squares fit of t = a + b*prefill_tokens + c*decode_requests (+ d_P * requests
    on each slow path P: the rows' columns after the third), clipped at 0."""
    import numpy as np

    data = np.asarray(rows, dtype=float)
    extra = [data[:, 3 + i] for i in range(len(paths))]
    design = np.column_stack([np.ones(len(data)), data[:, 0], data[:, 1], *extra])
    coef, *_ = np.linalg.lstsq(design, data[:, 2], rcond=None)
    if np.linalg.matrix_rank(design) < 3 + len(paths):
        raise BadInput(
            f"cost model calibration ({source}): the measured steps do not vary enough in "
            "prefill tokens, decode requests"
            + (" and requests per slow path" if paths else "")
            + " to separate the terms",
            hint="measure prefill-only and decode-only steps of several sizes"
            + (", with and without requests on each slow path" if paths else ""),
        )
    a, b, c, *d = (max(0.0, float(x)) for x in coef)
    return CostModel(a, b, c, source=source, paths=dict(zip(paths, d)))
