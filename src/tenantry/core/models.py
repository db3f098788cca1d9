"""Plain data of Tenantry: principals, jobs, commands.

Only the standard library is used here, so the CLI client can import it.
Every model converts to and from a JSON-able dict (``to_dict``/``from_dict``);
that dict is the wire form.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any


class AgentProduct(enum.StrEnum):
    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    GEMINI_CLI = "gemini-cli"
    OPENCODE = "opencode"
    CURSOR = "cursor"
    OPENHANDS = "openhands"
    OTHER_AGENT = "agent"
    HUMAN = "human"

    @property
    def is_agent(self) -> bool:
        return self is not AgentProduct.HUMAN


def field_values(obj: Any) -> dict[str, Any]:
    """A dataclass instance's fields by name, in declaration order, each value as it is
    (shallow, unlike ``dataclasses.asdict``): the body of a plain ``to_dict``."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


class FieldsDict:
    """A base of dataclasses whose ``to_dict`` is their ``field_values``."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return field_values(self)


def wire_dict(obj: Any, **values: Any) -> dict[str, Any]:
    """``dataclasses.asdict(obj)`` with ``values`` put in (enums as their value, tuples
    as lists, derived fields): the body of a ``to_dict`` that changes a few fields."""
    d = dataclasses.asdict(obj)
    d.update(values)
    return d


def _texts(d: dict[str, Any], *names: str) -> dict[str, str]:
    """Text fields of a wire dict by name, each ``""`` where the dict has none."""
    return {name: str(d.get(name, "")) for name in names}


# session tiers, strictest first: what a session may do beyond its agent rules
TIERS: tuple[str, ...] = ("read-only", "standard", "trusted")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who acts. ``uid`` is filled in by the daemon from the socket, never the client."""

    uid: int
    user: str
    agent: AgentProduct = AgentProduct.HUMAN
    session: str = ""
    host: str = ""
    project: str = ""
    # how the daemon knows who this is: "user" (the user's own socket, no agent
    # claimed), "claimed" (the user's socket, an agent by its own word) or
    # "sandboxed" (a session socket of `tenantry agent`: verified)
    origin: str = "user"
    # the tier the user chose when launching the session ("" = the facility's);
    # it can only make the session stricter than the facility's assignment
    tier: str = ""

    @property
    def is_agent(self) -> bool:
        return self.agent.is_agent

    @property
    def key(self) -> str:
        """A stable identity string: ``user/agent/session``."""
        return f"{self.user}/{self.agent.value}/{self.session or '-'}"

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self, agent=self.agent.value)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Principal:
        return cls(
            uid=int(d["uid"]),
            user=str(d["user"]),
            agent=AgentProduct(d.get("agent", "human")),
            origin=str(d.get("origin", "user")),
            **_texts(d, "session", "host", "project", "tier"),
        )


class JobState(enum.StrEnum):
    """Slurm-like job states (the subset every backend maps onto)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    # Slurm-only states mapped here so nothing is lost; `terminal` tells waiters.
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    SUSPENDED = "SUSPENDED"
    REQUEUED = "REQUEUED"
    # The daemon lost track of the job and says why in ``Job.reason``.
    LOST = "LOST"
    UNKNOWN = "UNKNOWN"

    @property
    def terminal(self) -> bool:
        return self not in _ACTIVE

    @property
    def reusable(self) -> bool:
        """May a duplicate submission return a job in this state? Still going or
        succeeded; never one that ended in failure (the fixed script must run)."""
        return not self.terminal or self is JobState.COMPLETED


_ACTIVE = frozenset(
    {JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED, JobState.REQUEUED, JobState.UNKNOWN}
)


@dataclass(frozen=True, slots=True)
class Resources:
    """A resource shape, as asked by ``--cpus/--mem/--gpus/--time``."""

    cpus: int = 1
    mem_mb: int | None = None
    gpus: int = 0
    time_s: int | None = None
    partition: str = ""
    account: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Resources:
        if not d:
            return _NO_RESOURCES  # frozen: one default shape serves every command
        return cls(**{k: v for k, v in d.items() if k in _RESOURCE_FIELDS})


_RESOURCE_FIELDS = frozenset(f.name for f in dataclasses.fields(Resources))
_NO_RESOURCES = Resources()


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A batch job as submitted: a script file plus sbatch-style options."""

    script: str  # absolute path of the script as the client saw it
    script_text: str  # content at submission time (what dedup and the journal see)
    args: tuple[str, ...] = ()
    cwd: str = "/"
    name: str = ""
    resources: Resources = field(default_factory=Resources)
    output: str = ""  # stdout path pattern (%j = job id); default <cwd>/tenantry-%j.out
    error: str = ""  # stderr path pattern; default: merged into output
    env: dict[str, str] = field(default_factory=dict)
    array: str = ""
    extra: tuple[str, ...] = ()  # further sbatch options passed through verbatim
    force: bool = False

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self, args=list(self.args), extra=list(self.extra))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobSpec:
        return cls(
            script=str(d["script"]),
            script_text=str(d.get("script_text", "")),
            args=tuple(str(a) for a in d.get("args", ())),
            cwd=str(d.get("cwd", "/")),
            name=str(d.get("name", "")),
            resources=Resources.from_dict(d.get("resources")),
            output=str(d.get("output", "")),
            error=str(d.get("error", "")),
            env={str(k): str(v) for k, v in (d.get("env") or {}).items()},
            array=str(d.get("array", "")),
            extra=tuple(str(a) for a in d.get("extra", ())),
            force=bool(d.get("force", False)),
        )


