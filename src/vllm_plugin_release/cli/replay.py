"""`vpr replay` (the spec's request mix through the plugin's and upstream's schedulers) and
`vpr loadtest` (the same mix against a running server)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vllm_plugin_release.cli import options as o
from vllm_plugin_release.core import records
from vllm_plugin_release.core.errors import EXIT_OK, BadInput, GateFailed


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay",
        parents=[o.SPEC, o.DIST],
        help="replay the request mix through the plugin's and upstream's schedulers (CPU)",
        description="Drive the plugin's scheduler and upstream vLLM's V1 scheduler on the "
        "spec's request mix inside the pairing environment and write dist/NAME/replay.json, "
        "the harness timing (replay-timing.json) and two PNG plots. Exit 1 when a scheduler "
        "crashed or did not finish the mix.",
    )
    p.add_argument("--python", help="pairing env python (default: dist/NAME/env.json)")
    p.add_argument("--out", help="output folder (default dist/NAME)")
    p.add_argument("--requests", type=int, help="replay only the first N requests of the mix")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument(
        "--sys-path",
        action="append",
        default=[],
        metavar="DIR",
        help="extra folder on the env's import path (a scheduler not installed there)",
    )
    p.set_defaults(func=_cmd_replay)

    q = subparsers.add_parser(
        "loadtest",
        parents=[o.SPEC, o.DIST],
        help="send the request mix to a running OpenAI-compatible server, streaming",
        description="Send the spec's request mix (the one the replay uses) to a running "
        "OpenAI-compatible server and write dist/NAME/loadtest.json (exit 3, with what was "
        "measured kept, when the endpoint refuses or times out).",
    )
    q.add_argument("--endpoint", required=True, help="server base URL, e.g. http://HOST:8000")
    q.add_argument("--model", help="model name (default: the first of /v1/models)")
    q.add_argument("--out", help="result file (default dist/NAME/loadtest.json)")
    q.add_argument("--max-requests", type=int, default=200, help="request bound (200)")
    q.add_argument("--duration", type=float, default=300.0, help="time bound in s (300)")
    q.add_argument(
        "--request-timeout", type=float, default=120.0, help="bound per request in s (120)"
    )
    q.add_argument(
        "--prompt-mode",
        choices=["tokens", "text"],
        default="tokens",
        help="send prompts as token-id arrays (exact lengths; vLLM) or as text",
    )
    q.add_argument(
        "--no-vllm-extras",
        action="store_true",
        help="do not send ignore_eos/min_tokens (for servers that reject them)",
    )
    q.add_argument(
        "--time-scale", type=float, default=1.0, help="multiply arrival times by this (1.0)"
    )
    q.set_defaults(func=_cmd_loadtest)


def _cmd_replay(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.progress import info
    from vllm_plugin_release.replay import config, mix, runner

    spec = load_spec(args.spec)
    request_mix = mix.from_spec(spec)
    if args.requests is not None:
        if args.requests < 1:
            raise BadInput("--requests must be >= 1")
        request_mix = request_mix.limit(args.requests)
    replay_config = config.from_spec(spec)
    dist = records.dist_dir(Path(args.dist), spec.name)
    python = Path(args.python) if args.python else records.env_record(dist, spec.path).python
    out_dir = Path(args.out) if args.out else dist
    info(
        f"replaying {len(request_mix)} requests through {replay_config.plugin_scheduler} and "
        f"{replay_config.upstream_scheduler} in {python}"
    )
    outcome = runner.replay(
        python,
        request_mix,
        replay_config,
        name=spec.name,
        out=runner.Output(out_dir, plots=not args.no_plots),
        sys_path=args.sys_path,
    )
    print(render(outcome.report, outcome.timing))
    for path in outcome.files:
        print(f"wrote {path}")
    problems = [
        f"{side}: {outcome.report[side].get('crashed') or outcome.report[side].get('stopped')}"
        for side in ("plugin", "upstream")
        if outcome.report[side].get("crashed") or outcome.report[side].get("stopped")
    ]
    if problems:
        raise GateFailed("the replay did not complete:\n  " + "\n  ".join(problems))
    return EXIT_OK


def _fmt(value: Any, scale: float = 1.0, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value * scale:.4g}{unit}"
    return f"{value}{unit}"


def render(report: dict[str, Any], timing: dict[str, Any] | None = None) -> str:
    """A plain-text table of the two schedulers side by side."""
    rows = [
        ("steps", ("steps",), 1.0, ""),
        ("mixed steps", ("mixed_steps",), 1.0, ""),
        ("prefill-only steps", ("prefill_only_steps",), 1.0, ""),
        ("decode-only steps", ("decode_only_steps",), 1.0, ""),
        ("empty steps", ("empty_steps",), 1.0, ""),
        ("chunked-prefill steps", ("chunked_prefill_steps",), 1.0, ""),
        ("interleaved decode steps", ("interleaved_decode_steps",), 1.0, ""),
        ("preemptions", ("preemptions",), 1.0, ""),
        ("completed", ("requests", "completed"), 1.0, ""),
        ("rejected", ("requests", "rejected"), 1.0, ""),
        ("TTFT p50", ("ttft_s", "p50"), 1000.0, " ms"),
        ("TTFT p99", ("ttft_s", "p99"), 1000.0, " ms"),
        ("ITL mean", ("itl_s", "mean"), 1000.0, " ms"),
        ("ITL p99", ("itl_s", "p99"), 1000.0, " ms"),
        ("ITL max", ("itl_s", "max"), 1000.0, " ms"),
        ("longest decode stall", ("longest_decode_stall_steps",), 1.0, " steps"),
        ("output tokens/s", ("output_tokens_per_s",), 1.0, ""),
    ]

    def dig(side: dict[str, Any], path: tuple[str, ...]) -> Any:
        node: Any = side
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node

    plugin, upstream = report["plugin"], report["upstream"]
    lines = [
        f"replay of {report['mix']['requests']} requests (seed {report['mix']['seed']}, "
        f"vLLM {report.get('vllm_version')})",
        f"{'':26}{'plugin':>14}{'upstream':>14}",
    ]
    for label, path, scale, unit in rows:
        lines.append(
            f"{label:26}{_fmt(dig(plugin, path), scale, unit):>14}"
            f"{_fmt(dig(upstream, path), scale, unit):>14}"
        )
    policy = plugin.get("policy") or {}
    for change in policy.get("changes", []):
        why = change.get("why") or ""
        said = f"{change['key']}: {change['from']} -> {change['to']}"
        lines.append(
            f"policy {policy.get('name')}: "
            + (why if why.startswith(said) else (f"{said} ({why})" if why else said))
        )
    lines += _path_lines(report)
    for side in ("plugin", "upstream"):
        if report[side].get("crashed"):
            lines.append(f"{side} scheduler crashed: {report[side]['crashed']}")
    if timing and timing.get("overhead_ratio") is not None:
        lines.append(
            f"harness: {timing['replay_wall_s']:.2f} s replay wall, "
            f"{timing['scheduler_s']:.2f} s inside the schedulers "
            f"(x{timing['overhead_ratio']}), vLLM import {timing.get('import_s') or 0:.1f} s"
        )
    return "\n".join(lines)


def _path_lines(report: dict[str, Any]) -> list[str]:
    """The slow paths' marks: how many requests took each, and its price."""
    paths = report.get("paths") or {}
    lines = [f"slow paths not marked: {paths['error']}"] if paths.get("error") else []
    prices = (report.get("config") or {}).get("cost_model", {}).get("paths") or {}
    for name, mark in (paths.get("per_path") or {}).items():
        if name == "default":
            continue
        instead = f", instead of the {mark['instead_of']}" if mark.get("instead_of") else ""
        lines.append(
            f"slow path {name}: {mark['requests']} requests ({mark['share'] * 100:.1f}%)"
            f"{instead}; {prices.get(name, 0.0) * 1000:g} ms per token sampled there (plugin side)"
        )
    return lines


