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

import posixpath
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenantry.errors import UsageError
from tenantry.models import Principal
from tenantry.policy.engine import Request
from tenantry.policy.facts import Facts
from tenantry.policy.paths import PathContext, PathInfo, classify
from tenantry.policy.schema import ACTIONS
from tenantry.policy.slurmopts import JobShape
from tenantry.policy.unwrap import Analysis, Effective, analyze_argv, analyze_shell

OwnerLookup = Callable[[str], "tuple[str, str] | None"]

_WRITE_ALL = frozenset({"rm", "rmdir", "unlink", "shred", "touch", "truncate", "mkdir", "chmod",
                        "chown", "chgrp", "tee", "setfacl", "chattr", "mv", "mkfifo"})  # fmt: skip
_WRITE_LAST = frozenset({"cp", "ln", "install", "rsync", "scp", "sftp"})
_NO_PATH_ARGS = frozenset({"echo", "printf", "true", "false", "test", "[", "expr", "seq",
                           "sleep", "kill", "pkill", "killall", "scancel", "scontrol",
                           "squeue", "sacct", "sinfo", "sacctmgr"})  # fmt: skip
_STARTUP = re.compile(
    r"/\.(bashrc|bash_profile|bash_login|bash_logout|profile|zshrc|zprofile|zshenv|zlogin|"
    r"cshrc|tcshrc|kshrc|inputrc|config/fish/config\.fish|xinitrc|xsession)$"
)
_QUERY_TOOLS = frozenset({"squeue", "sacct", "sinfo", "sstat", "sprio", "sshare", "sdiag",
                          "sreport", "scontrol-show"})  # fmt: skip
_SCONTROL_JOB = frozenset({"hold", "uhold", "release", "requeue", "requeuehold", "suspend",
                           "resume", "top", "notify", "update"})  # fmt: skip
_SCONTROL_READ = frozenset({"show", "listpids", "ping", "version", "help", "pidinfo",
                            "listjobs", "liststeps", "getaddrs"})  # fmt: skip
_SACCTMGR_READ = frozenset({"show", "list", "help", "version"})
_SYSTEMCTL_READ = frozenset({"status", "show", "cat", "is-active", "is-enabled", "is-failed",
                             "list-units", "list-unit-files", "list-timers", "help"})  # fmt: skip
_READERS = frozenset({"cat", "tac", "head", "tail", "less", "more", "base64", "base32", "xxd",
                      "od", "hexdump", "strings", "cp", "scp", "rsync", "sftp", "curl", "wget",
                      "tar", "zip", "gzip", "bzip2", "xz", "zstd", "nc", "ncat", "socat",
                      "openssl", "gpg", "dd", "tee", "ln", "install", "sed", "awk", "grep",
                      "rg", "ag", "diff", "cmp", "split", "nl", "uuencode", "mail", "sendmail",
                      "python", "python3", "perl", "ruby", "node"})  # fmt: skip
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


