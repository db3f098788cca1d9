"""The sandbox profile, declared once: what an agent session sees and may write.

``Profile`` lists what is hidden, what is writable and which environment
variables pass; ``bwrap_argv`` turns it and one session's paths into a
bubblewrap command line. Pure: no I/O except ``os.path`` existence checks done
by the caller through ``exists``. Standard library only (the launcher and the
daemon both import it).
"""

from __future__ import annotations

import os.path
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import tenantry
from tenantry.jobs.environment import LOGIN

# Directories replaced by an empty read-only tmpfs inside the sandbox.
# ``~`` is the user's home; paths that do not exist are skipped.
HIDDEN_DIRS: tuple[str, ...] = (
    "/run/munge",
    "/var/run/munge",
    "/etc/munge",
    "/var/lib/munge",
    "/var/log/munge",
    "/var/spool/slurmctld",
    "/var/spool/slurmd",
    "/var/spool/slurm",
    "/var/lib/slurm",
    "/etc/tenantry/secrets",
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker",
    "~/.password-store",
    "~/.local/share/keyrings",
)


def hidden_extra(sandbox_hide: str, *facility_sockets: str) -> str:
    """The setting's extra hidden directories plus each facility socket's directory.

    An agent reaches Tenantry only through its session socket: the facility
    service's socket (which takes any local uid) must not be reachable from
    inside, or the agent could describe itself to the service as its human.
    """
    dirs = [d for d in (x.strip() for x in sandbox_hide.split(",")) if d]
    dirs += [os.path.dirname(s) for s in facility_sockets if s and os.path.dirname(s)]
    return ",".join(dict.fromkeys(dirs))


# Files replaced by /dev/null (read as empty, cannot be written).
HIDDEN_FILES: tuple[str, ...] = (
    "/etc/slurm/jwt_hs256.key",
    "/etc/slurm/slurm.key",  # auth/slurm
    "/etc/slurm/jwt.key",
    "/etc/slurm/slurmdbd.conf",
    "~/.netrc",
    "~/.pgpass",
    "~/.git-credentials",
    "~/.config/gh/hosts.yml",
)
# Parents of other users' homes: replaced by a tmpfs holding only the own home.
HOME_PARENTS: tuple[str, ...] = ("/home", "/root")

# The agents' own state (sessions, caches, their user config): writable when
# present, so the agent works; the launcher creates its agent's entries first.
# (Facility-wide rules belong in managed settings, which live outside home.)
AGENT_STATE: dict[str, tuple[str, ...]] = {
    "claude-code": ("~/.claude/", "~/.claude.json"),
    "codex": ("~/.codex/",),
    "gemini-cli": ("~/.gemini/",),
    "opencode": ("~/.config/opencode/", "~/.local/share/opencode/", "~/.local/state/opencode/"),
    "cursor": ("~/.cursor/", "~/.config/cursor/"),
}
SHARED_WRITABLE: tuple[str, ...] = ("~/.cache/", "~/.npm/")

# Environment passed into the sandbox: exact names, and prefixes ending in "*".
ENV_ALLOW: tuple[str, ...] = (
    *LOGIN,
    "COLORTERM",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "NO_COLOR",
    "FORCE_COLOR",
    "COLUMNS",
    "LINES",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "MODULEPATH",
    "MODULESHOME",
    "LMOD_*",
    "ANTHROPIC_*",
    "CLAUDE_CODE_*",
    "DISABLE_*",
    "OPENAI_*",
    "CODEX_HOME",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_*",
    "OPENCODE_*",
    "CURSOR_API_KEY",
)
# Never passed, whatever the allow-list and the facility's additions say.
ENV_DENY: tuple[str, ...] = (
    "TENANTRY_*",
    "SLURM_*",
    "SBATCH_*",
    "MUNGE_*",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "KRB5CCNAME",
    "AWS_*",
    "XDG_RUNTIME_DIR",
)


def _match(name: str, patterns: Sequence[str]) -> bool:
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


def allowed_env(
    env: Mapping[str, str], extra: Sequence[str] = (), deny: Sequence[str] = ENV_DENY
) -> dict[str, str]:
    """The part of ``env`` that passes the allow-list (plus ``extra`` patterns)."""
    allow = (*ENV_ALLOW, *extra)
    return {k: v for k, v in env.items() if _match(k, allow) and not _match(k, deny)}


# XDG_RUNTIME_DIR inside when the user has none: a tmpfs on the sandbox's private
# /dev (not /tmp, whose entries on PATH the policy treats as plantable)
FALLBACK_RUNTIME = "/dev/tenantry-run"


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPaths:
    """Where one session's pieces are, on the host and inside the sandbox."""

    home: str
    project: str
    state_dir: str
    session_dir: str
    inside_runtime: str
    scratch: tuple[str, ...] = ()  # more writable trees (the facility's scratch)

    @property
    def inside_socket(self) -> str:
        return os.path.join(self.inside_runtime, "tenantry", "sock")

    @property
    def inside_bin(self) -> str:
        return os.path.join(self.inside_runtime, "tenantry", "bin")


