"""From a shell string or an argv list to every program that would really run.

Wrappers are peeled (``sudo``, ``env``, ``nice``, ``timeout``, ``nohup``,
``exec``, ``command``, ``xargs``, ``find -exec``, ``srun``, ``flock``, ...);
strings handed to a shell (``bash -c``, ``sh -c``, ``su -c``, ``eval``,
``ssh host CMD``, ``watch``, a here-string or ``echo ... |`` into a shell) are
parsed again; readable scripts given to ``bash``/``source`` are read and
parsed. The wrapper itself is kept too, so a policy sees both ``sudo`` and
what ``sudo`` would run. Names a script gives to programs (``ln -s``,
``cp``, ``alias``) follow the program.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tenantry.safety.policy import risky, shell
from tenantry.safety.policy.execopts import embedded, env_commands
from tenantry.safety.policy.observed import look
from tenantry.safety.policy.paths import skeleton
from tenantry.safety.policy.risky import GIT_COMMAND_KEYS
from tenantry.safety.policy.shell import SimpleCommand, Word

SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "busybox-sh", "rbash",
                    "fish", "tcsh", "csh", "yash"})  # fmt: skip
INTERPRETERS = frozenset({"python", "python2", "python3", "perl", "ruby", "node", "nodejs",
                          "php", "lua", "Rscript", "R", "julia", "awk", "gawk", "mawk", "tclsh",
                          "pwsh", "osascript", "deno", "bun", "pypy", "pypy3", "luajit",
                          "octave", "matlab"})  # fmt: skip
_VERSIONED = re.compile(r"(python|pypy|ruby|perl|lua|php|node)\d+(\.\d+)*")  # python3.11
_INLINE_FLAGS = frozenset({"-c", "-e", "-E", "--eval", "-r", "--command", "-x"})
SENSITIVE = re.compile(
    r"\b(sudo|su|doas|pkexec|scancel|scontrol|sacctmgr|munge|shadow|netrc|id_rsa|id_ed25519|"
    r"authorized_keys|b64decode|base64|rot13|fromCharCode|chr|exec|eval|system|popen|"
    r"subprocess|spawn\w*|execv\w*|child_process|pty|\.ssh|\.aws|kill -9 -1|"
    # deletions, moves and writes of trees, and the files that run in the human's shells
    r"rmtree|rm_rf|rm_r|rmSync|rmdirSync|rimraf|remove_dir_all|removedirs|unlink|rmdir|"
    r"os\.remove|os\.rename|shutil\.move|File::Path|FileUtils|os\.execute|"
    r"bashrc|bash_profile|bash_aliases|zshrc|zprofile|\.profile|\.gnupg|\.kube|"
    r"credentials|systemd|crontab)\b|\\x[0-9a-f]{2}|`",
    re.I,
)
MAX_SCRIPT_BYTES = 1 << 20
MAX_COMMANDS = 2000

# options of mpirun and mpiexec that take a value (what the wrapped command follows)
_MPI_VALUED = frozenset(
    {"-np", "-n", "-N", "-H", "-host", "--host", "-hostfile", "--hostfile", "-machinefile"}
    | {"-x", "--map-by", "--bind-to", "-ppn", "-wdir", "-c"}
)

_RLWRAP_VALUED = frozenset({"-a", "-b", "-C", "-D", "-f", "-g", "-H", "-l", "-M", "-O", "-p",
                            "-P", "-q", "-s", "-S", "-t", "-w", "-z"})  # fmt: skip

# wrapper -> (options that take a value, positional args before the command)
WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "coproc": (frozenset(), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "setsid": (frozenset(), 0),
    "ionice": (frozenset({"-c", "-n", "--class", "--classdata"}), 0),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset({"-c", "--cpu-list"}), 0),
    "numactl": (
        frozenset(
            {
                "-C",
                "-N",
                "-m",
                "-p",
                "-i",
                "-P",
                "--physcpubind",
                "--cpunodebind",
                "--membind",
                "--preferred",
                "--interleave",
            }
        ),
        0,
    ),
    "doas": (frozenset({"-u", "-C"}), 0),
    "sudo": (
        frozenset(
            {
                "-u",
                "-g",
                "-p",
                "-C",
                "-D",
                "-r",
                "-t",
                "-U",
                "-T",
                "-R",
                "-h",
                "--user",
                "--group",
                "--prompt",
                "--close-from",
                "--chdir",
                "--role",
                "--type",
                "--other-user",
                "--command-timeout",
                "--chroot",
                "--host",
            }
        ),
        0,
    ),
    "runuser": (frozenset({"-u", "-g", "-G", "--user", "--group"}), 0),
    "exec": (frozenset({"-a"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "busybox": (frozenset(), 0),
    "unbuffer": (frozenset(), 0),
    "caffeinate": (frozenset({"-t", "-w"}), 0),
    "strace": (
        frozenset({"-o", "-e", "-p", "-s", "-u", "-E", "-P", "-a", "-b", "-I", "-O", "-S", "-X"}),
        0,
    ),
    "ltrace": (frozenset({"-o", "-e", "-p", "-s", "-u", "-n", "-a", "-l", "-x"}), 0),
    "valgrind": (frozenset(), 0),
    "gdb": (frozenset({"-x", "-ex", "-p", "-cd"}), 0),
    "mpirun": (_MPI_VALUED | {"--rank-by", "--wdir", "--npernode", "-npernode"}, 0),
    "mpiexec": (_MPI_VALUED, 0),
    "xvfb-run": (frozenset({"-s", "-n", "-e", "-f", "-p"}), 0),
    "nsenter": (frozenset({"-t", "-S", "-G"}), 0),
    "unshare": (frozenset(), 0),
    "chroot": (frozenset(), 1),
    "firejail": (frozenset(), 0),
    "script": (frozenset({"-c", "--command"}), 0),
    "parallel": (frozenset({"-j", "--jobs", "-S", "--sshlogin"}), 0),
    "prlimit": (frozenset({"-p", "--pid", "-o", "--output"}), 0),
    "cpulimit": (frozenset({"-l", "--limit", "-p", "--pid", "-e", "--exe", "-c", "--cpu"}), 0),
    "rlwrap": (_RLWRAP_VALUED, 0),
    "dtach": (frozenset({"-n", "-N", "-A", "-c", "-e", "-r"}), 0),
    "daemonize": (frozenset({"-c", "-e", "-o", "-p", "-l", "-u", "-E"}), 0),
}
_MULTI_VALUE = {"-mca": 2, "--mca": 2, "-genv": 2, "-env": 2, "--env": 2}


@dataclass(slots=True)
class Effective:
    """One program that would run, with what led to it."""

    argv: list[str]
    dynamic: list[bool]
    env: dict[str, str] = field(default_factory=dict)
    via: list[str] = field(default_factory=list)
    redirects: list[tuple[str, Word]] = field(default_factory=list)
    source: str = "command"  # command | script | wrap | remote | job
    stdin_text: str | None = None
    stdin_env: bool = False  # its input carries the environment (``env | curl -d @- URL``)
    cwd: str = "/"  # where the command runs: relative program paths resolve from here

    @property
    def program(self) -> str:
        return program_name(self.argv[0], self.cwd) if self.argv else ""


@dataclass(slots=True)
class Analysis:
    commands: list[Effective] = field(default_factory=list)
    uncertain: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    assigned: set[str] = field(default_factory=set)
    computed: set[str] = field(default_factory=set)
    # static values given to shell variables (``export SBATCH_QOS=x``), for later commands
    values: dict[str, str] = field(default_factory=dict)
    # files this same command line writes: path -> text if known, else None
    written: dict[str, str | None] = field(default_factory=dict)

    def add_uncertain(self, kind: str, reason: str) -> None:
        if (kind, reason) not in self.uncertain:
            self.uncertain.append((kind, reason))


def program_name(word: str, cwd: str = "/") -> str:
    """The program a command word names: basename, look-alikes folded, symlinks followed.

    A relative path (``./lnk``) is resolved from the command's ``cwd``, not
    the daemon's; a regular file that is a byte-for-byte copy of a guarded
    client (``cp $(which scancel) ./x``) is named after the original.
    """
    name = skeleton(word)
    if "/" in name:
        path = name if name.startswith("/") else posixpath.join(cwd or "/", name)
        path, copied = look(_program_file, path)
        name = copied or posixpath.basename(path.rstrip("/")) or name
    return name


def _program_file(path: str) -> tuple[str, str | None]:
    """(``path`` with a symlink followed, the guarded program it is a copy of)."""
    try:
        if os.path.islink(path):
            path = os.path.realpath(path)
        return path, copy_of(path)
    except (OSError, ValueError):
        return path, None


# programs whose copies under another name are still judged as themselves
GUARDED = ("scancel", "scontrol", "sbatch", "srun", "salloc", "sacctmgr", "sudo", "su",
           "crontab", "kill", "pkill", "killall", "squeue", "sacct")  # fmt: skip
_GUARDED_DIRS = ("/usr/bin", "/usr/local/bin", "/bin", "/usr/sbin", "/opt/slurm/bin")
_guarded: dict[int, list[tuple[str, bytes]]] | None = None


def _guarded_table() -> dict[int, list[tuple[str, bytes]]]:
    global _guarded
    if _guarded is None:
        import hashlib
        import shutil

        table: dict[int, list[tuple[str, bytes]]] = {}
        for prog in GUARDED:
            found = shutil.which(prog, path=":".join(_GUARDED_DIRS))
            if not found:
                continue
            try:
                data = Path(found).read_bytes()
            except OSError:
                continue
            table.setdefault(len(data), []).append((prog, hashlib.sha256(data).digest()))
        _guarded = table
    return _guarded


def copy_of(path: str) -> str | None:
    """The guarded program ``path`` is a copy of, if it is one (same size, same bytes)."""
    if path.startswith(_GUARDED_DIRS):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    table = _guarded_table()
    if not os.path.isfile(path) or st.st_size not in table:
        return None
    import hashlib

    try:
        digest = hashlib.sha256(Path(path).read_bytes()).digest()
    except OSError:
        return None
    return next((prog for prog, d in table[st.st_size] if d == digest), None)


def analyze_shell(
    text: str,
    *,
    variables: dict[str, str] | None = None,
    source: str = "command",
    cwd: str = "/",
    read_scripts: bool = True,
) -> Analysis:
    out = Analysis()
    _Unwrapper(out, variables or {}, cwd, read_scripts).shell_text(text, [], source, 0)
    return out


def analyze_argv(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    variables: dict[str, str] | None = None,
    cwd: str = "/",
    read_scripts: bool = True,
) -> Analysis:
    """An argv list as ``commands.run`` receives it (no shell, but ``bash -c`` inside is)."""
    out = Analysis()
    words = [Word(a) for a in argv]
    cmd = SimpleCommand(words=words, assigns={k: Word(v) for k, v in (env or {}).items()})
    _Unwrapper(out, variables or {}, cwd, read_scripts).simple(cmd, [], "command", 0)
    return out


class _Unwrapper:
    def __init__(self, out: Analysis, variables: dict[str, str], cwd: str, read: bool) -> None:
        self.out = out
        self.vars = variables
        self.cwd = cwd
        self.read = read
        self.written = out.written
        # does a command's output (keyed by id) carry the environment, and does the
        # command being unwrapped read it on its input?
        self._env_out: dict[int, bool] = {}
        self._env_in = False

    def abspath(self, p: str) -> str:
        if p.startswith("~/") and "HOME" in self.vars:
            p = self.vars["HOME"] + p[1:]
        return posixpath.normpath(p if p.startswith("/") else posixpath.join(self.cwd, p))

    def note_writes(self, eff: Effective, prog: str, args: list[str]) -> None:
        for op, word in eff.redirects:
            if op in ("<", "<<<") or word.dynamic:
                continue
            text = None
            if prog in ("echo", "printf", "cat", "tee"):
                fake = SimpleCommand(words=[Word(a) for a in eff.argv])
                fake.stdin_text = eff.stdin_text
                text = _static_output(fake)
            key = self.abspath(word.text)
            self.written[key] = (self.written.get(key) or "") + text if text is not None else None
        targets: list[str] = []
        if prog == "tee":
            targets = [a for a in args if not a.startswith("-")]
        elif prog in ("cp", "mv", "install", "rsync", "scp") and args:
            targets = [args[-1]]
        elif prog in ("curl", "wget"):
            targets = risky.download_targets(prog, args)
        for t in targets:
            content = eff.stdin_text if prog == "tee" else None
            self.written[self.abspath(t)] = content

    def run_written(self, path: str, via: list[str], source: str, d: int) -> bool:
        """Judge a file written earlier in this same line, if it is one. True if handled."""
        key = self.abspath(path)
        if key not in self.written:
            return False
        text = self.written[key]
        if text is None:
            self.out.add_uncertain("name", f"{path} is written by this same command, then run")
        else:
            self.shell_text(text, via, source, d)
        return True

    def shell_text(self, text: str, via: list[str], source: str, depth: int) -> None:
        parsed = shell.parse(text, self.vars, depth)
        for kind, reason in parsed.uncertain:
            self.out.add_uncertain(kind, reason)
        self.out.assigned |= parsed.assigned
        self.out.computed |= parsed.computed
        self.out.values.update(parsed.values)
        for line in env_commands(parsed.command_vars):
            self.shell_text(line, [*via, "env-command"], source, depth + 1)
        for name, body in parsed.functions.items():
            self.out.aliases.setdefault(name, "")
            if _forks_itself(name, body, self.vars, depth):
                self.out.add_uncertain(
                    "recursion",
                    f"function {name} starts itself in a pipeline or in the background"
                    " (a fork bomb)",
                )
        for cmd in parsed.commands:
            self.simple(cmd, via, source, depth)

    def simple(self, cmd: SimpleCommand, via: list[str], source: str, depth: int) -> None:
        env = {k: w.text for k, w in cmd.assigns.items()}
        if not cmd.words:
            if cmd.redirects:
                self.emit(Effective([], [], env, list(via), list(cmd.redirects), source))
            for line in env_commands(env):
                self.shell_text(line, [*via, "env-command"], source, depth + 1)
            return
        stdin = cmd.stdin_text
        if stdin is None and cmd.piped_from is not None:
            stdin = _static_output(cmd.piped_from)
        words = [w.text for w in cmd.words]
        # the environment flows down a pipeline through filters; the first command
        # of an inner pipeline (``env | bash -c 'cat | curl ...'``) reads the outer input
        outer = self._env_in
        if cmd.piped_from is not None:
            self._env_in = self._env_out.get(id(cmd.piped_from), False)
        prog = program_name(words[0])
        self._env_out[id(cmd)] = risky.dumps_env(prog, words[1:]) or (
            self._env_in and prog in risky.ENV_FILTERS
        )
        try:
            self.unwrap(
                words,
                [w.dynamic for w in cmd.words],
                env,
                via,
                cmd.redirects,
                source,
                depth,
                stdin,
                cmd.stdin_dynamic and stdin is None,
            )
        finally:
            self._env_in = outer

    def emit(self, eff: Effective) -> Effective:
        """Record one program that would run (in this cwd, an alias resolved)."""
        if len(self.out.commands) >= MAX_COMMANDS:
            self.out.add_uncertain("depth", f"more than {MAX_COMMANDS} commands")
        eff.cwd = self.cwd
        eff.stdin_env = self._env_in
        if eff.argv:
            alias = self.out.aliases.get(eff.program)
            if alias:
                eff.via.append("alias:" + eff.program)
                eff.argv[0] = alias
        self.out.commands.append(eff)
        return eff

    def unwrap(
        self,
        argv: list[str],
        dyn: list[bool],
        env: dict[str, str],
        via: list[str],
        redirects: list[tuple[str, Word]],
        source: str,
        depth: int,
        stdin: str | None = None,
        stdin_dynamic: bool = False,
    ) -> None:
        if depth > shell.MAX_DEPTH:
            self.out.add_uncertain("depth", "wrappers nested too deeply")
            return
        if not argv:
            return
        eff = self.emit(
            Effective(list(argv), list(dyn), dict(env), list(via), list(redirects), source, stdin)
        )
        prog = eff.program
        args, adyn = argv[1:], dyn[1:]
        inner_via = [*via, prog]
        d = depth + 1
        self.note_writes(eff, prog, args)
        found = embedded(prog, args)
        found.commands.extend(env_commands(env))
        if found.commands or found.opaque:
            if any(adyn):
                self.out.add_uncertain("dynamic", f"{prog} runs a command computed at run time")
            for reason in found.opaque:
                self.out.add_uncertain("exec-option", reason)
            for line in found.commands:
                self.shell_text(line, [*via, prog, "exec-option"], source, depth + 1)
        if "/" in argv[0] and not dyn[0]:
            if self.run_written(argv[0], inner_via, source, d):
                return
            text = _read_small(self.abspath(argv[0])) if self.read else None
            if (
                text is not None
                and text.startswith("#!")
                and re.match(r"#!\S*/(env\s+)?(ba|da|z|k)?sh\b", text)
            ):
                self.shell_text(text, inner_via, "script", d)

        def again(start: int, extra_env: dict[str, str] | None = None) -> None:
            if start < len(args):
                self.unwrap(
                    args[start:],
                    adyn[start:],
                    {**env, **(extra_env or {})},
                    inner_via,
                    [],
                    source,
                    d,
                    stdin,
                    stdin_dynamic,
                )

        def text_of(i: int, what: str) -> str | None:
            if i >= len(args):
                return None
            if adyn[i]:
                self.out.add_uncertain("dynamic", f"{what} is computed at run time")
                return None
            return args[i]

        if prog in ("make", "gmake"):
            self.makefile(args, [*via, prog], d, stdin, stdin_dynamic)
        if prog in SHELLS:
            self.shell_cmd(prog, args, adyn, inner_via, source, d, stdin, stdin_dynamic)
        elif prog == "eval":
            if any(adyn):
                self.out.add_uncertain("dynamic", "eval of text computed at run time")
            self.shell_text(" ".join(args), inner_via, source, d)
        elif prog in ("source", "."):
            self.script_file(args, adyn, inner_via, source, d, stdin)
        elif prog == "env":
            self.env_cmd(args, adyn, env, inner_via, source, d)
        elif prog in ("su", "runuser") and "-c" in args:
            i = args.index("-c") + 1
            t = text_of(i, f"{prog} -c")
            if t is not None:
                self.shell_text(t, inner_via, source, d)
            if prog == "runuser" and "-c" not in args[:1]:
                pass
        elif prog == "sudo" and any(a in ("-s", "-i", "--shell", "--login") for a in args):
            start = _skip_options(args, WRAPPERS["sudo"][0], 0)
            if start < len(args):
                if any(adyn[start:]):
                    self.out.add_uncertain("dynamic", "sudo -s command computed at run time")
                self.shell_text(" ".join(args[start:]), inner_via, source, d)
        elif prog == "command" and args and args[0] in ("-v", "-V"):
            return
        elif prog in WRAPPERS:
            valued, npos = WRAPPERS[prog]
            if prog == "taskset" and not any(a.startswith("-c") for a in args):
                npos = 1
            if prog in ("script",) and ("-c" in args or "--command" in args):
                flag = "-c" if "-c" in args else "--command"
                t = text_of(args.index(flag) + 1, "script -c")
                if t is not None:
                    self.shell_text(t, inner_via, source, d)
                return
            again(_skip_options(args, valued, npos))
        elif prog == "xargs":
            start = _skip_options(args, _XARGS_VALUED, 0, long_eq=True)
            if start < len(args):
                self.unwrap(
                    [*args[start:], "{xargs-input}"],
                    [*adyn[start:], True],
                    env,
                    inner_via,
                    [],
                    source,
                    d,
                )
            else:
                self.unwrap(["echo", "{xargs-input}"], [False, True], env, inner_via, [], source, d)
        elif prog in ("find", "fd", "fdfind"):
            self.find_exec(args, adyn, env, inner_via, source, d)
        elif prog == "ssh":
            start = _skip_options(args, _SSH_VALUED, 0)
            if start + 1 < len(args):
                if any(adyn[start + 1 :]):
                    self.out.add_uncertain("dynamic", "remote command computed at run time")
                self.shell_text(" ".join(args[start + 1 :]), inner_via, "remote", d)
        elif prog in ("srun", "salloc"):
            from tenantry.safety.policy.slurmopts import parse_argv

            rest = parse_argv(prog, args).positional
            if rest:
                n = len(args) - len(rest)
                # srun's command runs in the job; salloc's here, holding the allocation
                where = "job" if prog == "srun" else source
                self.unwrap(rest, adyn[n:], env, inner_via, [], where, d)
        elif prog in ("watch",):
            start = _skip_options(args, frozenset({"-n", "--interval", "-d"}), 0)
            if start < len(args):
                self.shell_text(" ".join(args[start:]), inner_via, source, d)
        elif prog == "flock":
            if "-c" in args or "--command" in args:
                flag = "-c" if "-c" in args else "--command"
                t = text_of(args.index(flag) + 1, "flock -c")
                if t is not None:
                    self.shell_text(t, inner_via, source, d)
            else:
                start = _skip_options(args, frozenset({"-w", "--timeout", "-E"}), 1)
                again(start)
        elif prog in ("apptainer", "singularity") and args and args[0] in ("exec", "run"):
            start = _skip_options(args[1:], frozenset({"-B", "--bind", "--env", "-H"}), 1)
            again(start + 1)
        elif prog == "trap" and args:
            t = text_of(0, "trap action")
            if t is not None:
                self.shell_text(t, inner_via, source, d)
        elif prog == "alias":
            for a in args:
                name, eq, value = a.partition("=")
                if eq:
                    parsed = shell.parse(value, self.vars, d)
                    first = next((c for c in parsed.commands if c.words), None)
                    if first is not None:
                        self.out.aliases[name] = first.words[0].text
                    self.shell_text(value, inner_via, source, d)
        elif prog == "hash" and "-p" in args:
            i = args.index("-p")
            if i + 2 < len(args):
                self.out.aliases[args[i + 2]] = program_name(args[i + 1], self.cwd)
        elif prog in ("ln", "cp", "install", "mv") and len(args) >= 2 and not adyn[-1]:
            srcs = [a for a in args[:-1] if not a.startswith("-")]
            if srcs:
                target = program_name(srcs[-1], self.cwd)
                self.out.aliases[posixpath.basename(args[-1].rstrip("/"))] = target
        elif prog in INTERPRETERS or _VERSIONED.fullmatch(prog):
            self.interpreter(prog, args, adyn, stdin, stdin_dynamic)
        elif prog == "git":
            for i, a in enumerate(args[:-1]):
                if a == "-c" and "=" in args[i + 1]:
                    key, _, value = args[i + 1].partition("=")
                    if key.lower() in GIT_COMMAND_KEYS or value.startswith("!"):
                        self.shell_text(value.lstrip("!"), inner_via, source, d)
        elif prog == "tmux":
            verbs = {
                "new",
                "new-session",
                "new-window",
                "neww",
                "split-window",
                "splitw",
                "run-shell",
                "run",
                "send-keys",
                "send",
                "respawn-pane",
                "respawn-window",
            }
            if any(a in verbs for a in args):
                start = next(i for i, a in enumerate(args) if a in verbs) + 1
                rest = args[_skip_options(args[start:], _TMUX_VALUED, 0) + start :]
                rest = [a for a in rest if a not in ("Enter", "C-m")]
                if rest:
                    self.shell_text(" ".join(rest), inner_via, source, d)
        elif prog == "screen":
            again(_skip_options(args, frozenset({"-S", "-c", "-t", "-p", "-X", "-L", "-Logfile",
                                                 "-h", "-T", "-e"}), 0))  # fmt: skip

    def makefile(
        self,
        args: list[str],
        via: list[str],
        depth: int,
        stdin: str | None = None,
        stdin_dynamic: bool = False,
    ) -> None:
        """make runs its makefile's recipes through the shell: judge them as a script.

        Recipes are the tab-indented lines and the text after ``;`` on a rule line
        (``all: ; cmd``); a makefile read from stdin (``-f -``, ``-f /dev/stdin``) is
        the command's input text, or uncertain when that is not known.
        """
        base = self.cwd
        files: list[str] = []
        evals: list[str] = []  # --eval TEXT: makefile text given on the command line
        for i, a in enumerate(args):
            nxt = args[i + 1] if i + 1 < len(args) else ""
            if a == "--eval" and nxt:
                evals.append(nxt)
            elif a.startswith("--eval="):
                evals.append(a.split("=", 1)[1])
            elif a in ("-C", "--directory") and nxt:
                base = nxt if nxt.startswith("/") else posixpath.join(base, nxt)
            elif a.startswith("--directory="):
                base = posixpath.join(base, a.split("=", 1)[1])
            elif a in ("-f", "--file", "--makefile") and nxt:
                files.append(nxt)
            elif a.startswith(("--file=", "--makefile=")):
                files.append(a.split("=", 1)[1])
        names = files or ["GNUmakefile", "makefile", "Makefile"]
        texts: list[str] = []
        for name in names:
            path = name if name.startswith("/") else posixpath.join(base, name)
            if name in ("-", "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"):
                if stdin is None:
                    if stdin_dynamic or not self.read:
                        self.out.add_uncertain("stdin", "make reads its makefile from its input")
                    continue
                text: str | None = stdin
            elif not self.read:
                continue
            else:
                text = _read_small(path)
            if text is None:
                continue
            texts.append(text)
            if not files:
                break
        texts.extend(evals)
        for text in texts:
            recipes = _make_recipes(text, args)
            if recipes:
                self.shell_text("\n".join(recipes), via, "script", depth)

    def shell_cmd(
        self,
        prog: str,
        args: list[str],
        adyn: list[bool],
        via: list[str],
        source: str,
        d: int,
        stdin: str | None,
        stdin_dynamic: bool,
    ) -> None:
        i = 0
        command_flag = from_input = False
        while i < len(args):
            a = args[i]
            if a in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                i += 2
                continue
            if a == "--":
                i += 1
                break
            if (a.startswith("-") and len(a) > 1) or (a.startswith("+") and len(a) > 1):
                if not a.startswith("--") and "c" in a[1:]:
                    command_flag = True
                if not a.startswith("--") and "s" in a[1:]:
                    from_input = True  # -s: commands from the input, the rest are $1...
                i += 1
                continue
            break
        if command_flag:
            if i >= len(args):
                self.out.add_uncertain("syntax", f"{prog} -c without a command")
                return
            if adyn[i]:
                self.out.add_uncertain("name", f"{prog} -c runs text computed at run time")
                return
            self.shell_text(args[i], via, source, d)
            return
        if i < len(args) and not from_input:
            self.script_file(args[i:], adyn[i:], via, "script", d, stdin)
            return
        if stdin is not None:
            self.shell_text(stdin, via, source, d)
        elif stdin_dynamic:
            self.out.add_uncertain("name", f"{prog} reads commands from a pipe or file")

    def script_file(
        self,
        args: list[str],
        adyn: list[bool],
        via: list[str],
        source: str,
        d: int,
        stdin: str | None = None,
    ) -> None:
        if not args:
            return
        if adyn[0]:
            self.out.add_uncertain("name", "script path computed at run time")
            return
        if self.run_written(args[0], via, source, d):
            return
        path = self.abspath(args[0])
        if path in ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0") or path.startswith(
            ("/dev/", "/proc/")
        ):
            if stdin is not None and path != "/dev/null":
                self.shell_text(stdin, via, source, d)
            elif path != "/dev/null":
                self.out.add_uncertain("name", f"commands read from {path}")
            return
        text = _read_small(path) if self.read else None
        if text is None:
            self.out.notes.append(f"script {args[0]} was not readable; only its name was judged")
            return
        self.shell_text(text, via, source, d)

    def env_cmd(
        self,
        args: list[str],
        adyn: list[bool],
        env: dict[str, str],
        via: list[str],
        source: str,
        d: int,
    ) -> None:
        extra: dict[str, str] = {}
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-u", "--unset", "-C", "--chdir"):
                i += 2
                continue
            if a in ("-S", "--split-string") or (a.startswith("-S") and len(a) > 2):
                split = args[i + 1] if a in ("-S", "--split-string") else a[2:]
                rest = args[i + 2 :] if a in ("-S", "--split-string") else args[i + 1 :]
                try:
                    words = shlex.split(split)
                except ValueError:
                    self.out.add_uncertain("syntax", "env -S string does not split")
                    return
                self.env_cmd(words + rest, [False] * len(words) + [False] * len(rest),
                             {**env, **extra}, via, source, d)  # fmt: skip
                return
            if a == "--":
                i += 1
                break
            if a.startswith("-") and len(a) > 1:
                i += 1
                continue
            if "=" in a and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", a):
                k, _, v = a.partition("=")
                extra[k] = v
                i += 1
                continue
            break
        if i < len(args):
            self.unwrap(args[i:], adyn[i:], {**env, **extra}, via, [], source, d)
        elif extra:
            self.emit(Effective([], [], {**env, **extra}, list(via), [], source))

    def find_exec(
        self, args: list[str], adyn: list[bool], env: dict[str, str], via: list[str], source: str,
        d: int,
    ) -> None:  # fmt: skip
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-exec", "-execdir", "-ok", "-okdir", "-x", "--exec", "-X", "--exec-batch"):
                j = i + 1
                while j < len(args) and args[j] not in (";", "+", "\\;"):
                    j += 1
                seg = args[i + 1 : j]
                if seg:
                    segdyn = [x or s == "{}" for x, s in zip(adyn[i + 1 : j], seg, strict=False)]
                    self.unwrap(seg, segdyn, env, via, [], source, d)
                i = j + 1
                continue
            i += 1

    def interpreter(
        self,
        prog: str,
        args: list[str],
        adyn: list[bool],
        stdin: str | None = None,
        stdin_dynamic: bool = False,
    ) -> None:
        if _program_from_stdin(prog, args):
            # ``curl URL | python3``, ``python3 - <<EOF``: the input is the program
            if stdin is not None:
                m = SENSITIVE.search(stdin)
                if m:
                    self.out.add_uncertain(
                        "interpreter",
                        f"{prog} reads code from its input that mentions {m.group(0)!r};"
                        " it cannot be checked",
                    )
            elif stdin_dynamic:
                self.out.add_uncertain("interpreter", f"{prog} runs code read from a pipe")
        for i, a in enumerate(args):
            code = None
            if a in _INLINE_FLAGS and i + 1 < len(args):
                code = args[i + 1]
            elif prog in ("awk", "gawk", "mawk") and i == 0 and not a.startswith("-"):
                code = a
            if code is None:
                continue
            if adyn[i + 1 if a in _INLINE_FLAGS else i]:
                self.out.add_uncertain("interpreter", f"{prog} code computed at run time")
            elif SENSITIVE.search(code) or (prog in ("awk", "gawk", "mawk") and "system" in code):
                m = SENSITIVE.search(code)
                what = m.group(0) if m else "system("
                self.out.add_uncertain(
                    "interpreter",
                    f"{prog} inline code mentions {what!r}; it cannot be checked",
                )


# options of interpreters that take a value (to find the script among the arguments), and
# those that name the program some other way than a script file or the input
_INTERP_VALUED = frozenset({"-W", "-X", "-Q", "-I", "-M", "-r", "--require", "-C", "-l",
                            "--import", "--loader", "--env-file", "--input-type", "-J",
                            "-L", "-t", "--threads", "-p", "--procs"})  # fmt: skip
_INTERP_PROGRAM = _INLINE_FLAGS | {"-m", "-f", "--file", "-File", "-p", "--print", "--version",
                                   "-V", "--help", "-h"}  # fmt: skip


def _program_from_stdin(prog: str, args: list[str]) -> bool:
    """Does ``prog args`` read its program from its input (no script, no inline code,
    or the script ``-``)? awk never does: its input is data."""
    if prog in ("awk", "gawk", "mawk", "nawk", "osascript"):
        return False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-":
            return True
        if a == "--":
            return i + 1 >= len(args) or args[i + 1] == "-"
        if a in _INTERP_PROGRAM or (a[:2] in ("-c", "-e", "-m") and len(a) > 2 and a[1] != "-"):
            return False
        if not a.startswith("-"):
            return False  # the script
        i += 2 if a in _INTERP_VALUED else 1
    return True


def _forks_itself(name: str, body: str, variables: dict[str, str], depth: int) -> bool:
    """Does a function's body run the function again in a pipeline or the background?"""
    if "|" not in body and "&" not in body:
        return False
    inner = shell.parse(body.strip().removeprefix("{").removesuffix("}"), variables, depth + 1)
    return any(c.words and c.words[0].text == name for c in inner.commands)


