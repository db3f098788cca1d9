"""Admin ops of the kill switch. Only a human may call them.

With the ``admin_users`` setting empty (user mode), a human acts on their own
user's agent sessions only. Users listed in ``admin_users`` (staff) act on
anyone's.
"""

from __future__ import annotations

from typing import Any

from tenantry.core.errors import PermissionDenied, UsageError
from tenantry.safety.kill.component import ANY_USER, KillSwitch
from tenantry.service.ops import OpContext, op, param


def _staff(ctx: OpContext) -> bool:
    raw = ctx.runtime.settings.admin_users
    return ctx.principal.user in {u.strip() for u in raw.split(",") if u.strip()}


def _authorize(ctx: OpContext, target_user: str | None = None) -> str:
    """The owner scope of the caller's stops; raises unless a human may do this."""
    p = ctx.principal
    if p.is_agent:
        raise PermissionDenied(
            "admin operations are for humans; an agent cannot stop or resume sessions",
            hint="ask your user to run `tenantry admin ...` in their own shell",
        )
    if _staff(ctx):
        return ANY_USER
    if ctx.runtime.settings.admin_users.strip() and target_user != p.user:
        raise PermissionDenied(
            f"only staff ({ctx.runtime.settings.admin_users}) may act on other users' sessions"
        )
    if target_user is not None and target_user != p.user:
        raise PermissionDenied(f"you may stop only your own agents, not those of {target_user}")
    return p.user


def _switch(ctx: OpContext) -> KillSwitch:
    return ctx.runtime.component("kill", KillSwitch)


def _text(params: dict[str, Any], name: str) -> str:
    value = param(params, name, str, required=True).strip()
    if not value or "\n" in value:
        raise UsageError(f"parameter {name!r} must be a non-empty single line")
    return value


@op("admin.stop_session", "Stop an agent session: refuse it, cancel its jobs, end its work")
async def stop_session(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    target = _text(params, "session")
    owner = _authorize(ctx)
    reason = param(params, "reason", str, "")
    return await _switch(ctx).stop("session", target, by=ctx.principal, owner=owner, reason=reason)


@op("admin.stop_user", "Stop every agent session of a user (their own shells keep working)")
async def stop_user(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    user = _text(params, "user")
    owner = _authorize(ctx, user)
    reason = param(params, "reason", str, "")
    return await _switch(ctx).stop("user", user, by=ctx.principal, owner=owner, reason=reason)


@op("admin.resume_session", "Let a stopped agent session act again")
async def resume_session(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    target = _text(params, "session")
    owner = _authorize(ctx)
    return await _switch(ctx).resume("session", target, by=ctx.principal, owner=owner)


@op("admin.resume_user", "Let a stopped user's agent sessions act again")
async def resume_user(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    user = _text(params, "user")
    owner = _authorize(ctx, user)
    return await _switch(ctx).resume("user", user, by=ctx.principal, owner=owner)


@op("admin.list_stopped", "Active stops of the kill switch")
async def list_stopped(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"stopped": _switch(ctx).list_stopped()}