def _expand(path: str, home: str) -> str:
    return home + path[1:] if path.startswith("~") else path


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def bwrap_argv(
    bwrap: str,
    paths: SessionPaths,
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    exists: Callable[[str], bool] = os.path.exists,
    isdir: Callable[[str], bool] = os.path.isdir,
    resolve: Callable[[str], str] = os.path.realpath,
    extra_hidden: Sequence[str] = (),
    info_fd: int | None = None,
    bind_try: bool = False,
    keep_visible: Sequence[str] = (),
) -> list[str]:
    """The bubblewrap command line that runs ``command`` under the profile.

    ``env`` is the complete environment of the sandboxed program (already
    filtered by ``allowed_env`` and completed by the caller). ``bind_try``
    tolerates a missing session directory (pilots on compute nodes).
    """
    home = paths.home
    argv = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-cgroup-try",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",  # noqa: S108 - the sandbox's own, empty /tmp
        "--tmpfs",
        "/dev/shm",  # noqa: S108
    ]
    if _under(home, "/tmp") and isdir(home):  # noqa: S108 - a home under /tmp (tests, CI)
        argv += ["--ro-bind", home, home]
    # other users' homes: an empty tmpfs over each parent, the own home bound back
    for parent in HOME_PARENTS:
        if isdir(parent) and home != parent:
            argv += ["--tmpfs", parent]
            if _under(home, parent):
                argv += ["--ro-bind", home, home]
            for keep in keep_visible:  # Tenantry's own interpreter, if it lives in a home
                if _under(keep, parent) and not _under(keep, home) and isdir(keep):
                    argv += ["--ro-bind", keep, keep]
            argv += ["--remount-ro", parent]
    writable = [paths.project, *paths.scratch]
    for w in writable:
        if w and isdir(w):
            argv += ["--bind", w, w]
    for entry in (*(e for v in AGENT_STATE.values() for e in v), *SHARED_WRITABLE):
        path = _expand(entry, home).rstrip("/")
        if exists(path):
            argv += ["--bind", path, path]
    hidden_dirs = [_expand(d, home) for d in (*HIDDEN_DIRS, *extra_hidden)]
    hidden_dirs.append(paths.state_dir)
    for d in dict.fromkeys(resolve(d) for d in hidden_dirs if isdir(d)):
        argv += ["--tmpfs", d, "--remount-ro", d]
    for f in dict.fromkeys(resolve(_expand(f, home)) for f in HIDDEN_FILES):
        if exists(f) and not isdir(f):
            argv += ["--ro-bind", "/dev/null", f]
    # the runtime dir: a fresh tmpfs (no user socket, no ssh/gpg agents) holding
    # only this session's directory, read-only, at the standard socket place
    runtime = paths.inside_runtime
    argv += ["--tmpfs", runtime]  # (on /dev: its own tmpfs, since /dev is noexec)
    argv += [
        "--bind-try" if bind_try else "--ro-bind",
        paths.session_dir,
        os.path.join(runtime, "tenantry"),
    ]
    if bind_try:
        argv += ["--remount-ro", os.path.join(runtime, "tenantry")]
    argv += ["--clearenv"]
    for k, v in sorted(env.items()):
        argv += ["--setenv", k, v]
    cwd = paths.project if paths.project and isdir(paths.project) else home
    argv += ["--chdir", cwd]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    argv += ["--", *command]
    return argv


def own_runtime() -> list[str]:
    """Directories Tenantry itself runs from (interpreter, packages, source)."""
    import sys

    here = os.path.dirname(os.path.dirname(os.path.abspath(tenantry.__file__)))
    dirs = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, here)}
    return sorted(dirs)


def session_env(
    parent: Mapping[str, str],
    paths: SessionPaths,
    *,
    session: str,
    agent: str,
    project: str,
    extra_allow: Sequence[str] = (),
) -> dict[str, str]:
    """The sandboxed program's environment: the allow-list plus Tenantry's markers.

    The markers are informational: identity comes from the socket, so changing
    them inside changes nothing.
    """
    env = allowed_env(parent, extra_allow)
    path = env.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["PATH"] = paths.inside_bin + ":" + path
    env["XDG_RUNTIME_DIR"] = paths.inside_runtime
    env["TENANTRY_SOCKET"] = paths.inside_socket
    env["TENANTRY_SESSION"] = session
    env["TENANTRY_AGENT"] = agent
    env["TENANTRY_SANDBOX"] = "1"
    env["TENANTRY_AUTOSTART"] = "0"
    if project:
        env["TENANTRY_PROJECT"] = project
    return env
