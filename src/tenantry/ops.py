"""The service layer: one registry of use cases that every surface calls.

An *op* is an async function ``fn(ctx, params) -> result`` registered under a
dotted name (``jobs.submit``, ``memory.recall``, ``index.find``). The HTTP
gateway exposes each at ``POST /v1/op/<name>``, the CLI calls them through the
client, the MCP server through the same client, the dashboard in-process.
A streaming op returns an async iterator of dict chunks; its last chunk is the
result (``{"result": ...}``).

Concepts register their ops in their own ``ops`` module with ``@op(...)``;
``tenantry.gateway.app.OP_MODULES`` lists the modules the daemon loads.
Params are plain JSON dicts: validate them with ``param()`` so bad input
becomes a ``UsageError`` an agent can act on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from tenantry.errors import UsageError
from tenantry.models import Principal

if TYPE_CHECKING:
    from tenantry.gateway.runtime import Runtime

T = TypeVar("T")

OpFn = Callable[["OpContext", dict[str, Any]], Awaitable[Any]]
StreamFn = Callable[["OpContext", dict[str, Any]], AsyncIterator[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Op:
    name: str
    fn: Callable[..., Any]
    summary: str
    streaming: bool = False
    # the policy action this op is judged as (None: no policy check, e.g. read-only info)
    action: str | None = None


@dataclass(frozen=True, slots=True)
class OpContext:
    """What an op sees: who calls, and the running daemon's parts."""

    principal: Principal
    runtime: Runtime
    # the client's idempotency key for this request ("" when it sent none)
    request_id: str = ""


REGISTRY: dict[str, Op] = {}


def op(
    name: str, summary: str, *, streaming: bool = False, action: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register an op under ``name``. Re-registering the same function is a no-op."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        existing = REGISTRY.get(name)
        if existing is not None and existing.fn.__qualname__ != fn.__qualname__:
            raise RuntimeError(f"op {name} registered twice")
        REGISTRY[name] = Op(name, fn, summary, streaming, action)
        return fn

    return deco


def param(
    params: dict[str, Any],
    name: str,
    kind: type[T],
    default: T | None = None,
    *,
    required: bool = False,
) -> T:
    """Read one parameter, checking its JSON type; missing -> default or UsageError."""
    if name not in params or params[name] is None:
        if required:
            raise UsageError(f"missing parameter {name!r}")
        return default  # type: ignore[return-value]
    value = params[name]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is not object and (
        not isinstance(value, kind) or (kind is int and isinstance(value, bool))
    ):
        raise UsageError(f"parameter {name!r} must be {kind.__name__}, got {type(value).__name__}")
    return value  # type: ignore[no-any-return]
