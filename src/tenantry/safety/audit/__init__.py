"""Tamper-evident audit log: append-only, hash-chained, anchored."""

from __future__ import annotations

from tenantry.safety.audit.chain import Report, digest, verify
from tenantry.safety.audit.component import AuditLog, audit_paths, create

__all__ = ["AuditLog", "Report", "audit_paths", "create", "digest", "verify"]
