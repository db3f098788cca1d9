"""Guarding what ops return: streamed chunks, command results, job logs.

The gateway's ops call these on every piece of untrusted text before it
leaves the daemon. ``StreamGuard`` works on a stream: it releases whole
lines only, and holds an open private-key block until its END line (or
``max_hold`` characters), so a secret split across chunks is still redacted.
Instruction-like lines are contained (withheld, with a digest) by default.
"""

from __future__ import annotations

from typing import Any

from tenantry.safety.guard.core import Finding, Mode, guard


class StreamGuard:
    def __init__(self, origin: str, *, mode: Mode = "contain", max_hold: int = 65_536) -> None:
        self.origin = origin
        self.mode: Mode = mode
        self.max_hold = max_hold
        self.findings: list[Finding] = []
        self._buf = ""

    def _release(self, text: str) -> str:
        if not text:
            return ""
        g = guard(text, self.origin, mode=self.mode)
        self.findings.extend(g.findings)
        return g.text

    def feed(self, text: str) -> str:
        """Guarded text that can be released now (possibly empty)."""
        self._buf += text
        cut = self._buf.rfind("\n") + 1
        if cut == 0:
            if len(self._buf) < self.max_hold:
                return ""
            cut = len(self._buf)
        begin = self._buf.rfind("-----BEGIN", 0, cut)
        if (
            begin != -1
            and "-----END" not in self._buf[begin:cut]
            and len(self._buf) < self.max_hold
        ):
            cut = begin
        out, self._buf = self._buf[:cut], self._buf[cut:]
        return self._release(out)

    def flush(self) -> str:
        out, self._buf = self._buf, ""
        return self._release(out)


def _summary(findings: list[Finding], origin: str) -> dict[str, Any]:
    return {
        "origin": origin,
        "secrets_redacted": sum(f.kind == "secret" for f in findings),
        "instruction_like": any(f.kind == "injection" for f in findings),
        "findings": [f.to_dict() for f in findings],
    }


def guard_command_result(result: dict[str, Any], origin: str) -> dict[str, Any]:
    """A ``CommandResult.to_dict()`` with its output tails guarded and a ``guard`` summary."""
    out = dict(result)
    findings: list[Finding] = []
    labels: set[str] = set()
    for key in ("stdout_tail", "stderr_tail"):
        text = out.get(key)
        if isinstance(text, str) and text:
            g = guard(text, origin, mode="contain")
            out[key] = g.text
            findings.extend(g.findings)
            labels.update(g.labels)
    summary = _summary(findings, origin)
    summary["labels"] = sorted(labels or {"untrusted"})
    summary["notice"] = guard("", origin).notice() if not findings else _notice(findings, origin)
    out["guard"] = summary
    return out


def guard_text_result(result: dict[str, Any], origin: str, key: str = "text") -> dict[str, Any]:
    """A result dict whose ``key`` holds untrusted text (``jobs.logs``, file reads)."""
    out = dict(result)
    text = out.get(key)
    if isinstance(text, str):
        g = guard(text, origin, mode="contain")
        out[key] = g.text
        summary = _summary(list(g.findings), origin)
        summary["labels"] = list(g.labels)
        summary["notice"] = g.notice()
        out["guard"] = summary
    return out


def _notice(findings: list[Finding], origin: str) -> str:
    from tenantry.safety.guard.core import Guarded

    return Guarded("", origin, (), tuple(findings)).notice()
