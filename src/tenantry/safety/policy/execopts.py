"""Options of ordinary tools that run a command, read out as the command they run.

``tar --checkpoint-action=exec=CMD``, ``rsync -e CMD``, ``ssh -o
ProxyCommand=CMD``, ``zip -TT CMD``, ``vim -c '!CMD'``, sed's ``e``
command, ``gdb -ex '!CMD'`` and the like hand a shell command line to
``/bin/sh``. :func:`embedded` returns those command lines so the unwrapper
judges them as commands, and names the forms whose command cannot be read
statically (sed's ``s///e`` runs the pattern space) so they are denied as
uncertain rather than allowed. Pure: no files, no processes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tenantry.safety.policy.risky import git_subcommand

_TAR_OPTS = {
    "--use-compress-program": "",
    "--to-command": "",
    "--info-script": "",
    "--new-volume-script": "",
    "--rsh-command": "",
}
_TAR_SHORT = {"-I", "-F"}
_SSH_KEYS = {"proxycommand", "localcommand", "knownhostscommand", "remotecommand"}
_SSH_LIKE = frozenset({"ssh", "scp", "sftp", "autossh", "mosh"})
_VIM_LIKE = frozenset({"vim", "vi", "nvim", "view", "ex", "gvim", "rvim", "vimdiff"})


@dataclass(slots=True)
class Embedded:
    """Command lines an invocation hands to a shell, and what could not be read."""

    commands: list[str] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)


def _values(args: list[str], longs: set[str], shorts: set[str]) -> list[str]:
    """Values of the named options, in ``--opt=v``, ``--opt v``, ``-Xv`` and ``-X v`` forms."""
    out: list[str] = []
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if name in longs:
            if eq:
                out.append(value)
            elif i + 1 < len(args):
                out.append(args[i + 1])
        elif a in shorts and i + 1 < len(args):
            out.append(args[i + 1])
        elif a[:2] in shorts and len(a) > 2 and not a.startswith("--"):
            out.append(a[2:])
    return out


def _ssh_option(value: str) -> tuple[str, str] | None:
    key, sep, rest = value.partition("=")
    if not sep:
        key, _, rest = value.partition(" ")
    key = key.strip().lower()
    return (key, rest.strip()) if key in _SSH_KEYS else None


def _sed_scripts(args: list[str]) -> list[str]:
    scripts = _values(args, {"--expression"}, {"-e"})
    if not scripts:
        rest = [a for a in args if not a.startswith("-")]
        if rest:
            scripts = [rest[0]]
    return scripts


_SED_E_CMD = re.compile(r"(?:^|[;\n{}]|[0-9$/]|^\s*)\s*e(?:\s+(?P<cmd>[^;\n}]+))?\s*(?:$|[;\n}])")
_SED_S_E = re.compile(r"s(?P<d>[^\\\n\w\s]).*?(?P=d).*?(?P=d)[gpIiMm0-9]*e")


_GIT_PACK_OPTS = {"--upload-pack", "--receive-pack", "--exec"}
_GIT_EXT_ESCAPES = re.compile(r"%(.)")


def _git_commands(args: list[str]) -> list[str]:
    """Programs git runs for a remote: ``--upload-pack``/``--receive-pack``/``--exec``
    (``clone -u``) and an ``ext::`` URL, whose text after the prefix is the command
    (``%`` escapes the next character; ``%s``/``%S`` stand for the service name)."""
    out = _values(args, _GIT_PACK_OPTS, set())
    sub, _ = git_subcommand(args, "/")
    if sub >= 0 and args[sub] == "clone":
        out.extend(_values(args, set(), {"-u"}))
    for a in args:
        if a.startswith("ext::"):
            out.append(
                _GIT_EXT_ESCAPES.sub(
                    lambda m: "git-upload-pack" if m.group(1) in "sS" else m.group(1), a[5:]
                )
            )
    return out


# environment variables whose value a program runs as a command: git's and ssh's helpers,
# pagers and editors, less's input filter, rsync's remote shell, askpass programs
COMMAND_VARS = frozenset({"GIT_SSH_COMMAND", "GIT_SSH", "GIT_PAGER", "GIT_EDITOR",
                          "GIT_SEQUENCE_EDITOR", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS",
                          "GIT_PROXY_COMMAND", "SSH_ASKPASS", "SUDO_ASKPASS", "PAGER",
                          "MANPAGER", "SYSTEMD_PAGER", "LESSOPEN", "LESSCLOSE", "EDITOR",
                          "VISUAL", "FCEDIT", "RSYNC_RSH", "CVS_RSH", "RSH", "BROWSER",
                          "TAR_RSH", "PSQL_PAGER", "PSQL_EDITOR"})  # fmt: skip


def env_commands(env: dict[str, str]) -> list[str]:
    """The command lines held by variables in ``env`` that programs run
    (``GIT_SSH_COMMAND='sh -c x'``, ``LESSOPEN='|cmd %s'``)."""
    out: list[str] = []
    for name, value in env.items():
        if name in COMMAND_VARS:
            text = value.lstrip("|-").replace("%s", "file")
            if text.strip():
                out.append(text)
    return out


def _client_shell(
    text: str, out: Embedded, prog: str, *, escapes: tuple[str, ...], pipes: tuple[str, ...]
) -> None:
    """A database shell's commands that run programs: ``\\! CMD`` (psql, mysql),
    ``.shell CMD`` (sqlite3), and output sent to a program (``\\o |CMD``, ``.once |CMD``)."""
    for line in re.split(r"[\n;]", text):
        body = line.strip()
        for esc in escapes:
            if body.startswith(esc) and (
                esc.startswith("\\") or body[len(esc) : len(esc) + 1] in " \t"
            ):
                cmd = body[len(esc) :].strip()
                if cmd:
                    out.commands.append(cmd)
        for pipe in pipes:
            if body.startswith(pipe) and "|" in body[len(pipe) :]:
                out.commands.append(body.split("|", 1)[1].strip().strip("'\""))


def embedded(prog: str, args: list[str]) -> Embedded:
    """The command lines ``prog args`` would hand to a shell."""
    out = Embedded()
    if prog in ("tar", "gtar", "bsdtar"):
        for a in args:
            if a.startswith("--checkpoint-action="):
                action = a.split("=", 1)[1]
                if action.startswith(("exec=", "exec:")):
                    out.commands.append(action[5:])
        out.commands.extend(_values(args, set(_TAR_OPTS), _TAR_SHORT))
    elif prog == "rsync":
        out.commands.extend(_values(args, {"--rsh", "--rsync-path"}, {"-e"}))
    elif prog in _SSH_LIKE:
        for value in _values(args, set(), {"-o"}):
            hit = _ssh_option(value)
            if hit and hit[1].lower() != "none":
                out.commands.append(hit[1])
        if prog in ("scp", "sftp"):
            out.commands.extend(_values(args, set(), {"-S"}))
    elif prog == "zip":
        out.commands.extend(_values(args, {"--unzip-command"}, {"-TT"}))
    elif prog in _VIM_LIKE:
        cmds = _values(args, {"--cmd"}, {"-c"}) + [a[1:] for a in args if a.startswith("+")]
        for c in cmds:
            body = c.lstrip(": ")
            if "!" in body:
                out.commands.append(body.split("!", 1)[1])
            elif re.search(
                r"\b(system|systemlist|terminal|term|py3?|python3?|lua|perl|ruby)\b", body
            ):
                out.opaque.append(f"{prog} -c {c[:60]!r} runs code the policy cannot read")
    elif prog in ("less", "more"):
        for a in args:
            if a.startswith("+") and "!" in a:
                out.commands.append(a.split("!", 1)[1])
    elif prog == "man":
        out.commands.extend(_values(args, {"--pager", "--preprocessor"}, {"-P", "-p"}))
    elif prog == "gdb":
        for c in _values(args, {"--eval-command", "-ex", "-iex"}, {"-ex", "-iex"}):
            body = c.strip()
            if body.startswith("!"):
                out.commands.append(body[1:])
            elif body.split(" ", 1)[0] in ("shell", "pipe", "|", "python", "py", "guile"):
                out.opaque.append(f"gdb -ex {c[:60]!r} runs code the policy cannot read")
    elif prog == "expect":
        for c in _values(args, set(), {"-c"}):
            m = re.findall(r"\b(?:spawn|exec|system)\s+([^;\n\]]+)", c)
            if m:
                out.commands.extend(m)
            else:
                out.opaque.append("expect -c runs Tcl the policy cannot read")
    elif prog in ("sed", "gsed"):
        for script in _sed_scripts(args):
            if _SED_S_E.search(script):
                out.opaque.append("sed's s///e flag runs the pattern space as a command")
            for sed_e in _SED_E_CMD.finditer(script):
                if sed_e.group("cmd"):
                    out.commands.append(sed_e.group("cmd").strip())
                else:
                    out.opaque.append("sed's e command runs the pattern space as a command")
    elif prog == "psql":
        for text in _values(args, {"--command"}, {"-c"}):
            _client_shell(text, out, prog, escapes=("\\!",), pipes=("\\o", "\\g", "\\w"))
            if re.search(r"\bprogram\s+'", text, re.I):
                out.opaque.append("psql: COPY ... PROGRAM runs a command the policy cannot read")
    elif prog in ("mysql", "mariadb"):
        for text in _values(args, {"--execute"}, {"-e"}):
            _client_shell(text, out, prog, escapes=("\\!", "system"), pipes=("pager",))
    elif prog == "sqlite3":
        dot = [a for a in args if a.startswith(".")] + _values(args, {"-cmd"}, set())
        for text in dot:
            _client_shell(text, out, prog, escapes=(".shell", ".system"),
                          pipes=(".output", ".once", ".import"))  # fmt: skip
    elif prog in ("emacs", "emacsclient", "xemacs"):
        for text in _values(args, {"--eval", "-eval", "--execute"}, set()):
            if re.search(r"shell-command|call-process|start-process|make-process|"
                         r"async-shell|process-file|compile|term\b|eshell", text):  # fmt: skip
                out.opaque.append(f"{prog} --eval runs Lisp that starts a program")
    elif prog == "start-stop-daemon":
        exe = _values(args, {"--startas", "--exec"}, {"-a", "-x"})
        if exe:
            tail = args[args.index("--") + 1 :] if "--" in args else []
            out.commands.append(" ".join([exe[0], *tail]))
    elif prog in ("sort", "gsort"):
        out.commands.extend(_values(args, {"--compress-program"}, set()))
    elif prog == "git":
        out.commands.extend(_git_commands(args))
    elif prog == "env":
        for value in _values(args, {"--split-string"}, set()):
            out.commands.append(value)
    elif prog == "script":  # util-linux script(1): the command runs in a new pty
        out.commands.extend(_values(args, {"--command"}, set()))
        for i, a in enumerate(args):
            short = re.fullmatch(r"-[aefkqETI]*c(.*)", a)  # -c CMD, -qc CMD, -cCMD
            if short:
                value = short.group(1) or (args[i + 1] if i + 1 < len(args) else "")
                if value:
                    out.commands.append(value)
    return out
