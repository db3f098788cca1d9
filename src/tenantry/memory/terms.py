"""Terms: how lesson text and queries become FTS5 tokens.

Both sides go through the same function, so the index never disagrees with
the query: lower-case, split on anything that is not a letter or digit,
map a few HPC abbreviations and phrasings onto one form (``OOM`` and "out of
memory"; "walltime" and "time limit"), drop stop words, strip common English
suffixes. The FTS5 table then uses the plain ``unicode61`` tokenizer on the
already-processed text, and a query is a list of quoted terms joined by
``OR``: raw error text (quotes, colons, parentheses, paths) never reaches the
FTS5 query parser.
"""

from __future__ import annotations

import re
from functools import lru_cache

_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), r)
    for p, r in (
        # separators include "_": Slurm prints states as OUT_OF_MEMORY, TIME_LIMIT, NODE_FAIL
        (r"out[ _-]of[ _-](?:[a-z]+[ _-])?memory|oom[-_ ]?kill(?:ed|er)?|oom_kill", " oom "),
        (r"wall[ _-]?time|wall[ _-]?clock|time[ _-]?limit|timelimit", " timelimit "),
        (r"no space left on device|enospc|disk quota|quota exceeded|over quota", " quota "),
        (r"command not found|no such file or directory|not found", " notfound "),
        (r"permission denied|access denied|not permitted|eacces", " denied "),
        (r"segmentation fault|segfault|sigsegv", " segfault "),
        (r"\bshared[ -]?(?:file[ -]?system|fs)\b|\blustre\b|\bgpfs\b|\bnfs\b", " sharedfs "),
    )
)

_ALIASES: dict[str, str] = {
    "gpus": "gpu",
    "gres": "gpu",
    "nvidia": "cuda",
    "cudnn": "cuda",
    "nccl": "cuda",
    "mem": "memory",
    "ram": "memory",
    "rss": "memory",
    "mpirun": "mpi",
    "mpiexec": "mpi",
    "openmpi": "mpi",
    "mpich": "mpi",
    "intelmpi": "mpi",
    "miniconda": "conda",
    "anaconda": "conda",
    "mamba": "conda",
    "micromamba": "conda",
    "venv": "virtualenv",
    "partitions": "partition",
    "queue": "partition",
    "sbatch": "slurm",
    "srun": "slurm",
    "salloc": "slurm",
    "slurmstepd": "slurm",
    "lmod": "module",
    "modules": "module",
    "ml": "module",
    "killed": "kill",
    "dir": "directory",
    "env": "environment",
    "libs": "library",
    "lib": "library",
    "nodes": "node",
    "qos": "qos",
    "dies": "crash",
    "died": "crash",
    "crashed": "crash",
    "crashes": "crash",
}

_STOP_WORDS = """
    a an and are as at be been but by can could did do does doing for from had has have how i
    if in into is it its me my no not of on or our so such than that the their then there these
    they this to too was we were what when where which while who why will with you your after
    before again also am any because being both each few further here just more most other over
    own same some only very s t us up out off down should would get got getting keep keeps kept
    still now try tried trying use used using run ran running
"""
_STOP = frozenset(_STOP_WORDS.split())

_TOKEN = re.compile(r"[a-z0-9]+")
_NUMERIC = re.compile(r"^[0-9]+$")

MAX_TERM = 40


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light English suffix stripper (deliberately conservative)."""
    if len(word) <= 4 or word[-1].isdigit() or word.endswith(("ss", "fs", "us", "is")):
        return word
    for suffix, keep in (
        ("ations", 4),
        ("ation", 4),
        ("ings", 4),
        ("ing", 4),
        ("edly", 4),
        ("ied", 3),
        ("ies", 3),
        ("ed", 4),
        ("es", 4),
        ("s", 4),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep:
            base = word[: -len(suffix)]
            if suffix in ("ied", "ies"):
                return base + "y"
            if suffix == "s" and word.endswith("ss"):
                return word
            return base
    return word


def terms(text: str) -> list[str]:
    """The index/query terms of ``text``, in order, with repeats."""
    low = text.lower()
    for pattern, repl in _PHRASES:
        low = pattern.sub(repl, low)
    out: list[str] = []
    for tok in _TOKEN.findall(low):
        if tok in _STOP or len(tok) > MAX_TERM:
            continue
        if _NUMERIC.match(tok) and len(tok) != 3:
            continue  # ids, counts and versions; three digits are often exit codes or errno
        tok = _ALIASES.get(tok, tok)
        out.append(stem(tok))
    return out


def index_text(text: str) -> str:
    """The processed text stored in the FTS5 table."""
    return " ".join(terms(text))


def query_terms(text: str, limit: int = 64) -> list[str]:
    """Distinct query terms in first-seen order (at most ``limit``)."""
    seen: dict[str, None] = {}
    for t in terms(text):
        if t not in seen:
            seen[t] = None
            if len(seen) >= limit:
                break
    return list(seen)


def fts_query(words: list[str]) -> str:
    """An FTS5 MATCH expression: each term quoted, joined by OR (never a syntax error)."""
    return " OR ".join('"' + w.replace('"', "") + '"' for w in words if w)
