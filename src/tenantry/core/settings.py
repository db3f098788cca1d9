"""Settings: declared once (name, default, help), loaded once, frozen, passed down.

Each setting is read from the environment variable ``TENANTRY_<NAME>`` (upper
case) or from ``<state>/config.toml`` (``name = value`` at top level); the
environment wins. ``tenantry settings`` lists them all with their help.
Only the standard library is used: the CLI client imports this module.
"""

from __future__ import annotations

import os
import os.path

from tenantry.core.errors import UsageError

TYPE_CHECKING = False  # the CLI client path avoids importing typing (and collections)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any


def _default_state_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "tenantry")


def mask_password(url: str) -> str:
    """``url`` with the password of its user part replaced by ``***``."""
    import re

    url = re.sub(r"(password=)[^&]*", r"\1***", url)
    return re.sub(r"^([a-z]+://[^:/@]*):[^@/]*@", r"\1:***@", url)


class Setting:
    """One declared setting: its name, default (whose type it keeps) and help."""

    __slots__ = ("default", "help", "name")

    def __init__(self, name: str, default: Any, help: str) -> None:
        self.name, self.default, self.help = name, default, help


DECLARED: tuple[Setting, ...] = (
    Setting("state_dir", "", "Directory for the store, logs and job output (0700)."),
    Setting(
        "store_url",
        "",
        "The daemon's database: empty = sqlite:///<state_dir>/tenantry.sqlite3 (embedded);"
        " postgresql://USER@HOST/DB for facility mode (password from ~/.pgpass or the URL;"
        " never shown).",
    ),
    Setting("socket", "", "Unix socket of the daemon; default $XDG_RUNTIME_DIR/tenantry/sock."),
    Setting("backend", "local", "Job backend: local (embedded default) or slurm."),
    Setting("local_slots", 0, "CPU slots of the local backend's job queue; 0 = number of CPUs."),
    Setting("output_cap_bytes", 1_048_576, "Most output bytes kept per command result."),
    Setting("command_timeout_s", 3600.0, "Default timeout of `tenantry run` commands."),
    Setting("poll_fast_s", 0.5, "Status poller interval while jobs are changing."),
    Setting("poll_slow_s", 5.0, "Status poller interval when nothing changes."),
    Setting("dedup_window_s", 300.0, "Identical submissions within this window return the job."),
    Setting("slurm_timeout_s", 15.0, "Timeout of every Slurm client command."),
    Setting("max_body_bytes", 8_388_608, "Largest request body; refused while it is read."),
    Setting("max_connections", 512, "Most open socket connections; more are answered 503."),
    Setting("header_timeout_s", 10.0, "Close a connection that sends no request head in time."),
    Setting("idle_timeout_s", 30.0, "Close a keep-alive connection idle this long."),
    Setting("slurm_partition", "", "Default Slurm partition (empty: Slurm's default)."),
    Setting("slurm_account", "", "Default Slurm account (empty: Slurm's default)."),
    Setting("lease_idle_s", 180.0, "Release a lease after this many idle seconds."),
    Setting("lease_max_per_user", 4, "Most leases one user may hold at once."),
    Setting("lease_max_per_session", 2, "Most leases one agent session may hold at once."),
    Setting("lease_time_s", 3600, "Walltime asked for a lease's allocation."),
    Setting("lease_drain_s", 120.0, "Stop sending commands this long before a lease's walltime."),
    Setting(
        "login_node_commands",
        "ls,cat,head,tail,wc,pwd,echo,printf,true,false,stat,file,which,env,printenv,date,id,"
        "whoami,hostname,uname,basename,dirname,realpath,readlink,diff,cmp,grep,sort,uniq,cut,"
        "tr,mkdir,cp,mv,rm,touch,ln,git,tenantry,module",
        "Comma-separated programs (basenames, * for all) cheap enough for the login node; with"
        " login_node_policy enforced, agent commands off this list run on a lease.",
    ),
    Setting(
        "login_node_policy",
        "auto",
        "Does login_node_commands bind agents? enforce | off | auto (enforce with a scheduler,"
        " off on the embedded local backend, whose leases are local processes).",
    ),
    Setting("policy_file", "/etc/tenantry/policy.cedar", "Facility policy (Cedar)."),
    Setting(
        "policy_facts_refresh_s",
        600.0,
        "Re-read the policy facts (sacctmgr associations and QoS, partitions) this often on the"
        " Slurm backend (0: only at start).",
    ),
    Setting(
        "guard_hold_s",
        600.0,
        "After an agent session receives instruction-like content, hold its submits, cancels,"
        " writes and leases for the human's approval for this many seconds (0: off).",
    ),
    Setting("http", "", "Also serve HTTP (dashboard, /metrics) on HOST:PORT; empty = off."),
    Setting(
        "hook_on_unreachable",
        "closed-dangerous",
        "Agent hooks when the daemon is down: closed-dangerous (deny the built-in dangerous"
        " list, allow the rest), closed (deny every shell command) or open (allow all).",
    ),
    Setting(
        "hook_http",
        "",
        "Also answer agent hooks over HTTP on 127.0.0.1:PORT (Claude Code's http hook type:"
        " no process per tool call); `tenantry install` then writes http hooks; empty = off.",
    ),
    Setting("hook_redirect", True, "Agent hooks redirect raw squeue/sbatch/find/grep to Tenantry."),
    Setting("budgets_file", "", "Budgets and rate limits (TOML or JSON); empty = defaults."),
    Setting("admin_users", "", "Comma-separated staff users allowed to stop anyone's sessions."),
    Setting("audit_dir", "", "Directory of the audit log and its anchor; default <state>/audit."),
    Setting("audit_key_file", "", "HMAC key of the audit chain; empty = <audit_dir>/audit.key."),
    Setting("memory_staff", "", "Comma-separated users who may approve lessons to facility scope."),
    Setting(
        "memory_verify_interval_s",
        3600.0,
        "Re-verify lessons whose TTL lapsed this often; 0 = off.",
    ),
    Setting("memory_capture_window_s", 1800.0, "A fix must follow its failure within this window."),
    Setting("memory_agree_projects", 2, "Distinct projects whose agreement promotes a lesson."),
    Setting(
        "memory_subject_keys",
        "",
        "Comma-separated subject keys the facility adds to module, package, partition,"
        " error, tool, path (e.g. qos,filesystem,license).",
    ),
    Setting(
        "memory_synonyms",
        "",
        "File of `pattern = term term` lines extending memory's query expansion"
        " with the facility's own names.",
    ),
    Setting(
        "memory_dense",
        True,
        "Re-rank recalled lessons with the embedding model bundled in the wordllama wheel"
        " (vectors in <state>/memory.vectors); false = lexical ranking only.",
    ),
    Setting("index_sweep_s", 30.0, "Workspace index: seconds between directory sweeps; 0 = off."),
    Setting("index_max_file_bytes", 1_048_576, "Workspace index: largest file whose text is kept."),
    Setting("index_watch", True, "Workspace index: follow changes with inotify."),
    Setting(
        "index_watch_backing",
        "",
        "Workspace index: MOUNT=BACKING[,...]: follow roots under MOUNT by watching BACKING,"
        " the host's own copy of a FUSE or NFS mount's files (sees every change).",
    ),
    Setting("lease_slots", 2, "Commands one lease runs at once (its allocation is slots x shape)."),
    Setting("lease_listen", "127.0.0.1:0", "HOST:PORT where pilots dial back (port 0: any free)."),
    Setting(
        "claimed_agents",
        "agent",
        "Clients outside any sandbox that say they are agents: agent (the agent rules, never"
        " a human's) or refuse (only sessions started with `tenantry agent` may act).",
    ),
    Setting("sandbox_bwrap", "", "bubblewrap to use for `tenantry agent`; empty = find one."),
    Setting(
        "sandbox_env_allow", "", "Comma-separated extra environment names (or PREFIX*) passed in."
    ),
    Setting("sandbox_hide", "", "Comma-separated extra directories hidden from agent sessions."),
    Setting(
        "sandbox_writable", "", "Comma-separated directories (scratch) agent sessions may write."
    ),
    Setting(
        "audit_syslog",
        False,
        "Also send each audit anchor to the system log (`/dev/log`: journald, rsyslog).",
    ),
    Setting(
        "facility_address",
        "",
        "Facility mode: the facility service's socket this daemon executes for (it asks the"
        " service for every decision); empty = user mode.",
    ),
    Setting(
        "facility_socket",
        "/run/tenantry/facility.sock",
        "The socket `tenantry facility serve` listens on (every user may connect).",
    ),
    Setting(
        "facility_staff_group",
        "tenantry-staff",
        "Unix group whose members are facility staff (approve lessons, stop anyone's agents,"
        " see every user's jobs and events).",
    ),
    Setting("facility_user", "tenantry", "System account that runs the facility service."),
    Setting("facility_timeout_s", 10.0, "Timeout of each call a daemon makes to its facility."),
    Setting(
        "facility_facts_refresh_s",
        300.0,
        "The facility service re-reads Slurm's associations, QoS and partitions this often; a"
        " submission's claimed account must be one of the user's associations (0: no check).",
    ),
    Setting(
        "facility_poll_slow_s",
        0.0,
        "The facility's cluster poller runs squeue every second; above 1, it backs off up to this"
        " many seconds while no job changes (fewer controller RPCs, answers up to this old;"
        " a job it does not know yet hurries it). 0: every second.",
    ),
    Setting(
        "facility_slurm_events",
        "",
        "The job event log that slurmctld appends to (PrologSlurmctld/EpilogSlurmctld running"
        " tenantry's slurm_event.sh; docs/facility-cluster.md). While it is trusted and"
        " complete, the cluster poller runs only every facility_safety_poll_s. Empty: poll.",
    ),
    Setting(
        "facility_slurm_user",
        "slurm",
        "Slurm's SlurmUser: the job event log is trusted only while it or root owns it and no"
        " one else may write it or its directory.",
    ),
    Setting(
        "facility_safety_poll_s",
        60.0,
        "With a healthy job event log, the cluster poller's interval (a safety net that also"
        " checks the log missed nothing; a miss brings back the normal pace).",
    ),
    Setting(
        "facility_push",
        True,
        "An executor takes its jobs' state changes pushed by the facility service (a long-lived"
        " subscription resumed from its last sequence number) instead of polling it.",
    ),
    Setting(
        "facility_tcp",
        "",
        "HOST:PORT on which `tenantry facility serve` also listens for daemons on other login"
        " nodes, each request proven by a MUNGE credential (`tenantry serve --facility"
        " munge://HOST:PORT`); empty = off.",
    ),
    Setting("munge_socket", "", "munged's socket for MUNGE credentials; empty = MUNGE's default."),
)


