"""Which shell commands Tenantry redirects, and which it treats as dangerous.

Pure functions over a command string, standard library only (the hook imports
this on every tool call). A command is split into simple commands at ``|``,
``&&``, ``||``, ``;`` and newlines; each is looked at without its leading
variable assignments and wrappers (``sudo``, ``env``, ``time``, ``watch``...).

- *Redirects* send an agent from a raw scheduler or file-system walk to the
  Tenantry equivalent (``squeue`` -> ``tenantry jobs``): the answer is the same
  and the shared controller or parallel file system is spared.
- *Dangerous* commands are the short built-in list the hook fails closed on
  when the daemon (and so the facility policy) cannot be reached.
"""

from __future__ import annotations

import re
import shlex

_SPLIT = re.compile(r"\|\||&&|[|;&\n]")
_WRAPPERS = {"sudo", "env", "time", "nice", "nohup", "command", "exec", "watch", "timeout", "xargs"}
_LOOP = re.compile(r"\b(for|while|until)\b.*\bdo\b", re.S)


class Finding:
    """A matched rule: a stable id (``redirect.squeue``) and a message for the agent.

    (A plain class: ``dataclasses`` costs the hook milliseconds on every call.)
    """

    __slots__ = ("message", "rule")

    def __init__(self, rule: str, message: str) -> None:
        self.rule = rule
        self.message = message

    def __repr__(self) -> str:
        return f"Finding({self.rule!r}, {self.message!r})"


_SHELLS = {"sh", "bash", "zsh", "dash", "ksh"}
_META = set(";|&$`<>()\n")


def plain_argv(command: str) -> list[str]:
    """The argv of a single plain command (no chaining, substitution or redirection), or []."""
    if _META & set(command):
        return []
    try:
        return shlex.split(command)
    except ValueError:
        return []


def only_tenantry(command: str) -> bool:
    """A single plain ``tenantry ...`` call: no chaining, substitution or redirection."""
    argv = plain_argv(command)
    return bool(argv) and _base(argv[0]) == "tenantry"


def simple_commands(command: str, depth: int = 0) -> list[list[str]]:
    """Each simple command as argv, wrappers and assignments stripped.

    ``bash -c '...'`` (and ``sh``, ``zsh``, ``eval``) is looked into, two levels deep.
    """
    out: list[list[str]] = []
    for part in _SPLIT.split(command):
        try:
            argv = shlex.split(part, comments=True)
        except ValueError:
            argv = part.split()
        while argv and ("=" in argv[0] and not argv[0].startswith("-")):
            argv = argv[1:]
        while argv and _base(argv[0]) in _WRAPPERS:
            argv = _skip_wrapper(argv)
        if not argv:
            continue
        out.append(argv)
        if depth < 2:
            inner = _inner_script(argv)
            if inner is not None:
                out.extend(simple_commands(inner, depth + 1))
    return out


def _inner_script(argv: list[str]) -> str | None:
    name = _base(argv[0])
    if name == "eval":
        return " ".join(argv[1:])
    if name in _SHELLS:
        for i, a in enumerate(argv[1:], start=1):
            if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
                return argv[i + 1] if i + 1 < len(argv) else None
    return None


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _skip_wrapper(argv: list[str]) -> list[str]:
    name = _base(argv[0])
    rest = argv[1:]
    if name == "timeout" and rest and not rest[0].startswith("-"):
        rest = rest[1:]  # the duration
    while rest and (rest[0].startswith("-") or (name == "env" and "=" in rest[0])):
        if (name in {"watch", "nice", "timeout"} and rest[0] in {"-n", "-d", "-s", "-k"}) or (
            name == "sudo" and rest[0] in {"-u", "-g", "-C", "-D"}
        ):
            rest = rest[2:]
            continue
        rest = rest[1:]
    return rest


_SCHEDULER = {
    "squeue": "`tenantry jobs` or `tenantry status ID` (MCP: list_jobs, job_status), "
    "answered from the shared status cache",
    "sacct": "`tenantry jobs` (finished jobs too) or `tenantry status ID`"
    " (MCP: list_jobs, job_status)",
    "sbatch": "`tenantry submit SCRIPT` (MCP: submit_job): deduplicated, attributed, checked",
    "scancel": "`tenantry cancel ID` (MCP: cancel_job)",
    "srun": "`tenantry run -- CMD` (MCP: run_command), on a warm lease instead of a new job",
    "salloc": "`tenantry run -- CMD` (MCP: run_command); leases are managed for you",
}


def _recursive_search(argv: list[str]) -> str | None:
    name = _base(argv[0])
    args = argv[1:]
    if name == "find":
        if "-maxdepth" in args:
            i = args.index("-maxdepth")
            if i + 1 < len(args) and args[i + 1] in {"0", "1"}:
                return None
        return "`tenantry find PATTERN` (answered from the workspace index)"
    if name in {"grep", "egrep", "fgrep"}:
        flags = [a for a in args if a.startswith("-") and not a.startswith("--")]
        if any(set(f[1:]) & {"r", "R"} for f in flags) or any(
            a in {"--recursive", "--dereference-recursive"} for a in args
        ):
            return "`tenantry grep REGEX` (answered from the workspace index)"
        return None
    if name in {"rg", "ag", "ack", "fd", "fdfind"}:
        return "`tenantry grep REGEX` / `tenantry find PATTERN` (answered from the index)"
    if name == "ls" and any(
        a == "--recursive" or (a.startswith("-") and not a.startswith("--") and "R" in a)
        for a in args
    ):
        return "`tenantry find PATTERN`"
    return None


