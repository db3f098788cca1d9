"""Resolve a path the way the kernel would, then classify it for scope checks.

A path an agent names is expanded (``~``, ``~user``, ``$HOME``), made absolute
against the working directory, folded to a Unicode skeleton (NFKC plus a
table of look-alike letters and slashes, zero-width characters dropped),
stripped of ``/proc/self/root``-style detours, normalized (``..``) and resolved
through symlinks that exist. Every form is classified; the most sensitive
class wins, so a symlink, a ``..`` walk or a Cyrillic ``ѕ`` cannot hide a
credential file. Globs are checked against the credential patterns, so
``~/.ss?/id_*`` is a credential path too.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from tenantry.core.models import field_values
from tenantry.core.secrets import HOME_SECRETS, SECRET_DIRS, SECRET_NAMES
from tenantry.safety.policy.observed import look

# Look-alikes NFKC does not fold (Cyrillic, Greek, slashes, dots).
_CONFUSABLES = str.maketrans(
    {
        "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x",
        "ѕ": "s", "і": "i", "ј": "j", "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w",
        "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
        "С": "C", "Т": "T", "Х": "X", "Ѕ": "S", "І": "I", "Ј": "J",
        "ο": "o", "α": "a", "ν": "v", "ι": "i", "κ": "k", "ρ": "p", "τ": "t", "υ": "u",
        "∕": "/", "⁄": "/", "⧸": "/", "╱": "/", "⟋": "/",
        "․": ".", "‧": ".", "·": ".",
        "\u200b": None, "\u200c": None, "\u200d": None, "\u2060": None, "\ufeff": None,
        "\u00ad": None,
    }
)  # fmt: skip


def skeleton(text: str) -> str:
    """The look-alike-folded form of ``text`` (NFKC, confusables, no zero-width)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text).translate(_CONFUSABLES)


SYSTEM_SECRETS = (
    "/etc/munge",
    "/etc/munge/*",
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d/*",
    "/etc/ssh/ssh_host_*key",
    "/etc/slurm/slurmdbd.conf",
    "/etc/slurm/*.key",
    "/etc/slurm/jwt*",
    "/var/spool/slurm*/*.key",
    "/var/spool/slurmctld/jwt*",
    "/var/lib/munge/*",
    "/run/munge/*",
    "/root",
    "/root/*",
    "/proc/*/environ",
    "/proc/*/mem",
    "/proc/kcore",
    "/dev/mem",
    "/dev/kmem",
    "/etc/krb5.keytab",
    "/tmp/krb5cc_*",  # noqa: S108
    "/etc/pki/tls/private/*",
    "/etc/ssl/private/*",
)
# files that steer agents or version control: an agent writing them changes what
# runs later in the human's tools (hooks, agent settings, MCP servers)
CONTROL = re.compile(
    r"/\.git/(hooks(/|$)|config$|info/attributes$)|/\.(claude|codex|gemini|cursor|opencode|"
    r"openhands|continue|aider[\w.-]*)(/|$)|/\.mcp\.json$|/\.vscode/(settings|tasks)\.json$|"
    r"/\.gitconfig$|/\.config/git/|/\.envrc$|/\.pre-commit-config\.yaml$|/\.husky/"
)
# secrets in Tenantry's own state (the audit key, lease secrets, tokens): read, they let
# an agent forge what the facility trusts
_STATE_SECRET = re.compile(r"(\.(secret|key|pem)|token[\w.-]*)$")
_ALWAYS_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/dev/null", "/dev/stdout", "/dev/stderr",  # noqa: S108
                    "/dev/tty", "/dev/fd", "/proc/self/fd")  # fmt: skip
SYSTEM_PREFIXES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/opt", "/var",
                   "/sys", "/proc", "/dev", "/srv", "/root")  # fmt: skip
WRITABLE_SYSTEM = ("/var/tmp", "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/shm",  # noqa: S108
                   "/dev/tty", "/proc/self/fd")  # fmt: skip
