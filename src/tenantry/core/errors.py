"""The one exception tree of Tenantry.

Every error an agent or operator can see is a ``TenantryError``. Each carries a
stable ``code`` (used by the HTTP envelope, MCP tool errors and CLI exit codes),
a message that says what to do next, and whether retrying may help.

    TenantryError
    +-- UsageError               bad input from the caller (exit 2)
    |   +-- NotFound             unknown job, lease, lesson, workspace, ...
    |   |   +-- EnvUnknown       an environment digest the daemon does not hold (resend it)
    |   +-- Conflict             the object is in a state that forbids the action
    |   +-- PolicyInvalid        a policy file does not load (exit 78)
    +-- PermissionDenied         identity or ownership check failed
    |   +-- PolicyDenied         a policy decision denied the action
    |   |   +-- ApprovalRequired held until a human approves it (``tenantry approve``)
    |   +-- BudgetExceeded       a budget or rate limit is exhausted
    |   |   +-- LeaseCapReached  a user/session holds as many leases as allowed
    |   +-- SessionStopped       an operator stopped this agent session (kill switch)
    +-- Unavailable              something we depend on is down (retryable)
    |   +-- DaemonUnavailable    the client cannot reach the daemon
    |   +-- BackendUnavailable   the scheduler/backend cannot be reached
    |   +-- AuditUnavailable     the audit record cannot be written (action refused)
    |   +-- SandboxUnavailable   no usable bubblewrap for `tenantry agent`
    |   +-- FacilityUnavailable  the facility service cannot be reached (facility mode)
    +-- BackendError             the backend refused or failed an operation
    |   +-- SubmissionRejected   the scheduler rejected a submission
    +-- LeaseLost                the lease running a command went away
    +-- PilotProtocolError       a pilot or the daemon sent invalid protocol
    +-- StoreError               the state store failed
    |   +-- StoreUnavailable     the database server cannot be reached (retryable)
    +-- IngestError              an input file for the report cannot be read
    +-- IndexError_              the workspace index cannot answer
    +-- MemoryError_             the facility memory cannot answer

Foreign exceptions are translated where they enter (``raise ... from exc``)
and rendered once per surface.

This module imports only the standard library: the CLI client uses it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the CLI client path avoids importing typing

if TYPE_CHECKING:
    from typing import Any, ClassVar


class TenantryError(Exception):
    """Base of every Tenantry error."""

    code: ClassVar[str] = "error"
    exit_code: ClassVar[int] = 1
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """The wire form (one envelope for every surface)."""
        out: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.hint:
            out["hint"] = self.hint
        if self.details:
            out["details"] = self.details
        return out

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(TenantryError):
    code = "usage"
    exit_code = 2
    http_status = 400


class NotFound(UsageError):
    code = "not_found"
    http_status = 404


class EnvUnknown(NotFound):
    """A request named its environment by digest; this daemon does not hold it.

    Clients send a session's environment once and its digest afterwards; after
    a daemon restart they get this and send the environment again.
    """

    code = "env_unknown"


class Conflict(UsageError):
    code = "conflict"
    http_status = 409


class PermissionDenied(TenantryError):
    code = "permission_denied"
    exit_code = 77
    http_status = 403


class PolicyDenied(PermissionDenied):
    code = "policy_denied"


class ApprovalRequired(PolicyDenied):
    """Held, not refused: a human may approve it (``tenantry approve ID``)."""

    code = "approval_required"


class BudgetExceeded(PermissionDenied):
    code = "budget_exceeded"
    http_status = 429
    retryable = True


class Unavailable(TenantryError):
    code = "unavailable"
    exit_code = 69
    http_status = 503
    retryable = True


class DaemonUnavailable(Unavailable):
    code = "daemon_unavailable"


class BackendUnavailable(Unavailable):
    code = "backend_unavailable"


class BackendError(TenantryError):
    code = "backend_error"
    http_status = 502


class SubmissionRejected(BackendError):
    code = "submission_rejected"
    http_status = 422


class LeaseLost(TenantryError):
    code = "lease_lost"
    http_status = 503
    retryable = True


class StoreError(TenantryError):
    code = "store_error"


class StoreUnavailable(StoreError):
    """The database server cannot be reached (facility mode: PostgreSQL is down)."""

    code = "store_unavailable"
    retryable = True


# --- guard (budgets, kill switch, audit) ------------------------------------


class SessionStopped(PermissionDenied):
    code = "session_stopped"


class AuditUnavailable(Unavailable):
    """The audit record of an action could not be written: the action is refused."""

    code = "audit_unavailable"


# --- sandbox (agent sessions) -------------------------------------------------


class SandboxUnavailable(Unavailable):
    """No usable bubblewrap (missing, or user namespaces disabled)."""

    code = "sandbox_unavailable"
    retryable = False


# --- report -----------------------------------------------------------------


class IngestError(TenantryError):
    code = "ingest_error"
    exit_code = 65
    http_status = 422


# --- index ------------------------------------------------------------------


class IndexError_(TenantryError):
    code = "index_error"


# --- memory -----------------------------------------------------------------


class MemoryError_(TenantryError):
    code = "memory_error"


# --- policy -----------------------------------------------------------------


class PolicyInvalid(UsageError):
    """A policy file does not parse, does not match the schema, or widens where it may not."""

    code = "policy_invalid"
    exit_code = 78


# --- leases -----------------------------------------------------------------


class PilotProtocolError(TenantryError):
    """A pilot or the daemon sent a message that is not valid protocol."""

    code = "pilot_protocol"
    http_status = 502


class LeaseCapReached(BudgetExceeded):
    """A user or session already holds as many leases as allowed."""

    code = "lease_cap"


# --- facility mode ------------------------------------------------------------


class FacilityUnavailable(Unavailable):
    """The facility service that decides for this daemon cannot be reached.

    Agent actions are refused (fail closed) until it answers again; the user's
    own commands keep working.
    """

    code = "facility_unavailable"


# --- integrations -------------------------------------------------------------


_BY_CODE: dict[str, type[TenantryError]] = {}


def _collect(cls: type[TenantryError]) -> None:
    _BY_CODE.setdefault(cls.code, cls)
    for sub in cls.__subclasses__():
        _collect(sub)


def from_dict(data: dict[str, Any]) -> TenantryError:
    """Rebuild an error from its wire form (client side)."""
    if not _BY_CODE:
        _collect(TenantryError)
    cls = _BY_CODE.get(str(data.get("code", "error")), TenantryError)
    details = data.get("details") or {}
    err = cls(str(data.get("message", "unknown error")), hint=data.get("hint"))
    err.details = dict(details)
    return err
