"""Ordinary programs whose options make them dangerous, read from their argv.

The program names alone say nothing here: ``find`` lists files until
``-delete``, ``nc`` talks to a port until ``-e /bin/sh`` hands it a shell,
``docker run`` starts a container until ``--privileged`` or ``-v /:/host``
gives it the machine, ``git config`` stores a name until the key is one that
runs a command, ``gpg`` encrypts until ``--export-secret-keys``. Each reader
returns what :mod:`tenantry.safety.policy.normalize` turns into Cedar facts:
command tags (``rm-root``, ``remote-shell``, ``privileged-container``) and
paths the command really reads or writes. Pure: no files, no processes.
"""

from __future__ import annotations

import itertools
import posixpath
import re

# find's options before its start points, and those of them that take a value
_FIND_LEAD = frozenset({"-H", "-L", "-P"})
_FIND_LEAD_VALUED = frozenset({"-D"})
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})
_DELETERS = frozenset({"rm", "unlink", "shred", "rmdir", "srm", "wipe"})

_NETCATS = frozenset({"nc", "ncat", "netcat", "nc.openbsd", "nc.traditional", "pwncat"})
NETWORK_TOOLS = _NETCATS | {"socat"}  # (and shells with a redirect) may be remote shells
_NETCAT_EXEC = ("-e", "-c", "--exec", "--sh-exec", "--lua-exec")
_SOCAT_EXEC = re.compile(r"^(exec|system):", re.IGNORECASE)
_SOCAT_NET = re.compile(
    r"^(tcp|tcp4|tcp6|udp|udp4|udp6|tcp-listen|tcp4-listen|tcp6-listen|udp-listen|"
    r"openssl|openssl-listen|ssl|sctp|sctp-listen|socks4a?|proxy|vsock)[:-]",
    re.IGNORECASE,
)
_NET_DEVICES = ("/dev/tcp/", "/dev/udp/")

CONTAINERS = frozenset({"docker", "podman", "nerdctl"})
_CONTAINER_START = frozenset({"run", "create", "exec"})
_HOST_NAMESPACES = re.compile(r"^--(pid|ipc|uts|userns|cgroupns)=host$")
_UNCONFINED = re.compile(r"unconfined|label[=:]disable|systempaths=unconfined")
_HOST_ROOTS = frozenset({"/", "/etc", "/root", "/home", "/var", "/usr", "/boot", "/proc",
                         "/sys", "/dev", "/run", "/var/run/docker.sock", "/run/docker.sock",
                         "/run/podman/podman.sock"})  # fmt: skip

# git settings whose value is a command git runs (``git -c KEY=CMD`` runs it at once)
GIT_COMMAND_KEYS = frozenset({"core.pager", "core.editor", "core.sshcommand", "core.fsmonitor",
                              "core.hookspath", "sequence.editor", "diff.external",
                              "credential.helper", "pager.log", "pager.diff", "gpg.program",
                              "core.askpass", "uploadpack.packobjectshook"})  # fmt: skip
# the editor and pager settings, and the values that only name a well-known program
_GIT_VIEWER_KEYS = frozenset({"core.pager", "core.editor", "sequence.editor", "pager.log",
                              "pager.diff"})  # fmt: skip
_PLAIN_VIEWER = re.compile(
    r"(vim?|nvim|gvim -f|nano|pico|micro|emacs(client)?( -nw| -t)?|mg|ed|joe|kak|hx|helix|"
    r"code( --wait| -w)?|subl -w|less( -[A-Za-z]+)*|more|most|cat|delta|diff-so-fancy|bat)"
)
# stored by ``git config``, these also steer what later git commands run or where they
# send their traffic: per-name commands, included files of settings, URL rewrites
_GIT_STEERING_KEY = re.compile(
    r"^(core\.gitproxy|credential\..+\.helper|pager\..+|gpg\..+\.program|include\.path|"
    r"includeif\..+\.path|filter\..+\.(clean|smudge|process)|diff\..+\.(textconv|command)|"
    r"merge\..+\.driver|remote\..+\.(uploadpack|receivepack|vcs)|url\..+\.insteadof|"
    r"http\.proxy)$",
    re.IGNORECASE,
)
_GIT_CONFIG_READ = frozenset({"--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l",
                              "--list", "--show-origin", "--show-scope", "--name-only",
                              "--get-color", "--get-colorbool", "-e", "--edit"})  # fmt: skip
