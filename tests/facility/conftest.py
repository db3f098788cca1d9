"""A facility on this machine: three Unix users, a staff group, the service's account.

Needs root (to create users and run processes as them) and a real Slurm with
accounting (each user gets an association so their daemons can submit). The
users are created idempotently and kept (other tests may use them at the same
time); everything else lives in a directory the fixture removes.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.gateway.conftest import wait_for

PY = sys.executable
# a checkout's tests run its own code in the users' daemons and the service too
_PATHS = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
CHECKOUT_ENV = {"PYTHONPATH": os.pathsep.join(_PATHS)} if _PATHS else {}
TENANTRY = str(Path(sys.executable).with_name("tenantry"))
ACCOUNT = "tt-tenantry"
STAFF = "tt-staff"
USERS = ("tt-alice", "tt-bob", "tt-carol")  # carol is staff
SLURM_ACCOUNT = os.environ.get("TENANTRY_TEST_SLURM_ACCOUNT", "root")
BUDGETS = "[user.hour]\njobs = 1\n"  # each user's agents: one submission an hour


def _run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kw)


def _need(cond: bool, why: str) -> None:
    if cond:
        return
    if os.environ.get("TENANTRY_REQUIRE_SLURM") == "1":
        pytest.fail(f"facility tests need {why} (TENANTRY_REQUIRE_SLURM=1)")
    pytest.skip(f"facility tests need {why}")


def ensure_accounts() -> None:
    """The staff group, the service's system account, three users (idempotent)."""
    if _run(["getent", "group", STAFF]).returncode != 0:
        _run(["groupadd", STAFF])
    if _run(["id", ACCOUNT]).returncode != 0:
        _run(["useradd", "--system", "--user-group", "--no-create-home",
              "--shell", "/usr/sbin/nologin", ACCOUNT])  # fmt: skip
    for name in USERS:
        if _run(["id", name]).returncode != 0:
            _run(["useradd", "--user-group", "--no-create-home", "--shell", "/bin/sh", name])
    if "tt-carol" not in grp.getgrnam(STAFF).gr_mem:
        _run(["usermod", "-aG", STAFF, "tt-carol"])
    for name in USERS:
        out = _run(["sacctmgr", "-n", "-P", "show", "assoc", f"user={name}", "format=user"])
        if name not in out.stdout.split():
            _run(["sacctmgr", "-i", "add", "user", name, f"account={SLURM_ACCOUNT}"])


wait_until = wait_for


