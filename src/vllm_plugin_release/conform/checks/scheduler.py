"""The `scheduler` check: the plugin's scheduler docs against the replay of the spec's
request mix (`[conformance.scheduler]`)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform import (
    CheckDef,
    CheckResult,
    Context,
    Evidence,
    from_findings,
)
from vllm_plugin_release.conform.lib.doctext import split_sentences, text_blocks
from vllm_plugin_release.conform.lib.installscan import plugin_root_for
from vllm_plugin_release.conform.lib.plugintree import Unread, read_text, too_large
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.replay.config import REPLAY_SCHEMA
from vllm_plugin_release.replay.mix import REQUEST_MIX_SCHEMA
from vllm_plugin_release.replay.model import ReplayReport, SideCounts, headline_text

DEFAULT_DOCS = "docs/SCHEDULING.md"


SCHEDULER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Scheduler constraints check (docs half; the replay half compares).",
    "additionalProperties": False,
    "properties": {
        "docs": {
            "type": "string",
            "minLength": 1,
            "default": DEFAULT_DOCS,
            "description": "The plugin's scheduling notes (Markdown), relative to the plugin "
            "source.",
        },
        "require_mixed_statement": {
            "type": "boolean",
            "default": True,
            "description": "Fail when the docs state nothing about mixed prefill+decode batches.",
        },
        "aliases": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "description": "Names the docs use for the plugin (e.g. TT); default: the words of "
            "[plugin] name other than vllm/plugin.",
        },
        "unobserved_support": {
            "enum": ["ignore", "warn", "fail"],
            "default": "warn",
            "description": "Verdict when the docs say a behaviour is supported but the replay "
            "never shows it on a load where upstream vLLM does.",
        },
    },
}

TABLES: dict[str, dict[str, Any]] = {
    "scheduler": SCHEDULER_SCHEMA,
    "request_mix": REQUEST_MIX_SCHEMA,
    "replay": REPLAY_SCHEMA,
}


NAME = "scheduler"
MIX = "expected production request mix (pilot plan)"
NO_MIX = "no [conformance.request_mix] in the spec: the pilot's request mix is not recorded"
TOPICS = ("mixed_batches", "chunked_prefill", "decode_interleaving")
MAX_BYTES = 512 * 1024  # the docs are read this far (the evidence says when cut)
# Replay counters compared with each topic (the replay stage writes these keys).
REPLAY_KEYS = {
    "mixed_batches": "mixed_steps",
    "chunked_prefill": "chunked_prefill_steps",
    "decode_interleaving": "interleaved_decode_steps",
}


@dataclass(frozen=True)
class Statement:
    topic: str
    polarity: str  # supported | not_supported | unknown
    sentence: str
    line: int
    subject: str = "plugin"  # plugin | upstream
    conditional: bool = False
    section: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_PF = r"prefill(?:s|ing)?(?:-like)?"
_DC = r"decod(?:e|es|ing)(?:-like)?"
# Words between two terms of one clause: bounded, so a sentence repeating one term is not
# rescanned to its end from each repeat.
_GAP = r"[^.;:]{0,300}"
_TOPIC_RULES: dict[str, list[tuple[re.Pattern[str], str | None]]] = {
    # (pattern, inherent polarity or None)
    "mixed_batches": [
        (re.compile(r"\bhomogeneous (?:batch|step)"), "not_supported"),
        (re.compile(rf"\ball-{_PF} or all-{_DC}|\ball-{_DC} or all-{_PF}"), "not_supported"),
        (
            re.compile(
                rf"\b{_PF}-only (?:or|and|vs\.?) {_DC}-only|\b{_DC}-only (?:or|and|vs\.?) "
                rf"{_PF}-only"
            ),
            "not_supported",
        ),
        (
            re.compile(r"\b(?:separate|different|distinct|two) (?:batch )?(?:modes|batch types)\b"),
            "not_supported",
        ),
        (re.compile(r"\bco-?schedul\w*"), None),
        (re.compile(rf"\bmix(?:ed|es|ing)?\b{_GAP}\b(?:{_PF}|{_DC}|batch\w*|steps?)\b"), None),
        (re.compile(rf"\b(?:{_PF}|{_DC})\b{_GAP}\bmix(?:ed|es|ing)?\b"), None),
        (
            re.compile(rf"\bboth\b[^.;:]{{0,40}}\b{_PF}\b[^.;:]{{0,40}}\b{_DC}\b"),
            "supported",
        ),
        (
            re.compile(
                rf"\b{_PF}\b[^.;:]{{0,40}}\b{_DC}\b[^.;:]{{0,40}}\b(?:same|single|one) "
                r"(?:batch|step|forward)"
            ),
            "supported",
        ),
    ],
    "chunked_prefill": [
        (re.compile(r"\b(?:token-)?chunked[- _]prefill"), None),
        (re.compile(r"\bprefill chunk(?:s|ing)?\b"), None),
        (re.compile(r"\bchunk(?:ed)? continuation"), None),
        (re.compile(r"\bchunk(?:ing|s)? (?:of )?(?:long )?(?:prompts?|prefills?)\b"), None),
        (re.compile(r"\bsplit\w* (?:long )?(?:prompts?|prefills?) into chunks"), None),
    ],
    "decode_interleaving": [
        (re.compile(r"\binterleav\w*"), None),
        (re.compile(rf"\bfall(?:s|ing)? back to (?:a |an )?{_DC}"), None),
        (re.compile(rf"\balternat\w* between {_PF} and {_DC}"), None),
        (
            re.compile(
                rf"\b{_DC}s? (?:steps? )?(?:run |runs |proceed\w* )?(?:in )?between "
                rf"(?:{_PF} )?(?:chunks|steps)"
            ),
            None,
        ),
        (re.compile(rf"\b{_DC}s? (?:are |is )?(?:stall|starv|block|paus)\w*"), "not_supported"),
        (
            re.compile(rf"\b(?:stall|starv|block|paus)\w* (?:the )?(?:running )?{_DC}s?\b"),
            "not_supported",
        ),
    ],
}
_TOPIC_FILTER = {
    "decode_interleaving": re.compile(rf"\b(?:{_DC}|{_PF})\b"),
    "mixed_batches": re.compile(rf"\b(?:{_PF}|{_DC}|batch\w*|step\w*)\b"),
}
_NEG = re.compile(
    r"\b(?:not|never|no|none|nor|neither|without|cannot|avoid\w*|unsupported|disabl\w*|"
    r"forbid\w*|prohibit\w*|prevent\w*|refus\w*|reject\w*|instead of)\b|n't\b|"
    r"\b(?:turns?|turned|switch\w*|set)\b[^.;:]{0,40}\boff\b|\b(?:is|are|stays?) off\b"
)
_POS = re.compile(
    r"\b(?:support\w*|enabl\w*|allow\w*|permit\w*|can|may|will|is part of|naturally|"
    r"includ\w*|combin\w*|mix(?:es)?|co-?schedul\w*|schedules|runs?|execut\w*|batch\w* "
    r"together|does|do|lets?|falls? back|interleav\w*)\b"
)
_COND = re.compile(
    r"(?<![\w-])only\b|\b(?:if|when|whenever|unless|except|some|certain|depend\w*|provided|"
    r"for (?:every|each|any|some) model types?|for model types?)\b"
)
_RESTRICTED = re.compile(r"\bbut only\b|(?<![\w-])only (?:for|when|if|on|with|in)\b")
_SUBORDINATE = re.compile(
    r"^(?:if|when|whenever|unless|once|because|since|although|though|as long as|while)\b"
)
_CONTRAST_UPSTREAM = re.compile(
    r"\b(?:unlike|than|from|compared (?:with|to)|versus|vs\.?|differs? from|relative to)\s+"
    r"(?:the\s+)?upstream\b"
)
_UPSTREAM = re.compile(r"\bupstream\b|\b(?:stock|vanilla|generic) vllm\b")
_CLAUSE_SPLIT = re.compile(
    r"\s*[;:]\s+|\s*;\s*|\s+(?:but|whereas|however|although|though)\s+|\s+[—–]\s+|\s+-\s+"
)


def _aliases_for(plugin_name: str | None, extra: list[str] | None) -> list[str]:
    words = list(extra or [])
    if plugin_name:
        words += [
            w
            for w in re.split(r"[-_.\s]+", plugin_name)
            if w and w.lower() not in ("vllm", "plugin", "platform", "backend")
        ]
    words += [
        "the plugin",
        "this plugin",
        "our plugin",
        "our scheduler",
        "this backend",
        "this platform",
    ]
    return sorted({w.lower() for w in words}, key=len, reverse=True)


def _subject(lower: str, aliases: list[str]) -> str | None:
    """plugin / upstream when the sentence names one (the first named wins), else None."""
    masked = _CONTRAST_UPSTREAM.sub(lambda m: " " * len(m.group(0)), lower)
    up = _UPSTREAM.search(masked)
    found = (re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", masked) for a in aliases)
    plug = min((m.start() for m in found if m), default=None)
    if up is None:
        return "plugin" if plug is not None or _CONTRAST_UPSTREAM.search(lower) else None
    return "plugin" if plug is not None and plug < up.start() else "upstream"


def _lead_polarity(lower: str) -> str | None:
    if _NEG.search(lower):
        return "not_supported"
    if re.search(r"\b(?:support\w*|allow\w*|enabl\w*|includ\w*|permit\w*)\b", lower):
        return "supported"
    return None


def _normalize(sentence: str) -> str:
    # blanks first: `\s*[+/&]` would rescan a long run of blanks from each of them
    lower = re.sub(r"\s+", " ", sentence.lower())
    lower = re.sub(r" ?[+/&] ?", " and ", lower)  # prefill+decode, prefill/decode
    return re.sub(r"\s+", " ", lower)


def _classify(lower: str, start: int, end: int, inherent: str | None) -> tuple[str, bool]:
    """(polarity, conditional) of the topic match at lower[start:end]."""
    # The clause that holds the match: the first span between two separators around it.
    cuts = [0, *(i for m in _CLAUSE_SPLIT.finditer(lower) for i in m.span()), len(lower)]
    c_start, c_end = next(
        ((a, b) for a, b in zip(cuts[::2], cuts[1::2]) if a <= start <= b), (0, len(lower))
    )
    clause = lower[c_start:c_end]
    rel = start - c_start
    conditional = bool(_COND.search(clause) or _RESTRICTED.search(lower))
    # A leading subordinate clause ("If no prefill can be admitted, ...") is a condition.
    sub = _SUBORDINATE.match(clause.strip())
    if sub:
        comma = clause.find(",")
        if comma != -1 and rel > comma:
            clause, rel = clause[comma + 1 :], rel - comma - 1
            conditional = True
        elif comma != -1 or rel >= 0:
            return "unknown", True  # the topic is only the condition of something else
    match_text = lower[start:end]
    negative = bool(_NEG.search(clause))
    if inherent is not None:
        polarity = inherent
        if negative and inherent == "not_supported" and not _NEG.search(match_text):
            polarity = "supported"  # "not homogeneous", "never stalls decodes"
        elif negative and inherent == "supported":
            polarity = "not_supported"  # "never includes both prefill and decode"
        return polarity, conditional
    if negative:
        return "not_supported", conditional
    if _POS.search(clause):
        return "supported", conditional
    return "unknown", conditional


def _topics(lower: str, lead_polarity: str | None) -> dict[str, tuple[str, bool]]:
    """(polarity, conditional) per topic a normalized sentence speaks of; a list item under
    a lead-in with a polarity takes it when it states none, negated under a negated one."""
    found: dict[str, tuple[str, bool]] = {}
    for topic, rules in _TOPIC_RULES.items():
        flt = _TOPIC_FILTER.get(topic)
        if flt is not None and not flt.search(lower):
            continue
        for pattern, inherent in rules:
            m = pattern.search(lower)
            if not m:
                continue
            polarity, conditional = _classify(lower, m.start(), m.end(), inherent)
            if lead_polarity is not None:
                if polarity == "unknown":
                    polarity = lead_polarity
                elif lead_polarity == "not_supported":
                    polarity = "supported" if polarity == "not_supported" else "not_supported"
            old = found.get(topic)
            if old is None or (old[0] == "unknown" and polarity != "unknown"):
                found[topic] = (polarity, conditional)
    return found


def extract_statements(
    doc_text: str, *, plugin_name: str | None = None, aliases: list[str] | None = None
) -> list[Statement]:
    """Statements the doc makes about mixed batches, chunked prefill and decode interleaving."""
    names = _aliases_for(plugin_name, aliases)
    statements: list[Statement] = []
    section: str | None = None
    section_subject = "plugin"
    last_subject = "plugin"
    lead: tuple[str, str | None] | None = None  # (subject, polarity) of the open lead-in
    for kind, parts in text_blocks(doc_text):
        if kind == "heading":
            section = parts[0][1]
            heading_subject = _subject(_normalize(section), names)
            section_subject = heading_subject or "plugin"
            last_subject = section_subject
            lead = None
            continue
        if kind != "item":
            lead = None
        sentences = [(parts[0][0], parts[0][1])] if kind == "table" else split_sentences(parts)
        for index, (line, sentence) in enumerate(sentences):
            lower = _normalize(sentence)
            explicit = _subject(lower, names)
            if explicit is not None:
                subject = explicit
                if kind != "item":
                    last_subject = explicit
            elif kind == "item" and lead is not None:
                subject = lead[0]
            else:
                subject = last_subject
            found = _topics(lower, lead[1] if kind == "item" and lead is not None else None)
            for topic, (polarity, conditional) in found.items():
                statements.append(
                    Statement(topic, polarity, sentence, line, subject, conditional, section)
                )
            last = index == len(sentences) - 1
            if kind == "para" and last and sentence.rstrip().endswith(":"):
                lead = (subject, _lead_polarity(lower))
            elif kind == "para" and last:
                lead = None
    return statements


def summarize(statements: list[Statement], subject: str = "plugin") -> dict[str, dict[str, Any]]:
    """Per topic: its stance and the statements behind it."""
    out: dict[str, dict[str, Any]] = {}
    for topic in TOPICS:
        mine = [s for s in statements if s.topic == topic and s.subject == subject]
        pos = [s for s in mine if s.polarity == "supported"]
        neg = [s for s in mine if s.polarity == "not_supported"]
        if not mine:
            stance = "unstated"
        elif not pos and not neg:
            stance = "mentioned"
        elif pos and any(all(s.conditional for s in side) for side in (pos, neg) if side):
            stance = "conditional"  # a claim, or its denial, only under conditions
        elif pos and neg:
            stance = "contradictory"
        else:
            stance = "supported" if pos else "not_supported"
        decisive = (
            neg if stance == "not_supported" else pos if stance == "supported" else (pos + neg)
        )
        out[topic] = {
            "stance": stance,
            "statements": [
                {
                    "line": s.line,
                    "polarity": s.polarity,
                    "conditional": s.conditional,
                    "sentence": s.sentence,
                }
                for s in sorted(decisive or mine, key=lambda s: s.line)
            ],
        }
    return out


_WORDS = {
    "mixed_batches": "mixed prefill+decode batches",
    "chunked_prefill": "chunked prefill",
    "decode_interleaving": "decode interleaving",
}


def _quote(item: dict[str, Any], docs: str) -> str:
    sentence = item["sentence"]
    if len(sentence) > 160:
        sentence = sentence[:157] + "..."
    return f'{docs}:{item["line"]}: "{sentence}"'


def _compare_replay(
    replay: ReplayReport,
    stances: dict[str, dict[str, Any]],
    docs: str,
    unobserved: str,
    evidence: list[Evidence],
    details: dict[str, Any],
) -> tuple[list[str], list[str]]:
    """(failures, warnings) from comparing the replay's observed steps with the docs."""
    plugin = replay.plugin or SideCounts(None, None, {}, None)
    fails: list[str] = []
    warns: list[str] = []
    if plugin.crashed:
        fails.append(
            f"the plugin's scheduler failed during the replay ({plugin.crashed}); the docs "
            "could not be compared with observed batches"
        )
        return fails, warns
    plugin_counts = dict(plugin.counts)
    upstream_counts = dict(replay.upstream.counts) if replay.upstream is not None else {}
    if "mixed_steps" not in plugin_counts:
        raise BadInput(
            "scheduler replay: plugin.mixed_steps is missing",
            hint="the replay must count the plugin's mixed prefill+decode steps",
        )
    details["replay"] = {"plugin": plugin_counts, "upstream": upstream_counts}
    if plugin.stopped:
        warns.append(f"the replay did not finish ({plugin.stopped}); compared what it saw")
    for topic, counter in REPLAY_KEYS.items():
        if counter not in plugin_counts:
            continue
        seen = plugin_counts[counter]
        evidence.append(Evidence(note=f"replay: plugin {counter}", value=seen, source="replay"))
        finding = _topic_finding(
            topic, stances[topic], plugin, plugin_counts, upstream_counts.get(counter, 0), docs
        )
        if finding is None:
            continue
        verdict, msg = finding
        if verdict == "unobserved":
            verdict = unobserved
        if verdict == "fail":
            fails.append(msg)
        elif verdict == "warn":
            warns.append(msg)
    return fails, warns