_GIT_CONFIG_VALUED = frozenset({"-f", "--file", "--blob", "--type", "--default", "--comment"})
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace",
                         "--exec-path", "--config-env", "--super-prefix"})  # fmt: skip
_GIT_LOCATIONS = frozenset({"--global", "--system", "--local", "--worktree"})

_GPG = frozenset({"gpg", "gpg2"})
_GPG_SECRET = frozenset({"--export-secret-keys", "--export-secret-subkeys",
                         "--export-ssh-key", "--export-secret-key"})  # fmt: skip


def _find_lead(args: list[str]) -> int:
    """Index after find's leading options (``-H``, ``-L``, ``-P``, ``-D x``, ``-O2``)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in _FIND_LEAD or re.fullmatch(r"-O\d", a):
            i += 1
        elif a in _FIND_LEAD_VALUED:
            i += 2
        else:
            break
    return i


def find_follows(args: list[str]) -> bool:
    """Does find follow start points that are symbolic links (``-H`` or ``-L``)?"""
    return bool({"-H", "-L"} & set(args[: _find_lead(args)]))


def find_starts(args: list[str]) -> list[int]:
    """Indexes of find's start points in ``args`` (``.`` is implied when there are none)."""
    i = _find_lead(args)
    starts: list[int] = []
    while i < len(args) and not args[i].startswith(("-", "(", "!", ")", ",")):
        starts.append(i)
        i += 1
    return starts


def find_deletes(args: list[str]) -> bool:
    """Does this find remove what it finds (``-delete``, or ``-exec rm ...``)?"""
    for i, a in enumerate(args):
        if a == "-delete":
            return True
        if a in _FIND_EXEC and i + 1 < len(args) and posixpath.basename(args[i + 1]) in _DELETERS:
            return True
    return False


def find_written(args: list[str]) -> list[str]:
    """Files find writes its listing into (``-fprint FILE`` and the like)."""
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a in _FIND_WRITES]


def output_files(args: list[str]) -> list[str]:
    """The file ``sort``/``shuf`` write instead of standard output (``-o FILE``)."""
    out: list[str] = []
    for i, a in enumerate(args):
        if a in ("-o", "--output") and i + 1 < len(args):
            out.append(args[i + 1])
        elif a.startswith("--output="):
            out.append(a.split("=", 1)[1])
        elif a.startswith("-o") and len(a) > 2:
            out.append(a[2:])
    return out


def remote_shell(
    prog: str, args: list[str], redirect_words: list[str], shells: frozenset[str]
) -> bool:
    """Does this command hand a shell or a program to a network connection?

    ``nc -e /bin/sh HOST PORT`` (and ``-c``, ``--sh-exec``), ``socat TCP:HOST:PORT
    EXEC:/bin/sh``, and a shell whose input or output is ``/dev/tcp/HOST/PORT``.
    """
    if prog in _NETCATS:
        return any(
            a in _NETCAT_EXEC or a.startswith(("--exec=", "--sh-exec=", "--lua-exec="))
            for a in args
        )
    if prog == "socat":
        addresses = [a for a in args if not a.startswith("-")]
        return any(_SOCAT_EXEC.match(a) for a in addresses) and any(
            _SOCAT_NET.match(a) for a in addresses
        )
    if prog in shells:
        return any(w.startswith(_NET_DEVICES) for w in redirect_words)
    return False