_TMUX_VALUED = frozenset({"-s", "-n", "-c", "-t", "-x", "-y", "-e", "-F", "-f", "-L", "-S"})
_XARGS_VALUED = frozenset({"-n", "-I", "-L", "-P", "-d", "-a", "-E", "-s", "--max-args",
                           "--max-procs", "--delimiter", "--arg-file", "--max-chars",
                           "--max-lines", "--replace", "--process-slot-var"})  # fmt: skip
_SSH_VALUED = frozenset({"-i", "-p", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b", "-c", "-E",
                         "-e", "-m", "-O", "-Q", "-S", "-W", "-w", "-B", "-I"})  # fmt: skip


def _skip_options(
    args: list[str], valued: frozenset[str], npos: int, *, long_eq: bool = True
) -> int:
    """Index of the wrapped command after the wrapper's options and ``npos`` positionals."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a in _MULTI_VALUE:
            i += 1 + _MULTI_VALUE[a]
            continue
        if (a.startswith("-") and len(a) > 1 and not re.match(r"^-\d", a)) or (
            a.startswith("-") and re.match(r"^-\d+$", a)
        ):
            name = a.split("=", 1)[0]
            if name in valued and "=" not in a and not (len(name) == 2 and len(a) > 2):
                i += 2
            elif not a.startswith("--") and len(a) > 2 and "-" + a[-1] in valued:
                i += 2  # combined short flags ending in one that takes a value: -dmS name
            else:
                i += 1
            continue
        break
    while npos > 0 and i < len(args):
        i += 1
        npos -= 1
    return i


def _static_output(cmd: SimpleCommand) -> str | None:
    """What ``echo``/``printf`` with static words would write into a pipe."""
    if not cmd.words or any(w.dynamic for w in cmd.words):
        return None
    prog = program_name(cmd.words[0].text)
    args = [w.text for w in cmd.words[1:]]
    if prog == "echo":
        escapes = False
        while args and re.fullmatch(r"-[neE]+", args[0]):
            for flag in args[0][1:]:
                escapes = {"e": True, "E": False}.get(flag, escapes)
            args = args[1:]
        text = " ".join(args)
        return (_unescape(text)[0] if escapes else text) + "\n"
    if prog == "printf" and args:
        return _printf(args[0], args[1:])
    if cmd.stdin_text is not None and prog in ("cat", "tee"):
        return cmd.stdin_text
    return None


_ESCAPE = re.compile(
    r"\\(0[0-7]{0,3}|[0-7]{1,3}|x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|"
    r"U[0-9A-Fa-f]{1,8}|.)",
    re.S,
)
_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n",
            "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}  # fmt: skip
_CONVERSION = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*)?)?([a-zA-Z%])")


def _unescape(text: str) -> tuple[str, bool]:
    """``printf``'s and ``echo -e``'s backslash escapes decoded (octal, hex, Unicode);
    the flag says whether ``\\c`` ended the output there."""
    out: list[str] = []
    pos = 0
    for m in _ESCAPE.finditer(text):
        out.append(text[pos : m.start()])
        pos = m.end()
        e = m.group(1)
        if e == "c":
            return "".join(out), True
        if e[0] in "01234567":
            out.append(chr(int(e, 8) & 0xFF))
        elif e[0] in "xuU" and len(e) > 1:
            out.append(chr(min(int(e[1:], 16), 0x10FFFF)))
        else:
            out.append(_ESCAPES.get(e, "\\" + e))
    out.append(text[pos:])
    return "".join(out), False


def _printf(fmt: str, args: list[str]) -> str:
    """What ``printf FORMAT ARGS...`` writes: the format's escapes decoded, its
    conversions filled from the arguments, the format reused while arguments remain."""
    out: list[str] = []
    rest = list(args)
    while True:
        used = False
        pos = 0
        for m in _CONVERSION.finditer(fmt):
            out.append(_unescape(fmt[pos : m.start()])[0])
            pos = m.end()
            kind = m.group(1)
            if kind == "%":
                out.append("%")
                continue
            used = True
            value = rest.pop(0) if rest else ""
            if kind == "b":
                value, stop = _unescape(value)
                out.append(value)
                if stop:
                    return "".join(out)
            else:
                out.append(value[:1] if kind == "c" else value)
        out.append(_unescape(fmt[pos:])[0])
        if not used or not rest:
            return "".join(out)


_MAKE_DEFAULTS = {"CC": "cc", "CXX": "g++", "FC": "f77", "MAKE": "make", "RM": "rm -f",
                  "AR": "ar", "LD": "ld", "CPP": "cc -E", "SHELL": "/bin/sh"}  # fmt: skip
_MAKE_ASSIGN = re.compile(r"^([A-Za-z_][\w.]*)\s*(?::{1,3}=|\?=|\+=|=)(.*)$", re.M)
_MAKE_ARG = re.compile(r"^[A-Za-z_][\w.]*=")
# a rule with its recipe on the same line: ``targets : prerequisites ; recipe``
_MAKE_INLINE = re.compile(r"^(?![\t#])[^\n=;]*?[^:=\n]:{1,2}(?![:=])[^\n=;]*;(.*)$", re.M)
_MAKE_REF = re.compile(r"\$(?:\(([^()]*)\)|\{([^{}]*)\}|([@<^?*+%]))")


_MAKE_SHELL = re.compile(r"\$[({]shell\s+([^(){}]*)[)}]")


def _make_recipes(text: str, args: list[str]) -> list[str]:
    """The shell command lines a makefile's text runs: its recipes (tab-indented lines
    and the text after ``;`` on a rule line), variables expanded, and every
    ``$(shell ...)``, which may run while make reads the file."""
    joined = text.replace("\\\n", " ")
    values = dict(_MAKE_DEFAULTS)
    for m in _MAKE_ASSIGN.finditer(joined):
        values[m.group(1)] = m.group(2).strip()
    for a in args:
        if _MAKE_ARG.match(a):
            key, _, val = a.partition("=")
            values[key] = val
    recipes = [
        _make_expand(ln[1:].lstrip("@+- "), values)
        for ln in joined.splitlines()
        if ln.startswith("\t")
    ]
    recipes += [
        _make_expand(m.group(1).lstrip("@+- "), values)
        for m in _MAKE_INLINE.finditer(joined)
        if m.group(1).strip()
    ]
    recipes += [m.group(1) for m in _MAKE_SHELL.finditer(joined)]
    return recipes


def _make_expand(line: str, values: dict[str, str], depth: int = 0) -> str:
    """A recipe line with make's variables expanded (unknown ones are empty, as in make)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name is None:
            return "target"  # automatic variables name files
        if name.startswith("shell "):
            return "$(" + name[6:] + ")"  # make's $(shell ...) runs a command
        if depth < 5 and name in values:
            return _make_expand(values[name], values, depth + 1)
        return ""

    return _MAKE_REF.sub(one, line.replace("$$", "\x00")).replace("\x00", "$")


def _read_small(path: str) -> str | None:
    """A small script's text (None when missing, not a file or too big); observed."""
    return look(_read_small_now, path)


def _read_small_now(path: str) -> str | None:
    try:
        p = Path(path)
        if not p.is_file() or p.stat().st_size > MAX_SCRIPT_BYTES:
            return None
        return p.read_text(errors="replace")
    except OSError:
        return None
