"""The facility day's script: who runs which command when, and the ground truth it implies.

Pure and seeded (``random.Random(seed)``): the same :class:`DayConfig` always
gives the same :class:`Day`. Times are seconds from the start of the
compressed day. ``bench/facility_day.py`` turns each :class:`Action` into a
real command (per arm) and runs it; :func:`ground_truth` reduces what was run
into the figures ``tenantry report`` is compared with.

The shape of an agent session (explore -> modify -> execute, bursts, idle
gaps) and the human rate follow the paper ("Towards Efficient HPC Systems for
Agents"): agents issue commands at 20.8x the human rate per active hour. The
mix of command classes inside a loop is a model (no recorded transcripts ship
with the repository): every knob is a field of :class:`DayConfig`, and
``facility_day.md`` lists the values used.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# Command classes. Explore: ls, find, grep, git, read. Modify: edit.
# Execute: test (a short test run), sbatch (a small batch job) then squeue/sacct polling.
# danger: a destructive command policy should stop (rm -r of a scratch build dir).
CLASSES = (
    "ls",
    "find",
    "grep",
    "git",
    "read",
    "edit",
    "test",
    "sbatch",
    "squeue",
    "sacct",
    "danger",
)
EXPLORE = (("ls", 0.3), ("grep", 0.3), ("find", 0.2), ("read", 0.2))
HUMAN_MIX = (
    ("ls", 0.25),
    ("read", 0.2),
    ("edit", 0.15),
    ("squeue", 0.15),
    ("sbatch", 0.12),
    ("git", 0.08),
    ("sacct", 0.05),
)
PAPER_RATIO = 20.8  # agent / human commands per active hour (the paper)


@dataclass(frozen=True, slots=True)
class DayConfig:
    """Knobs of the day. Defaults are the full mode; ``short()`` is CI's."""

    agents: int = 50  # agent sessions
    humans: int = 10
    sessions_per_user: int = 5  # agent sessions per agent Unix user (one daemon each)
    day_s: float = 600.0  # length of the compressed day
    seed: int = 1
    think_s: tuple[float, float] = (0.5, 2.5)  # gap between commands inside a burst
    idle_mean_s: float = 30.0  # gap between loops (model time, user away)
    long_idle_p: float = 0.1  # chance a gap is a long one (4x the mean)
    git_p: float = 0.3  # git status per loop
    edits: tuple[int, int] = (1, 3)
    tests: tuple[int, int] = (1, 3)  # test runs per loop (retries after a failure)
    batch_p: float = 0.05  # a loop submits a batch job
    job_s: tuple[float, float] = (8.0, 20.0)  # a batch job's run time
    poll_s: tuple[float, float] = (3.0, 6.0)  # squeue polling interval while waiting
    danger_p: float = 0.02
    human_window: tuple[float, float] = (0.15, 0.85)  # office hours, as day fractions
    human_job_s: tuple[float, float] = (30.0, 60.0)  # humans' jobs: fewer, longer, wider
    ratio: float = PAPER_RATIO

    @staticmethod
    def short(**kw: float | int) -> DayConfig:
        base: dict[str, object] = {"agents": 5, "humans": 2, "day_s": 90.0, "idle_mean_s": 12.0}
        base.update(kw)
        return DayConfig(**base)  # type: ignore[arg-type]

    @property
    def agent_users(self) -> int:
        return max(1, math.ceil(self.agents / self.sessions_per_user))


@dataclass(frozen=True, slots=True)
class Action:
    t: float
    cls: str
    arg: str = ""  # class-specific: a pattern, a file, the job's run time


@dataclass(frozen=True, slots=True)
class Actor:
    user: str  # logical name (a00, h03); the arm maps it to a Unix user
    kind: str  # agent | human
    session: str  # agent session id ("" for a human)
    workspace: int  # index of the workspace the actor works in
    actions: tuple[Action, ...] = ()


@dataclass(frozen=True, slots=True)
class Day:
    config: DayConfig
    actors: tuple[Actor, ...]

    def by_kind(self, kind: str) -> list[Actor]:
        return [a for a in self.actors if a.kind == kind]

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {"agent": defaultdict(int), "human": defaultdict(int)}
        for a in self.actors:
            for act in a.actions:
                out[a.kind][act.cls] += 1
        return {k: dict(v) for k, v in out.items()}