_SYSTEM = re.compile("(?:" + "|".join(map(re.escape, SYSTEM_PREFIXES)) + ")(?:/|$)")
_WRITABLE = re.compile("(?:" + "|".join(map(re.escape, WRITABLE_SYSTEM)) + ")(?:/|$)")
_PROC_ROOT = re.compile(r"^/proc/(self|thread-self|\d+)(/task/\d+)?/root(?=/|$)")
_PROC_CWD = re.compile(r"^/proc/(self|thread-self|\d+)(/task/\d+)?/cwd(?=/|$)")
_GLOBCH = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class PathInfo:
    """A resolved path and its classes (the Cedar ``Path`` entity's attributes)."""

    raw: str
    path: str  # the resolved form the checks used
    credential: bool = False
    system: bool = False  # under a system prefix (writes there are denied)
    protected: bool = False  # Tenantry's own state (audit log, policy, tokens)
    other_home: bool = False  # another user's home directory
    lookalike: bool = False  # Unicode look-alikes were folded
    dynamic: bool = False  # could not be resolved statically
    control: bool = False  # agent/VCS control files (.git/hooks, .claude/, .mcp.json ...)
    outside_write: bool = False  # outside the principal's write scope

    def attrs(self) -> dict[str, object]:
        return field_values(self)


@dataclass(frozen=True, slots=True)
class PathContext:
    """Where relative paths start and whose home ``~`` is."""

    cwd: str = "/"
    home: str = "/"
    user: str = ""
    homes_root: str = "/home"
    protected: tuple[str, ...] = ()  # Tenantry state directories
    # where the principal may write besides its home (scratch, project dirs, temp)
    write_roots: tuple[str, ...] = ()
    # globs of directories in other users' homes the facility shares for reading
    read_roots: tuple[str, ...] = ()

    def home_of(self, user: str) -> str:
        return self.home if user in ("", self.user) else posixpath.join(self.homes_root, user)


def expand(raw: str, ctx: PathContext) -> str:
    """``~``, ``~user``, ``$HOME``/``${HOME}`` expanded and made absolute."""
    p = raw
    for var in ("${HOME}", "$HOME"):
        if p.startswith(var):
            p = ctx.home + p[len(var) :]
    if p.startswith("~"):
        head, _, tail = p[1:].partition("/")
        base = ctx.home_of(head)
        p = base + ("/" + tail if tail or p.endswith("/") else "")
    if not p.startswith("/"):
        p = posixpath.join(ctx.cwd or "/", p)
    return p


def _strip_proc(p: str, ctx: PathContext) -> str:
    for _ in range(8):
        m = _PROC_ROOT.match(p)
        if m:
            p = p[m.end() :] or "/"
            continue
        m = _PROC_CWD.match(p)
        if m:
            p = posixpath.join(ctx.cwd, p[m.end() :].lstrip("/"))
            continue
        break
    return p


def resolve(raw: str, ctx: PathContext) -> list[str]:
    """Every form of ``raw`` worth checking: lexical, skeleton and symlink-resolved."""
    forms: list[str] = []
    for text in dict.fromkeys((raw, skeleton(raw))):
        p = _strip_proc(expand(text, ctx), ctx)
        lexical = _strip_proc(posixpath.normpath(p), ctx)
        forms.append(lexical)
        if not _GLOBCH.search(p):
            try:
                real = look(os.path.realpath, p)
            except (OSError, ValueError):
                real = lexical
            forms.append(_strip_proc(real, ctx))
    return list(dict.fromkeys(forms))


def _glob_covers(glob: str, probe: str) -> bool:
    """Could shell glob ``glob`` name ``probe`` or a directory above it (no dotglob)?

    One probe at a time; ``_glob_covers_any`` answers the same for all of them
    at once (the tests hold it to this).
    """
    g, q = glob.split("/"), probe.split("/")
    if len(g) > len(q):
        return False
    for gc, qc in zip(g, q, strict=False):
        if qc.startswith(".") and not gc.startswith(".") and gc != qc:
            return False
        if not fnmatch.fnmatchcase(qc, gc):
            return False
    return True


_Trie = dict[str, "_Trie"]