_GIT_VALUED = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}


def _git_subcommand(args: list[str]) -> str | None:
    """The subcommand of ``git ARGS`` (after git's own options)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in _GIT_VALUED:
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return a
    return None


def redirect(command: str) -> Finding | None:
    """The Tenantry equivalent of a raw scheduler or recursive search command."""
    for argv in simple_commands(command):
        name = _base(argv[0])
        if name == "tenantry":
            continue
        if name == "git" and _git_subcommand(argv[1:]) == "status":
            return Finding(
                "redirect.git-status",
                _msg(
                    "git status",
                    "`tenantry git status ARGS` (same output; git asks the workspace index"
                    " what changed instead of statting every file)",
                ),
            )
        if name == "scontrol" and len(argv) > 1 and argv[1] in {"show", "-d"}:
            return Finding(
                "redirect.scontrol",
                _msg("scontrol show", "`tenantry status ID` or `tenantry jobs`"),
            )
        if name in _SCHEDULER:
            return Finding(f"redirect.{name}", _msg(name, _SCHEDULER[name]))
        hint = _recursive_search(argv)
        if hint:
            return Finding(f"redirect.{name}", _msg(f"recursive {name}", hint))
    return None


ACTIVE = ["PENDING", "RUNNING", "SUSPENDED"]  # what squeue lists


def answerable(command: str, user: str) -> list[str] | None:
    """The job states to list when the hook may answer ``command`` itself, else None.

    Only the forms whose answer is the caller's own jobs: ``squeue --me`` or
    ``squeue -u USER`` (its active jobs) and a plain ``sacct`` (all its jobs,
    ``[]``); a plain ``squeue`` lists every user's and is redirected instead.
    """
    argv = plain_argv(command)
    if not argv:
        return None
    name, args = _base(argv[0]), argv[1:]
    if name == "squeue" and args in (["--me"], ["-u", user], ["--user", user], [f"--user={user}"]):
        return ACTIVE
    if name == "sacct" and args in ([], ["-X"]):
        return []
    return None


def _msg(what: str, instead: str) -> str:
    return (
        f"Tenantry: {what} goes through Tenantry on this HPC system; instead use {instead}. "
        "(An operator can turn this redirection off with hook_redirect = false.)"
    )


_ARRAY_PART = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")


def _array_tasks(args: list[str]) -> int:
    """How many tasks ``sbatch ARGS``'s ``--array``/``-a`` asks for (0 without one): its
    indexes, ranges and steps (``0-999``, ``1,5,10-20:2``, ``0-99%4``), in any spelling
    (``-a 0-9``, ``-a0-9``, ``--array 0-9``, ``--array=0-9``)."""
    spec = ""
    for i, a in enumerate(args):
        if a in ("-a", "--array") and i + 1 < len(args):
            spec = args[i + 1]
        elif a.startswith("--array="):
            spec = a[len("--array=") :]
        elif a.startswith("-a") and not a.startswith("--") and a[2:3].isdigit():
            spec = a[2:]
    tasks = 0
    for part in spec.split("%", 1)[0].split(","):
        m = _ARRAY_PART.fullmatch(part.strip())
        if m is None:
            continue
        lo, hi, step = int(m.group(1)), int(m.group(2) or m.group(1)), int(m.group(3) or 1)
        tasks += (hi - lo) // max(step, 1) + 1 if hi >= lo else 0
    return tasks


def dangerous(command: str) -> Finding | None:
    """A command on the built-in fail-closed list (used when policy is unreachable)."""
    if "sbatch" in command and (_LOOP.search(command) or re.search(r"xargs\b.*\bsbatch", command)):
        return Finding("danger.sbatch-flood", "submits batch jobs in a loop")
    for argv in simple_commands(command):
        name = _base(argv[0])
        args = argv[1:]
        short = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
        if name == "scancel":
            return Finding("danger.scancel", "cancels batch jobs")
        if name == "rm" and (set(short) & {"r", "R"} or "--recursive" in args):
            return Finding("danger.rm-recursive", "deletes a directory tree")
        if name == "sbatch" and _array_tasks(args) > 100:
            return Finding("danger.sbatch-array", "submits a job array of more than 100 tasks")
        if name in {"mkfs", "shred", "wipefs"} or name.startswith("mkfs."):
            return Finding(f"danger.{name}", "destroys data on a device")
        if name == "dd" and any(a.startswith("of=/dev/") for a in args):
            return Finding("danger.dd-device", "writes to a device")
        if name in {"chmod", "chown"} and ("R" in short or "--recursive" in args):
            return Finding(f"danger.{name}-recursive", "changes permissions of a tree")
        if name in {"killall", "pkill"} or (name == "kill" and "-1" in args):
            return Finding(f"danger.{name}", "kills processes by name or all of them")
    if re.search(r":\(\)\s*\{", command):
        return Finding("danger.fork-bomb", "is a fork bomb")
    return None
