"""The headline benchmark: one compressed facility day with agents, bare and through Tenantry.

N agent sessions and M human users (``bench/day_replay.py``: seeded
explore-modify-execute loops with bursts and idle gaps; humans at 1/20.8 of
the agents' rate) run on this machine's real Slurm, on workspaces behind a
FUSE mount that delays and counts every metadata operation
(``bench/fusedelay.py``). Two arms, interleaved (bare, tenantry, bare, ...):

  bare      real find/grep/git, one ``srun`` job per test run, real
            sbatch/squeue/sacct (``bench/day_arms.py``)
  tenantry  the same day through Tenantry: in facility mode (the default) one
            ``tenantry facility serve`` on PostgreSQL with every agent user's
            daemon as its executor, in user mode (``--mode user``) one daemon per
            agent Unix user; either way the agent's pre-tool hook before every
            command, PATH shims for the Slurm clients, the index for find/grep,
            leases for test runs; humans unchanged

Each actor is a ``bench/day_runner.py`` process running as its own Unix user
(``tt-dayb-*`` for bare, ``tt-dayt-*`` for tenantry, created with useradd and
given a Slurm association), so ``sdiag``'s per-user RPC table and ``sacct -u``
count exactly this bench's traffic on a Slurm other work shares. After each
tenantry arm, ``tenantry report`` runs on the arm's sacct dump and the
daemons' stores and is compared with the replay's ground truth.

    sudo .venv/bin/python bench/facility_day.py --short          # CI smoke, ~3 min
    sudo .venv/bin/python bench/facility_day.py                  # N=50, M=10, 3 repeats
    sudo .venv/bin/python bench/facility_day.py --agents 20 --day-s 300 --repeats 1

Needs root, a Slurm with accounting (scripts/dev-slurm start --accounting),
/dev/fuse with Debian fuse3 + libfuse3-dev and pyfuse3, git. Writes
``OUT/results.json``, ``OUT/facility_day.png`` (with matplotlib) and prints a
Markdown summary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

import day_arms
import day_replay
import day_slurm
import metadata
from day_replay import Day, DayConfig, Executed

ROOT = Path(__file__).resolve().parents[1]
RUNNER = Path(__file__).resolve().parent / "day_runner.py"
ARMS = ("bare", "tenantry")


def TENANTRY(python: str) -> tuple[str, ...]:
    return (python, "-m", "tenantry")


MODES = ("user", "facility")


@dataclass(slots=True)
class ArmResult:
    arm: str
    repeat: int
    start: float = 0.0
    end: float = 0.0
    rpcs: dict[str, int] = field(default_factory=dict)  # per Unix user
    rpc_resets: int = 0
    meta_ops: int = 0
    meta_setup_ops: int = 0  # the index crawl, before the day starts
    # the day's metadata ops per caller (Unix user name, or "uid N"), as the mount counts
    meta_by_user: dict[str, int] = field(default_factory=dict)
    ops_per_command: dict[str, int] = field(default_factory=dict)  # measured alone, per class
    jobs: dict[str, int] = field(default_factory=dict)  # per Unix user
    cpu_s: float = 0.0
    daemon_cpu_s: float = 0.0
    executed: list[dict[str, Any]] = field(default_factory=list)
    series: list[tuple[float, int, int]] = field(default_factory=list)  # t, agent rpcs, meta
    report: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # each agent user's index counters at the end of the day (tenantry index list)
    index_counters: dict[str, dict[str, int]] = field(default_factory=dict)


USER_PREFIX = "tt-day"  # --user-prefix: a run beside another one needs its own users


def unix_name(arm: str, logical: str) -> str:
    return f"{USER_PREFIX}{arm[0]}-{logical}"


def use_user_prefix(prefix: str) -> None:
    """Name this run's Unix users, service account and staff group ``PREFIX...``."""
    global USER_PREFIX, SERVICE_ACCOUNT, STAFF_GROUP
    if not prefix.startswith("tt-") or len(prefix) > 20:
        raise SystemExit("--user-prefix: tt-... (at most 20 characters)")
    USER_PREFIX, SERVICE_ACCOUNT, STAFF_GROUP = prefix, f"{prefix}-svc", f"{prefix}-staff"


def labels_for(day: Day, arm: str) -> dict[str, str]:
    return {unix_name(arm, a.user): a.kind for a in day.actors}


class Sampler(threading.Thread):
    """Every ``every`` s: the arm users' RPCs (sdiag per user) and the mount's metadata ops."""

    def __init__(self, mount: metadata.Mount, users: list[str], agents: list[str], every: float):
        super().__init__(daemon=True)
        self.mount, self.agents, self.every = mount, agents, every
        self.rpc = day_slurm.RpcCounter(users)
        self.stop = threading.Event()
        self.series: list[tuple[float, int, int]] = []
        self.meta0 = self._meta()
        self.uids0 = mount.by_uid()
        self.rpc.sample(day_slurm.sdiag_users())

    def meta_by_user(self) -> dict[str, int]:
        """The metadata ops since the start, per caller's user name."""
        out: dict[str, int] = {}
        for uid, n in self.mount.by_uid().items():
            n -= self.uids0.get(uid, 0)
            if n:
                try:
                    name = pwd.getpwuid(uid).pw_name
                except KeyError:
                    name = f"uid {uid}"
                out[name] = out.get(name, 0) + n
        return out

    def _meta(self) -> int:
        return metadata.Mount.meta(dict.fromkeys(self.mount.snapshot(), 0), self.mount.snapshot())[
            0
        ]

    def tick(self) -> None:
        self.rpc.sample(day_slurm.sdiag_users())
        self.series.append((time.time(), self.rpc.sum(self.agents), self._meta() - self.meta0))

    def run(self) -> None:
        while not self.stop.wait(self.every):
            try:
                self.tick()
            except (subprocess.SubprocessError, OSError) as exc:
                print(f"  sampler: {exc}", file=sys.stderr)