@lru_cache(maxsize=256)
def _probes(home: str, homes_root: str) -> _Trie:
    """The credential patterns as probe paths (``*`` -> ``x``), a trie of their components."""
    root: _Trie = {}
    for pat in _compiled(home, homes_root)[1]:
        node = root
        for part in pat.replace("*", "x").split("/"):
            node = node.setdefault(part, {})
    return root


def _glob_covers_any(glob: str, probes: _Trie) -> bool:
    """``_glob_covers(glob, probe)`` for some probe in the trie, walking shared prefixes once."""
    frontier = [probes]
    for gc in glob.split("/"):
        hidden_ok = gc.startswith(".")
        frontier = [
            child
            for node in frontier
            for qc, child in node.items()
            if (hidden_ok or not qc.startswith(".") or gc == qc) and fnmatch.fnmatchcase(qc, gc)
        ]
        if not frontier:
            return False
    return True


def _patterns(ctx: PathContext) -> list[str]:
    pats = [p for p in SYSTEM_SECRETS if not (p.startswith("/root") and ctx.home == "/root")]
    for home in (ctx.home, posixpath.join(ctx.homes_root, "*")):
        for rel in HOME_SECRETS:
            pat = posixpath.join(home, rel)
            pats.extend((pat, pat + "/*"))
    return pats


@lru_cache(maxsize=256)
def _compiled(home: str, homes_root: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """One regex for every credential pattern of this home (the hot path), and the list."""
    pats = _patterns(PathContext(home=home, homes_root=homes_root))
    return re.compile("|".join(fnmatch.translate(p) for p in pats)), tuple(pats)


def _credential(path: str, ctx: PathContext, glob: bool) -> bool:
    base = posixpath.basename(path)
    if SECRET_NAMES.match(base) and not glob:
        return True
    if (
        glob
        and "id_" in base
        and any(fnmatch.fnmatchcase(n, base) for n in ("id_rsa", "id_ed25519"))
    ):
        return True
    regex = _compiled(ctx.home, ctx.homes_root)[0]
    if regex.match(path):
        return True
    if glob and _glob_covers_any(path, _probes(ctx.home, ctx.homes_root)):
        return True
    # a secret directory anywhere (e.g. a copied ~/.ssh) keeps its class
    return not SECRET_DIRS.isdisjoint(path.split("/"))


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def credential(raw: str, ctx: PathContext) -> bool:
    """``classify(raw, ctx).credential`` without the other classes."""
    glob = bool(_GLOBCH.search(raw))
    return any(_credential(p, ctx, glob) for p in resolve(raw, ctx))


def classify(raw: str, ctx: PathContext, *, dynamic: bool = False) -> PathInfo:
    """Resolve ``raw`` and classify every form; the most sensitive class wins."""
    forms = resolve(raw, ctx)
    glob = bool(_GLOBCH.search(raw))
    cred = system = protected = other = control = outside = False
    roots = (ctx.home, *_ALWAYS_WRITABLE, *ctx.write_roots)
    for p in forms:
        control = control or bool(CONTROL.search(p))
        outside = outside or not any(_under(p, r) for r in roots if r and r != "/")
        cred = cred or _credential(p, ctx, glob)
        if _SYSTEM.match(p) and not _WRITABLE.match(p) and not _under(p, ctx.home):
            system = True
        if any(_under(p, s) for s in ctx.protected if s):
            protected = True
            cred = cred or bool(_STATE_SECRET.search(posixpath.basename(p)))
        if _under(p, ctx.homes_root) and not _under(p, ctx.home):
            shared = any(
                fnmatch.fnmatchcase(p, r) or fnmatch.fnmatchcase(p, r.rstrip("/") + "/*")
                for r in ctx.read_roots
            )
            other = other or not shared
    return PathInfo(
        raw=raw,
        path=forms[-1] if forms else raw,
        credential=cred,
        system=system,
        protected=protected,
        other_home=other,
        lookalike=skeleton(raw) != raw,
        dynamic=dynamic,
        control=control,
        outside_write=outside and not system,
    )
