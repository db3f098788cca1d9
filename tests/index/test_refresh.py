"""Refreshing from the change source's own words: one file for an edit, a directory for
create/delete/rename, and answers that are never stale (the query barrier)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.events import Event, EventType
from tenantry.index import crawl, gitstatus
from tenantry.index.changes import MODIFIED, ManualSource
from tenantry.index.component import IndexService
from tenantry.index.grep import GrepSpec

from . import conftest as tools
from .conftest import OLD, index_find, index_grep_items, runtime, wait_until
from .test_differential import FIND_CASES, GREP_CASES, mutate


async def watched_tree(svc: IndexService, tmp_path: Path, **tree: int) -> Path:
    """A generated tree, crawled, on a file system whose every change inotify sees."""
    root = tmp_path / "ws"
    tools.make_tree(root, **tree)
    await svc.add(str(root), wait=True)
    _complete(svc, root)
    await svc.settle()
    return root


def _complete(svc: IndexService, root: Path) -> None:
    complete = getattr(svc.source, "complete", None)
    if complete is None or not complete(str(root)):
        pytest.skip(f"inotify does not see every change on {root}'s file system")


@contextlib.asynccontextmanager
async def started(source: ManualSource, tmp_path: Path) -> AsyncIterator[IndexService]:
    svc = IndexService(runtime(tmp_path, index_sweep_s=0), source=source)
    await svc.start()
    try:
        yield svc
    finally:
        await svc.aclose()


async def snapshot(svc: IndexService, root: Path) -> dict[str, Any]:
    """Every find and grep case of the differential tests, right after one barrier."""
    scope = svc.resolve(str(root))
    await svc.wait_fresh(scope)
    out: dict[str, Any] = {"files": await index_find(svc, root, kind="f")}
    for i, (kw, _) in enumerate(FIND_CASES):
        out[f"find{i}"] = await index_find(svc, root, **kw)
    for i, (kw, _) in enumerate(GREP_CASES):
        listed = await index_grep_items(svc, root, GrepSpec(files_only=True, **kw))  # type: ignore[arg-type]
        out[f"l{i}"] = {x["path"] for x in listed}
        lines = await index_grep_items(svc, root, GrepSpec(before=1, after=2, **kw))  # type: ignore[arg-type]
        out[f"n{i}"] = {(x["path"], x["line"], x["text"], x["match"]) for x in lines}
    return out


def truth(root: Path) -> dict[str, Any]:
    """The same cases from the real ``find`` and ``rg``."""
    files = tools.rg_files(root)
    out: dict[str, Any] = {"files": files}
    for i, (_, args) in enumerate(FIND_CASES):
        out[f"find{i}"] = tools.real_find(root, *args)
    for i, (kw, args) in enumerate(GREP_CASES):
        listed = tools.rg_list(root, str(kw["pattern"]), *args)
        lines = tools.rg_lines(root, str(kw["pattern"]), "-B1", "-A2", *args)
        if "globs" in kw:  # rg's -g re-includes ignored files; the index never holds them
            listed &= files
            lines = {x for x in lines if x[0] in files}
        out[f"l{i}"], out[f"n{i}"] = listed, lines
    return out


def differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [
        f"{k}: extra {sorted(got[k] - want[k])[:3]} missing {sorted(want[k] - got[k])[:3]}"
        for k in want
        if got[k] != want[k]
    ]


def single_changes(root: Path, step: int) -> Iterator[str]:
    """One change at a time, of every kind; yields its name after making it."""
    src = root / "src"
    texts = sorted(src.glob("*.txt"))
    with texts[0].open("a") as fh:
        fh.write(f"needle edited in place {step}\n")
    yield "edit in place"
    texts[-1].write_text(f"alpha rewritten {step}\n")  # truncate and write
    yield "rewrite"
    (src / f"created{step}.py").write_text(f"needle created {step}\n")
    yield "create file"
    tmp = src / ".save.tmp"
    tmp.write_text(texts[0].read_text() + "widget saved\n")
    os.replace(tmp, texts[0])
    yield "atomic save"
    (src / f"created{step}.py").rename(root / "docs" / f"moved{step}.py")
    yield "rename file across directories"
    (root / "docs" / f"moved{step}.py").unlink()
    yield "delete file"
    (root / f"tree{step}" / "a" / "b").mkdir(parents=True)
    (root / f"tree{step}" / "a" / "b" / "deep.md").write_text("needle deep\n")
    yield "create directory tree"
    (root / f"tree{step}").rename(root / "docs" / f"tree{step}")
    yield "rename directory"
    with (root / "docs" / f"tree{step}" / "a" / "b" / "deep.md").open("a") as fh:
        fh.write("quux beta\n")
    yield "edit in a renamed directory"
    shutil.rmtree(root / "docs" / f"tree{step}")
    yield "delete directory tree"
    os.chmod(texts[-1], 0o600)
    yield "chmod"
    mutate(root, step, in_place=step % 2 == 0)  # a batch, .gitignore edits included
    yield "batch"


@tools.needs_rg
async def test_answers_right_after_each_change_equal_find_and_rg(
    service: IndexService, tmp_path: Path
) -> None:
    root = await watched_tree(service, tmp_path, seed=13, files=120)
    for step in range(2):
        for change in single_changes(root, step):
            got = await snapshot(service, root)  # no waiting but the barrier
            assert differences(got, truth(root)) == [], (step, change)
    # drained on the loop: no cookie was needed for any of those answers
    assert service.counters.drains > 0 and service.counters.barriers == 0


async def test_a_query_with_nothing_pending_writes_no_cookie(
    service: IndexService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = await watched_tree(service, tmp_path, seed=5, files=30)
    cookies: list[str] = []
    real_touch = gitstatus._touch_and_remove

    def counted(path: str) -> None:
        cookies.append(path)
        real_touch(path)

    monkeypatch.setattr(gitstatus, "_touch_and_remove", counted)
    scope = service.resolve(str(root))
    for _ in range(3):
        await service.wait_fresh(scope)
    assert cookies == [] and service.counters.drains == 3
    # a change made just before the query: seen, still without a cookie
    (root / "src" / "just_made.py").write_text("needle\n")
    await service.wait_fresh(scope)
    assert await index_find(service, root, name="just_made.py")
    assert cookies == []


async def test_a_backed_root_still_flushes_its_feed_by_a_cookie(tmp_path: Path) -> None:
    """watchdog's threads may hold events of a backing tree: there a cookie is the barrier."""
    mnt, export = tmp_path / "mnt", tmp_path / "export"
    (mnt / "ws").mkdir(parents=True)
    (export / "ws").mkdir(parents=True)
    rt = runtime(tmp_path, index_sweep_s=0, index_watch_backing=f"{mnt}={export}")
    svc = IndexService(rt)
    await svc.start()
    try:
        await svc.add(str(mnt / "ws"), wait=True)
        assert svc.source.complete(str(mnt / "ws"))  # type: ignore[attr-defined]
        assert not svc.source.drain(str(mnt / "ws"))  # type: ignore[attr-defined]
        await svc.wait_fresh(svc.resolve(str(mnt / "ws")))
        assert svc.counters.barriers == 1 and svc.counters.drains == 0
    finally:
        await svc.aclose()


