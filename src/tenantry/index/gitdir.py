"""A private copy of a repository's git directory, read by the offloaded ``git status``.

Besides the work tree, ``git status`` reads its repository on every run:
``HEAD``, the branch's ref, ``packed-refs`` (looked up about a dozen times,
present or not), ``config``, ``commondir``, ``info/exclude``, the merge,
rebase, cherry-pick, revert and bisect state, the HEAD commit and its root
tree. On a parallel file system each is an operation of the workspace's
metadata servers: 70-100 per status, where the paths the change feed reported
cost 1-5. So Tenantry runs git with ``GIT_DIR`` in its state directory, on a
copy that ``mirror`` makes of the repository's ``.git``:

- copied: every top-level file (``HEAD``, ``config``, ``packed-refs``,
  ``MERGE_HEAD``, ``ORIG_HEAD``...) and the directories status takes state from
  (``refs``, ``info``, ``rebase-merge``, ``rebase-apply``, ``sequencer``); a
  file beyond ``FILE_MAX`` or a directory beyond ``TREE_MAX`` entries is a
  symbolic link to the original instead;
- ``objects``: the daemon's own directory, holding the objects every status
  reads (HEAD's commit and root tree, ``store_objects``; an object never
  changes, so its copy is never stale), whose ``info/alternates`` names a view
  of the repository's object store: links to its loose objects' directories
  and to its pack files. git finds every object the repository has, but looks
  there only for one the private directory lacks (and stats each pack file);
- a symbolic link to the original (git reads what is there at the time): any
  other directory (``logs``, ``modules``, ``worktrees``, ``lfs``...);
- left out: ``index`` (git gets a private copy, ``GIT_INDEX_FILE``), lock
  files, Tenantry's cookies, and ``hooks``: the run writes only its private
  index, and the repository's ``post-index-change`` hook is not about that one.

``stale(paths)`` says which copies the paths the feed reported under ``.git``
make stale. A repository whose git directory cannot be moved without changing
git's answer is not copied (``config_problem``; the caller then runs git on the
repository's own directory): a ``core.worktree`` or ``core.bare``, an
extension other than the object format and per-worktree config, a linked
worktree's directory (``commondir``), a ``.git`` that is a file or a link, and
any difference between the configuration git reads there and here (an
``include.path`` relative to ``.git/config``, an ``includeIf "gitdir:..."``),
or a repository git refuses (its owner is not the user and no
``safe.directory`` names it: git then reads no repository configuration).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import zlib

from tenantry.index.changes import COOKIE_PREFIX

FILE_MAX = 8 << 20  # a bigger file is linked, not copied
TREE_MAX = 2_000  # entries of one copied directory tree; more: the tree is linked
COPIED_DIRS = frozenset({"refs", "info", "rebase-merge", "rebase-apply", "sequencer"})
LEFT_OUT = frozenset({"index", "objects", "hooks"})
EXTENSIONS = frozenset({"extensions.objectformat", "extensions.worktreeconfig"})


def stale(paths: list[str]) -> tuple[bool, bool]:
    """(the index copy, the git directory copy) made stale by these changed paths.

    Paths are workspace-relative. A change inside a linked directory or the
    object store needs no new copy (git reads those live); lock files come
    with the rename that completes them.
    """
    index = gitdir = False
    for rel in paths:
        if rel == ".git":
            return True, True  # the directory itself was made, moved or removed
        if not rel.startswith(".git/") or rel.endswith(".lock"):
            continue
        sub = rel[5:]
        top, sep, _ = sub.partition("/")
        if not sep and top == "index":
            index = True
        elif not sep or top in COPIED_DIRS or (top == "objects" and _in_view(sub)):
            gitdir = True
    return index, gitdir


def _in_view(sub: str) -> bool:
    """``objects/...`` path ``sub`` is one the object view links or copies (not a loose object)."""
    parts = sub.split("/")
    return len(parts) == 2 or parts[1] in ("pack", "info")


def parse_config(listing: bytes) -> list[tuple[str, str, str, str]]:
    """``git config --list -z --show-scope --show-origin`` -> (scope, origin, key, value)."""
    parts = listing.decode("utf-8", "surrogateescape").split("\0")
    out = []
    for i in range(0, len(parts) - 2, 3):
        key, _, value = parts[i + 2].partition("\n")
        out.append((parts[i], parts[i + 1], key, value))
    return out


def config_problem(real: bytes, mine: bytes) -> str:
    """Why git would answer differently on the copy (both listings as above), or ""."""
    entries = parse_config(real)
    if not any(scope in ("local", "worktree") for scope, _, _, _ in entries):
        return "git reads no configuration of this repository (not trusted, or empty)"
    for _, _, key, value in entries:
        k = key.lower()
        if k == "core.worktree":
            return "the repository sets core.worktree"
        if k == "core.bare" and value.lower() not in ("false", "no", "off", "0"):
            return "the repository is bare"
        if k.startswith("extensions.") and k not in EXTENSIONS:
            return f"the repository uses {key}"
    if [(s, k, v) for s, _, k, v in entries] != [(s, k, v) for s, _, k, v in parse_config(mine)]:
        return "its configuration reads differently from another directory (include, includeIf)"
    return ""


def object_format(listing: bytes) -> str:
    for _, _, key, value in parse_config(listing):
        if key.lower() == "extensions.objectformat":
            return value.lower()
    return "sha1"


def config_files(listing: bytes, env: dict[str, str]) -> tuple[str, ...]:
    """The configuration files outside the repository that git read (and may come to read).

    A change to one of them is checked like a change under ``.git``: an
    ``includeIf "gitdir:..."`` added to ``~/.gitconfig`` would otherwise go unseen.
    """
    home = env.get("HOME", "")
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files = {env.get("GIT_CONFIG_GLOBAL") or os.path.join(home, ".gitconfig")}
    files.add(os.path.join(xdg, "git", "config"))
    for scope, origin, _, _ in parse_config(listing):
        if scope in ("system", "global") and origin.startswith("file:"):
            files.add(origin[5:])
    return tuple(sorted(files))


def files_key(files: tuple[str, ...]) -> tuple[tuple[int, int, int], ...]:
    """What tells a new version of each file: size, mtime and inode (zeros when absent)."""
    out = []
    for path in files:
        try:
            st = os.stat(path)
            out.append((st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            out.append((0, 0, 0))
    return tuple(out)


def mirror(real: str, dest: str, objects: str) -> str:
    """Copy the git directory ``real`` into the new directory ``dest``; why not, or ""."""
    try:
        os.mkdir(dest, 0o700)
        with os.scandir(real) as it:
            entries = sorted(it, key=lambda e: e.name)
        if len(entries) > TREE_MAX:
            return f"{real} holds {len(entries)} entries"
        for e in entries:
            name = e.name
            if name in LEFT_OUT or name.endswith(".lock") or name.startswith(COOKIE_PREFIX):
                continue
            if name == "commondir":
                return "a linked worktree's git directory"
            src, dst = os.path.join(real, name), os.path.join(dest, name)
            if e.is_symlink():
                _relink(src, dst)
            elif e.is_dir(follow_symlinks=False):
                if name not in COPIED_DIRS or not _copy_tree(src, dst):
                    os.symlink(src, dst)
            elif e.is_file(follow_symlinks=False):
                _copy_file(src, dst, e.stat(follow_symlinks=False).st_size)
        view = os.path.join(dest, "objects.view")
        why = _object_view(os.path.join(real, "objects"), view)
        if why:
            return why
        os.makedirs(os.path.join(objects, "info"), exist_ok=True)
        _write(os.path.join(objects, "info", "alternates"), view + "\n")
        os.symlink(objects, os.path.join(dest, "objects"))
        os.makedirs(os.path.join(dest, "refs"), exist_ok=True)
    except OSError as exc:
        return f"cannot copy {real}: {exc.strerror or exc}"
    return ""


def _object_view(store: str, view: str) -> str:
    """The repository's object store ``store`` seen through links made at ``view``; why not.

    Its loose objects' directories and its pack files are links, so git reads
    the objects of the repository, but only when it needs one the private store
    lacks: listing the packs and looking for the store's own alternates is local.
    """
    os.makedirs(os.path.join(view, "pack"))
    with os.scandir(store) as it:
        entries = list(it)
    for e in entries:
        name = e.name
        if len(name) == 2 and all(c in "0123456789abcdef" for c in name):
            os.symlink(os.path.join(store, name), os.path.join(view, name))
        elif name == "pack":
            with os.scandir(e.path) as packs:
                for f in packs:
                    if f.name.startswith("pack-") and f.is_file(follow_symlinks=False):
                        os.symlink(f.path, os.path.join(view, "pack", f.name))
        elif name == "info":
            try:
                with open(os.path.join(e.path, "alternates"), errors="surrogateescape") as fh:
                    text = fh.read()
            except FileNotFoundError:
                continue
            lines = [x for x in text.splitlines() if x.strip() and not x.startswith("#")]
            if not all(os.path.isabs(x) for x in lines):
                return "the object store has relative alternates"
            os.mkdir(os.path.join(view, "info"))
            _write(os.path.join(view, "info", "alternates"), text)
    return ""


def _copy_tree(src: str, dst: str) -> bool:
    """Copy a directory tree; False (and nothing left at ``dst``) beyond ``TREE_MAX`` entries."""
    seen = 0
    for base, dirs, files in os.walk(src):
        seen += len(dirs) + len(files)
        if seen > TREE_MAX:
            shutil.rmtree(dst, ignore_errors=True)
            return False
        target = dst + base[len(src) :]
        os.makedirs(target, 0o700, exist_ok=True)
        for name in dirs:
            if os.path.islink(os.path.join(base, name)):  # os.walk does not descend into it
                _relink(os.path.join(base, name), os.path.join(target, name))
        for name in files:
            path = os.path.join(base, name)
            if name.endswith(".lock"):
                continue
            if os.path.islink(path):
                _relink(path, os.path.join(target, name))
                continue
            try:
                _copy_file(path, os.path.join(target, name), os.lstat(path).st_size)
            except FileNotFoundError:
                continue  # gone meanwhile: the feed reports it, and the next run copies again
    return True


def _copy_file(src: str, dst: str, size: int) -> None:
    if size > FILE_MAX:
        os.symlink(src, dst)
        return
    try:
        with open(src, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return
    with open(dst, "wb") as f:
        f.write(data)


def _relink(src: str, dst: str) -> None:
    """A link like ``src``, pointing at the same place from ``dst``."""
    target = os.readlink(src)
    os.symlink(os.path.join(os.path.dirname(src), target), dst)


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def store_objects(objects: str, batch: bytes, algo: str) -> int:
    """Write the objects of ``git cat-file --batch`` output into ``objects`` (loose); how many.

    Each object's name is checked against its content before it is kept.
    """
    stored, pos = 0, 0
    while pos < len(batch):
        end = batch.find(b"\n", pos)
        if end < 0:
            break
        head = batch[pos:end].split()
        pos = end + 1
        if len(head) != 3 or not head[2].isdigit():
            continue  # "<name> missing" (an unborn branch, say)
        oid, kind, size = head[0].decode(), head[1], int(head[2])
        data = batch[pos : pos + size]
        pos += size + 1
        body = kind + b" " + str(size).encode() + b"\0" + data
        if len(data) != size or hashlib.new(algo, body).hexdigest() != oid:
            continue
        path = os.path.join(objects, oid[:2], oid[2:])
        if os.path.exists(path):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as f:
            f.write(zlib.compress(body))
        os.replace(tmp, path)
        stored += 1
    return stored