def _topic_finding(
    topic: str,
    stance: dict[str, Any],
    plugin: SideCounts,
    plugin_counts: dict[str, int],
    upstream_seen: int,
    docs: str,
) -> tuple[str, str] | None:
    """(fail | warn | unobserved, message) when the replay disagrees with the docs on a topic."""
    seen = plugin_counts[REPLAY_KEYS[topic]]
    negatives = [i for i in stance["statements"] if i["polarity"] == "not_supported"]
    positives = [i for i in stance["statements"] if i["polarity"] == "supported"]
    if seen > 0 and stance["stance"] in ("not_supported", "contradictory") and negatives:
        # Docs that rule the behaviour out (unconditionally: fail; conditionally: warn).
        firm = [i for i in negatives if not i["conditional"]]
        steps = plugin_counts.get("steps")
        of = f" of {steps}" if steps is not None else ""
        first = plugin.first_mixed_step if topic == "mixed_batches" else None
        at = f" (first at step {first})" if first is not None else ""
        msg = (
            f"the replay saw {seen}{of} plugin steps with {_WORDS[topic]}{at}, but "
            f"{_quote((firm or negatives)[0], docs)}"
        )
        return ("fail" if firm else "warn"), msg
    if seen == 0 and stance["stance"] == "supported" and positives and upstream_seen > 0:
        # Docs that claim the behaviour, never seen on a load where upstream shows it.
        msg = (
            f"the docs state {_WORDS[topic]} ({_quote(positives[0], docs)}) but the "
            f"replay saw none in the plugin, while upstream had "
            f"{upstream_seen} on the same load"
        )
        return "unobserved", msg
    return None


