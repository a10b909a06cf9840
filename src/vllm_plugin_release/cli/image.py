"""`vpr image build`: the Debian-based image for the container runner (`stages/container_build`)."""

from __future__ import annotations

import argparse
import json

from vllm_plugin_release.cli.build import add_spec_argument
from vllm_plugin_release.edges import settings


def register(sub: argparse._SubParsersAction) -> None:
    image = sub.add_parser("image", help="the container runner's image (vpr image build)")
    actions = image.add_subparsers(dest="image_command", metavar="ACTION")
    build = actions.add_parser(
        "build",
        help="make the image [build] base_image pins from Debian packages (mmdebstrap, "
        "SOURCE_DATE_EPOCH) and load it into the engine; exit 1 when its digest is not "
        "the pinned one",
    )
    add_spec_argument(build)
    build.add_argument(
        "--cache-dir", default=None, help="cache folder (default: $VPR_CACHE_DIR or .vpr)"
    )
    build.add_argument("--suite", default="bookworm", help="Debian suite (default: bookworm)")
    build.add_argument(
        "--mirror",
        default="http://deb.debian.org/debian",
        help="Debian mirror; a snapshot.debian.org URL keeps the digest for ever",
    )
    build.add_argument(
        "--write-spec",
        action="store_true",
        help="pin the image made here in the spec's [build] base_image",
    )
    build.add_argument("--json", action="store_true", help="print what was made as JSON")
    from vllm_plugin_release.cli.build import add_interpreter

    add_interpreter(build)
    build.set_defaults(func=_build)


def _build(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.cli.build import named_interpreter
    from vllm_plugin_release.conform.registry import set_spec_value
    from vllm_plugin_release.core import progress
    from vllm_plugin_release.core.errors import GateFailed
    from vllm_plugin_release.stages.container_build import build_image, compare_pin

    spec = load_spec(args.spec).with_interpreter(args.interpreter)
    named_interpreter(spec)  # checked also where Debian's python is used instead
    made = build_image(spec, settings.cache_from_args(args), suite=args.suite, mirror=args.mirror)
    print(json.dumps(made.to_json(), indent=2) if args.json else made.image)
    if args.write_spec:
        set_spec_value(args.spec, "build.base_image", json.dumps(made.image))
        progress.info(f"image: {args.spec} [build] base_image = {made.image}")
        return 0
    differs = compare_pin(spec, made.image)
    if differs:
        raise GateFailed(
            differs, hint="`vpr image build --write-spec` pins it, if this change is expected"
        )
    progress.info(f"image: {made.image} loaded")
    return 0
