"""Freshness signals: a change source, the periodic sweep, and what events are ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantry.index.changes import ManualSource
from tenantry.index.component import IndexService
from tenantry.index.grep import GrepSpec

from .conftest import index_find, index_grep_items, runtime, wait_until


async def test_a_change_source_drives_refreshes(tmp_path: Path) -> None:
    """The adapter interface a Lustre changelog reader would implement."""
    source = ManualSource()
    svc = IndexService(runtime(tmp_path, index_sweep_s=0), source=source)
    await svc.start()
    try:
        root = tmp_path / "ws"
        (root / "d").mkdir(parents=True)
        (root / "d" / "f.txt").write_text("old\n")
        await svc.add(str(root), wait=True)
        assert source.roots == {str(root)}
        with (root / "d" / "f.txt").open("a") as fh:  # in place: no directory change
            fh.write("needle\n")
        source.changed(str(root / "d" / "f.txt"))

        async def seen() -> bool:
            return len(await index_grep_items(svc, root, GrepSpec("needle"))) == 1

        assert await wait_until(seen)
    finally:
        await svc.aclose()


async def test_periodic_sweep_finds_new_files(tmp_path: Path) -> None:
    svc = IndexService(runtime(tmp_path, index_sweep_s=0.1), source=ManualSource())
    await svc.start()
    try:
        root = tmp_path / "ws"
        (root / "a" / "b").mkdir(parents=True)
        await svc.add(str(root), wait=True)
        (root / "a" / "b" / "new.py").write_text("x = 1\n")

        async def seen() -> bool:
            return bool(await index_find(svc, root, name="new.py"))

        assert await wait_until(seen)
        assert svc.counters.sweeps >= 1
    finally:
        await svc.aclose()


async def test_events_under_ignored_directories_cost_nothing(
    manual_service: IndexService, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    (root / "build" / "obj").mkdir(parents=True)
    (root / "src").mkdir()
    (root / ".gitignore").write_text("build/\n")
    await manual_service.add(str(root), wait=True)
    ws = manual_service.workspaces[manual_service.resolve(str(root)).ws]
    pick = manual_service._dir_to_sync
    assert pick(ws, ".git/objects/ab/cd") is None
    assert pick(ws, "build/obj/x.o") is None
    assert pick(ws, "src/new.py") == "src"
    assert pick(ws, "src/newdir/deeper/x.py") == "src"
    assert pick(ws, "top.txt") == ""


async def test_unreadable_directory_stays_listed(
    manual_service: IndexService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Permission denied is not "gone": the directory stays, with what was known."""
    import errno
    import os

    from tenantry.index import crawl

    root = tmp_path / "ws"
    (root / "locked").mkdir(parents=True)
    (root / "locked" / "f.txt").write_text("x\n")
    await manual_service.add(str(root), wait=True)
    real_open = os.open

    def deny(path: str, flags: int, *args: object, **kw: object) -> int:
        if str(path).endswith("locked"):
            raise PermissionError(errno.EACCES, "denied")
        return real_open(path, flags, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(crawl.os, "open", deny)  # type: ignore[attr-defined]
    await manual_service.refresh(str(root))  # deep: re-lists every directory
    want = {str(root), str(root / "locked"), str(root / "locked" / "f.txt")}
    assert await index_find(manual_service, root) == want
