"""Untrusted-content guard: origin labels, secret redaction, injection flags."""

from __future__ import annotations

from tenantry.safety.guard.core import Finding, Guarded, guard

__all__ = ["Finding", "Guarded", "guard"]
