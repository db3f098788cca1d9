"""Turn (principal, action, params) into the Cedar requests that describe what will happen.

A ``run_command`` becomes one request per program that would really run, plus
a ``submit_job`` for each ``sbatch``/``srun``/``salloc``, a ``cancel_job`` or
``modify_job`` for each job ``scancel``/``scontrol`` would touch, an ``admin``
for scheduler administration, and ``read_path``/``write_path`` for every
path argument or redirect that falls in a protected class. A ``submit_job``
includes the commands of its script and ``--wrap``. The decision is the
first denial among them.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.core.models import Principal
from tenantry.safety.policy import risky, slurmcmds
from tenantry.safety.policy.engine import Request
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.observed import look
from tenantry.safety.policy.paths import PathContext, PathInfo, classify, credential, expand
from tenantry.safety.policy.schema import ACTIONS
from tenantry.safety.policy.unwrap import (
    SHELLS,
    Analysis,
    Effective,
    analyze_argv,
    analyze_shell,
)

OwnerLookup = Callable[[str], "tuple[str, str] | None"]
# where a run_command would really run ("login" | "lease"; "" unknown), as the daemon decides it
WhereOf = Callable[[Principal, "dict[str, Any]"], str]

_WRITE_ALL = frozenset({"rm", "rmdir", "unlink", "shred", "touch", "truncate", "mkdir", "chmod",
                        "chown", "chgrp", "tee", "setfacl", "chattr", "mv", "mkfifo"})  # fmt: skip
_WRITE_LAST = frozenset({"cp", "ln", "install", "rsync", "scp", "sftp"})
_NO_PATH_ARGS = frozenset({"echo", "printf", "true", "false", "test", "[", "expr", "seq",
                           "sleep", "kill", "pkill", "killall", "scancel", "scontrol",
                           "squeue", "sacct", "sinfo", "sacctmgr"})  # fmt: skip
_STARTUP = re.compile(
    r"/\.(bashrc|bash_profile|bash_login|bash_logout|bash_aliases|profile|zshrc|zprofile|"
    r"zshenv|zlogin|zlogout|cshrc|tcshrc|kshrc|inputrc|config/fish/config\.fish|xinitrc|"
    r"xsession|xprofile|pam_environment)$"
    # what a login or the user's service manager starts: user units, autostart entries,
    # the environment of every user service, fish's and bash's drop-in directories
    r"|/\.config/(systemd/user|autostart|environment\.d|fish/conf\.d)/|/\.bashrc\.d/"
    # code Python runs at every start of an interpreter that sees this site directory
    r"|/site-packages/([^/]+\.pth|usercustomize\.py|sitecustomize\.py)$"
)
# files in the home that programs read and act on at their start: code interpreters run
# before any script (IPython, R, Julia, Octave), editors' and multiplexers' rc files
# that can run commands, debuggers' and database shells' init files, Lmod's rc files,
# and the package managers' indexes (where the next install comes from)
_HOME_STARTUP = re.compile(
    r"\.ipython/profile_[^/]+/(startup/|ipython_[a-z]+_config\.py$)"
    r"|\.jupyter/jupyter_[a-z]+_config\.py$"
    r"|\.(Rprofile|Renviron|octaverc|vimrc|exrc|gvimrc|emacs|tmux\.conf|screenrc|gdbinit|"
    r"lldbinit|sqliterc|psqlrc|mailcap|curlrc|wgetrc|condarc|modulerc|modulerc\.lua|"
    r"lmodrc\.lua|yarnrc|yarnrc\.yml)$"
    r"|\.julia/config/startup\.jl$|\.emacs\.d/(early-)?init\.el$"
    r"|\.vim/(plugin|autoload|ftplugin|after)/|\.config/nvim/(init\.(vim|lua)$|plugin/|lua/)"
    r"|\.config/(tmux/tmux\.conf|gdb/gdbinit|git/attributes)$|\.lmod\.d/"
    r"|\.(config/)?pip/pip\.(conf|ini)$|\.cargo/config(\.toml)?$|\.gradle/init\.(d/|gradle$)"
)
_QUERY_TOOLS = frozenset({"squeue", "sacct", "sinfo", "sstat", "sprio", "sshare", "sdiag",
                          "sreport", "scontrol-show"})  # fmt: skip
_SACCTMGR_READ = frozenset({"show", "list", "help", "version"})
_SYSTEMCTL_READ = frozenset({"status", "show", "cat", "is-active", "is-enabled", "is-failed",
                             "list-units", "list-unit-files", "list-timers", "help"})  # fmt: skip
_READERS = frozenset({"cat", "tac", "head", "tail", "less", "more", "base64", "base32", "xxd",
                      "od", "hexdump", "strings", "cp", "scp", "rsync", "sftp", "curl", "wget",
                      "tar", "zip", "gzip", "bzip2", "xz", "zstd", "nc", "ncat", "socat",
                      "openssl", "gpg", "dd", "tee", "ln", "install", "sed", "awk", "grep",
                      "rg", "ag", "diff", "cmp", "split", "nl", "uuencode", "mail", "sendmail",
                      "python", "python3", "perl", "ruby", "node"})  # fmt: skip
# programs that only read the paths they are given: anything else naming Tenantry's
# own state may change it (sqlite3, an editor, an interpreter's inline code)
_PURE_READERS = frozenset({"cat", "tac", "head", "tail", "less", "more", "wc", "ls", "stat",
                           "file", "du", "grep", "egrep", "fgrep", "zgrep", "rg", "ag", "diff",
                           "cmp", "nl", "strings", "od", "xxd", "hexdump", "md5sum", "sha1sum",
                           "sha256sum", "sha512sum", "b2sum", "cksum", "jq", "readlink",
                           "realpath", "dirname", "basename", "test", "[", "echo", "printf",
                           "tenantry"})  # fmt: skip
# a path that is only a variable (``"$DIR"/``, ``${X}/*``): empty or / at run time, maybe
_COMPUTED_PATH = re.compile(r'"?\$\{?\w+\}?"?/?\*?')
_PATHLIKE = re.compile(r"[/~$*?\[]|^\.|[^\x00-\x7f]|^(id_|munge|krb5cc|.*\.keytab$)")
_TOP_LEVEL = frozenset({"/", "/home", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/var",
                        "/opt", "/boot", "/root", "/srv", "/scratch", "/work", "/project",
                        "/projects", "/tmp"})  # fmt: skip  # noqa: S108


@dataclass(slots=True)
class Env:
    """What normalization needs besides the request itself."""

    facts: Facts
    owner_of: OwnerLookup | None = None
    protected: tuple[str, ...] = ()
    read_files: bool = True
    hour: int | None = None
    where_of: WhereOf | None = None


@dataclass(slots=True)
class Built:
    requests: list[Request] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Builder:
    def __init__(self, principal: Principal, env: Env, cwd: str) -> None:
        self.p = principal
        self.env = env
        self.facts = env.facts
        self.user = env.facts.user(principal.user)
        self.cwd = cwd or self.user.home
        self.pctx = PathContext(
            cwd=self.cwd,
            home=self.user.home,
            user=principal.user,
            homes_root=env.facts.homes_root,
            protected=env.protected + env.facts.protected,
            write_roots=tuple(
                r.format(user=principal.user, project=principal.project or principal.user)
                for r in env.facts.write_roots
            ),
            read_roots=env.facts.read_roots,
        )
        self.out = Built()
        self.n = 0
        hour = env.hour if env.hour is not None else time.localtime().tm_hour
        self.base_ctx: dict[str, Any] = {
            "source": "direct",
            "uncertain": False,
            "uncertain_kind": "",
            "reason": "",
            "limits": dict(env.facts.limits),
            "hour": hour,
            "where": "",
        }
        self.vars = {"HOME": self.user.home, "USER": principal.user, "PWD": self.cwd}
        self._computed: set[str] = set()
        self._cwd_secret: bool | None = None  # see ``cwd_secret``
        self.unsafe_path: tuple[str, ...] = ()
        self.search_path = ""
        self._wrappers: set[str] = set()
        self._finds_tenantry = False  # a pgrep/pidof of Tenantry's processes in the line
        self.written: dict[str, str | None] = {}  # files the line being judged writes

    @property
    def cwd_secret(self) -> bool:
        """Is the working directory itself a credential place? (resolved on first use)"""
        if self._cwd_secret is None:
            self._cwd_secret = credential(self.cwd, self.pctx)
        return self._cwd_secret

    def ctx(self, **kw: Any) -> dict[str, Any]:
        c = dict(self.base_ctx)
        c.update(kw)
        return c

    def add(
        self,
        action: str,
        rtype: str,
        attrs: dict[str, Any],
        ctx: dict[str, Any] | None = None,
        label: str = "",
        extras: dict[str, Any] | None = None,
    ) -> None:
        self.n += 1
        limits = self.facts.limits
        ex = {
            "limit_gpus": limits["agent_max_gpus"],
            "limit_nodes": limits["agent_max_nodes"],
            "limit_time_s": limits["agent_max_time_s"],
            "limit_array": limits["agent_max_array"],
            "limit_cpus": limits["agent_max_cpus"],
            **(extras or {}),
        }
        self.out.requests.append(
            Request(action, rtype, f"r{self.n}", attrs, ctx or self.ctx(), ex, label)
        )

    # --- commands ---------------------------------------------------------------

    def analysis(self, a: Analysis, spec_env: dict[str, str], source: str, raw: str) -> None:
        kinds = [k for k, _ in a.uncertain]
        worst = "" if not kinds else ("variable" if set(kinds) == {"variable"} else kinds[0])
        reason = "; ".join(r for _, r in a.uncertain[:3])
        self.out.warnings.extend(a.notes)
        if a.uncertain and worst == "variable" and source == "script":
            self.out.warnings.append(f"job script: {reason}")
        cmds = a.commands or [Effective([raw[:200] or "?"], [False])]
        self._computed = a.computed
        # programs that only hand their arguments on (``bash -c``, ``timeout``, ``env``):
        # the commands they run are judged themselves, so their text is not a path
        self._wrappers = {name for eff in cmds for name in eff.via}
        self._finds_tenantry = any(
            eff.program in ("pgrep", "pidof") and risky.signals_tenantry(eff.program, eff.argv[1:])
            for eff in cmds
        )
        if a.assigned and source != "script":
            # set or exported in this line: later commands may see them (the value when
            # it is known: ``export SBATCH_QOS=x; sbatch job.sh`` asks for that QoS)
            spec_env = {**{n: a.values.get(n, "") for n in a.assigned}, **spec_env}
        outer, self.written = self.written, a.written
        for eff in cmds:
            ctx = self.ctx(
                source=eff.source if eff.source != "command" else source,
                uncertain=bool(a.uncertain),
                uncertain_kind=worst,
                reason=reason,
            )
            self.command(eff, spec_env, ctx)
        self.written = outer

    def command(self, eff: Effective, spec_env: dict[str, str], ctx: dict[str, Any]) -> None:
        prog = eff.program
        args = eff.argv[1:]
        env_names = sorted(set(eff.env) | set(spec_env))
        tags = _tags(prog, args, eff, self)
        if self.unsafe_path and eff.argv and "/" not in eff.argv[0] and "PATH" not in eff.env:
            found = look(_which, eff.argv[0], self.search_path, self.cwd)
            if found is not None and found in self.unsafe_path:
                tags.add("planted-path")
        sub = next((x for x in args if not x.startswith("-")), "")
        hijack = [
            n
            for n in env_names
            if n in ("PATH", "LD_PRELOAD", "LD_AUDIT", "SLURM_CONF", "BASH_ENV")
        ]
        if eff.argv:
            self.add(
                "run_command",
                "Command",
                {
                    "program": prog,
                    "path": eff.argv[0],
                    "args": args,
                    "line": " ".join(eff.argv)[:400],
                    "via": eff.via,
                    "env": env_names,
                    "tags": sorted(tags),
                    "subcommand": sub,
                },
                ctx,
                label=" ".join(eff.argv)[:200],
                extras={"env_bad": ", ".join(hijack) or ", ".join(env_names)},
            )
        self.paths_of(eff, prog, args, ctx)
        env_all = {**spec_env, **eff.env}
        if prog in ("sbatch", "srun", "salloc"):
            slurmcmds.slurm_submit(self, prog, args, env_all, ctx, eff)
        elif prog == "scancel":
            slurmcmds.scancel(self, args, eff.dynamic[1:], ctx)
        elif prog == "scontrol":
            slurmcmds.scontrol(self, args, ctx)
        elif prog == "sattach":
            slurmcmds.sattach(self, args, ctx)
        elif prog == "sacctmgr":
            verb = next((x for x in args if not x.startswith("-")), "").lower()
            if verb and verb not in _SACCTMGR_READ:
                self.target("admin", f"sacctmgr {verb}", ctx)
            else:
                self.target("query_jobs", "sacctmgr", ctx)
        elif prog in ("squeue", "sacct", "sstat"):
            slurmcmds.query(self, prog, args, ctx)
        elif prog in _QUERY_TOOLS:
            self.target("query_jobs", prog, ctx)
        elif prog == "tenantry" and sub in ("admin", "audit"):
            self.target("admin", f"tenantry {sub}", ctx)

    def paths_of(self, eff: Effective, prog: str, args: list[str], ctx: dict[str, Any]) -> None:
        for op, word in eff.redirects:
            action = "read_path" if op in ("<",) else "write_path"
            self.path(action, word.text, ctx, dynamic=word.dynamic)
        if prog in _NO_PATH_ARGS or not eff.argv:
            return
        values: list[tuple[str, bool]] = []
        for a, d in zip(args, eff.dynamic[1:], strict=False):
            if a.startswith("-"):
                _, eq, v = a.partition("=")
                if eq and v:
                    values.append((v, d))
                elif a.startswith("-o") and prog in ("curl", "wget") and len(a) > 2:
                    values.append((a[2:], d))
                continue
            values.append((a.removeprefix("@"), d))
            if a.startswith(("if=", "of=")):
                values[-1] = (a[3:], d)
            elif "=" in a:
                values.append((a.split("=", 1)[1].removeprefix("@"), d))
        nonopt = [a for a in args if not a.startswith("-")]
        writes: set[str] = set()
        if prog in _WRITE_ALL:
            writes = set(nonopt)
            if prog in ("chmod", "chown", "chgrp") and nonopt:
                writes.discard(nonopt[0])
        elif prog in _WRITE_LAST and nonopt:
            writes = {nonopt[-1]}
        elif prog in ("sed", "perl") and any(a.startswith("-i") for a in args):
            writes = set(nonopt[1:])
        elif prog == "dd":
            writes = {a[3:] for a in args if a.startswith("of=")}
        elif prog in ("find", "gfind"):
            writes = set(risky.find_written(args))
            if risky.find_deletes(args):  # what it removes is below its start points
                writes |= {args[i] for i in risky.find_starts(args)} or {"."}
        elif prog in ("sort", "gsort", "shuf"):
            writes = set(risky.output_files(args))
        for i, a in enumerate(args):
            output_flag = a in ("-o", "-O", "--output", "--output-document")
            if prog in ("curl", "wget") and output_flag and i + 1 < len(args):
                writes.add(args[i + 1])
        if _recursive(prog, args):
            roots = {"/", "/etc", "/root", self.facts.homes_root, self.user.home.rstrip("/")}
            for a, d in zip(args, eff.dynamic[1:], strict=False):
                if a.startswith("-") or d:
                    continue
                info = classify(a, self.pctx)
                p = info.path.rstrip("/") or "/"
                if p in roots or posixpath.dirname(p) == self.facts.homes_root:
                    self.path_info("read_path", info, ctx, tree=True)
        if prog in _READERS:
            for a in args:
                if a in self._computed:
                    info = classify(a, self.pctx, dynamic=True)
                    reason = f"{prog} reads a path computed at run time ({a[:60]})"
                    bad = dict(ctx, uncertain=True, uncertain_kind="path", reason=reason)
                    self.path_info("read_path", info, bad)
        for v, d in values:
            if not v or len(v) > 4096:
                continue
            if not (v in writes or _PATHLIKE.search(v) or self.cwd_secret or self._links(v)):
                continue  # a plain word in an ordinary directory names nothing protected
            info = classify(v, self.pctx, dynamic=d)
            target = v if v in writes else "of=" + v if ("of=" + v) in args else ""
            if target or v in writes:
                self.path_info("write_path", info, ctx)
            elif info.credential or info.lookalike or info.other_home:
                self.path_info("read_path", info, ctx)
        if args:
            self.hidden_paths(prog, args, ctx)

    def hidden_paths(self, prog: str, args: list[str], ctx: dict[str, Any]) -> None:
        """Paths a command reads or writes that are not its plain arguments: git's
        config file behind ``git config``, gpg's secret keyring, and Tenantry's state
        named inside an argument (inline code, a database's path) of a program that
        does not only read."""
        home = self.user.home
        if prog == "git":
            sub, cwd = risky.git_subcommand(args, self.cwd)
            if sub >= 0 and args[sub] == "config":
                target = risky.git_config_file(args[sub + 1 :], cwd, home)
                if target is not None:
                    self.path("write_path", target, ctx)
        secret = risky.gpg_secret_export(prog, args, home)
        if secret is not None:
            self.path("read_path", secret, ctx)
        if prog in _PURE_READERS or prog in self._wrappers or not self.pctx.protected:
            return
        joined = "\0".join(args)
        for root, spelled in _protected_spellings(self.user.home, self.pctx.protected):
            if spelled.search(joined):
                self.path("write_path", root, ctx)

    def _links(self, word: str) -> bool:
        """Does a plain word name a symbolic link in the command's cwd (``cat lnk``)?"""
        if "\x00" in word or len(word) > 255:
            return False
        return look(os.path.islink, posixpath.join(self.cwd, word))

    def path(self, action: str, raw: str, ctx: dict[str, Any], *, dynamic: bool = False) -> None:
        self.path_info(action, classify(raw, self.pctx, dynamic=dynamic), ctx)

    def path_info(
        self, action: str, info: PathInfo, ctx: dict[str, Any], *, tree: bool = False
    ) -> None:
        attrs = info.attrs()
        attrs["startup"] = _startup(info.path, self.user.home) or (
            action == "write_path" and _shadows(info.path, self.user.home)
        )
        attrs["secret_tree"] = tree
        self.add(action, "Path", attrs, ctx, label=info.raw)

    def target(self, action: str, name: str, ctx: dict[str, Any] | None = None) -> None:
        self.add(action, "Target", {"kind": action, "name": name}, ctx, label=name)

    def read_file(self, raw: str) -> str | None:
        if not self.env.read_files:
            return None
        from tenantry.safety.policy.unwrap import _read_small

        path = raw if raw.startswith("/") else posixpath.join(self.cwd, raw)
        return _read_small(path)


def _startup(path: str, home: str) -> bool:
    """Is ``path`` a file some program runs or obeys at its start (``~/.bashrc``, a
    ``.pth`` file, ``~/.Rprofile``, ``~/.config/pip/pip.conf``)?"""
    if _STARTUP.search(path):
        return True
    prefix = home.rstrip("/") + "/"
    return path.startswith(prefix) and bool(_HOME_STARTUP.match(path[len(prefix) :]))


@functools.lru_cache(maxsize=256)
def _protected_spellings(
    home: str, protected: tuple[str, ...]
) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Each protected root and a pattern of the ways an argument may spell it
    (``/home/u/.local/state/tenantry``, ``~/...``, ``$HOME/...``, ``${HOME}/...``)."""
    prefix = home.rstrip("/") + "/"
    out: list[tuple[str, re.Pattern[str]]] = []
    for root in protected:
        if not root:
            continue
        forms = [root]
        if root.startswith(prefix):
            rel = root[len(prefix) :]
            forms += ["~/" + rel, "$HOME/" + rel, "${HOME}/" + rel]
        out.append((root, re.compile("|".join(re.escape(f) for f in forms))))
    return tuple(out)


def _named(raw: str, b: Builder) -> str:
    """The absolute path a word names, ``~`` and ``$HOME`` expanded, links not followed."""
    return posixpath.normpath(expand(raw, b.pctx))


_HOME_BINS = ("bin", ".local/bin")
_SYSTEM_BINS = ("/usr/bin", "/bin", "/usr/sbin", "/usr/local/bin")


def _shadows(path: str, home: str) -> bool:
    """Is ``path`` a program in the home's ``bin`` or ``.local/bin`` named like one the
    system has (``~/.local/bin/ls``, ``~/bin/git``)? The human's shell would run it in
    that program's place."""
    parent, _, name = path.rpartition("/")
    home = home.rstrip("/")
    if not name or parent not in tuple(f"{home}/{d}" for d in _HOME_BINS):
        return False
    return any(look(os.path.exists, f"{d}/{name}") for d in _SYSTEM_BINS)


# directories of the home whose contents run as the user: whoever may write them may
# plant a program or a startup file
_HOME_RUN_DIRS = ("", ".ssh", ".config", ".local", ".local/bin", "bin")


def _guarded(b: Builder, raw: str) -> bool:
    """May no one but the user write ``raw``: the home itself, the directories of it
    that hold what runs as the user, or a startup file?"""
    path = classify(raw, b.pctx).path.rstrip("/")
    home = b.user.home.rstrip("/")
    if any(path == (f"{home}/{d}" if d else home) for d in _HOME_RUN_DIRS):
        return True
    return _startup(path, home)


def _is_root(b: Builder, path: str) -> bool:
    """Is ``path`` /, a top-level directory, the homes' root or the user's home?"""
    p = path.rstrip("/") or "/"
    if p.endswith("/*"):
        p = p[:-2] or "/"
    return p in _TOP_LEVEL or p == b.user.home.rstrip("/") or p == b.facts.homes_root


def _recursive(prog: str, args: list[str]) -> bool:
    """Does this command read whole directory trees?"""
    if prog in ("tar", "rsync", "rg", "ag", "zip", "7z", "rclone", "duplicity", "borg"):
        return True
    flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
    longs = {a for a in args if a.startswith("--")}
    if prog in ("cp", "scp", "grep", "egrep", "fgrep", "zgrep", "chmod", "chown"):
        return bool(set(flags) & {"r", "R", "a"}) or bool(
            longs & {"--recursive", "--archive", "--dereference-recursive"}
        )
    return False


def _sends_env(prog: str, args: list[str], eff: Effective) -> bool:
    """Does the command send the environment to another host: fed by ``env`` through a
    pipe (``env | curl -d @- URL``, ``printenv | nc h 80``, via ``xargs`` too), with
    ``$(env)`` in its arguments, or ``env`` written to ``/dev/tcp``?"""
    if eff.stdin_env and (
        risky.sends_input(prog, args) or ("xargs" in eff.via and prog in risky.NETWORK_SENDERS)
    ):
        return True
    if prog in risky.NETWORK_SENDERS and any(risky.ENV_SUBSTITUTION.search(a) for a in args):
        return True
    return risky.dumps_env(prog, args) and any(
        w.text.startswith(("/dev/tcp/", "/dev/udp/")) for op, w in eff.redirects if ">" in op
    )


def _tags(prog: str, args: list[str], eff: Effective, b: Builder) -> set[str]:
    tags: set[str] = set()
    if risky.controls_tenantry(prog, args):
        tags.add("tenantry-control")
    if _sends_env(prog, args, eff):
        tags.add("env-exfil")
    if prog == "kill":
        rest = list(args)
        if rest and rest[0] in ("-s", "-n", "--signal"):
            rest = rest[2:]
        elif rest and rest[0].startswith("-") and rest[0] != "--" and rest[0] != "-1":
            rest = rest[1:]
        elif rest and rest[0] == "-1" and len(rest) > 1:
            rest = rest[1:]  # "kill -1 PID" is SIGHUP
        if "-1" in rest:
            tags.add("kill-all")
        if b._finds_tenantry:  # kill $(pgrep -f tenantry), pidof tenantry | xargs kill
            tags.add("kill-tenantry")
    elif prog in ("pkill", "killall", "pgrep-kill", "skill", "slay"):
        if risky.signals_tenantry(prog, args):
            tags.add("kill-tenantry")
        if any(a in ("-u", "--user", "-U") or a.startswith(("--user=", "-u")) for a in args):
            tags.add("kill-all")
        pats = [a for a in args if not a.startswith("-")]
        if any(p in (".", ".*", "", "^", "$") for p in pats):
            tags.add("kill-all")
    elif prog == "killall5":
        tags.add("kill-all")
    elif prog == "rm":
        flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
        recursive = "r" in flags or "R" in flags or "--recursive" in args
        if recursive:
            for a, d in zip(args, eff.dynamic[1:], strict=False):
                if a.startswith("-"):
                    continue
                if d and _COMPUTED_PATH.fullmatch(a):
                    tags.add("rm-root")
                    continue
                if _is_root(b, classify(a, b.pctx).path):
                    tags.add("rm-root")
    elif prog == "mv":
        # moving /, a home or a top-level directory away removes it from where it was
        # (a symbolic link is moved itself: its name is what counts)
        nonopt = [a for a in args if not a.startswith("-")]
        into = any(a in ("-t", "--target-directory") or a.startswith("--target-directory=")
                   for a in args)  # fmt: skip
        if any(_is_root(b, _named(a, b)) for a in (nonopt if into else nonopt[:-1])):
            tags.add("rm-root")
    elif prog in ("find", "gfind") and risky.find_deletes(args):
        dyn = eff.dynamic[1:]
        starts = risky.find_starts(args)
        follows = risky.find_follows(args)  # else a start point that is a link is itself
        for i in starts or [-1]:
            a = args[i] if i >= 0 else "."
            if 0 <= i < len(dyn) and dyn[i] and _COMPUTED_PATH.fullmatch(a):
                tags.add("rm-root")  # a start point computed at run time: maybe ""
                continue
            if _is_root(b, classify(a, b.pctx).path if follows else _named(a, b)):
                tags.add("rm-root")
    elif prog == "crontab":
        if (
            not args
            or any(a not in ("-l", "-u") for a in args if a.startswith("-"))
            or any(not a.startswith("-") for a in args)
        ) and args != ["-l"]:
            tags.add("persistence")
    elif prog in ("batch", "systemd-run") or (prog == "loginctl" and "enable-linger" in args):
        tags.add("persistence")
    elif prog == "at":
        # at -l/-c/-r/-d list, print and remove queued jobs (atq, atrm); the rest queues one
        if not any(a in ("-l", "-c", "-r", "-d", "-V", "--help", "--version") for a in args):
            tags.add("persistence")
    elif prog == "strigger" and "--set" in args:
        tags.add("persistence")  # a program Slurm runs on a later event
    elif prog == "chmod":
        mode = next((a for a in args if not a.startswith("-") or re.match(r"^-[rwxXst]", a)), "")
        if re.search(r"[ugoa]*[+=][rwxXt]*s", mode) or re.fullmatch(r"[2467]\d{3}", mode):
            tags.add("setuid")
        grants, paths, recursive = risky.chmod_grants(args)
        if ("o" in grants and recursive) or (grants and any(_guarded(b, p) for p in paths)):
            tags.add("opens-write")
    elif prog == "setfacl":
        others, paths = risky.setfacl_grants(args, b.user.name)
        if others and any(_guarded(b, p) for p in paths):
            tags.add("opens-write")
    elif prog == "systemctl":
        sub = next((a for a in args if not a.startswith("-")), "")
        if sub in _SYSTEMCTL_READ:
            tags.add("read-only")
    if (prog in risky.NETWORK_TOOLS or (prog in SHELLS and eff.redirects)) and risky.remote_shell(
        prog, args, [w.text for _, w in eff.redirects], SHELLS
    ):
        tags.add("remote-shell")
    if prog in risky.CONTAINERS and risky.privileged_container(prog, args):
        tags.add("privileged-container")
    return tags


def build(principal: Principal, action: str, params: dict[str, Any], env: Env) -> Built:
    """The requests that describe ``action`` with ``params`` (raises UsageError on bad input)."""
    if action not in ACTIONS:
        # an op whose action the schema does not know yet: judged as a Target, so
        # only rules without an action scope apply (humans keep their rights,
        # agents fall to default-deny until the policy names the action)
        b = Builder(principal, env, str(params.get("cwd") or ""))
        b.target(action, action, b.ctx())
        return b.out
    cwd = str(params.get("cwd") or "")
    b = Builder(principal, env, cwd)
    if action == "run_command":
        b.base_ctx["where"] = _where(principal, params, env)
        forwarded = {str(k): str(v) for k, v in (params.get("env") or {}).items()}
        spec_env = ambient_env(forwarded)
        # an inherited PATH is the human's environment, not the agent's choice:
        # it matters only if a program of this command would be found in an
        # entry anyone can plant into (checked per command in ``command``)
        b.unsafe_path = unsafe_entries(spec_env.pop("PATH", ""))
        b.search_path = forwarded.get("PATH", "")
        command = params.get("command")
        argv = params.get("argv")
        if isinstance(command, str):
            a = analyze_shell(command, variables=b.vars, cwd=b.cwd, read_scripts=env.read_files)
            b.analysis(a, spec_env, "command", command)
        elif isinstance(argv, list) and argv and all(isinstance(x, str) for x in argv):
            a = analyze_argv(argv, env={}, variables=b.vars, cwd=b.cwd, read_scripts=env.read_files)
            b.analysis(a, spec_env, "command", " ".join(argv))
        else:
            raise UsageError("run_command needs 'command' (a string) or 'argv' (a list)")
        slurmcmds.lease_shape(b, params)
    elif action == "submit_job":
        slurmcmds.submit(b, params)
    elif action in ("cancel_job", "modify_job", "read_job_output"):
        ids = params.get("ids") or [params.get("id")]
        for job_id in ids:
            if job_id in (None, ""):
                raise UsageError(f"{action} needs a job 'id'")
            slurmcmds.job_ref(b, action, str(job_id), b.ctx())
    elif action in ("read_path", "write_path"):
        paths = params.get("paths") or [params.get("path")]
        for p in paths:
            if not isinstance(p, str) or not p:
                raise UsageError(f"{action} needs a 'path'")
            b.path(action, p, b.ctx())
    else:
        name = str(params.get("name") or params.get("op") or params.get("query") or action)
        b.target(action, name[:200], b.ctx())
        where = params.get("path")
        if action in ("index_query", "index_build") and isinstance(where, str) and where:
            # the index reads (crawls, answers from) that tree as the user: the same read
            # scope as ``find``/``grep`` there (credentials' text never enters the index)
            b.path("read_path", where, b.ctx())
    return b.out


def _where(principal: Principal, params: dict[str, Any], env: Env) -> str:
    """The real location of a command: the daemon's placement, or what was asked offline."""
    if env.where_of is not None:
        try:
            return look(env.where_of, principal, dict(params))
        except Exception:  # the op refuses it with its own message; policy sees "unknown"
            return ""
    asked = str(params.get("where") or "auto").strip().lower()
    return {"local": "login", "lease": "lease"}.get(asked, "")


def unsafe_entries(path: str) -> tuple[str, ...]:
    """PATH entries anyone could plant a program into: relative ones and temp dirs."""
    return tuple(
        e
        for e in path.split(":")
        if e and (not e.startswith("/") or e.startswith(("/tmp", "/var/tmp", "/dev/shm")))  # noqa: S108
    )


def _which(name: str, path: str, cwd: str) -> str | None:
    """The PATH entry (as written) where ``name`` would be found, or None."""
    import os

    for entry in path.split(":"):
        if not entry:
            continue
        base = entry if entry.startswith("/") else posixpath.join(cwd, entry)
        cand = posixpath.join(base, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return entry
    return None


def ambient_env(env: dict[str, str]) -> dict[str, str]:
    """The suspicious part of the environment a client forwards with a command.

    Clients forward their whole environment (PATH, module systems' BASH_ENV,
    profilers' LD_PRELOAD), so only entries that point somewhere anyone can
    plant a program count: relative entries and world-writable temp dirs.
    """
    out: dict[str, str] = {}
    for name, sep in (("PATH", ":"), ("LD_PRELOAD", ":"), ("LD_AUDIT", ":")):
        value = env.get(name)
        if not value:
            continue
        for entry in value.replace(" ", sep).split(sep):
            if entry and (
                not entry.startswith("/") or entry.startswith(("/tmp", "/var/tmp", "/dev/shm"))  # noqa: S108
            ):
                out[name] = value
                break
    return out