class Daemons:
    """One ``tenantry serve`` per agent Unix user, as that user.

    User mode: each daemon polls Slurm itself. Facility mode (``facility`` is
    the service's socket): each daemon is its user's executor
    (``tenantry serve --facility SOCKET``) and takes its jobs' states from the
    service's one cluster poller.
    """

    def __init__(
        self,
        work: Path,
        users: list[str],
        python: str,
        pythonpath: str,
        facility: str = "",
        extra_env: dict[str, str] | None = None,
        hook_http: bool = False,
    ) -> None:
        self.work, self.users, self.python, self.pythonpath = work, users, python, pythonpath
        self.facility = facility
        self.extra_env = dict(extra_env or {})
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        # each user's daemon answers Claude Code's http hooks on its own loopback port
        self.hook_ports = {u: _free_port() for u in users} if hook_http else {}

    def hook_url(self, user: str) -> str:
        port = self.hook_ports.get(user)
        return f"http://127.0.0.1:{port}/v1/hook/claude-code" if port else ""

    def state(self, user: str) -> Path:
        return self.work / "state" / user

    def socket(self, user: str) -> str:
        return str(self.state(user) / "sock")

    def env(self, user: str) -> dict[str, str]:
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.work / "home" / user),
            "USER": user,
            "LANG": "C.UTF-8",
            "TZ": "UTC",
            "TENANTRY_STATE_DIR": str(self.state(user)),
            "TENANTRY_SOCKET": self.socket(user),
            "TENANTRY_BACKEND": "slurm",
            "TENANTRY_AUTOSTART": "0",
            "PYTHONPATH": self.pythonpath,
            **self.extra_env,
            **(
                {"TENANTRY_HOOK_HTTP": f"127.0.0.1:{self.hook_ports[user]}"}
                if user in self.hook_ports
                else {}
            ),
        }

    def start(self) -> None:
        import pwd

        for user in self.users:
            pw = pwd.getpwnam(user)
            st = self.state(user)
            if st.exists():
                shutil.rmtree(st)
            st.mkdir(parents=True)
            os.chown(st, pw.pw_uid, pw.pw_gid)
            os.chmod(st, 0o700)
            log = (self.work / f"daemon-{user}.log").open("ab")
            joins = ["--facility", self.facility] if self.facility else []
            self.procs[user] = _start_as(
                pw, [*TENANTRY(self.python), "serve", *joins], self.env(user), log
            )
        deadline = time.monotonic() + 90
        for user in self.users:
            _wait_socket(self.socket(user), self.procs[user], deadline, f"daemon-{user}.log")

    def run_as(self, user: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        import pwd

        pw = pwd.getpwnam(user)
        return subprocess.run(
            argv,
            env=self.env(user),
            cwd=str(self.work / "home" / user),
            **as_user(pw),
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )

    def cpu_s(self) -> float:
        return sum(day_slurm.proc_cpu_s(p.pid) for p in self.procs.values())

    def release_leases(self) -> int:
        """Release every lease (else a pilot lingers until its orphan timeout)."""
        n = 0
        for user in self.users:
            out = self.run_as(user, [*TENANTRY(self.python), "leases", "--json"])
            try:
                leases = json.loads(out.stdout).get("leases", [])
            except ValueError:
                continue
            for lease in leases:
                self.run_as(user, [*TENANTRY(self.python), "leases", "release", lease["id"]])
                n += 1
        return n

    def stop(self) -> None:
        _stop_all(list(self.procs.values()))

    def stores(self) -> list[str]:
        return [
            str(self.state(u) / "tenantry.sqlite3")
            for u in self.users
            if (self.state(u) / "tenantry.sqlite3").exists()
        ]


class AsUser(TypedDict):
    user: int
    group: int
    extra_groups: list[int]


def as_user(pw: Any) -> AsUser:
    """``subprocess`` keywords that run a child as ``pw``'s user, with no supplementary groups."""
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def _start_as(
    pw: Any, argv: list[str], env: dict[str, str], log: Any, cwd: str | None = None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        env=env,
        cwd=cwd or env["HOME"],
        **as_user(pw),
        stdout=log,
        stderr=log,
        start_new_session=True,
    )


def _wait_socket(path: str, proc: subprocess.Popen[bytes], deadline: float, log: str) -> None:
    while not _connects(path):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit(f"{path} is not served; see {log}")
        time.sleep(0.1)


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


SERVICE_ACCOUNT = "tt-day-svc"  # the facility service's system account
STAFF_GROUP = "tt-day-staff"
PG_ROLE = "tenantry_day"  # scripts/dev-postgres makes it (password = name, 127.0.0.1 only)


def postgres_url(db: str) -> str:
    """A fresh database ``db`` on the dev PostgreSQL (``scripts/dev-postgres``), its URL."""
    out = subprocess.run(
        [str(ROOT / "scripts" / "dev-postgres"), "start", "--role", PG_ROLE],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"facility mode needs PostgreSQL: {out.stderr.strip()}")
    base = out.stdout.strip().rsplit("/", 1)[0]
    port = base.rsplit(":", 1)[1]
    for sql in (f'DROP DATABASE IF EXISTS "{db}"', f'CREATE DATABASE "{db}" OWNER {PG_ROLE}'):
        subprocess.run(
            ["runuser", "-u", "postgres", "--", "psql", "-q", "-p", port, "-c", sql],
            check=True,
            capture_output=True,
        )
    return f"{base}/{db}"


SLOW_POLL_S = 5.0  # the facility service's facility_poll_slow_s in this bench
SLURM_EVENTS = "/var/spool/tenantry-slurm/events"  # scripts/dev-slurm's job event log


class FacilityService:
    """Facility mode: ``tenantry facility serve`` as its own account, on PostgreSQL.

    Laid out by ``tenantry facility install`` under WORK/facility (the socket,
    state, config and start script), as a site would, then started with the
    install's start script (which ``setpriv``s to the account). Its store is a
    fresh PostgreSQL database per arm.
    """

    def __init__(
        self, work: Path, python: str, pythonpath: str, db: str, slurm_events: str = ""
    ) -> None:
        self.base = work / "facility"
        self.python, self.pythonpath, self.db = python, pythonpath, db
        self.slurm_events = slurm_events
        self.socket = str(self.base / "run" / "facility.sock")
        self.state = self.base / "svc"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.base.exists():
            shutil.rmtree(self.base)
        (self.base / "bin").mkdir(parents=True)
        os.chmod(self.base, 0o755)
        program = self.base / "bin" / "tenantry"  # the program the service runs
        program.write_text(f'#!/bin/sh\nexec {self.python} -m tenantry "$@"\n')
        os.chmod(program, 0o755)
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "LANG": "C.UTF-8", "TZ": "UTC",
               "PYTHONPATH": self.pythonpath}  # fmt: skip
        etc = self.base / "etc"
        install = subprocess.run(
            [self.python, "-m", "tenantry", "facility", "install", "--json",
             "--account", SERVICE_ACCOUNT, "--staff-group", STAFF_GROUP,
             "--state-dir", str(self.state), "--listen", self.socket,
             "--config-dir", str(etc), "--unit-dir", str(etc),
             "--bin-dir", str(self.base / "sbin"), "--tenantry", str(program)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if install.returncode != 0:
            raise SystemExit(f"tenantry facility install failed: {install.stderr.strip()}")
        with (self.state / "config.toml").open("a") as cfg:
            cfg.write(f'store_url = "{postgres_url(self.db)}"\n')
            # the facility's trade: answers up to 5 s old for fewer controller RPCs (the
            # bare agents' own squeue polls come every 3-6 s)
            cfg.write(f"facility_poll_slow_s = {SLOW_POLL_S}\n")
            if self.slurm_events:  # slurmctld's job events: the poller is a safety net
                cfg.write(f'facility_slurm_events = "{self.slurm_events}"\n')
        log = (self.base.parent / "facility-service.log").open("ab")
        self.proc = subprocess.Popen(
            [str(self.base / "sbin" / "tenantry-facility-start")],
            env=env,
            cwd=str(self.base),
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        _wait_socket(self.socket, self.proc, time.monotonic() + 90, "facility-service.log")

    def cpu_s(self) -> float:
        return day_slurm.proc_cpu_s(self.proc.pid) if self.proc else 0.0

    def stop(self) -> None:
        if self.proc is not None:
            _stop_all([self.proc])
            self.proc = None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def python_for_users() -> tuple[str, str]:
    """A Python every actor's Unix user may run, and the PYTHONPATH that finds Tenantry.

    The virtualenv's interpreter may live under /root (pyenv); the system Python
    of the same minor version reads the checkout and the virtualenv's packages.
    """
    import sysconfig

    path = os.pathsep.join([str(ROOT / "src"), sysconfig.get_paths()["purelib"]])
    system = "/usr/bin/python3"
    probe = subprocess.run(
        [system, "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode == 0 and probe.stdout.strip() == str(tuple(sys.version_info[:2])):
        return system, path
    return sys.executable, path


def _connects(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Facility:
    """The machine set up once: users, workspaces, the FUSE mount, the shims."""

    def __init__(self, args: argparse.Namespace, day: Day) -> None:
        self.args, self.day = args, day
        self.work = Path(args.work)
        self.src, self.mnt = self.work / "src", self.work / "mnt"
        self.python, self.pythonpath = python_for_users()
        self.tenantry = TENANTRY(self.python)
        self.shims = self.work / "shims"
        self.files: dict[int, tuple[str, ...]] = {}

    def write_job_scripts(self) -> None:
        import pwd

        for arm in ARMS:
            for a in self.day.actors:
                name = unix_name(arm, a.user)
                pw = pwd.getpwnam(name)
                path = self.work / "home" / name / day_arms.JOB_SCRIPT
                path.write_text(day_arms.JOB_SCRIPT_TEXT)
                os.chown(path, pw.pw_uid, pw.pw_gid)
                os.chmod(path, 0o755)

    def prepare(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        os.chmod(self.work, 0o755)
        for d in ("home", "state", "logs"):
            (self.work / d).mkdir(exist_ok=True)
            os.chmod(self.work / d, 0o755)
        names = [unix_name(arm, a.user) for arm in ARMS for a in self.day.actors]
        for name in sorted(set(names)):
            day_slurm.ensure_user(name, str(self.work / "home" / name))
        day_slurm.wait_association(sorted(set(names)))
        self.write_job_scripts()
        for k in range(self.day.config.agent_users):
            ws = self.src / f"w{k:02d}"
            metadata.generate(ws, self.args.files, seed=k + 1)
            self.files[k] = tuple(
                str(p.relative_to(ws)).replace(os.sep, "/")
                for p in sorted(ws.glob("m*/p*/d*/f00*.py"))[:50]
            )
            scratch = ws / "scratch"
            scratch.mkdir(exist_ok=True)
            os.chmod(scratch, 0o1777)
            # the agent users' daemons flush their change feed with a cookie in .git
            # (a user's own repository is theirs to write; these are the bench's)
            os.chmod(ws / ".git", 0o1777)
        subprocess.run(
            [*self.tenantry, "shims", "install", "--force", str(self.shims)],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": self.pythonpath},
        )
        os.chmod(self.shims, 0o755)

    def daemon_env(self) -> dict[str, str]:
        """What the agent users' daemons get besides the defaults.

        The index follows the workspaces through the FUSE server's own tree (src),
        which sees every change as a parallel file system's changelog would
        (``index_watch_backing``); git trusts the bench-owned repositories.
        """
        return {
            "TENANTRY_INDEX_WATCH_BACKING": f"{self.mnt}={self.src}",
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
        }

    def clean_scratch(self) -> None:
        for k in range(self.day.config.agent_users):
            for f in (self.src / f"w{k:02d}" / "scratch").glob("*.py"):
                f.unlink()


def meta_total(mount: metadata.Mount) -> int:
    return metadata.Mount.meta(dict.fromkeys(mount.snapshot(), 0), mount.snapshot())[0]


CALIBRATED = ("ls", "read", "find", "grep", "git")


def actor_context(
    fac: Facility, arm: str, actor: day_replay.Actor, daemons: Daemons | None
) -> day_arms.Context:
    """Where one actor of one arm works: its Unix user, home, workspace and daemon socket."""
    name = unix_name(arm, actor.user)
    return day_arms.Context(
        arm=arm,
        unix_user=name,
        home=str(fac.work / "home" / name),
        workspace=str(fac.mnt / f"w{actor.workspace:02d}"),
        scratch=str(fac.src / f"w{actor.workspace:02d}" / "scratch"),
        tenantry=fac.tenantry,
        pythonpath=fac.pythonpath,
        files=fac.files[actor.workspace],
        shim_dir=str(fac.shims),
        socket=daemons.socket(name) if daemons and actor.kind == "agent" else "",
    )


def calibrate(
    fac: Facility, mount: metadata.Mount, arm: str, daemons: Daemons | None
) -> dict[str, int]:
    """Metadata ops of one command of each file-system class, run alone as the first agent."""
    import pwd

    actor = fac.day.by_kind("agent")[0]
    name = unix_name(arm, actor.user)
    pw = pwd.getpwnam(name)
    ctx = actor_context(fac, arm, actor, daemons)
    env = day_arms.env_for(actor, ctx)
    args = {"ls": "m00/p00", "read": "0", "find": "*_test.py", "grep": "frobnicate_widget"}
    out = {}
    for cls in CALIBRATED:
        step = day_arms.step_for(day_replay.Action(0, cls, args.get(cls, "")), actor, ctx)
        # git twice, the second counted: its steady state (the first `tenantry git
        # status` of a workspace checks every file, as plain git does each time)
        for _ in range(2 if cls == "git" else 1):
            before = meta_total(mount)
            subprocess.run(
                step["argv"],
                env=env,
                cwd=ctx.home,
                **as_user(pw),
                capture_output=True,
                check=False,
                timeout=600,
            )
            out[cls] = meta_total(mount) - before
    return out


def run_arm(fac: Facility, mount: metadata.Mount, arm: str, repeat: int) -> ArmResult:
    import pwd

    day, args = fac.day, fac.args
    res = ArmResult(arm, repeat)
    labels = labels_for(day, arm)
    users = sorted(labels)
    agents = sorted(u for u, k in labels.items() if k == "agent")
    fac.clean_scratch()
    service = None
    if arm == "tenantry" and args.mode == "facility":
        service = FacilityService(
            fac.work, fac.python, fac.pythonpath, args.pg_db, args.slurm_events
        )
        users.append(SERVICE_ACCOUNT)  # its RPCs are the arm's too
    daemons = (
        Daemons(
            fac.work,
            agents,
            fac.python,
            fac.pythonpath,
            service.socket if service else "",
            fac.daemon_env(),
            hook_http=args.hook == "http",
        )
        if arm == "tenantry"
        else None
    )
    res.start = time.time()
    if daemons is not None:
        before = meta_total(mount)
        if service is not None:
            service.start()
        daemons.start()
        for k, user in enumerate(agents):  # each agent user's project, indexed once
            out = daemons.run_as(user, [*fac.tenantry, "index", "add", str(fac.mnt / f"w{k:02d}")])
            if out.returncode != 0:
                raise SystemExit(f"index add for {user} failed: {out.stderr.strip()}")
        res.meta_setup_ops = meta_total(mount) - before
    res.ops_per_command = calibrate(fac, mount, arm, daemons)
    sampler = Sampler(mount, users, agents, args.sample_s)
    sampler.start()
    t0 = time.time() + 2.0
    procs = []
    for actor in day.actors:
        name = unix_name(arm, actor.user)
        pw = pwd.getpwnam(name)
        ctx = actor_context(fac, arm, actor, daemons)
        log = fac.work / "logs" / f"{arm}-{repeat}-{name}-{actor.session or 'h'}.jsonl"
        env = day_arms.env_for(actor, ctx)
        spec = {
            "t0": t0,
            "env": env,
            "cwd": ctx.home,
            # the hook's session id is the one the agent's commands claim (CLAUDE_CODE_SESSION_ID)
            "session": env.get("CLAUDE_CODE_SESSION_ID", actor.session),
            "hook": day_arms.hook_for(actor, ctx),
            **day_arms.http_hook_for(
                actor, ctx, daemons.hook_url(ctx.unix_user) if daemons else ""
            ),
            "log": str(log),
            "steps": [day_arms.step_for(a, actor, ctx) for a in actor.actions],
        }
        spec_path = log.with_suffix(".spec.json")
        spec_path.write_text(json.dumps(spec))
        log.touch()
        os.chown(log, pw.pw_uid, pw.pw_gid)
        procs.append(
            (
                name,
                subprocess.Popen(
                    [fac.python, str(RUNNER), str(spec_path)],
                    env=env,
                    cwd=ctx.home,
                    **as_user(pw),
                    stdin=subprocess.DEVNULL,
                ),
                log,
            )
        )
    deadline = time.monotonic() + day.config.day_s * 4 + 600
    for name, p, _log in procs:
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            res.notes.append(f"runner of {name} overran and was killed")
    res.end = time.time()
    if daemons is not None:
        for user in agents:
            out = daemons.run_as(user, [*fac.tenantry, "index", "list", "--json"])
            with contextlib.suppress(ValueError, AttributeError):
                res.index_counters[user] = json.loads(out.stdout).get("counters", {})
        daemons.release_leases()
        res.daemon_cpu_s = daemons.cpu_s() + (service.cpu_s() if service else 0.0)
        daemons.stop()
    if service is not None:
        service.stop()
    if not day_slurm.wait_drained(users, 60):
        res.notes.append("jobs still queued 60 s after the day; cancelled")
        for u in users:
            subprocess.run(["scancel", "-u", u], check=False)
        day_slurm.wait_drained(users, 60)
    time.sleep(args.sample_s)  # last RPCs (completion) into the counters
    sampler.stop.set()
    sampler.join()
    sampler.tick()
    res.series = sampler.series
    res.rpcs = dict(sampler.rpc.total)
    res.rpc_resets = sampler.rpc.resets
    res.meta_ops = sampler.series[-1][2] if sampler.series else 0
    res.meta_by_user = sampler.meta_by_user()
    for name, _p, log in procs:
        lines = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]
        for row in lines:
            if "cpu_s" in row:
                res.cpu_s += row["cpu_s"]
            else:
                res.executed.append({"user": name, **row})
    res.cpu_s += res.daemon_cpu_s
    dump = day_slurm.settled_sacct_dump(users, res.start)
    (fac.work / f"sacct-{arm}-{repeat}.txt").write_text(dump)
    jobs = day_slurm.parse_sacct(dump)
    res.jobs = {u: sum(1 for j in jobs if j.user == u) for u in users}
    executed = [
        Executed(
            e["user"], e["cls"], e["ts"], e["latency_s"], e["rc"], e["denied"], e["via_tenantry"]
        )
        for e in res.executed
    ]
    truth = day_replay.ground_truth(labels, executed, jobs)
    res.truth = {"shares": truth.users, **truth.detail}
    stores = daemons.stores() if daemons else []
    res.report = run_report(
        fac, arm, repeat, [str(fac.work / f"sacct-{arm}-{repeat}.txt"), *stores]
    )
    return res


def run_report(fac: Facility, arm: str, repeat: int, inputs: list[str]) -> dict[str, Any]:
    out = fac.work / f"report-{arm}-{repeat}.json"
    r = subprocess.run(
        [*fac.tenantry, "report", *inputs, "--format", "json", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": fac.pythonpath},
    )
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip()[-2000:]}
    data: dict[str, Any] = json.loads(out.read_text())
    return data


# --- summary -------------------------------------------------------------------------


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def latency(executed: list[dict[str, Any]], kind_of: dict[str, str]) -> dict[str, dict[str, float]]:
    by: dict[str, list[float]] = {}
    hook: dict[str, list[float]] = {}
    for e in executed:
        if kind_of.get(e["user"]) == "agent" and not e["denied"]:
            by.setdefault(e["cls"], []).append(e["latency_s"])
            hook.setdefault(e["cls"], []).append(e.get("hook_s", 0.0))
    return {
        c: {
            "n": len(v),
            "p50_ms": _pct(v, 0.5) * 1e3,
            "p99_ms": _pct(v, 0.99) * 1e3,
            "hook_p50_ms": _pct(hook[c], 0.5) * 1e3,
        }
        for c, v in sorted(by.items())
    }


def report_shares(report: dict[str, Any]) -> dict[str, Any]:
    """Agent shares (0-1) and the command-rate ratio from ``tenantry report --format json``."""
    head = report.get("headline", {})

    def share(key: str) -> float | None:
        v = head.get(key, {}).get("share_pct", {}).get("agent")
        return None if v is None else float(v) / 100

    rate = report.get("command_rate", {})
    return {
        "users": share("users"),
        "submissions": share("submissions"),
        "core_hours": share("core_hours"),
        "ratio": rate.get("ratio_pooled"),
    }


def summarize(results: list[ArmResult], day: Day) -> dict[str, Any]:
    out: dict[str, Any] = {"arms": {}}
    for arm in ARMS:
        rs = [r for r in results if r.arm == arm]
        if not rs:
            continue
        labels = labels_for(day, arm)
        agents = [u for u, k in labels.items() if k == "agent"]
        humans = [u for u, k in labels.items() if k != "agent"]

        def med(f: Any, rs: list[ArmResult] = rs) -> float:
            return float(statistics.median(f(r) for r in rs))

        lat = [latency(r.executed, labels) for r in rs]
        classes = sorted({c for x in lat for c in x})
        out["arms"][arm] = {
            "repeats": len(rs),
            "rpcs_agents": med(lambda r, a=agents: sum(r.rpcs[u] for u in a)),
            "rpcs_service": med(lambda r: r.rpcs.get(SERVICE_ACCOUNT, 0)),
            "rpcs_agents_service": med(
                lambda r, a=agents: sum(r.rpcs[u] for u in a) + r.rpcs.get(SERVICE_ACCOUNT, 0)
            ),
            "rpcs_all": med(lambda r: sum(r.rpcs.values())),
            "jobs_agents": med(lambda r, a=agents: sum(r.jobs[u] for u in a)),
            "jobs_all": med(lambda r: sum(r.jobs.values())),
            "meta_ops": med(lambda r: r.meta_ops),
            "meta_agents_service": med(
                lambda r, a=agents: (
                    sum(r.meta_by_user.get(u, 0) for u in a)
                    + r.meta_by_user.get(SERVICE_ACCOUNT, 0)
                )
            ),
            "meta_service": med(lambda r: r.meta_by_user.get(SERVICE_ACCOUNT, 0)),
            "meta_humans": med(lambda r, h=humans: sum(r.meta_by_user.get(u, 0) for u in h)),
            "meta_setup_ops": med(lambda r: r.meta_setup_ops),
            "cpu_s": med(lambda r: r.cpu_s),
            "daemon_cpu_s": med(lambda r: r.daemon_cpu_s),
            "wall_s": med(lambda r: r.end - r.start),
            "commands": med(lambda r: len(r.executed)),
            "denials": med(lambda r: sum(1 for e in r.executed if e["denied"])),
            "failed": med(lambda r: sum(1 for e in r.executed if _failed_row(e))),
            "lag_max_s": med(lambda r: max((e["lag_s"] for e in r.executed), default=0)),
            "rpc_resets": sum(r.rpc_resets for r in rs),
            "latency": {
                c: {
                    k: float(statistics.median(x[c][k] for x in lat if c in x))
                    for k in ("n", "p50_ms", "p99_ms", "hook_p50_ms")
                }
                for c in classes
            },
            "failed_by_class": _failed(rs[-1].executed),
            "ops_per_command": rs[-1].ops_per_command,
            "class_counts": _counts(rs[-1].executed),
        }
    b, t = out["arms"].get("bare"), out["arms"].get("tenantry")
    if b and t:

        def ratio(k: str) -> float | None:
            return round(b[k] / t[k], 1) if t[k] else None

        out["ratios"] = {
            k: ratio(k)
            for k in (
                "rpcs_agents",
                "rpcs_agents_service",
                "rpcs_all",
                "jobs_agents",
                "jobs_all",
                "meta_agents_service",
                "meta_ops",
            )
        }
    comp = []
    for r in results:
        if r.arm != "tenantry" or not r.report:
            continue
        got = report_shares(r.report)
        truth = r.truth
        comp.append(
            {"repeat": r.repeat, "report": got, "truth": truth, "error": r.report.get("error")}
        )
    out["report_vs_truth"] = comp
    return out


def _counts(executed: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in executed:
        out[e["cls"]] = out.get(e["cls"], 0) + 1
    return out


def _failed_row(e: dict[str, Any]) -> bool:
    """A command that failed (grep's 1 is "no match"; -1 is a policy denial)."""
    return e["rc"] not in (0, -1) and not (e["cls"] == "grep" and e["rc"] == 1)


def _failed(executed: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in executed:
        if _failed_row(e):
            out[e["cls"]] = out.get(e["cls"], 0) + 1
    return out


def plot(results: list[ArmResult], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for r in results:
        if not r.series or r.repeat != results[0].repeat:
            continue
        ts = [(t - r.start) for t, _, _ in r.series]
        style = "-" if r.arm == "bare" else "--"
        ax1.plot(ts, [max(1, x) for _, x, _ in r.series], style, label=r.arm)
        ax2.plot(ts, [max(1, m) for _, _, m in r.series], style, label=r.arm)
    ax1.set_title("controller RPCs by agent users (cumulative)")
    ax2.set_title("metadata ops on the workspace mount (cumulative)")
    for ax in (ax1, ax2):
        ax.set_yscale("log")
        ax.set_xlabel("seconds into the compressed day")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    arms = summary["arms"]
    b, t = arms.get("bare", {}), arms.get("tenantry", {})
    rows = [
        ("controller RPCs (agent users + facility service)", "rpcs_agents_service", "{:,.0f}"),
        ("controller RPCs (agent users)", "rpcs_agents", "{:,.0f}"),
        ("controller RPCs (facility service account)", "rpcs_service", "{:,.0f}"),
        ("controller RPCs (all bench users)", "rpcs_all", "{:,.0f}"),
        ("Slurm jobs (agent users)", "jobs_agents", "{:,.0f}"),
        ("Slurm jobs (all bench users)", "jobs_all", "{:,.0f}"),
        ("metadata ops (agent users + facility service)", "meta_agents_service", "{:,.0f}"),
        ("metadata ops (facility service account)", "meta_service", "{:,.0f}"),
        ("metadata ops (human users)", "meta_humans", "{:,.0f}"),
        ("metadata ops on the mount (every caller)", "meta_ops", "{:,.0f}"),
        ("  of which the index crawl", "meta_setup_ops", "{:,.0f}"),
        ("login-node CPU (process trees), s", "cpu_s", "{:,.1f}"),
        ("  of which daemons, s", "daemon_cpu_s", "{:,.1f}"),
        ("wall time of the day, s", "wall_s", "{:,.0f}"),
        ("commands run", "commands", "{:,.0f}"),
        ("policy denials", "denials", "{:,.0f}"),
        ("failed commands (rc != 0)", "failed", "{:,.0f}"),
        ("largest lag behind schedule, s", "lag_max_s", "{:,.1f}"),
    ]
    ratios = summary.get("ratios", {})
    lines = [
        f"config: {meta['config']}",
        f"load average before/after: {meta['load_before']} / {meta['load_after']}",
        "",
        "| measure | bare | tenantry | bare / tenantry |",
        "|---|---:|---:|---:|",
    ]
    for label, key, fmt in rows:
        r = ratios.get(key)
        lines.append(
            f"| {label} | {fmt.format(b.get(key, 0))} | {fmt.format(t.get(key, 0))} |"
            f" {'' if r is None else f'{r}x'} |"
        )
    lines += [
        "",
        "| agent command class | n | bare p50 | bare p99 | tenantry p50 | tenantry p99"
        " | of which hook (p50) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in sorted(set(b.get("latency", {})) | set(t.get("latency", {}))):
        bl, tl = b.get("latency", {}).get(c, {}), t.get("latency", {}).get(c, {})
        lines.append(
            f"| {c} | {bl.get('n', 0):.0f} | {bl.get('p50_ms', 0):.0f} ms |"
            f" {bl.get('p99_ms', 0):.0f} ms | {tl.get('p50_ms', 0):.0f} ms |"
            f" {tl.get('p99_ms', 0):.0f} ms | {tl.get('hook_p50_ms', 0):.0f} ms |"
        )
    lines += [
        "",
        "| file-system class | commands in the day | bare ops/command | tenantry ops/command"
        " | bare ops (estimate) | tenantry ops (estimate) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in CALIBRATED:
        n = b.get("class_counts", {}).get(c, 0)
        bo = b.get("ops_per_command", {}).get(c, 0)
        to = t.get("ops_per_command", {}).get(c, 0)
        lines.append(f"| {c} | {n} | {bo:,} | {to:,} | {n * bo:,} | {n * to:,} |")
    lines += ["", "| tenantry report vs ground truth | report | truth |", "|---|---:|---:|"]
    for c in summary.get("report_vs_truth", []):
        rep, tr = c["report"], c["truth"]
        for key in ("users", "submissions", "core_hours"):
            rv = rep.get(key)
            lines.append(
                f"| agent share of {key} (repeat {c['repeat']}) |"
                f" {'-' if rv is None else f'{100 * rv:.1f} %'} | {100 * tr['shares'][key]:.1f} % |"
            )
        tr_ratio = tr["command_rate"]["ratio"]
        lines.append(
            f"| command-rate ratio (repeat {c['repeat']}) | {rep.get('ratio')} |"
            f" {'-' if tr_ratio is None else f'{tr_ratio:.2f}'} |"
        )
        if c.get("error"):
            lines.append(f"| report error | {c['error'][:200]} | |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--short", action="store_true", help="CI smoke size: N=5, M=2, 90 s day")
    p.add_argument("--agents", type=int, help="agent sessions N (default 50; short 5)")
    p.add_argument("--humans", type=int, help="human users M (default 10; short 2)")
    p.add_argument("--sessions-per-user", type=int, default=5, help="agent sessions per Unix user")
    p.add_argument("--day-s", type=float, help="length of the compressed day (default 600)")
    p.add_argument("--idle-s", type=float, help="mean idle gap between an agent's loops")
    p.add_argument("--batch-p", type=float, help="chance an agent loop submits a batch job")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeats", type=int, help="interleaved repeats per arm (default 3; short 1)")
    p.add_argument("--arms", default="bare,tenantry")
    p.add_argument("--files", type=int, default=1000, help="files per agent user's workspace")
    p.add_argument("--delay-ms", type=float, default=0.5, help="delay per metadata op")
    p.add_argument("--cache-s", type=float, default=1.0, help="kernel attr/entry cache")
    p.add_argument("--sample-s", type=float, default=2.0)
    p.add_argument(
        "--mode",
        choices=MODES,
        default="facility",
        help="Tenantry deployment: facility (one service on PostgreSQL, daemons as executors;"
        " the default) or user (a daemon per user, each polling Slurm)",
    )
    p.add_argument(
        "--pg-db",
        default="tenantry_facility_day",
        help="facility mode: the PostgreSQL database the bench (re)creates for the service",
    )
    p.add_argument(
        "--hook",
        choices=("http", "command"),
        default="http",
        help="Claude Code's pre-tool hook in the tenantry arm: http (the daemon answers on"
        " loopback, what `tenantry install` writes with hook_http set; the default) or command"
        " (a `tenantry hook` process per command)",
    )
    p.add_argument(
        "--slurm-events",
        default=SLURM_EVENTS if os.path.exists(SLURM_EVENTS) else "",
        help="facility mode: slurmctld's job event log the service reads (scripts/dev-slurm"
        " writes it; '' to poll only)",
    )
    p.add_argument("--work", default="/var/tmp/tenantry-facility-day")
    p.add_argument(
        "--user-prefix",
        default="tt-day",
        help="Unix user names PREFIXb-a00, PREFIXt-a00, ... and PREFIX-svc: give a run"
        " beside another one its own (sdiag and sacct count per user)",
    )
    p.add_argument("--out", help="results directory (default WORK/out)")
    return p.parse_args(argv)


def config_of(args: argparse.Namespace) -> DayConfig:
    base = DayConfig.short() if args.short else DayConfig()
    kw: dict[str, Any] = {"seed": args.seed, "sessions_per_user": args.sessions_per_user}
    for name, attr in (
        ("agents", "agents"),
        ("humans", "humans"),
        ("day_s", "day_s"),
        ("idle_s", "idle_mean_s"),
        ("batch_p", "batch_p"),
    ):
        v = getattr(args, name)
        if v is not None:
            kw[attr] = v
    d = asdict(base)
    d.update(kw)
    for k, v in d.items():
        if isinstance(v, list):
            d[k] = tuple(v)
    return DayConfig(**d)


def write_results(out: Path, meta: dict[str, Any], results: list[ArmResult], day: Day) -> Any:
    summary = summarize(results, day)
    doc = {"meta": meta, "summary": summary, "runs": [asdict(r) for r in results]}
    (out / "results.json").write_text(json.dumps(doc, indent=1, default=str))
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    use_user_prefix(args.user_prefix)
    if os.geteuid() != 0:
        raise SystemExit("needs root (Unix users per actor, a FUSE mount for other users)")
    cfg = config_of(args)
    repeats = args.repeats or (1 if args.short else 3)
    arms = [a for a in args.arms.split(",") if a]
    day = day_replay.generate(cfg)
    fac = Facility(args, day)
    out = Path(args.out or fac.work / "out")
    out.mkdir(parents=True, exist_ok=True)
    print(f"day: {day.counts()}", flush=True)
    fac.prepare()
    meta: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": asdict(cfg),
        "files_per_workspace": args.files,
        "delay_ms": args.delay_ms,
        "mode": args.mode,
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "nproc": os.cpu_count(),
    }
    results: list[ArmResult] = []
    with metadata.Mount(
        fac.src, fac.mnt, args.delay_ms / 1e3, args.cache_s, ("allow_other",)
    ) as mount:
        for rep in range(repeats):
            for arm in arms:
                print(f"[{time.strftime('%H:%M:%S')}] {arm} repeat {rep} ...", flush=True)
                r = run_arm(fac, mount, arm, rep)
                results.append(r)
                write_results(out, meta, results, day)
                print(
                    f"  {arm}: wall {r.end - r.start:.0f}s, rpcs {sum(r.rpcs.values())},"
                    f" jobs {sum(r.jobs.values())}, meta {r.meta_ops}, cpu {r.cpu_s:.0f}s,"
                    f" commands {len(r.executed)} {r.notes}",
                    flush=True,
                )
    meta["load_after"] = [round(x, 2) for x in os.getloadavg()]
    summary = write_results(out, meta, results, day)
    meta["plot"] = plot(results, out / "facility_day.png")
    md = markdown(summary, meta)
    (out / "summary.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
