"""Planned file edits: compute, show as a unified diff, back up, write atomically.

An installer never writes while it plans. It returns ``Change``s (path, text
before, text after; ``None`` for an absent file); ``apply`` then keeps a
timestamped backup of every file it modifies and replaces each file
atomically, keeping its mode. A file is deleted only when nothing but
Tenantry's entries was in it (then without a backup, and empty directories
it leaves are removed). Planning the same install twice yields no
change the second time: that is how idempotence is checked.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenantry.errors import UsageError

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
        return path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc


def edit_json(path: Path, fn: Callable[[dict[str, Any]], None]) -> Change:
    """Plan an edit of a JSON object file; an edit that empties it deletes it."""
    before = read_text(path)
    data: Any = {}
    if before is not None and before.strip():
        try:
            data = json.loads(before)
        except ValueError as exc:
            raise UsageError(
                f"{path} is not valid JSON ({exc}); Tenantry will not rewrite it",
                hint="fix or move the file, then run the command again",
            ) from exc
        if not isinstance(data, dict):
            raise UsageError(f"{path} does not hold a JSON object; Tenantry will not rewrite it")
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
    """Plan setting (or, with ``body=None``, removing) the marked block in a text file."""
    before = read_text(path)
    text = before or ""
    start, end = text.find(BEGIN), text.find(END)
    if start != -1 and end != -1 and end > start:
        head, tail = text[:start], text[end + len(END) :]
        tail = tail[1:] if tail.startswith("\n") else tail
    else:
        head, tail = text, ""
    if body is None:
        new = (head.rstrip("\n") + "\n" + tail) if head.strip() else tail
        new = new if new.strip() else ""
    else:
        block = f"{BEGIN}\n{body.strip()}\n{END}\n"
        sep = "" if not head.strip() else ("\n" if head.endswith("\n\n") else "\n\n")
        new = head.rstrip("\n") + sep + block + tail if head.strip() else block + tail
    after = new if new.strip() else None
    if before is None and after is None:
        return Change(path, None, None)
    return Change(path, before, after)


def whole_file(path: Path, content: str | None) -> Change:
    """Plan a file that Tenantry owns entirely (``None`` removes it)."""
    return Change(path, read_text(path), content)


def backup_path(path: Path, stamp: str) -> Path:
    return path.with_name(f"{path.name}.tenantry-backup-{stamp}")


def apply(changes: list[Change]) -> list[dict[str, str]]:
    """Write the changes; returns what was done (path, action, backup)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    done: list[dict[str, str]] = []
    for ch in changes:
        if not ch.changed:
            continue
        backup = ""
        # a deletion only ever removes a file that held nothing but Tenantry's entries,
        # so only modifications need a backup
        if ch.before is not None and ch.after is not None:
            bp = backup_path(ch.path, stamp)
            n = 1
            while bp.exists():
                bp = backup_path(ch.path, f"{stamp}.{n}")
                n += 1
            _write(bp, ch.before, _mode(ch.path, 0o600))
            backup = str(bp)
        if ch.after is None:
            ch.path.unlink(missing_ok=True)
            _prune(ch.path.parent)
        else:
            _write(ch.path, ch.after, _mode(ch.path, 0o644))
        done.append({"path": str(ch.path), "action": ch.action, "backup": backup})
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
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