class Settings:
    """The settings in force: one attribute per declared setting, frozen.

    (A hand-written frozen class rather than a dataclass: the CLI imports this
    module on every call and ``dataclasses`` pulls in ``inspect``.)
    """

    state_dir: str
    store_url: str
    socket: str
    backend: str
    local_slots: int
    output_cap_bytes: int
    command_timeout_s: float
    poll_fast_s: float
    poll_slow_s: float
    dedup_window_s: float
    slurm_timeout_s: float
    max_body_bytes: int
    max_connections: int
    header_timeout_s: float
    idle_timeout_s: float
    slurm_partition: str
    slurm_account: str
    lease_idle_s: float
    lease_max_per_user: int
    lease_max_per_session: int
    lease_time_s: int
    lease_drain_s: float
    login_node_commands: str
    login_node_policy: str
    policy_file: str
    policy_facts_refresh_s: float
    guard_hold_s: float
    http: str
    hook_on_unreachable: str
    hook_http: str
    hook_redirect: bool
    budgets_file: str
    admin_users: str
    audit_dir: str
    audit_key_file: str
    memory_staff: str
    memory_verify_interval_s: float
    memory_capture_window_s: float
    memory_agree_projects: int
    memory_subject_keys: str
    memory_synonyms: str
    memory_dense: bool
    index_sweep_s: float
    index_max_file_bytes: int
    index_watch: bool
    index_watch_backing: str
    lease_slots: int
    lease_listen: str
    claimed_agents: str
    sandbox_bwrap: str
    sandbox_env_allow: str
    sandbox_hide: str
    sandbox_writable: str
    audit_syslog: bool
    facility_address: str
    facility_socket: str
    facility_staff_group: str
    facility_user: str
    facility_timeout_s: float
    facility_facts_refresh_s: float
    facility_poll_slow_s: float
    facility_slurm_events: str
    facility_slurm_user: str
    facility_safety_poll_s: float
    facility_push: bool
    facility_tcp: str
    munge_socket: str

    def __init__(self, **values: Any) -> None:
        names = {s.name for s in DECLARED}
        unknown = set(values) - names
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        for s in DECLARED:
            object.__setattr__(self, s.name, values.get(s.name, s.default))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Settings are frozen; use replace()")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.as_dict().items())))

    def __repr__(self) -> str:
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in self.shown().items())})"

    def shown(self) -> dict[str, Any]:
        """``as_dict()`` fit for logs and listings: a password in ``store_url`` masked."""
        out = self.as_dict()
        out["store_url"] = mask_password(self.store_url)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {s.name: getattr(self, s.name) for s in DECLARED}

    @property
    def state_path(self) -> Path:
        from pathlib import Path

        return Path(self.state_dir)

    @property
    def db_path(self) -> Path:
        return self.state_path / "tenantry.sqlite3"

    @property
    def store_address(self) -> str:
        """The store's URL: ``store_url``, or the embedded SQLite file under the state dir."""
        return self.store_url or f"sqlite://{self.db_path}"

    def replace(self, **changes: Any) -> Settings:
        return Settings(**{**self.as_dict(), **changes})


