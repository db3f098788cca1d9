"""telemetry.session and telemetry.hook turn hook reports into events."""

from __future__ import annotations

from typing import Any

import pytest

from tenantry.agents import ops
from tenantry.core.errors import UsageError
from tenantry.core.events import Bus, Event, EventType
from tenantry.core.models import AgentProduct, Principal
from tenantry.service.ops import REGISTRY, OpContext


class _Rt:
    def __init__(self) -> None:
        self.bus = Bus()
        self.seen: list[Event] = []

        async def keep(e: Event) -> None:
            self.seen.append(e)

        self.bus.subscribe(keep)

    async def emit(self, e: Event) -> None:
        await self.bus.publish(e)


P = Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "s-1", "login1", "chem")


def ctx() -> tuple[OpContext, _Rt]:
    rt = _Rt()
    return OpContext(P, rt), rt  # type: ignore[arg-type]


def test_ops_are_registered() -> None:
    assert REGISTRY["telemetry.session"].fn is ops.session_event
    assert REGISTRY["telemetry.hook"].fn is ops.hook_decision


async def test_session_event() -> None:
    c, rt = ctx()
    params: dict[str, Any] = {"event": "end", "agent": "claude-code", "cwd": "/w", "source": "exit"}
    out = await ops.session_event(c, params)
    assert out == {"recorded": True, "principal": "alice/claude-code/s-1"}
    (e,) = rt.seen
    assert e.type is EventType.SESSION_SEEN and e.outcome == "end" and e.subject == "s-1"
    assert e.data["source"] == "exit" and e.data["host"] == "login1"
    with pytest.raises(UsageError, match="event must be one of"):
        await ops.session_event(c, {"event": "restart"})
    with pytest.raises(UsageError, match="missing parameter"):
        await ops.session_event(c, {})


async def test_hook_decision() -> None:
    c, rt = ctx()
    await ops.hook_decision(
        c,
        {
            "decision": "deny",
            "rule": "redirect.squeue",
            "command": "squeue " * 200,
            "session": "s-9",
        },
    )
    (e,) = rt.seen
    assert e.type is EventType.HOOK_DECISION and e.outcome == "deny" and e.subject == "s-9"
    assert len(e.data["command"]) == 500 and e.data["agent"] == "claude-code"
    with pytest.raises(UsageError):
        await ops.hook_decision(c, {"decision": "maybe"})
