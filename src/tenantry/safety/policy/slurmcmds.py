"""Slurm commands and job requests: ownership, scancel/scontrol targets, job shapes.

Functions here take the request ``Builder`` of :mod:`tenantry.safety.policy.normalize`
and add ``cancel_job``/``modify_job``/``admin``/``query_jobs``/``submit_job``
requests for what a Slurm command or a submission would do.
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Any

from tenantry.jobs.request import api_argv
from tenantry.safety.policy.observed import look
from tenantry.safety.policy.slurmopts import JobShape
from tenantry.safety.policy.unwrap import Analysis, Effective, analyze_shell

if TYPE_CHECKING:
    from tenantry.safety.policy.normalize import Builder

_SCONTROL_JOB = frozenset({"hold", "uhold", "release", "requeue", "requeuehold", "suspend",
                           "resume", "top", "notify", "update"})  # fmt: skip
_SCONTROL_READ = frozenset({"show", "listpids", "ping", "version", "help", "pidinfo",
                            "listjobs", "liststeps", "getaddrs"})  # fmt: skip


def owner(b: Builder, job_id: str) -> tuple[str, str]:
    """The ownership class of ``job_id`` for this principal, and a description."""
    found = look(b.env.owner_of, job_id) if b.env.owner_of else None
    if found is None:
        found = b.facts.job_owner(job_id)
    if found is None:
        return "unknown", "a job Tenantry does not know"
    user, principal = found
    if user != b.p.user:
        return "other", f"user {user}"
    if principal == b.p.key:
        return "self", "this session"
    if not principal or principal.split("/")[1:2] == ["human"]:
        return "user", f"user {user}'s own job"
    return "sibling", f"another agent session ({principal})"


def job_ref(
    b: Builder, action: str, job_id: str, ctx: dict[str, Any], dynamic: bool = False
) -> None:
    if dynamic:
        cls, text = "unknown", "computed at run time"
    else:
        cls, text = owner(b, job_id)
    attrs = job_attrs(JobShape(), b)
    attrs.update({"id": job_id, "owner": cls})
    b.add(
        action,
        "Job",
        attrs,
        ctx,
        label=f"job {job_id}",
        extras={"owner_text": text, "what": f"job {job_id}"},
    )


def scancel(b: Builder, args: list[str], dyn: list[bool], ctx: dict[str, Any]) -> None:
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
                scope = "other" if val != b.p.user else (scope or "user")
            elif name == "--me" or (name in valued and name not in ("-s", "--signal")):
                scope = scope or "user"
        else:
            ids.extend((part, d) for part in a.split(",") if part)
        i += 1
    for job_id, d in ids:
        job_ref(b, "cancel_job", job_id, ctx, dynamic=d)
    if scope and not ids:
        attrs = job_attrs(JobShape(), b)
        label = "every job of the user" if scope == "user" else "another user's jobs"
        owner = "other" if scope == "other" else "user"
        attrs.update({"id": label, "owner": owner})
        text = "scancel by filter or user" if scope == "user" else "user filter"
        b.add(
            "cancel_job",
            "Job",
            attrs,
            ctx,
            label=label,
            extras={"owner_text": text, "what": label},
        )


def query(b: Builder, prog: str, args: list[str], ctx: dict[str, Any]) -> None:
    """squeue/sacct/sstat: a query about other users' jobs is named ``others: ...``."""
    users: list[str] = []
    jobs: list[str] = []
    all_users = False
    for i, a in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if a in ("-j", "--jobs") and nxt:
            jobs.extend(nxt.split(","))
        elif a.startswith("--jobs="):
            jobs.extend(a.split("=", 1)[1].split(","))
        elif a.startswith("-j") and len(a) > 2 and not a.startswith("--"):
            jobs.extend(a[2:].split(","))
        elif a in ("-u", "--user", "--users") and nxt:
            users.extend(nxt.split(","))
        elif a.startswith(("--user=", "--users=")):
            users.extend(a.split("=", 1)[1].split(","))
        elif a.startswith("-u") and len(a) > 2 and not a.startswith("--"):
            users.extend(a[2:].split(","))
        elif prog == "sacct" and a in ("-a", "--allusers"):
            all_users = True
    foreign = [u for u in users if u and u not in (b.p.user, str(b.p.uid))]
    # another user's job by its id (``sacct -j``, ``sstat -j``, ``squeue -j``), steps
    # (``.batch``) and array tasks (``_3``) included
    theirs = [j for j in jobs if j and owner(b, j)[0] == "other"]
    if all_users or foreign or theirs:
        who = "all users" if all_users else ", ".join(foreign) or f"job {theirs[0]}"
        b.target("query_jobs", f"others: {prog} of {who}", ctx)
    else:
        b.target("query_jobs", prog, ctx)


