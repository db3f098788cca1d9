"""Error signatures: the stable core of an error message.

Two failures are "the same error" when their messages agree once the parts
that vary between runs are stripped: paths, job and process ids, numbers,
hex addresses, hashes, host names with digits, timestamps. ``normalize``
does that stripping; ``signature_lines`` picks the lines of a long output
tail that look like errors; ``signature_hash`` gives the indexable key.
Pure functions, standard library only.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

# Order matters: the more specific patterns run first.
_SUBS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\x1b\[[0-9;]*[a-zA-Z]"), ""),  # ANSI colour codes
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:z|[+-]\d{2}:?\d{2})?"), " "),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"), " "),  # clock times
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"\b(?:https?|file|s3)://\S+"), "<url>"),
    (re.compile(r"(?<![\w.-])(?:~|\.{1,2})?(?:/[\w.+@%=-]+)+/?"), "<path>"),  # unix paths
    (re.compile(r"\b0x[0-9a-f]+\b"), "<hex>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<hex>"),  # hashes, long hex ids
    (re.compile(r"\b(\d+\.){3}\d+(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b[a-z]+-?\d{3,}[a-z0-9-]*\b"), "<host>"),  # node001, nid001234, cn-101
    (re.compile(r"\b\d+(?:\.\d+)*(?:[kmgtp]i?b?)?\b"), "<n>"),  # numbers, sizes, versions
    (re.compile(r"[\"'`‘’“”]"), ""),  # quotes vary between tools and locales
    (re.compile(r"\s+"), " "),
)

# Words that mark a line as an error message worth keying on.
_ERRORISH = re.compile(
    r"error|fatal|failed|failure|denied|not found|no such|cannot|can't|could not|unable"
    r"|killed|oom|out of memory|exceeded|invalid|unrecognized|unknown|undefined"
    r"|segmentation|abort|traceback|exception|refused|timed? ?out|quota|illegal|mismatch"
    r"|unsatisfiable|conflict|missing|unsupported|incompatible|terminated|cancelled",
    re.IGNORECASE,
)

_MAX_LINE = 300


def normalize(text: str) -> str:
    """Strip what varies between runs; lower-case; collapse whitespace."""
    out = text.lower()[: _MAX_LINE * 4]
    for pattern, repl in _SUBS:
        out = pattern.sub(repl, out)
    return out.strip(" :;,.-")[:_MAX_LINE]


def signature_lines(text: str, limit: int = 8) -> list[str]:
    """Normalized error-looking lines of an output tail, last ones first, deduplicated."""
    seen: set[str] = set()
    out: list[str] = []
    for line in reversed(text.splitlines()):
        if not _ERRORISH.search(line):
            continue
        norm = normalize(line)
        if len(norm) < 8 or norm in seen:
            continue
        seen.add(norm)
        out.append(norm)
        if len(out) >= limit:
            break
    return out


_TAIL = re.compile(r"(?:[\s:;,=()\[\]-]*<(?:path|url|n|host|hex|id|ip)>)+[\s:;,.()\[\]-]*$")


def without_tail(sig: str) -> str:
    """A normalized line without the variable parts it ends with ("...exceeded: <path>" ->
    "...exceeded"), or "" when nothing is stripped or too little is left.

    Tools print the same error with and without what it was about (Python's
    ``OSError`` appends the path, a lesson's writer often leaves it out), so a
    query line is also looked up by this shorter key.
    """
    short = _TAIL.sub("", sig).strip(" :;,.-")
    return short if short != sig and len(short) >= 8 else ""


def multiline_signatures(text: str, limit: int = 8) -> list[str]:
    """Normalized two-line windows around error-looking lines (signatures may span lines)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    out: list[str] = []
    for i in range(len(lines) - 1, 0, -1):
        if _ERRORISH.search(lines[i - 1]) or _ERRORISH.search(lines[i]):
            norm = normalize(lines[i - 1] + " " + lines[i])
            if len(norm) >= 8 and norm not in out:
                out.append(norm)
                if len(out) >= limit:
                    break
    return out


def primary_signature(text: str) -> str:
    """The one line that best keys this output (the last error-looking line)."""
    lines = signature_lines(text, limit=1)
    if lines:
        return lines[0]
    stripped = [ln for ln in text.splitlines() if ln.strip()]
    return normalize(stripped[-1]) if stripped else ""


def signature_hash(signature: str) -> str:
    """A short stable key of a normalized signature ('' for none)."""
    if not signature:
        return ""
    return hashlib.sha256(signature.encode()).hexdigest()[:16]


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of the word sets of two normalized signatures."""
    return best_similarity(a, [set(b.split())])


@lru_cache(maxsize=1 << 14)
def words(sig: str) -> frozenset[str]:
    """The word set of a stored signature (a recall compares dozens of them, repeatedly)."""
    return frozenset(sig.split())


def best_similarity(a: str, others: list[set[str]]) -> float:
    """The highest ``similarity`` of ``a`` to signatures given as word sets (split once)."""
    wa = words(a)
    if not wa:
        return 0.0
    return max((len(wa & wb) / len(wa | wb) for wb in others if wb), default=0.0)
