"""Human-only workloads that look like agents: the classifier's hardest negatives.

Every user here is a person (or a person's script): nobody runs a coding
agent, so a report of these traces must find no agents. The archetypes are
what facilities actually see from humans:

- ``office``: weekday office hours in the facility's zone, batch scripts;
- ``cron``: a pipeline submitting a short ``--wrap`` job every 15 or 60
  minutes, day and night, weekends included, failing now and then;
- ``sweep``: parameter sweeps -- hundreds of short jobs in minutes from a
  shell loop, many failing fast;
- ``workflow``: a workflow manager (Snakemake, Nextflow) submitting a DAG of
  small jobs at any hour and retrying failed rules three times in a row;
- ``night``: long runs submitted late in the evening, local time.

Times are drawn in a local zone (``tz``) and stored as UTC epochs, so a report
that ignores the zone sees office hours as "night".
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tenantry.report.simulate import SimJob, SimUser, Trace

ARCHETYPES = ("office", "cron", "sweep", "workflow", "night")


class _Jobs:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.next_id = 5000
        self.next_sub = 0
        self.jobs: list[SimJob] = []

    def add(
        self,
        user: SimUser,
        ts: int,
        name: str,
        line: str,
        *,
        elapsed: int,
        cpus: int,
        fail_p: float,
        fail_fast: bool = True,
    ) -> bool:
        rng = self.rng
        failed = rng.random() < fail_p
        el = rng.randint(2, 90) if failed and fail_fast else elapsed
        wait = int(rng.expovariate(1 / 120))
        job = SimJob(
            job_id=str(self.next_id),
            raw_id=self.next_id,
            submission=self.next_sub,
            user=user.name,
            uid=user.uid,
            account=user.account,
            name="wrap" if "--wrap" in line else name,
            submit=ts,
            start=ts + wait,
            elapsed=el,
            cpus=cpus,
            gpus=0,
            state="FAILED" if failed else "COMPLETED",
            exit_code="1:0" if failed else "0:0",
            comment="",
            submit_line=line,
            timelimit=86400,
            agent=False,
        )
        self.jobs.append(job)
        self.next_id += 1
        self.next_sub += 1
        return failed


def _epoch(day: datetime, hour: int, minute: int, second: int, tz: ZoneInfo) -> int:
    local = datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=tz)
    return int(local.astimezone(UTC).timestamp())


def generate(
    users: int = 60,
    days: int = 28,
    seed: int = 1,
    tz: str = "America/Chicago",
    start: datetime | None = None,
) -> Trace:
    """A human-only trace: ``users`` people spread over the archetypes."""
    rng = random.Random(seed)
    zone = ZoneInfo(tz)
    t0 = start or datetime(2026, 1, 5, tzinfo=UTC)  # a Monday
    builder = _Jobs(rng)
    people: list[SimUser] = []
    for i in range(users):
        kind = ARCHETYPES[i % len(ARCHETYPES)]
        user = SimUser(name=f"{kind}{i:03d}", uid=20000 + i, account=f"proj{i % 7}", agent=False)
        people.append(user)
        for d in range(days):
            day = t0 + timedelta(days=d)
            weekday = day.weekday() < 5
            if kind == "office" and weekday:
                for _ in range(rng.randint(1, 8)):
                    ts = _epoch(
                        day, rng.randint(9, 16), rng.randint(0, 59), rng.randint(0, 59), zone
                    )
                    builder.add(
                        user,
                        ts,
                        rng.choice(("train", "md_equil", "analysis")),
                        "sbatch run.sh",
                        elapsed=int(rng.lognormvariate(math.log(3600), 1.0)),
                        cpus=rng.choice((8, 16, 32)),
                        fail_p=0.05,
                        fail_fast=False,
                    )
            elif kind == "cron":
                step = 15 if i % 2 else 60
                offset = rng.randint(0, step - 1)
                for minute in range(offset, 24 * 60, step):
                    ts = _epoch(day, minute // 60, minute % 60, rng.randint(0, 5), zone)
                    builder.add(
                        user,
                        ts,
                        "etl",
                        "sbatch --wrap=python ingest.py | gzip > out.gz",
                        elapsed=rng.randint(20, 200),
                        cpus=1,
                        fail_p=0.04,
                    )
            elif kind == "sweep" and rng.random() < 0.3:
                ts = _epoch(day, rng.randint(0, 23), rng.randint(0, 59), 0, zone)
                for k in range(rng.randint(100, 600)):
                    builder.add(
                        user,
                        ts + k // 4,
                        "sweep",
                        f"sbatch --wrap=./sim --param {k}",
                        elapsed=rng.randint(30, 900),
                        cpus=rng.choice((1, 2, 4)),
                        fail_p=0.2,
                    )
            elif kind == "workflow" and rng.random() < 0.5:
                ts = _epoch(day, rng.randint(0, 23), rng.randint(0, 59), 0, zone)
                for rule in range(rng.randint(30, 200)):
                    name = f"smk-{rng.choice(('align', 'sort', 'call', 'merge'))}"
                    for _attempt in range(3):  # Snakemake --retries 2
                        ts += rng.randint(5, 120)
                        line = f"sbatch --parsable --job-name={name} --wrap=snakemake rule{rule}"
                        if not builder.add(
                            user, ts, name, line, elapsed=rng.randint(30, 600), cpus=2, fail_p=0.15
                        ):
                            break
            elif kind == "night" and rng.random() < 0.7:
                hour = rng.choice((21, 22, 23, 0, 1, 2))
                for _ in range(rng.randint(1, 4)):
                    ts = _epoch(day, hour, rng.randint(0, 59), rng.randint(0, 59), zone)
                    builder.add(
                        user,
                        ts,
                        "long_run",
                        "sbatch long.sh",
                        elapsed=int(rng.lognormvariate(math.log(6 * 3600), 0.5)),
                        cpus=64,
                        fail_p=0.05,
                        fail_fast=False,
                    )
    return Trace(users=people, jobs=builder.jobs, start=t0, end=t0 + timedelta(days=days))