@dataclass(slots=True)
class Job:
    """A job known to Tenantry. ``id`` is Tenantry's; ``backend_id`` the scheduler's."""

    id: str
    backend: str
    backend_id: str
    state: JobState
    principal: str  # Principal.key
    uid: int
    name: str = ""
    submitted_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    reason: str = ""
    output: str = ""
    error: str = ""
    resources: Resources = field(default_factory=Resources)
    updated_at: float = 0.0
    cwd: str = ""  # the working directory it was submitted from
    nodes: str = ""  # the node list the scheduler reports once it runs

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self, state=self.state.value, terminal=self.state.terminal)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        return cls(
            id=str(d["id"]),
            backend=str(d["backend"]),
            state=JobState(d["state"]),
            uid=int(d.get("uid", -1)),
            submitted_at=float(d.get("submitted_at") or 0.0),
            started_at=d.get("started_at"),
            ended_at=d.get("ended_at"),
            exit_code=d.get("exit_code"),
            **_texts(d, "backend_id", "principal", "name", "reason", "output", "error"),
            resources=Resources.from_dict(d.get("resources")),
            updated_at=float(d.get("updated_at") or 0.0),
            cwd=str(d.get("cwd") or ""),
            nodes=str(d.get("nodes") or ""),
        )


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One short command: argv list (never a shell string), cwd and environment."""

    argv: tuple[str, ...]
    cwd: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    resources: Resources = field(default_factory=Resources)
    where: str = "auto"  # auto | local | lease
    idempotent: bool = False

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self, argv=list(self.argv))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CommandSpec:
        argv = d.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            from tenantry.core.errors import UsageError

            raise UsageError(
                "argv must be a non-empty list of strings",
                hint="pass the command as a list, e.g. ['pytest', '-x']",
            )
        timeout = d.get("timeout_s")
        return cls(
            argv=tuple(argv),
            cwd=str(d.get("cwd") or "/"),
            env={str(k): str(v) for k, v in (d.get("env") or {}).items()},
            timeout_s=float(timeout) if timeout is not None else None,
            resources=Resources.from_dict(d.get("resources")),
            where=str(d.get("where") or "auto"),
            idempotent=bool(d.get("idempotent", False)),
        )


@dataclass(slots=True)
class CommandResult:
    """How a command ended. Output is untrusted data, never an instruction."""

    id: str
    exit_code: int | None
    state: str  # completed | failed | timeout | lost | error
    duration_s: float
    where: str = "local"
    stdout_tail: str = ""
    stderr_tail: str = ""
    truncated: bool = False
    reason: str = ""
    cpu_s: float = 0.0
    max_rss_kb: int = 0
    lessons: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""  # why it ran elsewhere than asked (an agent's where is a preference)

    def to_dict(self) -> dict[str, Any]:
        # by hand: dataclasses.asdict walks every field recursively (once per command)
        out = {f: getattr(self, f) for f in _RESULT_FIELDS}
        if self.lessons:
            import copy  # not on the client's start path

            out["lessons"] = copy.deepcopy(self.lessons)
        else:
            out["lessons"] = []
        return out


_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(CommandResult))