def privileged_container(prog: str, args: list[str]) -> bool:
    """``docker run --privileged``, host namespaces, added capabilities, or the host's
    root, system directories or container socket mounted into the container."""
    if prog not in CONTAINERS:
        return False
    verbs = [a for a in args if not a.startswith("-")]
    if not verbs:
        return False
    verb = verbs[0]
    if verb == "container" and len(verbs) > 1:
        verb = verbs[1]
    if verb not in _CONTAINER_START:
        return False
    for i, a in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if a == "--privileged" or a.startswith("--privileged="):
            return a != "--privileged=false"
        if a.startswith("--cap-add") or _HOST_NAMESPACES.match(a):
            return True
        opt = (
            nxt
            if a == "--security-opt"
            else a.partition("=")[2]
            if a.startswith("--security-opt=")
            else ""
        )
        if _UNCONFINED.search(opt):
            return True
        if a in ("--pid", "--ipc", "--userns", "--uts", "--cgroupns") and nxt == "host":
            return True
        mount = ""
        if a in ("-v", "--volume"):
            mount = nxt.split(":", 1)[0]
        elif a.startswith("--volume="):
            mount = a.split("=", 1)[1].split(":", 1)[0]
        elif a.startswith("-v") and len(a) > 2:
            mount = a[2:].split(":", 1)[0]
        elif a == "--mount" or a.startswith("--mount="):
            spec = nxt if a == "--mount" else a.split("=", 1)[1]
            for part in spec.split(","):
                key, _, value = part.partition("=")
                if key in ("source", "src"):
                    mount = value
        if mount and (posixpath.normpath(mount) in _HOST_ROOTS):
            return True
    return False


def git_subcommand(args: list[str], cwd: str) -> tuple[int, str]:
    """Index of git's subcommand in ``args`` (-1 if none) and the directory it runs in
    (``-C DIR`` moves it)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in _GIT_VALUED:
            if a == "-C" and i + 1 < len(args):
                cwd = posixpath.normpath(posixpath.join(cwd, args[i + 1]))
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return i, cwd
    return -1, cwd


def git_config_file(args: list[str], cwd: str, home: str) -> str | None:
    """The file ``git config ARGS`` writes a command-running setting into, or None.

    ``args`` follow ``config``; only settings whose value git later runs as a
    command (``core.hooksPath``, ``core.sshCommand``, ``alias.x = !cmd``, filters,
    includes, ...) are named: writing them is writing the repository's (or the
    user's) control file. Reads (``--get``, ``--list``) and ordinary keys are None.
    """
    if any(a in _GIT_CONFIG_READ for a in args):
        return None
    where = ""
    positional: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in _GIT_CONFIG_VALUED:
            if a in ("-f", "--file") and i + 1 < len(args):
                where = args[i + 1]
            i += 2
            continue
        if a.startswith("--file="):
            where = a.split("=", 1)[1]
        elif a in _GIT_LOCATIONS:
            where = a
        elif not a.startswith("-"):
            positional.append(a)
        i += 1
    if positional[:1] in (["set"], ["unset"], ["add"]):  # git 2.46+: git config set KEY VALUE
        positional = positional[1:]
    if len(positional) < 2:
        return None
    key, value = positional[0], positional[1]
    alias = key.lower().startswith("alias.") and value.lstrip().startswith("!")
    if not (key.lower() in GIT_COMMAND_KEYS or _GIT_STEERING_KEY.match(key) or alias):
        return None
    if key.lower() in _GIT_VIEWER_KEYS and _PLAIN_VIEWER.fullmatch(value.strip()):
        return None  # a well-known editor or pager by name: nothing planted
    if where == "--global":
        return posixpath.join(home, ".gitconfig")
    if where == "--system":
        return "/etc/gitconfig"
    if where and not where.startswith("--"):
        return where if where.startswith("/") else posixpath.join(cwd, where)
    return posixpath.join(cwd, ".git", "config")


def gpg_secret_export(prog: str, args: list[str], home: str) -> str | None:
    """The secret keyring ``gpg --export-secret-keys`` reads, or None."""
    if prog in _GPG and any(a.split("=", 1)[0] in _GPG_SECRET for a in args):
        return posixpath.join(home, ".gnupg", "private-keys-v1.d")
    return None


# How Tenantry's own processes appear to pkill and friends: the name the kernel gives
# the console script, and command lines of the daemon, its spawner, a lease's pilot and
# the facility service (a script's command line starts with its interpreter).
_TENANTRY_NAMES = ("tenantry",)
_TENANTRY_LINES = (
    "/usr/bin/python3 /usr/local/bin/tenantry serve",
    "/usr/bin/python3 /usr/local/bin/tenantry serve --facility /run/tenantry/facility.sock",
    "/usr/bin/python3 /usr/local/bin/tenantry facility serve",
    "/usr/bin/python3 /usr/local/bin/tenantry pilot",
    "/usr/bin/python3 -m tenantry serve",
    "/usr/bin/python3 -S -m tenantry.commands.spawner",
)
_SIGNALLERS = frozenset({"pkill", "pgrep", "skill", "snice", "killall", "pidof"})
_PGREP_VALUED = frozenset({"-d", "--delimiter", "-g", "--pgroup", "-G", "--group", "-P",
                           "--parent", "-s", "--session", "-t", "--terminal", "-u", "--euid",
                           "-U", "--uid", "--signal", "-F", "--pidfile", "--ns", "--nslist",
                           "-r", "--runstates", "-q", "--queue", "-o", "-O", "--older",
                           "--cgroup", "--env"})  # fmt: skip
_SIGNAL_NAMES = frozenset({"HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "IOT", "BUS", "FPE",
                           "KILL", "USR1", "SEGV", "USR2", "PIPE", "ALRM", "TERM", "STKFLT",
                           "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG", "XCPU",
                           "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "POLL", "PWR",
                           "SYS"})  # fmt: skip
_KILLALL_VALUED = frozenset({"-s", "--signal", "-u", "--user", "-o", "--older-than", "-y",
                             "--younger-than", "-n", "--ns", "-Z", "--context"})  # fmt: skip


def _matches_tenantry(pattern: str, *, full: bool, exact: bool, fold: bool) -> bool:
    """Would a procps/psmisc name pattern select one of Tenantry's processes?"""
    flags = re.IGNORECASE if fold else 0
    try:
        rx = re.compile(pattern, flags)
    except re.error:
        return True  # a pattern we cannot read is judged as the widest one
    texts = _TENANTRY_LINES if full else _TENANTRY_NAMES
    hit = rx.fullmatch if exact else rx.search
    return any(hit(t) for t in texts)


