"""Planned file edits: compute, show as a unified diff, back up, write atomically.

An installer never writes while it plans. It returns ``Change``s (path, text
before, text after; ``None`` for an absent file); ``apply`` then keeps a
backup of every file it modifies in Tenantry's state directory (never in the
project, so nothing new appears in a repository) and replaces each file
atomically, keeping its mode. Each install is recorded there too
(``Records``): the original bytes (or that the file did not exist) and a hash
of what Tenantry wrote. An uninstall that finds a file exactly as Tenantry
left it restores the original bytes, or deletes a file Tenantry created; a
file edited since only loses Tenantry's entries. Planning the same install
twice yields no change the second time: that is how idempotence is checked.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.core.jsontext import json_object

BEGIN = "<!-- tenantry:begin (managed by `tenantry install`; `tenantry uninstall` removes it) -->"
END = "<!-- tenantry:end -->"


@dataclass(frozen=True, slots=True)
class Change:
    path: Path
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def action(self) -> str:
        if self.before is None:
            return "create"
        if self.after is None:
            return "delete"
        return "modify"

    def diff(self) -> str:
        a = (self.before or "").splitlines(keepends=True)
        b = (self.after or "").splitlines(keepends=True)
        name = str(self.path)
        lines = difflib.unified_diff(
            a,
            b,
            fromfile="/dev/null" if self.before is None else f"a{name}",
            tofile="/dev/null" if self.after is None else f"b{name}",
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def read_text(path: Path) -> str | None:
    try:
        with path.open(newline="") as fh:  # keep the user's line endings
            return fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc


def edit_json(path: Path, fn: Callable[[dict[str, Any]], None]) -> Change:
    """Plan an edit of a JSON object file; an edit that empties it deletes it."""
    before = read_text(path)
    data: dict[str, Any] = {}
    if before is not None and before.strip():
        data = json_object(
            before,
            f"{path} (Tenantry will not rewrite it)",
            hint="fix or move the file, then run the command again",
        )
    fn(data)
    if not data:
        after = None
    else:
        after = json.dumps(data, indent=2) + "\n"
        if before is not None and _same_json(before, data):
            after = before  # unchanged content: keep the user's formatting
    return Change(path, before, after)


def _same_json(text: str, data: Any) -> bool:
    try:
        return bool(json.loads(text) == data)
    except ValueError:
        return False


def edit_toml(path: Path, fn: Callable[[Any], None]) -> Change:
    """Plan an edit of a TOML file, keeping comments and layout (tomlkit)."""
    import tomllib

    import tomlkit

    before = read_text(path)
    if before is not None:
        try:
            tomllib.loads(before)
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(
                f"{path} is not valid TOML ({exc}); Tenantry will not rewrite it"
            ) from exc
    doc = tomlkit.parse(before or "")
    fn(doc)
    text = tomlkit.dumps(doc).strip()
    after: str | None = text + "\n" if text else None
    if before is not None and tomllib.loads(after or "") == tomllib.loads(before):
        after = before  # unchanged content: keep the user's bytes
    return Change(path, before, after)


def edit_block(path: Path, body: str | None) -> Change:
    """Plan setting (or, with ``body=None``, removing) the marked block in a text file.

    The block goes at the end, after one added newline; removing it takes
    exactly that newline away again, so install + uninstall gives the same
    bytes. An existing block is replaced in place; the rest is never touched.
    """
    before = read_text(path)
    text = before or ""
    start, end = text.find(BEGIN), text.find(END)
    has = start != -1 and end != -1 and end > start
    if has:
        head, tail = text[:start], text[end + len(END) :]
    block = "" if body is None else f"{BEGIN}\n{body.strip()}\n{END}"
    if body is None:
        if not has:
            return Change(path, before, before)
        tail = tail[1:] if tail.startswith("\n") else tail
        head = head[:-1] if head.endswith("\n") and (head[:-1] or tail) else head
        new = head + tail if (head + tail).strip() else ""
    elif has:
        new = head + block + tail
    else:
        new = (text + "\n" if text else "") + block + "\n"
    after = new if new.strip() else None
    if before is None and after is None:
        return Change(path, None, None)
    return Change(path, before, after)


def whole_file(path: Path, content: str | None) -> Change:
    """Plan a file that Tenantry owns entirely (``None`` removes it)."""
    return Change(path, read_text(path), content)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Records:
    """What each install changed, kept in ``DIR/records.json`` with backups in ``DIR/backups/``."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.path = directory / "records.json"

    def load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, data: dict[str, dict[str, str]]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n", 0o600)

    def backup(self, path: Path, text: str, stamp: str) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = str(path).strip("/").replace("/", "%")
        bp = self.dir / "backups" / stamp / name
        n = 1
        while bp.exists():
            bp = self.dir / "backups" / f"{stamp}.{n}" / name
            n += 1
        _write(bp, text, 0o600)
        return bp

    def restore(self, changes: list[Change]) -> list[Change]:
        """Uninstall changes that give back the original bytes where the file is as we left it."""
        data = self.load()
        out = []
        for ch in changes:
            rec = data.get(str(ch.path))
            if rec is not None and ch.before is not None and _digest(ch.before) == rec["wrote"]:
                original = rec.get("original", "")
                after = None if not original else read_text(Path(original))
                if original and after is None:
                    after = ch.after  # the backup is gone: fall back to removing our entries
                ch = Change(ch.path, ch.before, after)
            out.append(ch)
        return out


def apply(changes: list[Change], records: Records, *, install: bool) -> list[dict[str, str]]:
    """Write the changes; returns what was done (path, action, backup)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    data = records.load()
    done: list[dict[str, str]] = []
    for ch in changes:
        if not ch.changed:
            continue
        backup = ""
        if ch.before is not None:
            backup = str(records.backup(ch.path, ch.before, stamp))
        if ch.after is None:
            ch.path.unlink(missing_ok=True)
            _prune(ch.path.parent)
        else:
            _write(ch.path, ch.after, _mode(ch.path, 0o644))
        key = str(ch.path)
        if install and ch.after is not None:
            first = data.get(key, {}).get("original", backup) if key in data else backup
            data[key] = {"original": first, "wrote": _digest(ch.after)}
        else:
            data.pop(key, None)
        done.append({"path": key, "action": ch.action, "backup": backup})
    records.save(data)
    return done


def _prune(directory: Path, levels: int = 2) -> None:
    """Remove directories left empty by a deletion (``.claude/``, ``.opencode/plugins/``)."""
    for _ in range(levels):
        try:
            directory.rmdir()  # only succeeds when empty
        except OSError:
            return
        directory = directory.parent


def _mode(path: Path, default: int) -> int:
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        return default


def _write(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            fh.write(text)
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