def scontrol(b: Builder, args: list[str], ctx: dict[str, Any]) -> None:
    rest = [a for a in args if not a.startswith("-")]
    if not rest:
        b.target("query_jobs", "scontrol", ctx)
        return
    verb = rest[0].lower()
    if verb in _SCONTROL_READ:
        what = rest[1].lower() if len(rest) > 1 else ""
        others = [
            j
            for j in rest[2:]
            if what in ("job", "jobs", "jobid", "step", "steps") and owner(b, j)[0] == "other"
        ]
        name = f"others: job {others[0]}" if others else f"scontrol {verb}"
        b.target("query_jobs", name, ctx)
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
            b.target("admin", f"scontrol {verb} {' '.join(targets)[:60]}", ctx)
        for job_id in ids:
            job_ref(b, "modify_job", job_id, ctx)
        if verb == "update" and ids and not admin:
            changed = update_options(targets)
            if changed:
                # the job as it would be after the change: the same caps as a submission
                job(b, JobShape.build("sbatch", changed, "", {}), ctx)
        if not ids and not admin:
            b.target("admin", f"scontrol {verb}", ctx)
    elif verb == "write" and len(rest) > 2 and rest[1].lower() == "batch_script":
        # a job's script into a file (``-``: standard output): a read of the job
        job_ref(b, "read_job_output", rest[2], ctx)
        out = rest[3] if len(rest) > 3 else f"slurm-{rest[2]}.sh"
        if out != "-":
            b.path("write_path", out, ctx)
    else:
        b.target("admin", f"scontrol {verb}", ctx)


# ``scontrol update job`` fields and the sbatch options that ask for the same thing
_UPDATE_FIELDS = {"timelimit": "time", "timemin": "time-min", "qos": "qos",
                  "partition": "partition", "account": "account", "numnodes": "nodes",
                  "reqnodes": "nodes", "numtasks": "ntasks", "reqprocs": "ntasks",
                  "numcpus": "ntasks", "mincpusnode": "mincpus", "cpuspertask": "cpus-per-task",
                  "gres": "gres", "nice": "nice",
                  "priority": "priority", "features": "constraint", "reservation":
                  "reservation", "mailuser": "mail-user", "mailtype": "mail-type",
                  "name": "job-name", "wckey": "wckey",
                  "comment": "comment", "workdir": "chdir", "stdout": "output",
                  "stderr": "error", "stdin": "input", "licenses": "licenses",
                  "minmemorynode": "mem", "minmemorycpu": "mem-per-cpu",
                  "dependency": "dependency", "starttime": "begin",
                  "deadline": "deadline", "reqnodelist": "nodelist",
                  "excnodelist": "exclude", "contiguous": "contiguous"}  # fmt: skip


def update_options(fields: list[str]) -> list[str]:
    """``scontrol update jobid=N TimeLimit=.. QOS=..`` as the sbatch options of the
    job after the change (``--time=..``, ``--qos=..``); fields sbatch has no word for are
    left to Slurm. ``TresPerNode=gres/gpu:4`` is ``--gres=gpu:4``, ``TresPerJob=gres/gpu:8``
    ``--gpus=8``."""
    out: list[str] = []
    for f in fields:
        key, eq, value = f.partition("=")
        k = key.lower().rstrip("+-")
        if not eq or k in ("jobid", "job", "jobname"):  # which jobs, not what changes
            continue
        if k == "trespernode":
            out.append("--gres=" + value.removeprefix("gres/"))
        elif k == "tresperjob" and value.startswith("gres/gpu"):
            out.append("--gpus=" + value.removeprefix("gres/gpu").lstrip(":="))
        elif k == "contiguous":
            if value.lower() in ("1", "yes", "true"):
                out.append("--contiguous")
        elif k in _UPDATE_FIELDS:
            out.append(f"--{_UPDATE_FIELDS[k]}={value}")
    return out


def sattach(b: Builder, args: list[str], ctx: dict[str, Any]) -> None:
    """``sattach JOB.STEP``: the step's input and output, an act on the job."""
    for a in args:
        if not a.startswith("-"):
            job_ref(b, "modify_job", a, ctx)
            return