def signals_tenantry(prog: str, args: list[str]) -> bool:
    """Does ``pkill``/``killall``/``pgrep``/``pidof`` select Tenantry's own processes?

    ``pkill tenantry``, ``pkill -f 'tenantry serve'``, ``pkill -f python`` (the daemon's
    command line is its interpreter's), ``killall tenantry``, ``pgrep -f tenantry`` (whose
    output feeds a ``kill``): an agent that stops the daemon stops its own governance.
    """
    if prog not in _SIGNALLERS:
        return False
    if prog == "pidof":
        return any(posixpath.basename(a) in _TENANTRY_NAMES for a in args if a[:1] != "-")
    full = exact = fold = regex = False
    valued = _KILLALL_VALUED if prog == "killall" else _PGREP_VALUED
    pats: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "--":
            continue
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            full |= name == "--full"
            exact |= name == "--exact"
            fold |= name in ("--ignore-case",)
            regex |= name == "--regexp"
            skip = name in valued and "=" not in a
            continue
        if a.startswith("-") and len(a) > 1 and not a[1:].isdigit():
            letters = a[1:]
            if letters.removeprefix("SIG") in _SIGNAL_NAMES:
                continue
            for j, ch in enumerate(letters):
                if "-" + ch in valued:
                    skip = j == len(letters) - 1
                    break
                full |= ch == "f" and prog != "killall"
                exact |= ch == "x" and prog != "killall"
                fold |= ch == "i" if prog != "killall" else ch == "I"
                regex |= ch == "r" and prog == "killall"
            continue
        if a.startswith("-"):
            continue  # a signal such as -9
        pats.append(a)
    if prog == "killall":
        return any(
            _matches_tenantry(p, full=False, exact=True, fold=fold)
            if regex
            else (p.lower() if fold else p) in _TENANTRY_NAMES
            for p in pats
        )
    return any(_matches_tenantry(p, full=full, exact=exact, fold=fold) for p in pats)


_TENANTRY_GLOBAL_VALUED = frozenset({"--socket", "--state-dir"})
_PYTHON = re.compile(r"python(\d+(\.\d+)*)?")
# what changes or stops Tenantry itself rather than asking it for something
TENANTRY_CONTROL = frozenset({"install", "uninstall", "serve", "stop", "pilot", "facility"})
_FACILITY_READ = frozenset({"status", "jobs", "dashboard", "events"})