def _cmd_loadtest(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.replay import loadtest, mix

    spec = load_spec(args.spec)
    request_mix = mix.from_spec(spec)
    dist = records.dist_dir(Path(args.dist), spec.name)
    out = Path(args.out) if args.out else dist / records.LOADTEST
    options = o.flow_options(
        loadtest.LoadOptions,
        args,
        duration_s=args.duration,
        request_timeout_s=args.request_timeout,
        vllm_extras=not args.no_vllm_extras,
    )
    result = loadtest.run(args.endpoint, request_mix, options, out=out)
    s = result.summary
    print(
        f"{s.requests.completed}/{s.requests.planned} requests completed against "
        f"{result.endpoint} ({result.model}) in {result.wall_s} s"
    )
    print(
        f"TTFT p50 {_fmt(s.ttft_s.p50, 1000, ' ms')}, p99 "
        f"{_fmt(s.ttft_s.p99, 1000, ' ms')}; ITL mean {_fmt(s.itl_s.mean, 1000, ' ms')}"
        f", p99 {_fmt(s.itl_s.p99, 1000, ' ms')}, max {_fmt(s.itl_s.max, 1000, ' ms')}"
        f"; {_fmt(s.output_tokens_per_s)} output tokens/s"
    )
    print(f"wrote {out}")
    return EXIT_OK
