"""From a regular expression to a trigram prefilter (an FTS5 MATCH expression).

A file can match the regex only if it contains every literal string the regex
requires. We walk Python's own parse tree of the pattern and collect required
literals: a run of literal characters is required; a group or a repetition
with a minimum of one requires what its body requires; an alternation
requires one of its branches. Anything else (classes, optional parts,
look-arounds) just breaks the current run. Literals shorter than three
characters say nothing to a trigram index and are dropped.

The result is *necessary*, never sufficient: candidates are verified with the
real regex on the cached text. The FTS5 ``trigram`` tokenizer folds case, so the
same prefilter serves case-insensitive searches (non-ASCII literals are dropped
then, since Unicode case folding is wider than the tokenizer's).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

# A requirement: None (no constraint), a literal, or ("and"|"or", [requirements]).
Req = None | str | tuple[str, list[Any]]


def required(pattern: str, flags: int = 0) -> Req:
    """The literal requirement of ``pattern`` (None when nothing useful is required)."""
    try:
        tree = _parser.parse(pattern, flags)
    except re.error:
        return None
    ascii_only = bool(tree.state.flags & re.IGNORECASE)
    return _seq(list(tree), ascii_only)


def _seq(items: list[tuple[Any, Any]], ascii_only: bool) -> Req:
    parts: list[Req] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) >= 3:
            parts.append("".join(run))
        run.clear()

    for op, av in items:
        if op is _c.LITERAL:
            ch = chr(av)
            if ch == "\n" or (ascii_only and not ch.isascii()):
                flush()
            else:
                run.append(ch)
            continue
        flush()
        if op is _c.SUBPATTERN:
            add_flags = av[1]
            parts.append(_seq(list(av[3]), ascii_only or bool(add_flags & re.IGNORECASE)))
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
            if av[0] >= 1:
                parts.append(_seq(list(av[2]), ascii_only))
        elif op is _c.BRANCH:
            branches = [_seq(list(b), ascii_only) for b in av[1]]
            if all(b is not None for b in branches):
                parts.append(("or", branches))
        elif op is getattr(_c, "ATOMIC_GROUP", None):
            parts.append(_seq(list(av), ascii_only))
    flush()
    kept = [p for p in parts if p is not None]
    if not kept:
        return None
    if len(kept) == 1:
        return kept[0]
    return ("and", kept)


KEEP = 5
# rough character frequencies in source text (higher = more common)
_LETTERS = "zqjxkvbywgpfmucdlhrsniotae"
_COMMON = {**{ch: 2 + i for i, ch in enumerate(_LETTERS)}, " ": 40, "\t": 20}
_COMMON.update(dict.fromkeys("().,=;:'\"-/", 12))


def _commonness(gram: str) -> int:
    score = 0
    for ch in gram:
        if ch in _COMMON:
            score += _COMMON[ch]
        elif ch.isupper() and ch.lower() in _COMMON:
            score += _COMMON[ch.lower()] // 3
        elif ch.isdigit():
            score += 6
        else:
            score += 3
    return score


def _quote(gram: str) -> str:
    return '"' + gram.replace('"', '""') + '"'


def fts_query(req: Req) -> str | None:
    """An FTS5 MATCH expression of single trigrams for ``req`` (None: match all)."""
    if req is None:
        return None
    if isinstance(req, str):
        grams = sorted({req[i : i + 3] for i in range(len(req) - 2)})
        if len(grams) > KEEP:
            # the index reads each trigram's whole list of files: AND only the few
            # likely rarest (every trigram is a necessary condition, any subset is too)
            grams = sorted(sorted(grams, key=lambda g: (_commonness(g), g))[:KEEP])
        return " AND ".join(_quote(g) for g in grams)
    kind, parts = req
    subs = [fts_query(p) for p in parts]
    if kind == "or":
        if any(s is None for s in subs):
            return None
        return " OR ".join(f"({s})" for s in subs)
    kept = [s for s in subs if s is not None]
    if not kept:
        return None
    return " AND ".join(f"({s})" for s in kept)
