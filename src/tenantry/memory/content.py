"""Content classes: what a lesson's text asks its reader to touch. Pure functions.

The scanner (``scanner``) looks for known attack *shapes* and is easy to
evade by rephrasing. This module answers a coarser question that does not
depend on phrasing: does the lesson involve something a reader must not take
from an unvetted source at all?

- ``remote``: code or data from outside the facility (a URL, ``curl``,
  ``wget``, ``git clone``, an installer script);
- ``credentials``: keys, tokens, passwords, ssh material, auth files;
- ``privilege``: scheduler priority and QOS, reservations, resource limits
  (``ulimit``, limit exemptions), access rights of other people, admin tools.

A lesson in any class is *sensitive*: however it is phrased, it is shown to
principals other than its writer, and attached to failures, only once staff
approved it (see ``retrieval.visibility``). The classes are recorded at
write time, since a lesson's content never changes.
"""

from __future__ import annotations

import re

REMOTE = "remote"
CREDENTIALS = "credentials"
PRIVILEGE = "privilege"

_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        REMOTE,
        re.compile(
            r"\b[a-z][a-z0-9+.-]*://"  # any URL scheme: https, ftp, docker, s3 ...
            r"|\b(?:curl|wget|aria2c|fetch|lwp-download)\b"
            r"|\bgit\s+clone\b|\b(?:pip3?|uv)\s+install\s+(?:[^\n`]*\s)?(?:git\+|https?:)"
            r"|\b(?:installer|\.run|\.sh)\b[^\n]{0,40}\b(?:download|fetch|get)\b"
            r"|\b(?:download|fetch)\w*\b[^\n]{0,60}\b(?:bash|sh|run|execute|source)\b"
            r"|\bwww\.|\b[\w-]+\.(?:com|net|org|io|example|xyz|ru|cn)(?:/|\b)",
            re.IGNORECASE,
        ),
    ),
    (
        CREDENTIALS,
        re.compile(
            r"\.ssh\b|\bssh[- ]?(?:keys?|director(?:y|ies)|agent|config)\b"
            r"|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|\bauthorized_keys\b|\bprivate[ _-]?keys?\b"
            r"|\b(?:access|api|auth|bearer|hub)?[ _-]?tokens?\b"
            r"|\bpasswords?\b|\bpasswd\b|\bcredentials?\b|\bsecrets?\b|\.netrc\b|\.pgpass\b"
            r"|\bmunge\b|\bkeytab\b|\bkinit\b|\bgpg\b",
            re.IGNORECASE,
        ),
    ),
    (
        PRIVILEGE,
        re.compile(
            r"--qos\b|\bqos\s*="
            r"|\b(?:use|with|add|set|switch to|submit (?:to|with))\s+(?:the\s+|an?\s+)?"
            r"(?:[\w-]+\s+)?qos\b"
            r"|--reservation\b|--priority\b|--nice\b|\bpriority\s+qos\b"
            r"|\bulimit\b|\bsetrlimit\b|\blimits\.conf\b|\b[a-z_]*exempt\w*\b|\bunlimited\b"
            r"|\bsudo\b|\bsu\s+-|\bscontrol\s+(?:update|create|delete)\b"
            r"|\bsacctmgr\s+(?:add|modify|delete)\b"
            r"|\bsetfacl\b|\bchmod\b[^\n]*\b(?:o[+=:]|a\+|777|666)|\bo::|\bchown\b|\bsetuid\b|\bsetcap\b"
            r"|\bLD_PRELOAD\b|\bLD_LIBRARY_PATH\s*=",
            re.IGNORECASE,
        ),
    ),
)


def classes(*texts: str) -> list[str]:
    """The content classes of the given texts, in a fixed order (empty = ordinary)."""
    joined = "\n".join(t for t in texts if t)
    return [name for name, pattern in _CLASSES if pattern.search(joined)]


def sensitive(*texts: str) -> bool:
    return bool(classes(*texts))