def check(
    spec: Spec, plugin_root: Path | str | None, replay: ReplayReport | None = None
) -> CheckResult:
    """The `scheduler` check: docs statements, the request mix, and the replay when given."""
    options = spec.conformance(NAME) or {}
    # as written: the scorecard records it
    request_mix: dict[str, Any] | None = spec.conformance("request_mix")
    docs = options.get("docs", DEFAULT_DOCS)
    unobserved = options.get("unobserved_support", "warn")
    threshold: dict[str, Any] = {
        "docs": docs,
        "require_mixed_statement": options.get("require_mixed_statement", True),
        "unobserved_support": unobserved,
    }
    details: dict[str, Any] = {"docs": docs, "request_mix": request_mix}
    evidence = [Evidence(note=MIX, value=request_mix, source="spec")] if request_mix else []
    evidence = evidence or [Evidence(note=NO_MIX, source="spec")]
    root = plugin_root_for(spec, plugin_root)
    try:
        text, cut = read_text(root, root / docs, MAX_BYTES)
    except Unread as exc:
        details["replay_compared"] = False
        key = "[conformance.scheduler] docs"
        key = key if "docs" in options else f"default of {key}"
        summary = (
            f"scheduler docs {docs} {exc.reason} ({key}); point [conformance.scheduler] docs "
            "at the plugin's scheduling notes"
        )
        evidence.insert(0, Evidence(note=f"file {exc.reason}", file=docs, source="plugin"))
        return CheckResult(NAME, "fail", summary, evidence, threshold, details)
    if cut:
        evidence.append(Evidence(note=too_large(docs, MAX_BYTES), file=docs, source="plugin"))
    plugin_name = spec.plugin.name if spec.plugin else None
    statements = extract_statements(text, plugin_name=plugin_name, aliases=options.get("aliases"))
    stances = summarize(statements)
    details["statements"] = [s.to_json() for s in statements]
    details["stated"] = stances
    details["upstream_stated"] = {
        t: v["stance"] for t, v in summarize(statements, "upstream").items()
    }
    evidence += _statement_evidence(stances, docs)
    fails, warns = _docs_findings(stances, docs, options.get("require_mixed_statement", True))
    details["replay_compared"] = replay is not None
    replay_note = "replay half not yet compared (docs only)"
    if replay is not None:
        found = _compare_replay(replay, stances, docs, unobserved, evidence, details)
        fails, warns = fails + found[0], warns + found[1]
        replay_note = f"replay {headline_text(replay.headline)}"
    stated = ", ".join(f"{_WORDS[t]}: {stances[t]['stance'].replace('_', ' ')}" for t in TOPICS)
    mix_note = "request mix recorded" if request_mix else "no request mix in the spec"
    tail = f"{docs}: {stated}; {mix_note}; {replay_note}"
    return from_findings(
        NAME, (fails, warns), tail, evidence=evidence, threshold=threshold, details=details
    )


