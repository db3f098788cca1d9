"""Settings: declared once (name, default, help), loaded once, frozen, passed down.

Each setting is read from the environment variable ``TENANTRY_<NAME>`` (upper
case) or from ``<state>/config.toml`` (``name = value`` at top level); the
environment wins. ``tenantry settings`` lists them all with their help.
Only the standard library is used: the CLI client imports this module.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenantry.errors import UsageError


def _default_state_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(base) / "tenantry")


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any
    help: str


DECLARED: tuple[Setting, ...] = (
    Setting("state_dir", "", "Directory for the store, logs and job output (0700)."),
    Setting("socket", "", "Unix socket of the daemon; default $XDG_RUNTIME_DIR/tenantry/sock."),
    Setting("backend", "local", "Job backend: local (embedded default) or slurm."),
    Setting("local_slots", 0, "CPU slots of the local backend's job queue; 0 = number of CPUs."),
    Setting("output_cap_bytes", 1_048_576, "Most output bytes kept per command result."),
    Setting("command_timeout_s", 3600.0, "Default timeout of `tenantry run` commands."),
    Setting("idle_exit_s", 0.0, "Exit the daemon after this many idle seconds; 0 = never."),
    Setting("poll_fast_s", 0.5, "Status poller interval while jobs are changing."),
    Setting("poll_slow_s", 5.0, "Status poller interval when nothing changes."),
    Setting("dedup_window_s", 300.0, "Identical submissions within this window return the job."),
    Setting("slurm_timeout_s", 15.0, "Timeout of every Slurm client command."),
    Setting("slurm_partition", "", "Default Slurm partition (empty: Slurm's default)."),
    Setting("slurm_account", "", "Default Slurm account (empty: Slurm's default)."),
    Setting("lease_idle_s", 180.0, "Release a lease after this many idle seconds."),
    Setting("lease_max_per_user", 4, "Most leases one user may hold at once."),
    Setting("lease_max_per_session", 2, "Most leases one agent session may hold at once."),
    Setting("lease_time_s", 3600, "Walltime asked for a lease's allocation."),
    Setting("lease_drain_s", 120.0, "Stop sending commands this long before a lease's walltime."),
    Setting(
        "login_node_commands", "", "Comma-separated programs allowed to run on the login node."
    ),
    Setting("policy_file", "/etc/tenantry/policy.cedar", "Facility policy (Cedar)."),
    Setting("http", "", "Also serve HTTP (dashboard, /metrics) on HOST:PORT; empty = off."),
    Setting("lease_slots", 2, "Commands one lease runs at once (its allocation is slots x shape)."),
    Setting("lease_listen", "127.0.0.1:0", "HOST:PORT where pilots dial back (port 0: any free)."),
)


@dataclass(frozen=True, slots=True)
class Settings:
    state_dir: str
    socket: str
    backend: str = "local"
    local_slots: int = 0
    output_cap_bytes: int = 1_048_576
    command_timeout_s: float = 3600.0
    idle_exit_s: float = 0.0
    poll_fast_s: float = 0.5
    poll_slow_s: float = 5.0
    dedup_window_s: float = 300.0
    slurm_timeout_s: float = 15.0
    slurm_partition: str = ""
    slurm_account: str = ""
    lease_idle_s: float = 180.0
    lease_max_per_user: int = 4
    lease_max_per_session: int = 2
    lease_time_s: int = 3600
    lease_drain_s: float = 120.0
    login_node_commands: str = ""
    policy_file: str = "/etc/tenantry/policy.cedar"
    http: str = ""
    lease_slots: int = 2
    lease_listen: str = "127.0.0.1:0"

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir)

    @property
    def db_path(self) -> Path:
        return self.state_path / "tenantry.sqlite3"

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)


def default_socket(state_dir: str, env: Mapping[str, str]) -> str:
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return str(Path(runtime) / "tenantry" / "sock")
    return str(Path(state_dir) / "sock")


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
    cfg = Path(state_dir) / "config.toml"
    if cfg.is_file():
        try:
            values.update(tomllib.loads(cfg.read_text()))
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
