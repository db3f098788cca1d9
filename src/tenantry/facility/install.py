"""``tenantry facility install``: the files and accounts of a facility service.

``plan(...)`` is pure: it lists the steps (system account, staff group,
directories with their modes, the systemd unit, a start script for hosts
without systemd, the service's config file). ``apply(steps)`` performs them,
idempotently (an existing account, group or identical file is left alone).
``root`` prefixes every written path, so a package build or a test can lay
the files out in a directory of its own.
"""

from __future__ import annotations

import grp
import os
import pwd
import shlex
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tenantry.core.errors import UsageError

UNIT_NAME = "tenantry-facility.service"


@dataclass(frozen=True)
class Layout:
    account: str = "tenantry"
    staff_group: str = "tenantry-staff"
    state_dir: str = "/var/lib/tenantry"
    socket: str = "/run/tenantry/facility.sock"
    config_dir: str = "/etc/tenantry"
    unit_dir: str = "/etc/systemd/system"
    sbin_dir: str = "/usr/local/sbin"
    tenantry: str = "/usr/local/bin/tenantry"
    backend: str = "slurm"


@dataclass(frozen=True)
class Step:
    kind: str  # account | group | dir | file
    path: str = ""
    mode: int = 0o644
    owner: str = ""  # account that owns a dir ("" = root)
    content: str = ""
    name: str = ""
    argv: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["mode"] = oct(self.mode)
        if self.content:
            d["content"] = self.content
        return {k: v for k, v in d.items() if v not in ("", [], None)}


def config_text(lay: Layout) -> str:
    return (
        "# Tenantry facility service (read by `tenantry facility serve`).\n"
        "# Every setting: `tenantry settings`; see docs/facility.md.\n"
        f'backend = "{lay.backend}"\n'
        f'facility_socket = "{lay.socket}"\n'
        f'facility_staff_group = "{lay.staff_group}"\n'
        f'facility_user = "{lay.account}"\n'
        f'policy_file = "{lay.config_dir}/policy.cedar"\n'
        "audit_syslog = true\n"
        "# the store: SQLite in this directory by default; replicas share PostgreSQL:\n"
        '# store_url = "postgresql://tenantry@dbhost/tenantry"\n'
    )


def serve_argv(lay: Layout) -> list[str]:
    return [lay.tenantry, "--state-dir", lay.state_dir, "facility", "serve"]


def unit_text(lay: Layout) -> str:
    run_dir = Path(lay.socket).parent
    state = Path(lay.state_dir)
    # systemd creates the directories it manages only under /run and /var/lib
    managed = ""
    if run_dir.parent == Path("/run"):
        managed += f"RuntimeDirectory={run_dir.name}\nRuntimeDirectoryMode=0755\n"
    if state.parent == Path("/var/lib"):
        managed += f"StateDirectory={state.name}\nStateDirectoryMode=0700\n"
    return (
        "[Unit]\n"
        "Description=Tenantry facility service (policy, budgets, kill switch, audit, memory)\n"
        "After=network-online.target munge.service\n"
        "\n[Service]\n"
        f"User={lay.account}\n"
        f"Group={lay.account}\n"
        f"ExecStart={shlex.join(serve_argv(lay))}\n"
        f"{managed}"
        "Restart=on-failure\n"
        "RestartSec=2\n"
        "NoNewPrivileges=yes\n"
        "ProtectSystem=strict\n"
        f"ReadWritePaths={lay.state_dir} {run_dir}\n"
        "PrivateTmp=yes\n"
        "\n[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def start_script(lay: Layout) -> str:
    run_dir = str(Path(lay.socket).parent)
    return (
        "#!/bin/sh\n"
        "# Start the Tenantry facility service without systemd (run as root).\n"
        "set -eu\n"
        f"install -d -m 0755 -o {lay.account} -g {lay.account} {shlex.quote(run_dir)}\n"
        f"install -d -m 0700 -o {lay.account} -g {lay.account} {shlex.quote(lay.state_dir)}\n"
        f"exec setpriv --reuid={lay.account} --regid={lay.account} --init-groups -- "
        f"{shlex.join(serve_argv(lay))}\n"
    )


def _under(root: str, path: str) -> str:
    return str(Path(root) / path.lstrip("/")) if root else path


def plan(lay: Layout, *, root: str = "", accounts: bool = True) -> list[Step]:
    steps: list[Step] = []
    if accounts:
        steps.append(
            Step("group", name=lay.staff_group, argv=["groupadd", "--system", lay.staff_group])
        )
        steps.append(
            Step(
                "account",
                name=lay.account,
                argv=[
                    "useradd",
                    "--system",
                    "--user-group",
                    "--home-dir",
                    lay.state_dir,
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    lay.account,
                ],
            )
        )
    run_dir = str(Path(lay.socket).parent)
    steps += [
        Step("dir", _under(root, lay.state_dir), 0o700, lay.account),
        Step("dir", _under(root, run_dir), 0o755, lay.account),
        Step("dir", _under(root, lay.config_dir), 0o755),
        Step(
            "file",
            _under(root, f"{lay.state_dir}/config.toml"),
            0o644,
            lay.account,
            config_text(lay),
        ),
        Step("file", _under(root, f"{lay.unit_dir}/{UNIT_NAME}"), 0o644, "", unit_text(lay)),
        Step(
            "file",
            _under(root, f"{lay.sbin_dir}/tenantry-facility-start"),
            0o755,
            "",
            start_script(lay),
        ),
    ]
    return steps


def _exists(kind: str, name: str) -> bool:
    try:
        (grp.getgrnam if kind == "group" else pwd.getpwnam)(name)
    except KeyError:
        return False
    return True


def _ids(owner: str) -> tuple[int, int]:
    if not owner:
        return 0, 0
    try:
        pw = pwd.getpwnam(owner)
    except KeyError:
        return -1, -1  # no such account (accounts skipped): keep the caller's
    return pw.pw_uid, pw.pw_gid


def apply(steps: list[Step]) -> list[str]:
    """Perform the steps; return what changed (idempotent)."""
    done: list[str] = []
    for s in steps:
        if s.kind in ("account", "group"):
            if _exists(s.kind, s.name):
                continue
            try:
                proc = subprocess.run(s.argv, capture_output=True, text=True, check=False)
            except OSError as exc:  # no groupadd/useradd on PATH (PATH without /usr/sbin)
                raise UsageError(
                    f"cannot run {s.argv[0]} to create the {s.kind} {s.name}: {exc.strerror}",
                    hint="put /usr/sbin on PATH, or create it yourself and pass --no-accounts",
                ) from exc
            if proc.returncode != 0:
                raise UsageError(
                    f"{s.argv[0]} {s.name} failed: {proc.stderr.strip()}",
                    hint="run `tenantry facility install` as root",
                )
            done.append(f"{s.kind} {s.name}")
            continue
        path = Path(s.path)
        uid, gid = _ids(s.owner)
        if s.kind == "dir":
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and path.read_text() == s.content:
                continue
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(s.content)
            os.replace(tmp, path)
        os.chmod(path, s.mode)
        if os.getuid() == 0 and uid >= 0:
            os.chown(path, uid, gid)
        done.append(f"{s.kind} {path}")
    return done