@dataclass(slots=True)
class Built:
    requests: list[Request] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class _Builder:
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
        }
        self.vars = {"HOME": self.user.home, "USER": principal.user, "PWD": self.cwd}
        self._computed: set[str] = set()
        self.cwd_secret = classify(self.cwd, self.pctx).credential

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
        if a.assigned and source != "script":
            spec_env = {**dict.fromkeys(a.assigned, ""), **spec_env}
        for eff in cmds:
            ctx = self.ctx(
                source=eff.source if eff.source != "command" else source,
                uncertain=bool(a.uncertain),
                uncertain_kind=worst,
                reason=reason,
            )
            self.command(eff, spec_env, ctx)

    def command(self, eff: Effective, spec_env: dict[str, str], ctx: dict[str, Any]) -> None:
        prog = eff.program
        args = eff.argv[1:]
        env_names = sorted(set(eff.env) | set(spec_env))
        tags = _tags(prog, args, eff, self)
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
            self.slurm_submit(prog, args, env_all, ctx, eff)
        elif prog == "scancel":
            self.scancel(args, eff.dynamic[1:], ctx)
        elif prog == "scontrol":
            self.scontrol(args, ctx)
        elif prog == "sacctmgr":
            verb = next((x for x in args if not x.startswith("-")), "").lower()
            if verb and verb not in _SACCTMGR_READ:
                self.target("admin", f"sacctmgr {verb}", ctx)
            else:
                self.target("query_jobs", "sacctmgr", ctx)
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
            if not (self.cwd_secret or v in writes or _PATHLIKE.search(v)):
                continue  # a plain word in an ordinary directory names nothing protected
            info = classify(v, self.pctx, dynamic=d)
            target = v if v in writes else "of=" + v if ("of=" + v) in args else ""
            if target or v in writes:
                self.path_info("write_path", info, ctx)
            elif info.credential or info.lookalike:
                self.path_info("read_path", info, ctx)

    def path(self, action: str, raw: str, ctx: dict[str, Any], *, dynamic: bool = False) -> None:
        self.path_info(action, classify(raw, self.pctx, dynamic=dynamic), ctx)

    def path_info(
        self, action: str, info: PathInfo, ctx: dict[str, Any], *, tree: bool = False
    ) -> None:
        attrs = info.attrs()
        attrs["startup"] = bool(_STARTUP.search(info.path))
        attrs["secret_tree"] = tree
        self.add(action, "Path", attrs, ctx, label=info.raw)

    def target(self, action: str, name: str, ctx: dict[str, Any] | None = None) -> None:
        self.add(action, "Target", {"kind": action, "name": name}, ctx, label=name)

    # --- jobs -----------------------------------------------------------------------

    def owner(self, job_id: str) -> tuple[str, str]:
        """The ownership class of ``job_id`` for this principal, and a description."""
        found = self.env.owner_of(job_id) if self.env.owner_of else None
        if found is None:
            found = self.facts.job_owner(job_id)
        if found is None:
            return "unknown", "a job Tenantry does not know"
        user, principal = found
        if user != self.p.user:
            return "other", f"user {user}"
        if principal == self.p.key:
            return "self", "this session"
        if not principal or principal.split("/")[1:2] == ["human"]:
            return "user", f"user {user}'s own job"
        return "sibling", f"another agent session ({principal})"

    def job_ref(self, action: str, job_id: str, ctx: dict[str, Any], dynamic: bool = False) -> None:
        if dynamic:
            cls, text = "unknown", "computed at run time"
        else:
            cls, text = self.owner(job_id)
        attrs = _job_attrs(JobShape(), self)
        attrs.update({"id": job_id, "owner": cls})
        self.add(
            action,
            "Job",
            attrs,
            ctx,
            label=f"job {job_id}",
            extras={"owner_text": text, "what": f"job {job_id}"},
        )

    def scancel(self, args: list[str], dyn: list[bool], ctx: dict[str, Any]) -> None:
        ids: list[tuple[str, bool]] = []
        scope = ""
        i = 0
        valued = {"-u", "--user", "-n", "--name", "--jobname", "-p", "--partition", "-A",
                  "--account", "-q", "--qos", "-t", "--state", "-w", "--nodelist", "-M",
                  "--clusters", "-s", "--signal", "-R", "--reservation", "--wckey"}  # fmt: skip
        while i < len(args):
            a, d = args[i], dyn[i] if i < len(dyn) else False
            if a.startswith("-") and a != "-":
                name, eq, val = a.partition("=")
                if name in valued and not eq:
                    val = args[i + 1] if i + 1 < len(args) else ""
                    i += 1
                elif not eq and len(a) > 2 and a[:2] in valued:
                    name, val = a[:2], a[2:]
                if name in ("-u", "--user"):
                    scope = "other" if val != self.p.user else (scope or "user")
                elif name == "--me" or (name in valued and name not in ("-s", "--signal")):
                    scope = scope or "user"
            else:
                ids.extend((part, d) for part in a.split(",") if part)
            i += 1
        for job_id, d in ids:
            self.job_ref("cancel_job", job_id, ctx, dynamic=d)
        if scope and not ids:
            attrs = _job_attrs(JobShape(), self)
            label = "every job of the user" if scope == "user" else "another user's jobs"
            owner = "other" if scope == "other" else "user"
            attrs.update({"id": label, "owner": owner})
            text = "scancel by filter or user" if scope == "user" else "user filter"
            self.add(
                "cancel_job",
                "Job",
                attrs,
                ctx,
                label=label,
                extras={"owner_text": text, "what": label},
            )

    def scontrol(self, args: list[str], ctx: dict[str, Any]) -> None:
        rest = [a for a in args if not a.startswith("-")]
        if not rest:
            self.target("query_jobs", "scontrol", ctx)
            return
        verb = rest[0].lower()
        if verb in _SCONTROL_READ:
            self.target("query_jobs", f"scontrol {verb}", ctx)
        elif verb in _SCONTROL_JOB:
            targets = rest[1:]
            ids: list[str] = []
            admin = False
            for t in targets:
                k, eq, v = t.partition("=")
                if eq and k.lower() in ("jobid", "job", "jobname"):
                    ids.extend(x for x in v.split(",") if x)
                elif eq and k.lower() in ("nodename", "partitionname", "reservationname",
                                          "frontendname", "suspendexcnodes"):  # fmt: skip
                    admin = True
                elif not eq and verb != "update":
                    ids.extend(x for x in t.split(",") if x)
            if admin:
                self.target("admin", f"scontrol {verb} {' '.join(targets)[:60]}", ctx)
            for job_id in ids:
                self.job_ref("modify_job", job_id, ctx)
            if not ids and not admin:
                self.target("admin", f"scontrol {verb}", ctx)
        else:
            self.target("admin", f"scontrol {verb}", ctx)

    def slurm_submit(
        self, tool: str, args: list[str], env: dict[str, str], ctx: dict[str, Any], eff: Effective
    ) -> None:
        script_text = ""
        shape = JobShape.build(tool, args, "", env)
        if tool == "sbatch" and shape.positional and not shape.wrap:
            script_text = self.read_file(shape.positional[0]) or ""
            if script_text:
                shape = JobShape.build(tool, args, script_text, env)
        self.job(shape, ctx)
        if shape.wrap:
            self.analysis(
                analyze_shell(shape.wrap, variables=self.vars, cwd=self.cwd), {}, "wrap", shape.wrap
            )
        if script_text:
            self.analysis(
                analyze_shell(script_text, variables=self.vars, cwd=self.cwd, source="script"),
                {},
                "script",
                script_text,
            )
        for ref in shape.jobref:
            self.job_ref("modify_job", ref, ctx)

    def job(self, shape: JobShape, ctx: dict[str, Any]) -> None:
        attrs = _job_attrs(shape, self)
        if shape.info_only:
            return
        parts = self.facts.partitions
        chosen = [parts[p] for p in attrs["partitions"] if p in parts]
        extras = {
            "known_partitions": sorted(parts) or ["(unknown)"],
            "accounts": list(self.user.accounts) or ["(unknown)"],
            "partition_limit": ", ".join(
                f"{p.name}: {p.max_time_s} s" for p in chosen if p.max_time_s
            ),
        }
        for path in shape.writes:
            self.path("write_path", path, ctx)
        for path in shape.reads:
            self.path("read_path", path, ctx)
        self.add("submit_job", "Job", attrs, ctx, label=f"{shape.tool} job", extras=extras)

    def read_file(self, raw: str) -> str | None:
        if not self.env.read_files:
            return None
        from tenantry.policy.unwrap import _read_small

        path = raw if raw.startswith("/") else posixpath.join(self.cwd, raw)
        return _read_small(path)


