"""PNG plots of a replay (step composition over time, the ITL distribution); matplotlib with
the Agg backend, imported only when a plot is drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_plugin_release.core import records
from vllm_plugin_release.replay.model import Analysis

COLOURS = {"prefill": "#d95f02", "decode": "#1b9e77", "mixed": "#7570b3"}
LABELS = {"plugin": "plugin", "upstream": "upstream vLLM"}


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (the runner imports it ahead, in a thread)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def caption(report: dict[str, Any]) -> str:
    """What every plot's title names: the pairing and the cost model the replay assumed."""
    cost = (report.get("config") or {}).get("cost_model") or {}
    model = "cost model ?"
    if all(isinstance(cost.get(k), (int, float)) for k in "abc"):
        model = (
            f"cost model: step = {cost['a'] * 1000:g} ms + {cost['b'] * 1000:g} ms/prefill token"
            f" + {cost['c'] * 1000:g} ms/decode request ({cost.get('source', '?')})"
        )
    return f"{report.get('name', '?')}, vLLM {report.get('vllm_version') or '?'}; {model}"


def step_composition(
    analyses: dict[str, Analysis], path: Path, *, bins: int = 200, title: str = ""
) -> Path:
    """Tokens per second of simulated time, split prefill/decode, with mixed steps marked."""
    import numpy as np

    plt = pyplot()
    labels = [k for k in ("plugin", "upstream") if k in analyses]
    fig, axes = plt.subplots(len(labels), 1, figsize=(10, 3.2 * len(labels)), squeeze=False)
    horizon = max((float(a.step_end[-1]) for a in analyses.values() if len(a.step_end)), default=1)
    edges = np.linspace(0.0, horizon, bins + 1)
    width = edges[1] - edges[0]
    for ax, label in zip(axes[:, 0], labels):
        a = analyses[label]
        where = np.clip(np.searchsorted(edges, a.step_start, side="right") - 1, 0, bins - 1)
        pf, dec, mixed = (
            np.bincount(where, weights=w, minlength=bins)
            for w in (a.prefill_tokens, a.decode_tokens, a.mixed.astype(float))
        )
        pf, dec = pf / width, dec / width
        mid = edges[:-1] + width / 2
        for low, high, kind in ((0, pf, "prefill"), (pf, pf + dec, "decode")):
            style = {"color": COLOURS[kind], "alpha": 0.8, "label": f"{kind} tokens/s"}
            ax.fill_between(mid, low, high, step="mid", **style)
        if mixed.any():
            top = float((pf + dec).max()) or 1.0
            hit = mixed > 0
            ax.scatter(
                mid[hit],
                np.full(hit.sum(), top * 1.04),
                marker="|",
                s=30,
                color=COLOURS["mixed"],
                label="bin holds mixed steps",
            )
        n_mixed = int(a.mixed.sum())
        ax.set_title(f"{LABELS[label]}: {len(a.step_start)} steps, {n_mixed} mixed")
        ax.set_ylabel("tokens / s")
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("simulated time (s)")
    return _save(plt, fig, path, title and f"Step composition: {title}")


def itl_distribution(analyses: dict[str, Analysis], path: Path, *, title: str = "") -> Path:
    """Histogram (log-spaced) and CDF of inter-token latency for both schedulers, in ms."""
    import numpy as np

    plt = pyplot()
    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 3.8))
    values = [a.itl * 1000 for a in analyses.values() if len(a.itl)]
    if values:
        low = max(min(float(v[v > 0].min()) if (v > 0).any() else 1e-3 for v in values), 1e-3)
        high = max(float(v.max()) for v in values)
        edges = np.geomspace(low, max(high, low * 1.01), 60)
    for label, colour in (("plugin", COLOURS["prefill"]), ("upstream", COLOURS["decode"])):
        a = analyses.get(label)
        if a is None or not len(a.itl):
            continue
        hist.hist(a.itl * 1000, bins=edges, alpha=0.55, color=colour, label=LABELS[label])
        ordered = np.sort(a.itl)
        cdf.plot(
            ordered * 1000,
            np.arange(1, len(ordered) + 1) / len(ordered),
            color=colour,
            label=f"{LABELS[label]} (p99 {np.percentile(ordered, 99) * 1000:.1f} ms)",
        )
    itl = "inter-token latency (ms)"
    hist.set(xscale="log", yscale="log", xlabel=itl, ylabel="tokens", title="ITL distribution")
    hist.legend(fontsize=8)
    cdf.set(xscale="log", xlabel=itl, ylabel="fraction of tokens", title="ITL CDF")
    cdf.legend(fontsize=8, loc="lower right")
    return _save(plt, fig, path, title and f"Inter-token latency: {title}")


def _save(plt: Any, fig: Any, path: Path, title: str) -> Path:
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def draw(analyses: dict[str, Analysis], folder: Path, *, title: str = "") -> list[Path]:
    """Both plots into `folder`, titled with `title` (see `caption`); returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    if not analyses:
        return []
    return [
        step_composition(analyses, folder / records.REPLAY_PLOTS[0], title=title),
        itl_distribution(analyses, folder / records.REPLAY_PLOTS[1], title=title),
    ]