def tenantry_subcommand(prog: str, args: list[str]) -> list[str]:
    """``tenantry [--socket S] SUB ...`` (or ``python3 -m tenantry SUB ...``) as
    ``[SUB, ...]``; empty for any other program."""
    if _PYTHON.fullmatch(prog):
        if len(args) < 2 or args[0] != "-m" or args[1] != "tenantry":
            return []
        args = args[2:]
    elif prog != "tenantry":
        return []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name = args[i].split("=", 1)[0]
        i += 2 if name in _TENANTRY_GLOBAL_VALUED and "=" not in args[i] else 1
    return args[i:]


def controls_tenantry(prog: str, args: list[str]) -> bool:
    """Does the command install, remove, start or stop Tenantry (``tenantry uninstall``,
    ``tenantry stop``, a second ``tenantry serve``), rather than ask it for something?"""
    rest = tenantry_subcommand(prog, args)
    if not rest or rest[0] not in TENANTRY_CONTROL:
        return False
    if rest[0] == "facility":
        verb = next((a for a in rest[1:] if not a.startswith("-")), "")
        return verb not in _FACILITY_READ
    return True


# The environment (where an agent session's tokens live: API keys, GITHUB_TOKEN, ...)
# dumped whole or by name, and the programs that send what they read to another host.
_ENV_DECLS = frozenset({"declare", "typeset", "export", "readonly"})
# what passes its input on, changed or not (so ``env | grep TOKEN | base64 | curl``)
ENV_FILTERS = frozenset({"grep", "egrep", "fgrep", "rg", "sed", "awk", "gawk", "mawk", "sort",
                         "uniq", "cut", "tr", "head", "tail", "tee", "cat", "tac", "base64",
                         "base32", "basenc", "xxd", "od", "hexdump", "gzip", "bzip2", "xz",
                         "zstd", "rev", "paste", "column", "jq", "openssl", "fold", "nl", "gpg",
                         "iconv", "strings", "perl", "python", "python3", "xargs",
                         "timeout", "nice", "stdbuf"})  # fmt: skip
_STDIN_SENDERS = frozenset({"nc", "ncat", "netcat", "nc.openbsd", "nc.traditional", "socat",
                            "telnet", "ssh", "mail", "mailx", "mutt", "sendmail",
                            "msmtp"})  # fmt: skip
NETWORK_SENDERS = _STDIN_SENDERS | {"curl", "wget", "scp", "rsync", "sftp", "gh", "aws",
                                    "rclone", "gsutil", "openssl"}  # fmt: skip
ENV_SUBSTITUTION = re.compile(r"(\$\(|<\(|`)\s*(env|printenv|set|export|declare|typeset)\b")


def dumps_env(prog: str, args: list[str]) -> bool:
    """Does the command print the environment, or variables of it (``env``,
    ``printenv [NAME]``, ``set``, ``export -p``, ``declare -x``)?"""
    if prog == "env":
        return all(a.startswith("-") and a not in ("-S", "--split-string") for a in args)
    if prog == "printenv":
        return True
    if prog == "set":
        return not args
    if prog in _ENV_DECLS:
        return not args or all(a.startswith("-") and "f" not in a for a in args)
    return False


def sends_input(prog: str, args: list[str]) -> bool:
    """Does the command send what it reads on its input to another host?"""
    if prog in _STDIN_SENDERS:
        return True
    if prog == "curl":
        return any(a == "-" or a.endswith("@-") for a in args) or any(
            a in ("-T", "--upload-file") and b in ("-", ".") for a, b in itertools.pairwise(args)
        )
    if prog == "wget":
        return any(a.endswith(("=/dev/stdin", "=-")) for a in args if a.startswith("--post"))
    if prog == "openssl":
        return bool(args) and args[0] == "s_client"
    if prog == "gh":
        return args[:2] == ["gist", "create"] and "-" in args
    if prog in ("aws", "gsutil"):
        return "cp" in args and "-" in args
    if prog == "rclone":
        return bool(args) and args[0] == "rcat"
    return False


_MODE = re.compile(r"^([0-7]{3,4}|([ugoa]*[-+=][rwxXstugo]*)(,[ugoa]*[-+=][rwxXstugo]*)*)$")


