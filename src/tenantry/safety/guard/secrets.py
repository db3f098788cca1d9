"""Secret detectors: keys, tokens and passwords that must never reach an agent.

Each rule is a regular expression; where it has a group named ``secret`` only
that group is redacted (the password of a URL, the value of an assignment),
otherwise the whole match is. Generic assignments (``token = ...``) are kept
only when the value looks random (Shannon entropy) and is not a placeholder,
so ``password = <your password>`` in documentation stays readable.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SecretRule:
    name: str
    pattern: re.Pattern[str]
    min_entropy: float = 0.0  # of the redacted part; 0 = no entropy test
    # The rule runs only when one of these substrings occurs (a fast C-level
    # prefilter); ``lower`` needles are looked for in the lower-cased text.
    needles: tuple[str, ...] = ()
    lower: bool = False


def _r(p: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(p, flags)


RULES: tuple[SecretRule, ...] = (
    SecretRule(
        "private_key",
        _r(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[^\x00]*\Z)",
            re.DOTALL,
        ),
        needles=("PRIVATE KEY",),
    ),
    SecretRule(
        "aws_access_key_id",
        _r(r"\b(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA)[0-9A-Z]{16}\b"),
        needles=("AKIA", "ASIA", "ABIA", "ACCA", "AROA", "AIDA"),
    ),
    SecretRule(
        "aws_secret_access_key",
        _r(
            r"(?i)aws_?secret_?(?:access_?)?key\s*[\"']?\s*[:=]\s*[\"']?"
            r"(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        needles=("aws",),
        lower=True,
    ),
    SecretRule(
        "github_token",
        _r(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_\w{60,255})\b"),
        needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    SecretRule("gitlab_token", _r(r"\bglpat-[A-Za-z0-9_-]{20,}\b"), needles=("glpat-",)),
    SecretRule("slack_token", _r(r"\bxox[abposr]-(?:\d+-)?[A-Za-z0-9-]{10,}\b"), needles=("xox",)),
    SecretRule(
        "slack_webhook",
        _r(r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+"),
        needles=("hooks.slack.com",),
    ),
    SecretRule("google_api_key", _r(r"\bAIza[0-9A-Za-z_-]{35}\b"), needles=("AIza",)),
    SecretRule(
        "openai_anthropic_key",
        _r(r"\bsk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_-]{20,}\b"),
        min_entropy=3.5,
        needles=("sk-",),
    ),
    SecretRule("stripe_key", _r(r"\b[rs]k_live_[A-Za-z0-9]{20,}\b"), needles=("k_live_",)),
    SecretRule(
        "huggingface_token", _r(r"\bhf_[A-Za-z0-9]{30,}\b"), min_entropy=3.5, needles=("hf_",)
    ),
    SecretRule(
        "jwt",
        _r(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    SecretRule(
        "url_password",
        _r(
            r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^/\s:@\"'<>]{1,64}:(?P<secret>[^@\s/\"'<>]{3,128})@"
        ),
    ),
    SecretRule(
        "assignment",
        _r(
            r"(?i)(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|"
            r"access[_-]?key|auth[_-]?key|client[_-]?secret|private[_-]?key|credentials?)"
            r"[\"']?\s*(?::=|=|:)\s*[\"']?(?P<secret>[^\s\"',;<>()]{8,200})"
        ),
        min_entropy=3.2,
        needles=("pass", "pwd", "secret", "token", "key", "credential"),
        lower=True,
    ),
)

_PLACEHOLDER = re.compile(
    r"(?i)^(?:\$\{?\w+\}?|%\w+%?|\{\{.*\}\}|<.*>|\[.*\]|x{4,}|\*{3,}|\.{3,}|"
    r".*(?:example|changeme|your[_-]|placeholder|dummy|redacted|sample|secret_here|here).*)$"
)


def entropy(s: str) -> float:
    """Shannon entropy in bits per character."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _looks_random(value: str, following: str) -> bool:
    if _PLACEHOLDER.match(value) or following == "(":  # a call: code, not a value
        return False
    if not any(c.isdigit() for c in value) and re.fullmatch(r"[A-Za-z_][\w.]*", value):
        return False  # an identifier or dotted name
    classes = sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() for c in value),
        )
    )
    return classes >= 2


@dataclass(frozen=True, slots=True)
class SecretHit:
    rule: str
    start: int
    end: int


def find_secrets(text: str) -> list[SecretHit]:
    """Spans to redact, sorted and merged (overlaps keep the first rule)."""
    hits: list[SecretHit] = []
    lowered = text.lower()
    for rule in RULES:
        hay = lowered if rule.lower else text
        if rule.needles and not any(n in hay for n in rule.needles):
            continue
        for m in rule.pattern.finditer(text):
            start, end = (
                (m.start("secret"), m.end("secret")) if "secret" in m.re.groupindex else m.span()
            )
            if start < 0:
                continue
            value = text[start:end]
            if rule.min_entropy:
                if entropy(value) < rule.min_entropy:
                    continue
                if rule.name == "assignment" and not _looks_random(value, text[end : end + 1]):
                    continue
            hits.append(SecretHit(rule.name, start, end))
    hits.sort(key=lambda h: (h.start, -h.end))
    merged: list[SecretHit] = []
    for h in hits:
        if merged and h.start < merged[-1].end:
            last = merged[-1]
            if h.end > last.end:
                merged[-1] = SecretHit(last.rule, last.start, h.end)
            continue
        merged.append(h)
    return merged


def redact(text: str, hits: list[SecretHit]) -> str:
    """``text`` with every hit replaced by ``[REDACTED:<rule>]``."""
    out: list[str] = []
    pos = 0
    for h in hits:
        out.append(text[pos : h.start])
        out.append(f"[REDACTED:{h.rule}]")
        pos = h.end
    out.append(text[pos:])
    return "".join(out)