def _job_attrs(shape: JobShape, b: _Builder) -> dict[str, Any]:
    facts = b.facts
    parts = facts.partitions
    names = shape.partitions or [p.name for p in parts.values() if p.default][:1]
    unknown = [p for p in shape.partitions if parts and p not in parts]
    chosen = [parts[p] for p in names if p in parts]
    time_s = shape.time_s
    if time_s < 0 and chosen:
        time_s = min((p.default_time_s or p.max_time_s or -1) for p in chosen)
    limits = [p.max_time_s for p in chosen if p.max_time_s]
    over = bool(limits) and (shape.unlimited_time or (time_s > 0 and time_s > max(limits)))
    accounts = b.user.accounts
    member = not shape.account or not accounts or shape.account in accounts
    qos_lists = [set(p.qos) for p in chosen if p.qos]
    qos_bad = bool(shape.qos) and bool(qos_lists) and not any(shape.qos in q for q in qos_lists)
    return {
        "id": "",
        "owner": "self",
        "tool": shape.tool,
        "partitions": names,
        "account": shape.account,
        "qos": shape.qos,
        "reservation": shape.reservation,
        "nodes": shape.nodes,
        "ntasks": shape.ntasks,
        "cpus": shape.cpus,
        "gpus": shape.gpus,
        "mem_mb": shape.mem_mb,
        "time_s": time_s,
        "unlimited_time": shape.unlimited_time,
        "array_size": shape.array_size,
        "exclusive": shape.exclusive,
        "nice_negative": shape.nice_negative,
        "info_only": shape.info_only,
        "options": sorted(shape.options),
        "unknown_options": sorted(set(shape.unknown)),
        "privileged_options": sorted(set(shape.privileged)),
        "bad_values": sorted(set(shape.bad_values)),
        "env": sorted(shape.env_names),
        "unknown_partitions": unknown,
        "over_partition_time": over,
        "account_member": member,
        "qos_admin": shape.qos in facts.admin_qos,
        "qos_not_allowed": qos_bad,
    }


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