def default_socket(state_dir: str, env: Mapping[str, str]) -> str:
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "tenantry", "sock")
    return os.path.join(state_dir, "sock")


def _coerce(name: str, raw: Any, default: Any) -> Any:
    try:
        if isinstance(default, bool):
            return str(raw).lower() in {"1", "true", "yes", "on"}
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"setting {name}={raw!r} is not a valid {type(default).__name__}",
            hint=f"fix TENANTRY_{name.upper()} or {name} in config.toml",
        ) from exc
    return str(raw)


def load(
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build settings from defaults, ``config.toml``, the environment and overrides."""
    env = os.environ if env is None else env
    overrides = {k: v for k, v in (overrides or {}).items() if v not in (None, "")}
    state_dir = str(
        overrides.get("state_dir") or env.get("TENANTRY_STATE_DIR") or _default_state_dir()
    )
    values: dict[str, Any] = {}
    cfg = os.path.join(state_dir, "config.toml")
    if os.path.isfile(cfg):
        import tomllib

        try:
            with open(cfg, encoding="utf-8") as f:
                values.update(tomllib.loads(f.read()))
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"cannot parse {cfg}: {exc}") from exc
    for s in DECLARED:
        key = f"TENANTRY_{s.name.upper()}"
        if key in env:
            values[s.name] = env[key]
    values.update(overrides)
    known = {s.name: s for s in DECLARED}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise UsageError(
            f"unknown setting(s): {', '.join(unknown)}", hint="see `tenantry settings`"
        )
    final = {n: _coerce(n, values.get(n, s.default), s.default) for n, s in known.items()}
    final["state_dir"] = state_dir
    if not final["socket"]:
        final["socket"] = default_socket(state_dir, env)
    return Settings(**final)
