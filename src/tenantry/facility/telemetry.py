"""The facility's telemetry of every user: executors' command events become command rows.

The service's journal already keeps every ingested event and every principal
that called (``sessions``). The characterization report (``report.latest``,
the dashboard, ``tenantry report --live``) also reads the ``commands`` table,
which in facility mode each executor fills for its own user only; this
recorder fills the service's from the ``command.started`` and
``command.finished`` events, keyed ``user:command_id`` (ids are per executor).
"""

from __future__ import annotations

from typing import Any

from tenantry.core.events import Event, EventType
from tenantry.core.models import AgentProduct, Principal
from tenantry.store.journal import Journal


def principal_of(key: str, uid: int) -> Principal:
    user, _, rest = key.partition("/")
    agent, _, session = rest.partition("/")
    try:
        product = AgentProduct(agent or "human")
    except ValueError:
        product = AgentProduct.OTHER_AGENT
    return Principal(uid=uid, user=user, agent=product, session="" if session == "-" else session)


def _num(data: dict[str, Any], name: str) -> float:
    value = data.get(name)
    return float(value) if isinstance(value, int | float) else 0.0


class CommandRecorder:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def record(self, ev: Event, uid: int) -> None:
        if ev.type not in (EventType.COMMAND_STARTED, EventType.COMMAND_FINISHED) or not ev.subject:
            return
        p = principal_of(ev.principal, uid)
        cid = f"{p.user}:{ev.subject}"
        data = ev.data
        argv = (
            [str(a) for a in data.get("argv") or []] if isinstance(data.get("argv"), list) else []
        )
        where = str(data.get("where", ""))
        if ev.type is EventType.COMMAND_STARTED:
            await self.journal.command_started(cid, p, argv, str(data.get("cwd", "")), where)
            return
        code = data.get("exit_code")
        await self.journal.command_finished(
            cid,
            p,
            argv,
            str(data.get("cwd", "")),
            exit_code=int(code) if isinstance(code, int) else None,
            state=ev.outcome or "finished",
            reason=str(data.get("reason") or data.get("error") or "")[:2000],
            cpu_s=_num(data, "cpu_s"),
            max_rss_kb=int(_num(data, "max_rss_kb")),
            where=where,
        )
