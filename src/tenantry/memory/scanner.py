"""Poisoning scanner: what a lesson must not carry.

A lesson is text other sessions will read while deciding what to run. Writes
are scanned for the shapes that turn shared memory into an attack: installs
piped into a shell, credential paths and secrets, privileged scheduler or
system flags, text that addresses the reader as an instruction, and
invisible characters that hide any of these. A lesson with findings stays
untrusted and quarantined: never returned by retrieval, visible only to its
writer and staff through ``show``/``list``. Pure functions.

One exception (``quarantining``): *privilege* findings in text staff wrote
themselves are recorded, not quarantined. Staff are who grants privileges,
and documenting a scheduler command such as ``scontrol update jobid=...
ArrayTaskThrottle=`` for users' own jobs is their job; such a lesson is still
sensitive (``content``), so it reaches others only as staff-approved. Remote
execution, credentials, instruction-like and hidden text quarantine whoever
wrote them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    category: str
    pattern: re.Pattern[str]


def _r(name: str, category: str, pattern: str) -> Rule:
    return Rule(name, category, re.compile(pattern, re.IGNORECASE | re.MULTILINE))


RULES: tuple[Rule, ...] = (
    # remote code straight into an interpreter
    _r(
        "pipe-to-shell",
        "remote-exec",
        r"\b(?:curl|wget|fetch)\b[^|\n]*\|\s*(?:sudo\s+)?(?:ba|z|k|da)?sh\b",
    ),
    _r(
        "pipe-to-interpreter",
        "remote-exec",
        r"\b(?:curl|wget)\b[^|\n]*\|\s*(?:sudo\s+)?(?:python[0-9.]*|perl|ruby|node)\b",
    ),
    _r("process-substitution-exec", "remote-exec", r"\b(?:ba|z)?sh\s+<\(\s*(?:curl|wget)"),
    _r("eval-download", "remote-exec", r"\beval\s+[\"']?\$\(\s*(?:curl|wget)"),
    _r("base64-exec", "remote-exec", r"base64\s+(?:-d|--decode)[^|\n]*\|\s*(?:ba)?sh\b"),
    _r("reverse-shell", "remote-exec", r"\bnc\b[^\n]*\s-e\s|/dev/tcp/|\bsocat\b[^\n]*exec:"),
    # credentials and secrets
    _r(
        "ssh-keys",
        "credentials",
        r"(?:~|\$home|/home/[\w.-]+|/root)?/\.ssh/(?:id_\w+|authorized_keys|config)\b|\bid_(?:rsa|ed25519|ecdsa)\b",
    ),
    _r(
        "credential-file",
        "credentials",
        r"\.netrc\b|\.pgpass\b|\.aws/credentials|\.git-credentials|\.docker/config\.json"
        r"|\.kube/config|/etc/shadow\b|munge\.key\b|\.config/gcloud|\.ssh/known_hosts",
    ),
    _r(
        "secret-env",
        "credentials",
        r"\b(?:aws_secret_access_key|github_token|gh_token|hf_token|openai_api_key"
        r"|anthropic_api_key|slurm_jwt)\s*=",
    ),
    _r(
        "secret-material",
        "credentials",
        r"-----begin [a-z ]*private key-----|\bakia[0-9a-z]{16}\b|\bgh[pousr]_[0-9a-z]{20,}",
    ),
    _r("exfiltrate-file", "credentials", r"\bcurl\b[^\n]*(?:-d|--data[\w-]*|-F)\s*@"),
    # privileged flags
    _r(
        "admin-qos",
        "privilege",
        r"--qos[= ]\s*(?:admin|staff|root|urgent|high_?prio\w*|exempt|normal_admin)\b"
        r"|\bqos\s*=\s*(?:admin|staff|root|exempt)\b",
    ),
    _r(
        "reservation-or-priority",
        "privilege",
        r"--reservation[= ]\s*(?:maint|admin|root|staff)\w*|--nice[= ]\s*-\d|--priority[= ]",
    ),
    _r(
        "sudo",
        "privilege",
        r"\bsudo\s+(?:-[a-z]+\s+)*(?:apt(?:-get)?|yum|dnf|pip3?|make|chmod|chown|rm|cp|mv|bash|sh"
        r"|su|tee|mount|systemctl|scontrol|sacctmgr|install|ln|python3?|/)",
    ),
    _r(
        "scheduler-admin",
        "privilege",
        r"\bscontrol\s+(?:update|create|delete|reconfigure)\b|\bsacctmgr\s+(?:add|modify|delete)\b",
    ),
    _r("world-writable", "privilege", r"\bchmod\s+(?:-R\s+)?(?:0?777|a\+w|o\+w)\b"),
    _r("preload", "privilege", r"\bLD_PRELOAD\s*="),
    _r(
        "disable-security",
        "privilege",
        r"--no-check-certificate|\bsetenforce\s+0\b|verify\s*=\s*false|-k\s+https://",
    ),
    # instruction-like text aimed at the reading agent
    _r(
        "override-instructions",
        "instruction",
        r"\b(?:ignore|disregard|forget|override)\b[^.\n]{0,40}\b(?:instructions?|rules|prompts?|guidelines|policy|policies)\b",
    ),
    _r(
        "role-injection",
        "instruction",
        r"<\s*/?\s*(?:system|assistant|instructions?)\s*>|^\s*(?:system|assistant)\s*:|\[/?inst\]",
    ),
    _r(
        "addressing-the-agent",
        "instruction",
        r"\b(?:as an? (?:ai|assistant|language model)|you are now|new instructions|system prompt"
        r"|do not (?:tell|inform|mention)[^.\n]{0,30}\buser\b"
        r"|without (?:asking|telling) the user)\b",
    ),
    _r(
        "imperative-always",
        "instruction",
        r"\b(?:always|must|immediately)\s+(?:send|upload|post|copy|share|email|paste)\b[^.\n]{0,60}"
        r"\b(?:tokens?|keys?|passwords?|credentials?|secrets?|ssh)\b",
    ),
    # hidden characters
    _r("invisible-text", "hidden", "[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"),
)


PRIVILEGE = "privilege"


def quarantining(findings: list[dict[str, str]], staff_written: bool) -> list[dict[str, str]]:
    """The findings that quarantine a lesson: all, but privilege ones in staff's own text."""
    if not staff_written:
        return findings
    return [f for f in findings if f["category"] != PRIVILEGE]


def scan(*texts: str) -> list[dict[str, str]]:
    """Findings for the given texts: ``[{rule, category, match}]`` (empty = clean)."""
    findings: list[dict[str, str]] = []
    seen: set[str] = set()
    for text in texts:
        if not text:
            continue
        for rule in RULES:
            m = rule.pattern.search(text)
            if m and rule.name not in seen:
                seen.add(rule.name)
                snippet = m.group(0)
                findings.append(
                    {"rule": rule.name, "category": rule.category, "match": snippet[:80]}
                )
    return findings