def slurm_submit(
    b: Builder, tool: str, args: list[str], env: dict[str, str], ctx: dict[str, Any], eff: Effective
) -> None:
    script_text = ""
    shape = JobShape.build(tool, args, "", env)
    if tool == "sbatch" and not shape.wrap:
        script_text = _script_text(b, shape, eff)
        if script_text:
            shape = JobShape.build(tool, args, script_text, env)
    job(b, shape, ctx)
    if shape.wrap:
        b.analysis(analyze_shell(shape.wrap, variables=b.vars, cwd=b.cwd), {}, "wrap", shape.wrap)
    if script_text:
        b.analysis(
            analyze_shell(script_text, variables=b.vars, cwd=b.cwd, source="script"),
            {},
            "script",
            script_text,
        )
    for ref in shape.jobref:
        job_ref(b, "modify_job", ref, ctx)


def _script_text(b: Builder, shape: JobShape, eff: Effective) -> str:
    """The batch script ``sbatch`` will read: the file it names (as this same line
    writes it, when it does), else its input (``sbatch <<EOF``)."""
    if shape.positional:
        name = shape.positional[0]
        path = posixpath.normpath(name if name.startswith("/") else posixpath.join(b.cwd, name))
        if path in b.written:
            text = b.written[path]
            if text is None:  # ``curl -o job.sh URL && sbatch job.sh``
                unread = Analysis()
                unread.add_uncertain("name", f"{name} is written by this same line, then submitted")
                b.analysis(unread, {}, "script", name)
            return text or ""
        return b.read_file(name) or ""
    if eff.stdin_text is not None:
        return eff.stdin_text
    return ""


def job(b: Builder, shape: JobShape, ctx: dict[str, Any]) -> None:
    attrs = job_attrs(shape, b)
    if shape.info_only:
        return
    parts = b.facts.partitions
    chosen = [parts[p] for p in attrs["partitions"] if p in parts]
    extras = {
        "known_partitions": sorted(parts) or ["(unknown)"],
        "accounts": list(b.user.accounts) or ["(unknown)"],
        "partition_limit": ", ".join(f"{p.name}: {p.max_time_s} s" for p in chosen if p.max_time_s),
        "user_qos": list(b.user.qos) or ["(any)"],
        "qos_limit": b.facts.qos_wall.get(shape.qos.lower(), 0),
    }
    for path in shape.writes:
        b.path("write_path", in_chdir(b, shape, path), ctx)
    for path in shape.reads:
        b.path("read_path", in_chdir(b, shape, path), ctx)
    b.add("submit_job", "Job", attrs, ctx, label=f"{shape.tool} job", extras=extras)


def in_chdir(b: Builder, shape: JobShape, raw: str) -> str:
    """A job's relative path as Slurm resolves it: from ``--chdir`` when given."""
    if not shape.chdir or raw.startswith(("/", "~")):
        return raw
    base = shape.chdir if shape.chdir.startswith("/") else posixpath.join(b.cwd, shape.chdir)
    return posixpath.join(base, raw)


def job_attrs(shape: JobShape, b: Builder) -> dict[str, Any]:
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
    # Slurm stores account and QoS names in lower case and matches them so
    member = (
        not shape.account or not accounts or shape.account.lower() in {a.lower() for a in accounts}
    )
    qos_lists = [{q.lower() for q in p.qos} for p in chosen if p.qos]
    qos = shape.qos.lower()
    qos_bad = bool(qos) and bool(qos_lists) and not any(qos in q for q in qos_lists)
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
        "qos_admin": shape.qos.lower() in {q.lower() for q in facts.admin_qos},
        "qos_not_allowed": qos_bad,
        "qos_not_associated": bool(qos) and bool(b.user.qos) and qos not in b.user.qos,
        "over_qos_time": qos in facts.qos_wall
        and (shape.unlimited_time or time_s > facts.qos_wall[qos]),
        "restricted_options": restricted_options(shape),
        "off_list_options": off_list(shape, facts.job_options),
        "mail_foreign": mail_foreign(shape, b),
        "unsafe_text": unsafe_text(shape),
    }


# options an agent job may not use without the facility allowing them in its own file
RESTRICTED = ("reservation", "container", "container-id", "x11", "get-user-env", "bb", "bbf",
              "uid", "gid")  # fmt: skip
_NAME_OK = re.compile(r"^[A-Za-z0-9._+%:@=,-]{1,128}$")
_TEXT_OK = re.compile(r"^[ -~]{0,256}$")  # printable ASCII, no newline or control characters


