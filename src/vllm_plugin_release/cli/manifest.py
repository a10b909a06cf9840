"""The manifest store's commands: `vpr manifest ...` (build, verify, query, the ledger),
`vpr keygen`, `vpr publish` and `vpr install`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.cli import options as o
from vllm_plugin_release.cli.options import key_path, store_location, trusted
from vllm_plugin_release.core.errors import EXIT_GATE, EXIT_OK
from vllm_plugin_release.edges import settings

if TYPE_CHECKING:
    from vllm_plugin_release.core.ledger import LedgerEntry
import os

# What every command that reads the store through its signed head takes.
READ_STORE = [o.STORE, o.KEY, o.CACHE]


def register(subparsers: Any) -> None:
    manifest = subparsers.add_parser(
        "manifest",
        help="build, verify and query pairing manifests",
        description="Build the signed pairing manifest, verify it, and query the manifest store.",
    )
    sub = manifest.add_subparsers(dest="manifest_command", metavar="SUBCOMMAND")
    manifest.set_defaults(func=lambda a: (manifest.print_help(sys.stderr), 2)[1])
    _register_build(sub)
    sub.add_parser("schema", help="print the manifest JSON Schema").set_defaults(func=cmd_schema)
    _register_verify(sub)
    _register_query(sub)
    _register_matrix(sub)
    _register_site(sub)
    _register_check_env(sub)
    _register_ledger(sub)
    _register_sign_store(sub)
    _register_keygen(subparsers)
    _register_publish(subparsers)
    _register_install(subparsers)


def _register_build(sub: Any) -> None:
    p = sub.add_parser(
        "build",
        parents=[o.SPEC, o.DIST, o.CACHE, o.SIGNING_KEY],
        help="write dist/NAME/manifest.json and the signed manifest.intoto.jsonl",
        description="Read the stage records in dist/NAME/ (build-core.json, build-plugin.json, "
        "env.json, scorecard.json) and write manifest.json (deterministic), "
        "manifest.intoto.jsonl (in-toto statement, SLSA provenance, DSSE ed25519 signature) "
        "and run.json (host and wall times).",
    )
    p.set_defaults(func=cmd_build)


def _register_verify(sub: Any) -> None:
    p = sub.add_parser(
        "verify",
        help="check a manifest's signature, schema and subject digests",
        description="Exit 0 when the DSSE signature verifies with KEY, the manifest matches its "
        "schema, and every subject (both wheels, the manifest) next to it has the signed "
        "sha256; exit 1 naming everything that did not match.",
    )
    p.add_argument("file", help="manifest.json, manifest.intoto.jsonl, or their folder")
    # required: a manifest from elsewhere is checked with the key named for it, none guessed
    p.add_argument("--key", required=True, metavar="KEY.pub", help="ed25519 public key (KEY.pub)")
    p.add_argument(
        "--manifest-only",
        action="store_true",
        help="check the signature and the manifest but not the wheels (e.g. a manifest "
        "store's pairings/<id>.json)",
    )
    p.add_argument("--json", action="store_true", help=o.JSON_HELP)
    p.set_defaults(func=cmd_verify)


def _register_query(sub: Any) -> None:
    p = sub.add_parser(
        "query",
        parents=[*READ_STORE, o.JSON],
        help="list pairings in a manifest store",
        description="List the pairings in a manifest store, read through its signed head "
        "from the store's summary (only the parts that can hold the answer; a store "
        "published before summaries: from index.json) (exit 1 when none matches, or when "
        "the store's head does not verify with --key, has expired, is older than one seen "
        "here, or does not vouch for the summary or the index it reads).",
    )
    p.add_argument("--core", help="core version (0.26.0) or specifier (>=0.25)")
    p.add_argument("--plugin", help="plugin distribution name")
    p.add_argument(
        "--verdict", choices=["fleet", "pilot", "lab"], help="only pairings of this verdict"
    )
    p.set_defaults(func=cmd_query)


def _register_matrix(sub: Any) -> None:
    p = sub.add_parser(
        "matrix",
        parents=[*READ_STORE, o.JSON],
        help="render the compatibility matrix (core versions x plugin commits)",
        description="Render the compatibility matrix of a manifest store, read through its "
        "signed head from the store's summary (a store published before summaries: from "
        "index.json) (exit 1 when the head does not verify with --key, has expired, is older "
        "than one seen here, or does not vouch for the summary or the index it reads).",
    )
    p.add_argument(
        "--format",
        choices=["table", "markdown", "html"],
        default="table",
        help="table: plain text for an 80-column log, plugin columns keyed [A], [B]... with "
        "a legend (default); markdown; html: a standalone page",
    )
    p.add_argument("-o", "--output", help="write to this file instead of standard output")
    p.set_defaults(func=cmd_matrix)


def _register_site(sub: Any) -> None:
    p = sub.add_parser(
        "site",
        parents=READ_STORE,
        help="write the compatibility site (static HTML and compat.json) of a store",
        description="Read the store through its signed head, check every pairing's signed "
        "manifest with --key, and write a static site to --out: index.html (core versions x "
        "plugins x site, each cell with its verdict, release lag and whether its signature "
        "verified; the newest core release, from the core's index unless --core-release or "
        "--newest-from store, and the pairings not covering it), one page per pairing (its "
        "scorecard from the signed manifest, its ledger history, the `vpr install` line), "
        "one page per plugin across every core (the ledger's matrix entries: each core "
        "column's outcome, Python, breaking changes and bisected range) and compat.json. No "
        "script, no outside asset; the same store (and newest release) gives the same "
        "bytes. Exit 0 written; 1 the store's head does not verify; 2 bad input; 3 the "
        "index cannot be read.",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="the site's folder (replaced)")
    p.add_argument(
        "--store-url",
        metavar="URL",
        help="where consumers read the store, for the install lines (default: --store)",
    )
    p.add_argument(
        "--key-name",
        default="publisher.pub",
        metavar="FILE",
        help="the publisher's key file as consumers hold it, for the install lines "
        "(default: publisher.pub)",
    )
    p.add_argument(
        "--core-release",
        metavar="VERSION",
        help="the newest core release (default: the newest final release on --index)",
    )
    # no spec here: the core's index is the public one unless named
    p.add_argument(
        "--index",
        metavar="URL",
        help="the core's simple API, where the newest release is read (default: "
        "https://pypi.org/simple)",
    )
    p.add_argument(
        "--newest-from",
        choices=["index", "store"],
        default="index",
        help="store: take the newest core the store names, and ask no index (offline)",
    )
    p.set_defaults(func=cmd_site)


def _register_check_env(sub: Any) -> None:
    p = sub.add_parser(
        "check-env",
        parents=[o.KEY, o.CACHE],
        help="check an installed environment against a manifest",
        description="Verify the manifest's signature with the publisher's key (an edited "
        "manifest is exit 1), then compare installed distributions with it: versions, the files "
        "recorded in RECORD against the certified wheels' digests, the plugin's entry points, "
        "and every pin of the pairing's lock (missing, different, extra). "
        "Prints every mismatch; exit 1 when there is one.",
    )
    p.add_argument(
        "--manifest",
        required=True,
        help="manifest.json (its signed statement next to it: manifest.intoto.jsonl, or "
        "<id>.intoto.jsonl for a store's pairings/<id>.json)",
    )
    p.add_argument(
        "--python", default=sys.executable, help="python of the environment (default: this one)"
    )
    p.add_argument(
        "--wheels",
        help="folder holding the certified wheels, for a file-by-file "
        "list of differences (default: the manifest's folder)",
    )
    p.add_argument(
        "--lock",
        help="the pairing's hash lock, to compare every pin (default: pairings/<id>.lock.txt "
        "next to a stored manifest, else the manifest's environment.lock_file); its sha256 "
        "must be the manifest's environment.lock_sha256",
    )
    p.set_defaults(func=cmd_check_env)


def _register_sign_store(sub: Any) -> None:
    p = sub.add_parser(
        "sign-store",
        parents=[o.STORE, o.SIGNING_KEY, o.CACHE],
        help="sign a fresh head for a store folder (after review, or before it expires)",
        description="Sign the store's head (head.json) over every file it vouches for "
        "(index.json, the ledger, last-known-good pointers, nightly schedules) as they are "
        "now, after checking the ledger and the signed documents with the key, with a new "
        "expiry ($VPR_STORE_HEAD_DAYS, default 30 days). Every writer signs a head; run this "
        "for a store written before vpr signed heads, after a reviewed repair, or to keep a "
        "store nobody writes to from expiring. Exit 0 signed; 1 a file does not verify.",
    )
    p.set_defaults(func=cmd_sign_store)


def _register_keygen(subparsers: Any) -> None:
    p = subparsers.add_parser("keygen", help="create an ed25519 signing key pair (KEY and KEY.pub)")
    p.add_argument("--out", help="private key path (default: .vpr/keys/manifest-signing.key)")
    # not FORCE: there is no cached result here, an existing key is replaced
    p.add_argument("--force", action="store_true", help="replace an existing key")
    p.add_argument(
        "--encrypt",
        action="store_true",
        help="encrypt the private key with the passphrase in $VPR_SIGNING_KEY_PASSWORD",
    )
    p.set_defaults(func=cmd_keygen)


def _register_publish(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "publish",
        parents=[
            *(o.SPEC, o.DIST, o.CACHE, o.STORE, o.KEY, o.SIGNING_KEY),
            o.ALLOW_UNCERTIFIED,
            o.JSON,
        ],
        help="upload both wheels to a package index and add the manifest to the store",
        description="twine check --strict, then upload both wheels (a file already on the index "
        "with the same sha256 counts as done; a different one fails before anything is "
        "uploaded), then add the manifest to the manifest store. With no index, a local "
        "pypiserver on loopback over .vpr/index/ is used and the upload is proven by "
        "installing both wheels with --require-hashes. Credentials come from "
        "TWINE_USERNAME / TWINE_PASSWORD or the keyring.",
    )
    # an upload URL, where the other commands' --index is a simple API to read from
    p.add_argument(
        "--index",
        metavar="URL",
        help="upload URL (default: $VPR_INDEX, [publish] index, else a local pypiserver)",
    )
    p.add_argument("--simple-index", help="the index's simple API URL if it cannot be derived")
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--verify-install",
        dest="verify_install",
        action="store_true",
        default=None,
        help="prove the upload by installing (default with the local index)",
    )
    group.add_argument(
        "--no-verify-install",
        dest="verify_install",
        action="store_false",
        help="publish without the install proof (default with a remote index)",
    )
    p.set_defaults(func=cmd_publish)


def cmd_build(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core import progress
    from vllm_plugin_release.core.manifestdoc import summary_line
    from vllm_plugin_release.stages import manifest as mf

    spec = load_spec(args.spec)
    built = mf.build_for_spec(
        spec,
        signing_key=args.signing_key,
        dist_root=args.dist,
        cache=settings.cache_from_args(args),
    )
    if built.key_created:
        progress.info(
            f"created signing key {built.key_path} (public key {built.public_key_path}); "
            "keep the private key out of version control"
        )
    progress.info(summary_line(built.manifest))
    print(f"manifest   {built.manifest_path}")
    print(f"statement  {built.statement_path}")
    print(f"pairing    {built.manifest.pairing_id}")
    print(f"signed by  keyid {built.keyid[:16]} (verify with {built.public_key_path})")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from vllm_plugin_release.core import manifestdoc as mf

    sys.stdout.write(mf.schema_text())
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from vllm_plugin_release.core import manifestdoc as mf
    from vllm_plugin_release.stages import verify

    result = verify.verify_files(Path(args.file), Path(args.key), manifest_only=args.manifest_only)
    if args.json:
        doc = {
            "ok": True,
            "manifest": str(result.manifest_path),
            "keyid": result.keyid,
            "pairing_id": result.manifest.pairing_id,
            "verdict": result.manifest.verdict,
            "subjects": result.subjects,
        }
        print(json.dumps(doc, indent=2, sort_keys=True))
        return EXIT_OK
    print(
        f"OK {result.manifest_path}: signature (keyid {result.keyid[:16]}), schema, "
        f"{len(result.subjects)} subjects"
    )
    for s in result.subjects:
        note = f"  ({s['problem']})" if s.get("problem") else ""
        print(f"  {s['sha256']}  {s['name']}{note}")
    print(f"  {mf.summary_line(result.manifest)}")
    return EXIT_OK


def cmd_query(args: argparse.Namespace) -> int:
    from vllm_plugin_release.core import progress
    from vllm_plugin_release.edges import trust

    s = trusted(args)
    entries = trust.query(s, core=args.core, plugin=args.plugin, verdict=args.verdict)
    if args.json:
        print(json.dumps([e.raw for e in entries], indent=2, sort_keys=True))  # as written
    elif entries:
        from vllm_plugin_release.core.storeindex import query_text

        sys.stdout.write(query_text(entries, s.location))
    if not entries:
        progress.info("no pairing matches")
        return EXIT_GATE
    return EXIT_OK


def cmd_matrix(args: argparse.Namespace) -> int:
    from vllm_plugin_release.core.cache import atomic_write_text
    from vllm_plugin_release.edges import trust

    text, _ = trust.matrix(trusted(args), "json" if args.json else args.format)
    if args.output:
        atomic_write_text(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_site(args: argparse.Namespace) -> int:
    from packaging.version import InvalidVersion, Version

    from vllm_plugin_release.core.errors import BadInput
    from vllm_plugin_release.flows.site import site

    if args.core_release is not None:
        try:
            Version(args.core_release)
        except InvalidVersion:
            raise BadInput(f"--core-release {args.core_release!r} is not a PEP 440 version")
    from vllm_plugin_release.flows.upstream import DEFAULT_INDEX

    index = None
    if args.newest_from == "index" and args.core_release is None:
        index = args.index or DEFAULT_INDEX
    made = site(
        trusted(args),
        Path(args.out),
        store_url=args.store_url,
        key_name=args.key_name,
        newest_core=args.core_release,
        core_index=index,
    )
    bad = made.unverified
    print(
        f"site {args.out}: {made.pairings} pairing(s), {made.cores} core "
        f"version(s); index.html, compat.json, {made.pairings} pairing page(s)"
        + (f", {made.plugins} plugin page(s) across every core" if made.plugins else "")
        + (f"; {bad} pairing(s) whose signature did NOT verify" if bad else "")
        + f"; newest core {made.newest or 'unknown'}"
    )
    return EXIT_OK


def cmd_check_env(args: argparse.Namespace) -> int:
    from vllm_plugin_release.core import progress
    from vllm_plugin_release.edges.envrun import check_python
    from vllm_plugin_release.stages import verify

    path = Path(args.manifest)
    check_python(args.python)  # a folder or a text file: bad input, before anything else
    # the signature first: nothing of an unverified manifest is used
    data = verify.verify_files(path, key_path(args), manifest_only=True).manifest
    wheels = Path(args.wheels) if args.wheels else path.parent
    lock_text, lock = verify.find_lock(path, data, Path(args.lock) if args.lock else None)
    if lock_text is None:
        progress.warn(
            "no pairing lock found (pass --lock FILE): only the core and plugin are compared, "
            "not the pins of the environment"
        )
    problems = verify.check_environment(data, args.python, wheels, lock_text)
    if problems:
        print(f"MISMATCH {args.python} vs {path}:")
        for problem in problems:
            print(f"  - {problem}")
        return EXIT_GATE
    pins = f", every pin of {lock}" if lock else ""
    print(
        f"OK {args.python} matches {path}: {data.core.name} {data.core.version}, "
        f"{data.plugin.name} {data.plugin.version} (versions, RECORD hashes, "
        f"entry points{pins})"
    )
    return EXIT_OK


def cmd_sign_store(args: argparse.Namespace) -> int:
    from vllm_plugin_release.edges import keys, trust
    from vllm_plugin_release.edges.store import open_store

    cache = settings.cache_from_args(args)
    path, _ = keys.resolve_key_path(args.signing_key, None, root=Path.cwd(), cache_root=cache.root)
    location = store_location(args)
    head = trust.sign_store(open_store(location), keys.load_private_key(path))
    files = ", ".join(sorted(head.files)) or "no files yet"
    print(f"signed head version {head.version} of {location}, valid until {head.expires}: {files}")
    return EXIT_OK


def cmd_keygen(args: argparse.Namespace) -> int:
    from vllm_plugin_release.core.attest import keyid
    from vllm_plugin_release.edges import keys

    out = Path(args.out) if args.out else settings.cache_from_env().root / keys.DEFAULT_KEY
    private, public = keys.generate_keypair(out, force=args.force, encrypt=args.encrypt)
    kid = keyid(keys.load_public_key(public))
    print(f"private key  {private}  (mode 0600; keep it secret, out of version control)")
    print(f"public key   {public}")
    print(f"keyid        {kid}")
    return EXIT_OK


def cmd_publish(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.stages import publish as pub

    spec = load_spec(args.spec)
    options = o.flow_options(pub.Options, args, public_key=args.key, dist_root=args.dist)
    result = pub.publish_spec(spec, options, cache=settings.cache_from_args(args))
    if args.json:
        from dataclasses import asdict

        data = asdict(result)  # the runner as its records hold it
        data["proven_in"] = None if result.proven_in is None else result.proven_in.to_json()
        print(json.dumps(data, indent=2, sort_keys=True))
        return EXIT_OK
    for name, status in result.wheels.items():
        print(f"{status:9} {name}")
    print(
        f"index     {result.index}"
        + (" (install proven with --require-hashes)" if result.install_proven else "")
    )
    print(
        f"store     {result.store}: pairing {result.pairing_id[:16]} {result.store_status} "
        f"(verdict {result.verdict})"
    )
    return EXIT_OK


def _register_ledger(sub: Any) -> None:
    p = sub.add_parser(
        "ledger",
        parents=READ_STORE,
        help="print and filter the signed pairing ledger (every verdict ever reached)",
        description="Read the store's pairing ledger through its signed head and print the "
        "entries that match the filters (--matrix: the compatibility matrix generated from "
        "the ledger, the latest verdict per core and plugin commit). Without a filter it "
        "reads STORE/ledger/ledger.jsonl and checks every entry's ed25519 signature, its "
        "link to the previous entry, and the entry count and last entry the head signs; "
        "with one, or --matrix, the ledger's summary the head vouches for (only the parts "
        "that can hold the answer). Exit 0; 1 when an entry's signature or link fails (the "
        "ledger is refused, naming the line), a file is not the one the head vouches for, "
        "or no entry matches; 2 bad input.",
    )
    p.add_argument("--core", help="core version, or a core commit prefix")
    p.add_argument("--plugin", help="plugin distribution name, or a plugin commit prefix")
    p.add_argument(
        "--verdict",
        choices=["fleet", "pilot", "lab", "pass", "fail", "regressed", "not-run"],
        help="fleet|pilot|lab (release), pass|fail (nightly), pass|fail|regressed|not-run "
        "(matrix: a column's outcome)",
    )
    p.add_argument(
        "--kind",
        choices=["release", "nightly", "matrix", "repair"],
        help="matrix: a version matrix column; repair: a store file a writer found differing "
        "from the signed head, restored",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help=o.JSON_HELP)
    out.add_argument(
        "--matrix",
        choices=["markdown", "json"],
        help="print the compatibility matrix generated from the matching entries",
    )
    p.set_defaults(func=cmd_ledger)


def cmd_ledger(args: argparse.Namespace) -> int:
    from vllm_plugin_release.core import ledger, progress
    from vllm_plugin_release.core.summary import LEDGER
    from vllm_plugin_release.edges import trust

    store = trusted(args)
    filters = {"core": args.core, "plugin": args.plugin, "verdict": args.verdict, "kind": args.kind}
    chosen: list[LedgerEntry] | None = None
    if not any(filters.values()) and args.matrix:  # every entry's: one file of the summary
        text, count = trust.matrix(store, args.matrix, LEDGER)
    elif not any(filters.values()):  # every entry: the whole ledger, each line checked
        chosen = store.ledger()
        count = len(chosen)
    else:  # the chunks of the summary that can hold a match
        chosen, count = trust.select(store, **filters)
    if args.matrix:
        if chosen is not None:
            text = ledger.matrix_text(ledger.matrix(chosen), args.matrix)
        sys.stdout.write(text)
    elif args.json:
        raws = None if chosen is None else [e.raw for e in chosen]  # as signed
        print(json.dumps(raws, indent=2, sort_keys=True))
    elif chosen:
        print(ledger.render_lines(chosen))
    progress.note(f"ledger: {count} entries verified in {store.location}")
    if not (count if chosen is None else chosen):  # no entry at all, or none matches
        progress.note("no ledger entry matches")
        return EXIT_GATE
    return EXIT_OK


def _register_install(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "install",
        parents=[*READ_STORE, o.ALLOW_UNCERTIFIED, o.JSON],
        help="install a certified pairing from the manifest store (hashes required)",
        description="Read the store through its signed head and verify the pairing's signed "
        "manifest with the publisher's public key (it must be the pairing asked for, and the "
        "ledger must hold no newer verdict for it), then "
        "install exactly its certified set (the pairing's hash lock and its wheels, from the "
        "store's embedded index) with --require-hashes into a Python environment, with "
        "vpr-guard and the verified manifest beside it (ENV/vpr-guard/): at every start vLLM "
        "then compares itself with that set. A second run "
        "over a matching environment changes nothing. Exit 0 installed or already matching; "
        "1 verification, verdict or check failed; 2 bad input; 3 install or network failure.",
    )
    p.add_argument(
        "pairing",
        nargs="?",
        metavar="PAIRING_ID",
        help="pairing id (or a unique prefix of 8+ characters)",
    )
    p.add_argument(
        "--core",
        metavar="VERSION",
        help="core version or specifier, with --plugin (instead of an id)",
    )
    p.add_argument("--plugin", metavar="NAME", help="plugin distribution name, with --core")
    p.add_argument(
        "--python-env",
        metavar="DIR",
        default=".venv",
        help="the environment to create or bring in line (default: .venv)",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="no network: only the store's embedded index and uv's cache",
    )
    p.add_argument(
        "--guard-policy",
        choices=["enforce", "warn", "off"],
        help="what vpr-guard does at vLLM's start-up when the environment is not the certified "
        "set, written to ENV/vpr-guard/policy ($VPR_GUARD overrides it; default without the "
        "file: enforce for a fleet verdict, warn for pilot or lab)",
    )
    p.set_defaults(func=cmd_install)


def cmd_install(args: argparse.Namespace) -> int:
    from vllm_plugin_release.flows.install import Request, Target, install

    cache = settings.cache_from_args(args)
    result = install(
        trusted(args),
        o.flow_options(Request, args),
        o.flow_options(
            Target,
            args,
            env_dir=Path(args.python_env),
            scratch=cache.tmp,
            key_path=str(Path(os.path.abspath(key_path(args)))),
        ),
    )
    if args.json:
        from dataclasses import asdict

        print(json.dumps(asdict(result), indent=2, sort_keys=True))
        return EXIT_OK
    what = {"installed": "installed", "unchanged": "already matches; nothing to do"}
    print(
        f"{what[result.status]}: pairing {result.pairing_id[:16]} ({result.verdict}) in "
        f"{args.python_env}: {result.pins} pins with hashes, signature keyid "
        f"{(result.keyid or '')[:16]}, from {result.store}"
    )
    return EXIT_OK
