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
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from tenantry.core.errors import UsageError
from tenantry.core.models import Principal

if TYPE_CHECKING:
    from tenantry.service.runtime import Runtime

T = TypeVar("T")

OpFn = Callable[["OpContext", dict[str, Any]], Awaitable[Any]]
StreamFn = Callable[["OpContext", dict[str, Any]], AsyncIterator[dict[str, Any]]]
# parameter name -> the JSON type(s) it takes (see check_fields)
Schema = dict[str, type | tuple[type, ...]]


@dataclass(frozen=True, slots=True)
class Op:
    name: str
    fn: Callable[..., Any]
    summary: str
    streaming: bool = False
    # the policy action this op is judged as (None: no policy check, e.g. read-only info)
    action: str | None = None
    # the parameters it takes and their JSON types, checked at the edge before
    # any gate (policy, budgets) or the op sees them; None: the op checks its own
    fields: Schema | None = None


@dataclass(frozen=True, slots=True)
class OpContext:
    """What an op sees: who calls, and the running daemon's parts."""

    principal: Principal
    runtime: Runtime
    # the client's idempotency key for this request ("" when it sent none)
    request_id: str = ""


REGISTRY: dict[str, Op] = {}


class ReplyBarrier:
    """What the answer to one request must wait for (its audit record's ``fsync``).

    The HTTP endpoint opens one per request; a gate that lets the op start
    before something is finished (``defer_until_reply``) adds it here, and
    the endpoint waits for all of it before it sends any part of the answer.
    """

    __slots__ = ("_waits",)

    def __init__(self) -> None:
        self._waits: list[Awaitable[Any]] = []

    def add(self, waitable: Awaitable[Any]) -> None:
        self._waits.append(waitable)

    async def wait(self) -> None:
        """Wait for everything added (raising the first failure, e.g. ``AuditUnavailable``)."""
        while self._waits:
            await self._waits.pop(0)


_barrier: ContextVar[ReplyBarrier | None] = ContextVar("tenantry_reply_barrier", default=None)


def open_barrier() -> ReplyBarrier:
    """The barrier of the request the current task serves (the endpoint's first step)."""
    barrier = ReplyBarrier()
    _barrier.set(barrier)
    return barrier


def defer_until_reply(waitable: Awaitable[Any]) -> bool:
    """Let the current request's answer wait for ``waitable`` instead of its op.

    False when the request is not served through a barrier: then the caller
    must wait for it itself before the op runs.
    """
    barrier = _barrier.get()
    if barrier is None:
        return False
    barrier.add(waitable)
    return True


def op(
    name: str,
    summary: str,
    *,
    streaming: bool = False,
    action: str | None = None,
    fields: Schema | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register an op under ``name``. Re-registering the same function is a no-op."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        existing = REGISTRY.get(name)
        if existing is not None and existing.fn.__qualname__ != fn.__qualname__:
            raise RuntimeError(f"op {name} registered twice")
        REGISTRY[name] = Op(name, fn, summary, streaming, action, fields)
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


def check_fields(params: dict[str, Any], op_name: str, schema: Schema) -> None:
    """Refuse unknown parameters and wrong JSON types before an op acts.

    Lists must hold strings and objects map strings to strings (argv, env);
    ``None`` counts as absent; a bool is never an int.
    """
    unknown = sorted(set(params) - set(schema))
    if unknown:
        raise UsageError(
            f"{op_name} does not take parameter(s): {', '.join(u[:40] for u in unknown[:5])}",
            hint=f"its parameters are: {', '.join(sorted(schema))}",
        )
    for name, kind in schema.items():
        value = params.get(name)
        if value is None:
            continue
        kinds = kind if isinstance(kind, tuple) else (kind,)
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if ok and isinstance(value, list):
            ok = all(isinstance(v, str) for v in value)
        if ok and isinstance(value, dict) and name == "env":
            ok = all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        if not ok:
            want = " or ".join(_JSON_NAMES.get(k, k.__name__) for k in kinds)
            raise UsageError(f"parameter {name!r} of {op_name} must be {want}")


_JSON_NAMES: dict[type, str] = {
    list: "a list of strings",
    dict: "an object",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
}
