"""A workload generator: a facility with human and agent users, with ground truth.

Humans work weekday office hours at a few submissions per active hour, mostly
batch scripts, wide jobs, some arrays, GPU jobs and requeues. Agents run
campaigns of consecutive hours at any time of day or week, submitting many
short jobs (``--wrap`` pipelines, test runs) that often fail in a row, mostly
through Tenantry (the job comment carries an attribution tag); a chosen
fraction of agent users leave no tag at all, so only behaviour can find them.

With a :class:`Profile` that sets target shares (``PAPER`` is the paper's
facility), the generator *calibrates*: it draws the human workload first, then
sizes the agent workload so that, measured exactly as ``tenantry report``
measures, agent users hold the target share of submissions, core-hours and
GPU-hours and issue commands at the target multiple of the human rate per
active hour. The model lives here; :mod:`tenantry.report.simulate_write`
writes it as sacct, SWF or JSON.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from tenantry.core import attribution
from tenantry.core.errors import UsageError
from tenantry.core.models import AgentProduct, Principal


@dataclass(frozen=True, slots=True)
class Profile:
    """Knobs of the generator. Shares are fractions (0.558, not 55.8)."""

    agent_fraction: float = 0.2
    submission_share: float | None = None
    core_share: float | None = None
    gpu_share: float | None = None
    command_ratio: float | None = None
    tagged_job_fraction: float = 0.8  # of a tagged agent user's jobs
    hidden_agent_fraction: float = 0.0  # agent users who never tag a job
    human_gpu_fraction: float = 0.08
    agent_gpu_fraction: float = 0.06


PAPER = Profile(
    agent_fraction=0.195,
    submission_share=0.558,
    core_share=0.291,
    gpu_share=0.427,
    command_ratio=20.8,
)
PROFILES = {"paper": PAPER, "none": Profile()}


@dataclass(slots=True)
class SimJob:
    """One allocation record (array tasks and het parts are records of one submission)."""

    job_id: str
    raw_id: int
    submission: int
    user: str
    uid: int
    account: str
    name: str
    submit: int  # epoch seconds
    start: int | None
    elapsed: int
    cpus: int
    gpus: int
    state: str
    exit_code: str
    comment: str
    submit_line: str
    timelimit: int
    agent: bool
    kind: str = "cpu"  # cpu | gpu | fixed (calibration class)


@dataclass(slots=True)
class SimUser:
    name: str
    uid: int
    account: str
    agent: bool
    product: str = "human"
    hidden: bool = False


@dataclass(slots=True)
class Trace:
    users: list[SimUser]
    jobs: list[SimJob]
    start: datetime
    end: datetime
    calibration: dict[str, float] = field(default_factory=dict)


HUMAN_NAMES = ("train", "sim_run", "analysis", "md_equil", "cfd_case", "postproc", "sweep", "fit")
AGENT_NAMES = ("pytest", "build", "bench", "repro", "check", "lint", "smoke", "probe")
HUMAN_CPUS = ((1, 10), (4, 15), (8, 15), (16, 20), (32, 20), (64, 12), (128, 8))
AGENT_CPUS = ((1, 30), (2, 20), (4, 25), (8, 15), (16, 6), (32, 4))
PRODUCTS = ("claude-code", "claude-code", "codex", "gemini-cli", "opencode")


def _weighted(rng: random.Random, table: tuple[tuple[int, int], ...]) -> int:
    return rng.choices([v for v, _ in table], weights=[w for _, w in table])[0]


def _poisson(rng: random.Random, lam: float) -> int:
    # Knuth for small lambda; normal approximation above 30
    if lam > 30:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


class _Builder:
    def __init__(self, rng: random.Random, t0: int, profile: Profile) -> None:
        self.rng = rng
        self.profile = profile
        self.t0 = t0
        self.next_id = 1000
        self.next_sub = 0
        self.jobs: list[SimJob] = []

    def add(
        self, user: SimUser, ts: int, *, agent: bool, tag: str, name: str, wrap_p: float = 0.0
    ) -> None:
        rng = self.rng
        sub = self.next_sub
        self.next_sub += 1
        base = self.next_id
        self.next_id += 1
        if agent:
            cpus = _weighted(rng, AGENT_CPUS)
            gpu = rng.random() < self.profile.agent_gpu_fraction
            # mostly short test runs, some long experiments
            median = 14400 if rng.random() < 0.15 else 300
            elapsed = max(5, int(rng.lognormvariate(math.log(median), 0.9)))
            wait = int(rng.expovariate(1 / 60))
            wrap = rng.random() < 0.6
            line = (
                f"sbatch --wrap=python -m pytest -x tests/ 2>&1 | tail -n 50 -c {cpus}"
                if wrap
                else f"sbatch -c {cpus} {name}.sh"
            )
            jname = "wrap" if wrap else name
            fail_p = 0.32
        else:
            cpus = _weighted(rng, HUMAN_CPUS)
            gpu = rng.random() < self.profile.human_gpu_fraction
            elapsed = max(30, int(rng.lognormvariate(math.log(2400), 1.2)))
            wait = int(rng.expovariate(1 / 600))
            line = f"sbatch -c {cpus} {name}.sh"
            jname = name
            if rng.random() < wrap_p:
                line, jname = f"sbatch -c {cpus} --wrap=./run.sh {name}", "wrap"
            fail_p = 0.06
        gpus = rng.choice((1, 1, 2, 4)) if gpu else 0
        if gpus:
            cpus = min(cpus, 4 * gpus)
            line += f" --gpus={gpus}"
        timelimit = 86400 if not agent else 7200
        r = rng.random()
        tasks = 1
        het = False
        if not agent and r < 0.05:
            tasks = rng.randint(2, 12)
            line = line.replace("sbatch", f"sbatch --array=1-{tasks}", 1)
        elif not agent and r < 0.055:
            het = True
        parts = tasks if tasks > 1 else (2 if het else 1)
        for part in range(parts):
            raw = base if part == 0 else self.next_id
            if part:
                self.next_id += 1
            state, exit_code, el, started = "COMPLETED", "0:0", min(elapsed, timelimit), True
            x = rng.random()
            if x < fail_p:
                state, exit_code = "FAILED", f"{rng.choice((1, 2, 127))}:0"
                el = rng.randint(3, 240) if agent else rng.randint(10, max(11, el))
            elif x < fail_p + 0.03:
                state, exit_code = "CANCELLED", "0:15"
                if rng.random() < 0.5:
                    started, el = False, 0
            elif x < fail_p + 0.04 and not agent:
                state, exit_code, el = "TIMEOUT", "0:1", timelimit
            if tasks > 1:
                job_id = f"{base}_{part + 1}"
            elif het:
                job_id = f"{base}+{part}"
            else:
                job_id = str(base)
            kind = "fixed" if (state != "COMPLETED" or not started) else ("gpu" if gpus else "cpu")
            start = ts + wait + part if started else None
            who = (job_id, raw, sub, user.name, user.uid, user.account, jname, ts)
            how = (tag, line, timelimit, agent)
            if not agent and started and state == "COMPLETED" and rng.random() < 0.01:
                # an earlier run that was requeued (sacct --duplicates shows it)
                first = max(1, el // 3)
                self.jobs.append(
                    SimJob(*who, start, first, cpus, gpus, "REQUEUED", "0:0", *how, "fixed")
                )
                start = (start or ts) + first + 60
            ran_s = el if started else 0
            self.jobs.append(SimJob(*who, start, ran_s, cpus, gpus, state, exit_code, *how, kind))


def _human_hours(rng: random.Random, days: int) -> list[int]:
    """Hour offsets (from the start) in which a human works."""
    hours: list[int] = []
    for d in range(days):
        weekend = d % 7 >= 5
        if rng.random() >= (0.06 if weekend else 0.7):
            continue
        k = min(10, 1 + _poisson(rng, 1.5))
        hours.extend(d * 24 + h for h in rng.sample(range(8, 19), k))
    return hours


def _campaign_hours(rng: random.Random, k: int, total_hours: int, taken: set[int]) -> list[int]:
    """``k`` distinct hours made of consecutive campaigns at any time of the week."""
    out: list[int] = []
    guard = 0
    while len(out) < k and guard < 100000:
        guard += 1
        length = rng.randint(2, 14)
        h = rng.randrange(total_hours)
        for x in range(h, min(total_hours, h + length)):
            if x not in taken and len(out) < k:
                taken.add(x)
                out.append(x)
    return out


def generate(
    users: int = 200,
    days: int = 28,
    seed: int = 1,
    profile: Profile = PAPER,
    start: datetime | None = None,
) -> Trace:
    """Draw a trace; calibrate the agent workload when the profile sets targets."""
    if users < 2 or days < 1:
        raise UsageError("simulate needs at least 2 users and 1 day")
    rng = random.Random(seed)
    t0dt = start or datetime(2026, 1, 5, tzinfo=UTC)  # a Monday
    t0 = int(t0dt.timestamp())
    n_agent = max(1, min(users - 1, round(profile.agent_fraction * users)))
    flags = [True] * n_agent + [False] * (users - n_agent)
    rng.shuffle(flags)
    people: list[SimUser] = []
    n_hidden = round(profile.hidden_agent_fraction * n_agent)
    hidden_left = n_hidden
    for i, is_agent in enumerate(flags):
        u = SimUser(
            f"u{i + 1:04d}", 20000 + i, f"proj{rng.randint(1, max(2, users // 8)):02d}", is_agent
        )
        if is_agent:
            u.product = rng.choice(PRODUCTS)
            if hidden_left > 0:
                u.hidden, hidden_left = True, hidden_left - 1
        people.append(u)
    b = _Builder(rng, t0, profile)
    # humans
    h_subs = h_hours = 0
    for u in people:
        if u.agent:
            continue
        level = min(1.2, 0.6 * rng.lognormvariate(0, 0.8))
        wrap_p = 0.5 if rng.random() < 0.1 else 0.02  # a few humans like --wrap too
        for hour in _human_hours(rng, days):
            n = 1 + _poisson(rng, level)
            h_hours += 1
            for _ in range(n):
                ts = t0 + hour * 3600 + rng.randrange(3600)
                b.add(u, ts, agent=False, tag="", name=rng.choice(HUMAN_NAMES), wrap_p=wrap_p)
                h_subs += 1
    # agents: how many submissions and active hours in total
    agents = [u for u in people if u.agent]
    if profile.submission_share is not None:
        s = profile.submission_share
        a_subs = round(s / (1 - s) * h_subs)
    else:
        a_subs = sum(int(rng.lognormvariate(math.log(40 * days), 0.7)) for _ in agents)
    ratio = profile.command_ratio or 15.0
    r_h = h_subs / max(1, h_hours)
    k_total = max(len(agents), round(a_subs / (ratio * r_h)))
    weights = [rng.lognormvariate(0, 0.9) for _ in agents]
    wsum = sum(weights)
    counts = [max(5, int(a_subs * w / wsum)) for w in weights]
    counts[counts.index(max(counts))] += a_subs - sum(counts)
    hours_per = [max(1, min(c, round(k_total * c / a_subs))) for c in counts]
    diff = k_total - sum(hours_per)
    order = sorted(range(len(agents)), key=lambda i: -counts[i])
    i = 0
    while diff != 0 and i < 10 * len(order) + abs(diff) * 10:
        j = order[i % len(order)]
        if diff > 0 and hours_per[j] < counts[j]:
            hours_per[j] += 1
            diff -= 1
        elif diff < 0 and hours_per[j] > 1:
            hours_per[j] -= 1
            diff += 1
        i += 1
    for u, n, k in zip(agents, counts, hours_per, strict=True):
        hours = sorted(_campaign_hours(rng, k, days * 24, set()))
        per_hour = [1] * len(hours)
        for _ in range(n - len(hours)):
            per_hour[rng.randrange(len(hours))] += 1
        session = ""
        prev = -10
        name = rng.choice(AGENT_NAMES)
        for hour, m in zip(hours, per_hour, strict=True):
            if hour != prev + 1:  # a new campaign: new session, new task
                session = f"{rng.getrandbits(64):016x}"
                name = rng.choice(AGENT_NAMES)
            prev = hour
            principal = Principal(
                uid=u.uid, user=u.name, agent=AgentProduct(u.product), session=session
            )
            for ts in sorted(t0 + hour * 3600 + rng.randrange(3600) for _ in range(m)):
                tagged = not u.hidden and rng.random() < profile.tagged_job_fraction
                tag = attribution.encode(principal) if tagged else ""
                b.add(u, ts, agent=True, tag=tag, name=name)
    trace = Trace(people, b.jobs, t0dt, t0dt + timedelta(days=days))
    if profile.core_share is not None and profile.gpu_share is not None:
        trace.calibration = _calibrate(trace.jobs, profile.core_share, profile.gpu_share)
    trace.calibration.update(
        {
            "human_submissions": h_subs,
            "agent_submissions": a_subs,
            "agent_active_hours": k_total,
            "human_active_hours": h_hours,
        }
    )
    return trace


def _calibrate(jobs: list[SimJob], core: float, gpu: float) -> dict[str, float]:
    """Scale agent run times so agent core- and GPU-hour shares hit the targets."""

    def sums(pred: Callable[[SimJob], bool]) -> tuple[float, float]:
        c = g = 0.0
        for j in jobs:
            if pred(j):
                c += j.cpus * j.elapsed
                g += j.gpus * j.elapsed
        return c, g

    c_h, g_h = sums(lambda j: not j.agent)
    c_f, g_f = sums(lambda j: j.agent and j.kind == "fixed")
    c_g, g_g = sums(lambda j: j.agent and j.kind == "gpu")
    c_c, _ = sums(lambda j: j.agent and j.kind == "cpu")
    target_c = core / (1 - core) * c_h
    target_g = gpu / (1 - gpu) * g_h
    if g_g <= 0 or c_c <= 0:
        raise UsageError("cannot calibrate: too few agent jobs; raise --users or --days")
    fb = (target_g - g_f) / g_g
    fa = (target_c - c_f - fb * c_g) / c_c
    if fb <= 0 or fa <= 0:
        raise UsageError("cannot calibrate to these shares with this trace size")
    for j in jobs:
        if j.agent and j.kind in ("cpu", "gpu"):
            j.elapsed = max(1, round(j.elapsed * (fb if j.kind == "gpu" else fa)))
    return {"cpu_scale": fa, "gpu_scale": fb}


def profile_named(
    name: str, *, agent_fraction: float | None = None, hidden_agent_fraction: float | None = None
) -> Profile:
    """A named profile with the CLI's overrides applied."""
    if name not in PROFILES:
        raise UsageError(f"unknown calibration {name!r}", hint=f"one of {', '.join(PROFILES)}")
    p = PROFILES[name]
    if agent_fraction is not None:
        if not 0 < agent_fraction < 1:
            raise UsageError("--agent-fraction must be between 0 and 1")
        p = replace(p, agent_fraction=agent_fraction)
    if hidden_agent_fraction is not None:
        if not 0 <= hidden_agent_fraction <= 1:
            raise UsageError("--hidden-agents must be between 0 and 1")
        p = replace(p, hidden_agent_fraction=hidden_agent_fraction)
    return p