def _statement_evidence(stances: dict[str, dict[str, Any]], docs: str) -> list[Evidence]:
    """One evidence item per decisive docs statement, topic by topic."""
    return [
        Evidence(
            note=f"{_WORDS[topic]}: {item['polarity'].replace('_', ' ')}"
            + (" (conditional)" if item["conditional"] else ""),
            file=docs,
            line=item["line"],
            value=item["sentence"],
            source="plugin docs",
        )
        for topic in TOPICS
        for item in stances[topic]["statements"]
    ]


def _docs_findings(
    stances: dict[str, dict[str, Any]], docs: str, require_mixed_statement: bool
) -> tuple[list[str], list[str]]:
    """(failures, warnings) from the docs alone: silence on mixed batches, self-contradiction."""
    fails: list[str] = []
    warns: list[str] = []
    mixed = stances["mixed_batches"]["stance"]
    if mixed in ("unstated", "mentioned") and require_mixed_statement:
        fails.append(
            f"{docs} states nothing about mixed prefill+decode batches; say whether "
            "the plugin schedules them"
        )
    for topic in TOPICS:
        if stances[topic]["stance"] == "contradictory":
            quotes = "; ".join(_quote(i, docs) for i in stances[topic]["statements"][:3])
            warns.append(f"{docs} contradicts itself on {_WORDS[topic]}: {quotes}")
    return fails, warns


def run(ctx: Context) -> CheckResult:
    """The replay must have completed on both sides before the docs are compared with it."""
    report = ctx.replay()
    sides = (("plugin", report.plugin), ("upstream", report.upstream)) if report else ()
    broken = [
        f"{side}: {counts.crashed or counts.stopped}"
        for side, counts in sides
        if counts is not None and (counts.crashed or counts.stopped)
    ]
    if broken:
        return CheckResult(
            NAME,
            "fail",
            "the replay did not complete: " + "; ".join(broken),
            [Evidence(note=b, source="replay") for b in broken],
        )
    return check(ctx.spec, ctx.plugin_root, replay=report)


CHECK = CheckDef(
    "scheduler",
    "what the plugin's docs say about scheduling against what its scheduler does in the replay",
    run,
    TABLES,
    ("plugin_root", "env", "replay"),
    needs=("env",),
)