def _tags(prog: str, args: list[str], eff: Effective, b: _Builder) -> set[str]:
    tags: set[str] = set()
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
    elif prog in ("pkill", "killall", "pgrep-kill", "skill", "slay"):
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
                if d and re.fullmatch(r'"?\$\{?\w+\}?"?/?\*?', a):
                    tags.add("rm-root")
                    continue
                info = classify(a, b.pctx)
                p = info.path.rstrip("/") or "/"
                if p.endswith("/*"):
                    p = p[:-2] or "/"
                if p in _TOP_LEVEL or p == b.user.home.rstrip("/") or p == b.facts.homes_root:
                    tags.add("rm-root")
    elif prog == "crontab":
        if (
            not args
            or any(a not in ("-l", "-u") for a in args if a.startswith("-"))
            or any(not a.startswith("-") for a in args)
        ) and args != ["-l"]:
            tags.add("persistence")
    elif prog in ("at", "batch", "systemd-run") or (prog == "loginctl" and "enable-linger" in args):
        tags.add("persistence")
    elif prog == "chmod":
        mode = next((a for a in args if not a.startswith("-") or re.match(r"^-[rwxXst]", a)), "")
        if re.search(r"[ugoa]*[+=][rwxXt]*s", mode) or re.fullmatch(r"[2467]\d{3}", mode):
            tags.add("setuid")
    elif prog == "systemctl":
        sub = next((a for a in args if not a.startswith("-")), "")
        if sub in _SYSTEMCTL_READ:
            tags.add("read-only")
    return tags


def build(principal: Principal, action: str, params: dict[str, Any], env: Env) -> Built:
    """The requests that describe ``action`` with ``params`` (raises UsageError on bad input)."""
    if action not in ACTIONS:
        raise UsageError(
            f"unknown policy action {action!r}",
            hint="known actions: " + ", ".join(sorted(ACTIONS)),
        )
    cwd = str(params.get("cwd") or "")
    b = _Builder(principal, env, cwd)
    if action == "run_command":
        spec_env = ambient_env({str(k): str(v) for k, v in (params.get("env") or {}).items()})
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
        _lease_shape(b, params)
    elif action == "submit_job":
        _submit(b, params)
    elif action in ("cancel_job", "modify_job", "read_job_output"):
        ids = params.get("ids") or [params.get("id")]
        for job_id in ids:
            if job_id in (None, ""):
                raise UsageError(f"{action} needs a job 'id'")
            b.job_ref(action, str(job_id), b.ctx())
    elif action in ("read_path", "write_path"):
        paths = params.get("paths") or [params.get("path")]
        for p in paths:
            if not isinstance(p, str) or not p:
                raise UsageError(f"{action} needs a 'path'")
            b.path(action, p, b.ctx())
    else:
        name = str(params.get("name") or params.get("op") or params.get("query") or action)
        b.target(action, name[:200], b.ctx())
    return b.out


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