# the resource and housekeeping options agent jobs may use; the rest is denied
# with a message (a facility adds names with the facts key "job_options")
ALLOWED_OPTIONS = frozenset({
    "account", "array", "begin", "chdir", "comment", "constraint", "core-spec", "cores-per-socket",
    "cpu-bind", "cpu-freq", "cpus-per-gpu", "cpus-per-task", "deadline", "dependency",
    "distribution", "error", "exact", "exclude", "exclusive", "export", "extra-node-info",
    "gpu-bind",
    "gpus", "gpus-per-node", "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "help",
    "hint", "hold", "ignore-pbs", "immediate", "input", "job-name", "kill-on-bad-exit",
    "kill-on-invalid-dep", "label", "licenses", "mail-type", "mail-user", "mem", "mem-bind",
    "mem-per-cpu", "mem-per-gpu", "mincpus", "mpi", "multi-prog", "nice", "no-kill", "no-requeue",
    "nodelist", "nodes", "ntasks", "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-node",
    "ntasks-per-socket", "open-mode", "output", "overcommit", "overlap", "oversubscribe",
    "parsable", "partition", "prefer", "propagate", "pty", "qos", "quiet", "requeue", "signal",
    "sockets-per-node", "spread-job", "switches", "test-only", "thread-spec", "threads-per-core",
    "time", "time-min", "tmp", "tres-per-task", "unbuffered", "usage", "verbose", "version",
    "wait", "wait-all-nodes", "wckey", "wrap", "jobid", "acctg-freq", "contiguous", "network",
    "use-min-nodes", "threads", "relative", "disable-status", "quit-on-interrupt", "bell",
    "no-bell", "no-shell", "cluster-constraint", "segment", "tres-bind", "gpu-freq",
    "mcs-label", "oom-kill-step", "batch",
})  # fmt: skip


def off_list(shape: JobShape, extra: frozenset[str]) -> list[str]:
    """Options outside the allow-list that no more specific rule already judges."""
    judged = {*RESTRICTED, "uid", "gid", "priority", "reboot", "clusters"}
    return sorted(
        f"--{o}"
        for o in shape.options
        if o not in ALLOWED_OPTIONS and o not in extra and o not in judged
        and f"--{o}" not in shape.privileged
    )  # fmt: skip


def restricted_options(shape: JobShape) -> list[str]:
    found = [f"--{o}" for o in RESTRICTED if o in shape.values]
    if shape.burst_buffer:
        found.append("#BB/#DW")
    return sorted(found)


def mail_foreign(shape: JobShape, b: Builder) -> bool:
    """Would Slurm mail somebody other than the job's user?"""
    to = shape.values.get("mail-user", "").strip()
    if not to:
        return False
    user = b.user.name
    return not all(a.strip() in (user, b.user.mail) or a.strip().startswith(user + "@")
                   for a in to.split(",") if a.strip()) or "\n" in to  # fmt: skip


def unsafe_text(shape: JobShape) -> list[str]:
    bad: list[str] = []
    for opt in ("job-name", "wckey"):
        v = shape.values.get(opt)
        if v is not None and not _NAME_OK.match(v):
            bad.append(f"--{opt}")
    for opt in ("comment", "extra", "mail-type"):
        v = shape.values.get(opt)
        if v is not None and not _TEXT_OK.match(v):
            bad.append(f"--{opt}")
    return bad


def submit(b: Builder, params: dict[str, Any]) -> None:
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
        args = api_argv(params)
        tool = "sbatch"
    shape = JobShape.build(tool, args, script_text, env)
    if tool == "sbatch" and not script_text and shape.positional and not shape.wrap:
        script_text = b.read_file(shape.positional[0]) or ""
        if script_text:
            shape = JobShape.build(tool, args, script_text, env)
    ctx = b.ctx()
    job(b, shape, ctx)
    if shape.wrap:
        b.analysis(analyze_shell(shape.wrap, variables=b.vars, cwd=b.cwd), {}, "wrap", shape.wrap)
    if script_text:
        a = analyze_shell(script_text, variables=b.vars, cwd=b.cwd, source="script")
        b.analysis(a, {}, "script", script_text)
    for ref in shape.jobref:
        job_ref(b, "modify_job", ref, ctx)


def lease_shape(b: Builder, params: dict[str, Any]) -> None:
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
    shape = JobShape.build("salloc", api_argv({"resources": res}))
    job(b, shape, b.ctx())