def chmod_grants(args: list[str]) -> tuple[set[str], list[str], bool]:
    """``chmod [opts] MODE PATH...``: the classes (``g``, ``o``) the mode gives write to,
    the paths, and whether it recurses. ``--reference`` modes are not read (empty)."""
    recursive = False
    rest: list[str] = []
    for a in args:
        if a in ("-R", "--recursive") or (a.startswith("-") and "R" in a and not _MODE.match(a)):
            recursive = True
        elif a.startswith("--reference"):
            return set(), [x for x in args if not x.startswith("-")], recursive
        elif a.startswith("-") and not _MODE.match(a):
            continue
        else:
            rest.append(a)
    if not rest:
        return set(), [], recursive
    mode, paths = rest[0], rest[1:]
    grants: set[str] = set()
    if mode.isdigit():
        digits = mode[-3:]
        if int(digits[1]) & 2:
            grants.add("g")
        if int(digits[2]) & 2:
            grants.add("o")
        return grants, paths, recursive
    for clause in mode.split(","):
        m = re.match(r"^([ugoa]*)([-+=])(.*)$", clause)
        if m is None or m.group(2) == "-" or "w" not in m.group(3):
            continue
        who = m.group(1) or "a"
        if "a" in who or "g" in who:
            grants.add("g")
        if "a" in who or "o" in who:
            grants.add("o")
    return grants, paths, recursive


def setfacl_grants(args: list[str], user: str) -> tuple[bool, list[str]]:
    """``setfacl -m SPEC PATH...``: does SPEC give write to anyone but ``user``; the paths."""
    specs: list[str] = []
    paths: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-m", "--modify", "-M", "--modify-file", "--set"):
            specs.append(next(it, ""))
        elif a in ("-x", "--remove", "-X", "--remove-file", "--restore"):
            next(it, "")  # removes entries: grants nothing
        elif a.startswith(("--modify=", "--set=")):
            specs.append(a.split("=", 1)[1])
        elif a.startswith("-m") and len(a) > 2:
            specs.append(a[2:])
        elif not a.startswith("-"):
            paths.append(a)
    for spec in ",".join(specs).split(","):
        parts = spec.strip().split(":")
        if parts and parts[0] in ("d", "default"):
            parts = parts[1:]
        if len(parts) < 3 or "w" not in parts[-1]:
            continue
        kind, name = parts[0], parts[1]
        if kind in ("u", "user") and name in ("", user):
            continue
        return True, paths
    return False, paths


def _url_name(url: str) -> str:
    """The file name a URL's path ends in (``index.html`` for a directory), as wget names it."""
    path = url.split("://", 1)[-1].split("?", 1)[0].split("#", 1)[0]
    name = path.rsplit("/", 1)[-1] if "/" in path else ""
    return name or "index.html"


def download_targets(prog: str, args: list[str]) -> list[str]:
    """Files ``curl``/``wget`` write what they fetch into (``-o F``, ``-sSLo F``, ``-qO F``,
    ``--output=F``, curl's ``-O`` and wget's default: the URL's own file name, under
    ``-P DIR``); ``-`` (standard output) is none."""
    out: list[str] = []
    flag = "o" if prog == "curl" else "O"
    longs = ("--output",) if prog == "curl" else ("--output-document",)
    urls = [a for a in args if "://" in a and not a.startswith("-")]
    named = remote = False
    prefix = ""
    for i, a in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        name, eq, value = a.partition("=")
        if name in longs:
            out.append(value if eq else nxt)
            named = True
        elif a.startswith("-") and not a.startswith("--") and flag in a[1:]:
            # the option's value: the rest of the cluster, else the next argument
            out.append(a[a.index(flag, 1) + 1 :] or nxt)
            named = True
        elif prog == "curl" and (a == "--remote-name" or (a.startswith("-") and "O" in a[1:])):
            remote = True
        elif prog == "wget" and (a in ("-P", "--directory-prefix") or name == "--directory-prefix"):
            prefix = value if eq else nxt
    if (prog == "wget" and not named) or remote:
        out.extend(posixpath.join(prefix, _url_name(u)) if prefix else _url_name(u) for u in urls)
    return [t for t in out if t and t != "-"]