def _submit(b: _Builder, params: dict[str, Any]) -> None:
    env = {str(k): str(v) for k, v in (params.get("env") or {}).items()}
    script_text = str(params.get("script_text") or "")
    argv = params.get("argv")
    if isinstance(argv, list) and argv:
        args = [str(a) for a in argv]
        tool = posixpath.basename(args[0]) if args[0].rsplit("/", 1)[-1] in (
            "sbatch", "srun", "salloc"
        ) else "sbatch"  # fmt: skip
        if posixpath.basename(args[0]) == tool:
            args = args[1:]
    else:
        args = _jobspec_argv(params)
        tool = "sbatch"
    shape = JobShape.build(tool, args, script_text, env)
    if tool == "sbatch" and not script_text and shape.positional and not shape.wrap:
        script_text = b.read_file(shape.positional[0]) or ""
        if script_text:
            shape = JobShape.build(tool, args, script_text, env)
    ctx = b.ctx()
    b.job(shape, ctx)
    if shape.wrap:
        b.analysis(analyze_shell(shape.wrap, variables=b.vars, cwd=b.cwd), {}, "wrap", shape.wrap)
    if script_text:
        a = analyze_shell(script_text, variables=b.vars, cwd=b.cwd, source="script")
        b.analysis(a, {}, "script", script_text)
    for ref in shape.jobref:
        b.job_ref("modify_job", ref, ctx)


def _lease_shape(b: _Builder, params: dict[str, Any]) -> None:
    """A command that may run on a lease asks for an allocation: judge its shape too."""
    res = params.get("resources")
    if not isinstance(res, dict) or str(params.get("where") or "auto") == "local":
        return
    asks = (
        int(res.get("gpus") or 0) > 0
        or int(res.get("cpus") or 1) > 1
        or any(res.get(k) for k in ("time_s", "partition", "account", "mem_mb"))
    )
    if not asks:
        return
    shape = JobShape.build("salloc", _jobspec_argv({"resources": res}))
    b.job(shape, b.ctx())


def _jobspec_argv(params: dict[str, Any]) -> list[str]:
    """sbatch options equivalent to a ``jobs.submit`` JobSpec dict."""
    out: list[str] = []
    res = params.get("resources") or {}
    if res.get("cpus"):
        out.append(f"--cpus-per-task={int(res['cpus'])}")
    if res.get("mem_mb"):
        out.append(f"--mem={int(res['mem_mb'])}M")
    if res.get("gpus"):
        # the Slurm backend asks for resources.gpus per node (--gres), as sbatch would
        out.append(f"--gres=gpu:{int(res['gpus'])}")
    if res.get("time_s") is not None:
        t = int(res["time_s"])
        out.append("--time=0" if t <= 0 else f"--time={(t + 59) // 60}")
    if res.get("partition"):
        out.append(f"--partition={res['partition']}")
    if res.get("account"):
        out.append(f"--account={res['account']}")
    if params.get("array"):
        out.append(f"--array={params['array']}")
    if params.get("output"):
        out.append(f"--output={params['output']}")
    if params.get("error"):
        out.append(f"--error={params['error']}")
    if params.get("name"):
        out.append(f"--job-name={params['name']}")
    out.extend(str(x) for x in params.get("extra") or ())
    script = str(params.get("script") or "")
    if script:
        out.append(script)
    out.extend(str(a) for a in params.get("args") or ())
    return out