def _terminate(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM a process still running and reap it; SIGKILL after 30 s."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Result:
    rc: int
    data: Any
    stderr: str


@dataclass
class User:
    """One Unix user with a daemon in facility mode; CLI calls run as that user."""

    name: str
    uid: int
    gid: int
    home: Path
    facility_socket: str
    proc: subprocess.Popen[bytes] | None = None
    log: Path = field(default_factory=Path)

    @classmethod
    def at_home(cls, name: str, uid: int, gid: int, home: Path, facility_socket: str) -> User:
        """The user with a fresh ``home`` (and its state and work dirs: theirs, mode 0700)."""
        for d in (home, home / "state", home / "work"):
            d.mkdir(mode=0o700)
            os.chown(d, uid, gid)
        return cls(name, uid, gid, home, facility_socket)

    @contextlib.contextmanager
    def second_daemon(self, home: Path, facility_socket: str) -> Iterator[User]:
        """This user's second daemon ("on another login node"): its own ``home``, facing
        ``facility_socket``; stopped on exit."""
        other = User.at_home(self.name, self.uid, self.gid, home, facility_socket)
        try:
            other.start()
            yield other
        finally:
            other.stop()

    @property
    def state(self) -> Path:
        return self.home / "state"

    @property
    def work(self) -> Path:
        return self.home / "work"

    def script(self, name: str, body: str) -> str:
        """An executable ``#!/bin/sh`` script NAME in this user's work dir, owned by them."""
        path = self.work / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        os.chown(path, self.uid, self.gid)
        path.chmod(0o755)
        return name

    def env(self, agent: bool) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TENANTRY_STATE_DIR": str(self.state),
            "TENANTRY_SOCKET": str(self.state / "sock"),
            "TENANTRY_AUTOSTART": "0",
            "TENANTRY_POLL_FAST_S": "0.3",
            "TENANTRY_POLICY_FILE": str(self.home / "no-policy.cedar"),
            **CHECKOUT_ENV,
        }
        if agent:
            env |= {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": f"s-{self.name}"}
        return env

    def argv(self, *args: str) -> list[str]:
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups",
                "--", PY, "-m", "tenantry", *args]  # fmt: skip

    def start(self) -> None:
        self.log = self.home / "daemon.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv("serve", "--facility", self.facility_socket, "--backend", "slurm"),
                env=self.env(False),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.work,
            )
        wait_until(lambda: self.call("info").rc == 0, 60, f"{self.name}'s daemon")

    def stop(self) -> None:
        _terminate(self.proc)
        self.proc = None

    def call(self, *args: str, agent: bool = False, json_flag: bool = True) -> Result:
        """``tenantry ARGS --json`` as this user (``--json`` goes before a ``--``)."""
        argv = list(args)
        if json_flag:
            # before a `--` or a script's arguments (submit's trailing args take the rest)
            cut = argv.index("--") if "--" in argv else len(argv)
            cut = 1 if argv[0] == "submit" else cut
            argv.insert(cut, "--json")
        proc = _run(self.argv(*argv), env=self.env(agent), cwd=self.work, timeout=180)
        text = proc.stdout.strip()
        try:
            data = json.loads(text) if text and json_flag else text
        except ValueError:
            data = text
        return Result(proc.returncode, data, proc.stderr)

    def agent_command(self, *argv: str) -> subprocess.Popen[bytes]:
        """``tenantry run -- ARGV`` as this user's agent, left running (stderr piped)."""
        return subprocess.Popen(
            self.argv("run", "--", *argv),
            env=self.env(True),
            cwd=self.work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def saw_started(self, program: str, *of_user: str) -> bool:
        """Has the facility a ``command.started`` event of ``program`` (of ``--user U``)?"""
        args = ("facility", "events", "--type", "command.started", "--since", "3600")
        seen = self.ok(*args, *(("--user", *of_user) if of_user else ()))
        return any(e["data"].get("argv", [None])[:1] == [program] for e in seen["events"])

    def ok(self, *args: str, agent: bool = False) -> Any:
        res = self.call(*args, agent=agent)
        assert res.rc == 0, f"{self.name}: tenantry {' '.join(args)} -> {res.rc}: {res.stderr}"
        return res.data


@dataclass
class Facility:
    base: Path
    socket: str
    state: Path
    start_script: Path
    users: dict[str, User]
    http_port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log_name: str = "facility.log"

    def start(self) -> None:
        with (self.base / self.log_name).open("ab") as out:
            self.proc = subprocess.Popen(
                [str(self.start_script)],
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **CHECKOUT_ENV},
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.base,
            )
        wait_until(self._listening, 60, "the facility service")

    def _listening(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            log = (self.base / self.log_name).read_text()
            raise AssertionError(f"the facility service exited: {log[-3000:]}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(self.socket)
            except OSError:
                return False
        return True

    def stop(self) -> None:
        _terminate(self.proc)
        self.proc = None

    def dashboard(self, path: str) -> str:
        """A page of the facility's dashboard, with the service's token (staff's view)."""
        import urllib.request

        token = (self.state / "http-token").read_text().strip()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}{path}",
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return str(resp.read().decode())

    def tenantry_as_root(self, *args: str) -> Any:
        proc = _run([PY, "-m", "tenantry", "--state-dir", str(self.state), *args, "--json"])
        return json.loads(proc.stdout) if proc.stdout.strip() else {"rc": proc.returncode}

    def service_uid(self) -> int:
        assert self.proc is not None
        return int(Path(f"/proc/{self.proc.pid}").stat().st_uid)


def free_port() -> int:
    with socket.socket() as probe:  # a free loopback port
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def facility(slurm: None) -> Iterator[Facility]:
    with running_facility() as fac:
        yield fac


@contextlib.contextmanager
def running_facility(extra_config: str = "") -> Iterator[Facility]:
    """The service (its config.toml plus ``extra_config``) and the three users' daemons."""
    _need(os.geteuid() == 0, "root (to create Unix users and act as them)")
    _need(
        shutil.which("setpriv") is not None and shutil.which("useradd") is not None,
        "setpriv and useradd",
    )
    ensure_accounts()
    base = Path(tempfile.mkdtemp(prefix="tt-fac-", dir="/tmp"))
    os.chmod(base, 0o755)
    users: dict[str, User] = {}
    fac: Facility | None = None
    try:
        svc, run_dir, etc = base / "svc", base / "run", base / "etc"
        sock = str(run_dir / "facility.sock")
        install = _run(
            [
                PY,
                "-m",
                "tenantry",
                "facility",
                "install",
                "--account",
                ACCOUNT,
                "--staff-group",
                STAFF,
                "--state-dir",
                str(svc),
                "--listen",
                sock,
                "--config-dir",
                str(etc),
                "--unit-dir",
                str(etc),
                "--bin-dir",
                str(base / "sbin"),
                "--tenantry",
                TENANTRY,
                "--json",
            ]
        )
        assert install.returncode == 0, install.stderr
        budgets = etc / "budgets.toml"
        budgets.write_text(BUDGETS)
        port = free_port()  # the facility's dashboard
        with (svc / "config.toml").open("a") as cfg:
            cfg.write(f'budgets_file = "{budgets}"\npoll_fast_s = 0.3\n')
            cfg.write(f'http = "127.0.0.1:{port}"\n{extra_config}')
        (base / "users").mkdir(mode=0o755)
        for name in USERS:
            pw = pwd.getpwnam(name)
            users[name] = User.at_home(name, pw.pw_uid, pw.pw_gid, base / "users" / name, sock)
        fac = Facility(base, sock, svc, base / "sbin" / "tenantry-facility-start", users, port)
        fac.start()
        for u in users.values():
            u.start()
        yield fac
    finally:
        for u in users.values():
            with contextlib.suppress(Exception):
                u.stop()
        if fac is not None:
            fac.stop()
        for name, u in users.items():
            if u.log.is_file() and os.environ.get("TENANTRY_TEST_KEEP_LOGS"):
                sys.stderr.write(f"--- {name}\n{u.log.read_text()}")
        shutil.rmtree(base, ignore_errors=True)