class CountingOs:
    """``os`` for the crawler, counting its stat and directory-listing calls."""

    STATS = frozenset({"stat", "lstat", "fstat"})

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        real = getattr(os, name)
        if name not in self.STATS | {"scandir", "open"}:
            return real

        def counted(*args: Any, **kw: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            if name == "scandir":
                return _Listing(self, real(*args, **kw))
            return real(*args, **kw)

        return counted

    @property
    def listdirs(self) -> int:
        return self.calls.get("scandir", 0)

    @property
    def stats(self) -> int:
        return sum(self.calls.get(n, 0) for n in (*self.STATS, "entry_stat"))


class _Listing:
    """A scandir iterator whose entries count as one stat each (the crawler lstats all)."""

    def __init__(self, counter: CountingOs, it: Any) -> None:
        self._counter, self._it = counter, it

    def __enter__(self) -> _Listing:
        return self

    def __exit__(self, *exc: object) -> None:
        self._it.close()

    def __iter__(self) -> Iterator[Any]:
        for entry in self._it:
            self._counter.calls["entry_stat"] = self._counter.calls.get("entry_stat", 0) + 1
            yield entry


async def test_one_edit_refreshes_only_that_file(
    service: IndexService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append to one file of a 40-file directory: no listing, one open and one stat."""
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    for i in range(40):
        (root / "pkg" / f"m{i:02d}.py").write_text(f"value = {i}\n")
        os.utime(root / "pkg" / f"m{i:02d}.py", (OLD, OLD))
    for d in (root / "pkg", root):
        os.utime(d, (OLD, OLD))  # nothing racy: the crawl schedules no re-check
    await service.add(str(root), wait=True)
    _complete(service, root)
    await service.settle()
    counting = CountingOs()
    monkeypatch.setattr(crawl, "os", counting)
    with (root / "pkg" / "m07.py").open("a") as fh:
        fh.write("needle_appended = 1\n")

    async def seen() -> bool:
        return len(await index_grep_items(service, root, GrepSpec("needle_appended"))) == 1

    assert await wait_until(seen)
    await service.settle()
    assert counting.listdirs == 0, counting.calls
    assert counting.stats <= 1 and counting.calls.get("open", 0) <= 1, counting.calls
    assert not service._timers  # no re-check: the source reports any later change


async def test_a_command_in_a_fully_watched_workspace_rescans_nothing(
    service: IndexService, tmp_path: Path
) -> None:
    root = await watched_tree(service, tmp_path, seed=4, files=60)
    before = service.counters.syncs
    (root / "src" / "made_by_command.py").write_text("needle\n")
    ended = {"cwd": str(root), "argv": ["sh"]}
    await service.runtime.bus.publish(Event(EventType.COMMAND_FINISHED, subject="c1", data=ended))
    await service.wait_fresh(service.resolve(str(root)))
    assert await index_find(service, root, name="made_by_command.py")
    # src alone (and its re-check once its fresh mtime can be trusted), not 13 directories
    assert service.counters.syncs - before <= 2


async def test_a_modified_notice_for_a_new_or_gone_file_lists_its_directory(
    tmp_path: Path,
) -> None:
    """A source may say MODIFIED for a file the index lacks, or one deleted since."""
    source = ManualSource()
    async with started(source, tmp_path) as svc:
        root = tmp_path / "ws"
        (root / "d").mkdir(parents=True)
        (root / "d" / "old.txt").write_text("old\n")
        await svc.add(str(root), wait=True)
        (root / "d" / "new.txt").write_text("needle\n")
        source.changed(str(root / "d" / "new.txt"), MODIFIED)

        async def new_seen() -> bool:
            return bool(await index_find(svc, root, name="new.txt"))

        assert await wait_until(new_seen)
        (root / "d" / "old.txt").unlink()
        source.changed(str(root / "d" / "old.txt"), MODIFIED)

        async def old_gone() -> bool:
            return not await index_find(svc, root, name="old.txt")

        assert await wait_until(old_gone)


class BackedSource(ManualSource):
    """A complete source that watches a backing tree (as ``index_watch_backing`` does)."""

    def complete(self, root: str) -> bool:
        return root in self.roots

    def backed(self, root: str) -> bool:
        return True


async def test_a_backed_source_rechecks_a_burst_of_edits_once(tmp_path: Path) -> None:
    """The mount's caches may predate the event: one later stat check per burst."""
    source = BackedSource()
    async with started(source, tmp_path) as svc:
        root = tmp_path / "ws"
        root.mkdir()
        f = root / "f.txt"
        f.write_text("old\n")
        os.utime(f, (OLD, OLD))
        os.utime(root, (OLD, OLD))
        await svc.add(str(root), wait=True)
        await svc.settle()
        for i in range(3):
            with f.open("a") as fh:
                fh.write(f"edit{i}\n")
            before = svc.counters.file_refreshes
            source.changed(str(f), MODIFIED)

            async def read(before: int = before) -> bool:
                return svc.counters.file_refreshes > before and not svc._tasks

            assert await wait_until(read)
            assert len(svc._timers) == 1  # moved, not added

        async def rechecked() -> bool:
            return not svc._timers and not svc._tasks

        assert await wait_until(rechecked)
        assert len(await index_grep_items(svc, root, GrepSpec("edit2"))) == 1
        assert svc.counters.file_refreshes == 4  # three reads and one stat check