PATTERNS = ("frobnicate_widget", "def test_", "class .*Error", "import numpy", "TODO")
NAMES = ("*.py", "*_test.py", "f00*.py", "*.json", "*.md")


def _pick(rng: random.Random, mix: Sequence[tuple[str, float]]) -> str:
    return rng.choices([c for c, _ in mix], weights=[w for _, w in mix])[0]


def _arg(rng: random.Random, cls: str, cfg: DayConfig) -> str:
    if cls == "grep":
        return rng.choice(PATTERNS)
    if cls == "find":
        return rng.choice(NAMES)
    if cls == "ls":
        return f"m{rng.randrange(2):02d}/p{rng.randrange(2):02d}"
    if cls == "read":
        return str(rng.randrange(1000))
    if cls == "sbatch":
        return f"{rng.uniform(*cfg.job_s):.1f}"
    return ""


def _agent(cfg: DayConfig, rng: random.Random, i: int) -> Actor:
    user_i = i // cfg.sessions_per_user
    t = rng.uniform(0, 0.1 * cfg.day_s)
    end = 0.9 * cfg.day_s
    acts: list[Action] = []

    def add(cls: str, arg: str | None = None) -> None:
        nonlocal t
        acts.append(Action(round(t, 3), cls, _arg(rng, cls, cfg) if arg is None else arg))
        t += rng.uniform(*cfg.think_s)

    while t < end:
        for _ in range(rng.randint(2, 6)):
            add(_pick(rng, EXPLORE))
        if rng.random() < cfg.git_p:
            add("git")
        for _ in range(rng.randint(*cfg.edits)):
            add("edit")
        for _ in range(rng.randint(*cfg.tests)):
            add("test")
        if rng.random() < cfg.danger_p:
            add("danger")
        if rng.random() < cfg.batch_p and t < end - cfg.job_s[1]:
            run = rng.uniform(*cfg.job_s)
            add("sbatch", f"{run:.1f}")
            waited, poll = 0.0, rng.uniform(*cfg.poll_s)
            while waited < run + poll:
                t += poll
                waited += poll
                add("squeue")
            add("sacct")
        gap = rng.expovariate(1 / cfg.idle_mean_s)
        if rng.random() < cfg.long_idle_p:
            gap *= 4
        t += gap
    return Actor(f"a{user_i:02d}", "agent", f"s{i:03d}", user_i, tuple(acts))


def _human(cfg: DayConfig, rng: random.Random, j: int, mean_gap: float) -> Actor:
    lo, hi = (f * cfg.day_s for f in cfg.human_window)
    t = rng.uniform(lo, lo + min(mean_gap, (hi - lo) / 4))
    # a working day starts by submitting the day's job
    acts = [Action(round(t, 3), "sbatch", f"{rng.uniform(*cfg.human_job_s):.1f}")]
    t += rng.expovariate(1 / mean_gap)
    while t < hi:
        cls = _pick(rng, HUMAN_MIX)
        arg = f"{rng.uniform(*cfg.human_job_s):.1f}" if cls == "sbatch" else _arg(rng, cls, cfg)
        acts.append(Action(round(t, 3), cls, arg))
        t += rng.expovariate(1 / mean_gap)
    return Actor(f"h{j:02d}", "human", "", j % max(1, cfg.agent_users), tuple(acts))


def agent_active_rate(actors: Iterable[Actor], day_s: float) -> float:
    """Commands per second of an agent session over its active span."""
    n = span = 0.0
    for a in actors:
        if a.actions:
            n += len(a.actions)
            span += max(1.0, a.actions[-1].t - a.actions[0].t)
    return n / span if span else 0.0


def generate(cfg: DayConfig) -> Day:
    """The day: agent sessions first (seeded), then humans at 1/ratio of their rate."""
    rng = random.Random(cfg.seed)
    agents = [_agent(cfg, random.Random(rng.getrandbits(32)), i) for i in range(cfg.agents)]
    rate = agent_active_rate(agents, cfg.day_s)
    mean_gap = cfg.ratio / rate if rate else cfg.day_s
    humans = [
        _human(cfg, random.Random(rng.getrandbits(32)), j, mean_gap) for j in range(cfg.humans)
    ]
    return Day(cfg, tuple(agents + humans))


# --- ground truth -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Executed:
    """One command as the runner logged it (wall-clock epoch seconds)."""

    user: str  # Unix user
    cls: str
    ts: float
    latency_s: float
    rc: int
    denied: bool = False
    via_tenantry: bool = False  # ran through `tenantry run` (a telemetry command)


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One allocation from sacct, reduced to what the shares need."""

    user: str
    submit: float  # epoch seconds
    cpus: int
    elapsed_s: float


@dataclass(slots=True)
class Truth:
    users: dict[str, float] = field(default_factory=dict)  # agent share (0-1) per measure
    detail: dict[str, object] = field(default_factory=dict)


def _share(agent: float, total: float) -> float:
    return agent / total if total else 0.0


def _rate(events: Mapping[str, list[float]]) -> tuple[int, int]:
    """(commands, active UTC clock hours) over users' event times."""
    n = sum(len(v) for v in events.values())
    hours = sum(len({math.floor(ts / 3600) for ts in v}) for v in events.values())
    return n, hours


def ground_truth(
    labels: Mapping[str, str],
    executed: Iterable[Executed],
    jobs: Iterable[SlurmJob],
) -> Truth:
    """Agent shares and command-rate ratio, measured as ``tenantry report`` defines them.

    ``labels`` maps each Unix user of the arm to ``agent`` or ``human`` (the
    replay knows). Submissions and core-hours come from the Slurm jobs of those
    users; the report's "commands" are submissions plus Tenantry-run commands,
    per active UTC clock hour. ``all_commands_ratio`` is the same ratio over
    every command the replay issued (the paper's sense), for reference.
    """
    executed = list(executed)
    jobs = [j for j in jobs if j.user in labels]
    # a user the report can see: one with a submission or a Tenantry-run command
    active = {e.user for e in executed if e.via_tenantry and e.user in labels}
    active |= {j.user for j in jobs}
    issued = {e.user for e in executed if e.user in labels}
    n_agent_users = sum(1 for u in active if labels[u] == "agent")
    subs = {"agent": 0, "human": 0}
    core_h = {"agent": 0.0, "human": 0.0}
    report_events: dict[str, dict[str, list[float]]] = {"agent": {}, "human": {}}
    all_events: dict[str, dict[str, list[float]]] = {"agent": {}, "human": {}}
    for j in jobs:
        c = labels[j.user]
        subs[c] += 1
        core_h[c] += j.cpus * j.elapsed_s / 3600
        report_events[c].setdefault(j.user, []).append(j.submit)
    for e in executed:
        if e.user not in labels:
            continue
        c = labels[e.user]
        all_events[c].setdefault(e.user, []).append(e.ts)
        if e.via_tenantry:
            report_events[c].setdefault(e.user, []).append(e.ts)
    rates = {}
    for name, ev in (("report", report_events), ("all", all_events)):
        an, ah = _rate(ev["agent"])
        hn, hh = _rate(ev["human"])
        ra, rh = (an / ah if ah else 0.0), (hn / hh if hh else 0.0)
        rates[name] = {"agent_rate": ra, "human_rate": rh, "ratio": ra / rh if rh else None}
    truth = Truth()
    truth.users = {
        "users": _share(n_agent_users, len(active)),
        "submissions": _share(subs["agent"], subs["agent"] + subs["human"]),
        "core_hours": _share(core_h["agent"], core_h["agent"] + core_h["human"]),
    }
    truth.detail = {
        "active_users": len(active),
        "agent_users": n_agent_users,
        "users_issuing_commands": len(issued),
        "agent_share_of_issuing_users": _share(
            sum(1 for u in issued if labels[u] == "agent"), len(issued)
        ),
        "submissions": subs,
        "core_hours": {k: round(v, 4) for k, v in core_h.items()},
        "command_rate": rates["report"],
        "all_commands_ratio": rates["all"]["ratio"],
    }
    return truth
