"""The loop's own inotify reader: what it reports, and that a drain leaves nothing behind."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenantry.index.changes import MODIFIED, WatchdogSource
from tenantry.index.inotify import IN_CREATE, IN_Q_OVERFLOW, InotifyTree, parse


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.lost = 0

    def notify(self, path: str, what: str = "", /) -> None:
        self.events.append((path, what))

    def on_lost(self) -> None:
        self.lost += 1

    def take(self) -> set[tuple[str, str]]:
        out, self.events = set(self.events), []
        return out


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[InotifyTree, Seen, Path]]:
    seen = Seen()
    t = InotifyTree(seen.notify, seen.on_lost)
    t.open()
    root = tmp_path / "ws"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("x\n")
    t.add(str(root))
    t.add_tree(str(root))
    yield t, seen, root
    t.close()


def test_every_change_made_before_a_read_is_reported_by_it(
    tree: tuple[InotifyTree, Seen, Path],
) -> None:
    t, seen, root = tree
    f = root / "a" / "b" / "f.txt"
    with f.open("a") as fh:
        fh.write("y\n")
    (root / "new").mkdir()
    (root / "new" / "inside.txt").write_text("z\n")  # may predate the new watch
    t.read()
    got = seen.take()
    assert (str(f), MODIFIED) in got
    assert (str(root / "new"), "") in got and (str(root / "new" / "inside.txt"), "") in got
    assert t.read() == 0 and seen.take() == set()  # nothing left behind
    (root / "new" / "later.txt").write_text("w\n")  # the new directory is watched
    t.read()
    assert (str(root / "new" / "later.txt"), "") in seen.take()


def test_a_renamed_directory_is_followed_under_its_new_name(
    tree: tuple[InotifyTree, Seen, Path],
) -> None:
    t, seen, root = tree
    os.rename(root / "a", root / "c")
    t.read()
    got = seen.take()
    assert (str(root / "a"), "") in got and (str(root / "c"), "") in got
    assert (str(root / "a" / "b" / "f.txt"), "") in got  # both ends of every entry
    assert (str(root / "c" / "b" / "f.txt"), "") in got
    (root / "c" / "b" / "f.txt").write_text("moved\n")
    t.read()
    assert (str(root / "c" / "b" / "f.txt"), MODIFIED) in seen.take()


def test_a_directory_moved_out_is_no_longer_watched(
    tree: tuple[InotifyTree, Seen, Path], tmp_path: Path
) -> None:
    t, seen, root = tree
    os.rename(root / "a", tmp_path / "outside")
    t.read()
    assert (str(root / "a"), "") in seen.take()
    (tmp_path / "outside" / "b" / "f.txt").write_text("elsewhere\n")
    t.read()
    assert seen.take() == set()  # not reported under its old path
    assert not any(p.startswith(str(root / "a")) for p in t._wd_of)


def test_reads_and_the_index_own_opens_are_not_events(
    tree: tuple[InotifyTree, Seen, Path],
) -> None:
    t, seen, root = tree
    (root / "a" / "b" / "f.txt").read_text()
    os.listdir(root / "a")
    assert t.read() == 0 and seen.take() == set()


def test_an_overflow_is_lost_and_rewatches(tree: tuple[InotifyTree, Seen, Path]) -> None:
    t, seen, _root = tree
    wds = len(t._wd_of)
    t._wd_of.clear()
    t._dir_of.clear()
    for event in parse(struct.pack("iIII", -1, IN_Q_OVERFLOW, 0, 0)):
        t._event(*event)
    assert seen.lost == 1 and len(t._wd_of) == wds


def test_parse_reads_names_and_padding() -> None:
    raw = struct.pack("iIII", 3, IN_CREATE, 0, 16) + b"name.txt".ljust(16, b"\0")
    raw += struct.pack("iIII", 4, IN_CREATE, 0, 0)
    assert parse(raw) == [(3, IN_CREATE, 0, "name.txt"), (4, IN_CREATE, 0, "")]


def test_a_tree_removed_during_its_first_walk_leaves_no_watch(tmp_path: Path) -> None:
    seen = Seen()
    t = InotifyTree(seen.notify, seen.on_lost)
    t.open()
    try:
        root = tmp_path / "ws"
        for i in range(20):
            (root / f"d{i}" / "e").mkdir(parents=True)
        t.add(str(root))
        t.remove(str(root))  # before the walk: it stops at once
        t.add_tree(str(root))
        assert t._wd_of == {} and t._dir_of == {}
    finally:
        t.close()


async def test_a_root_is_drained_only_once_its_first_walk_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk runs off the loop; until it ends a query must flush by a cookie."""
    import threading

    src = WatchdogSource()
    await src.start(lambda path, what="", /: None)
    try:
        assert src._tree is not None
        release = threading.Event()
        walk = src._tree.add_tree

        def slow(root: str) -> None:
            release.wait(10)
            walk(root)

        monkeypatch.setattr(src._tree, "add_tree", slow)
        root = tmp_path / "ws"
        (root / "a").mkdir(parents=True)
        src.watch(str(root))
        if not src.complete(str(root)):
            pytest.skip("not a local file system")
        assert not src.drain(str(root))  # the loop was not held by the walk, either
        release.set()
        await src.ready(str(root))
        assert src.drain(str(root))
        assert str(root / "a") in src._tree._wd_of
    finally:
        release.set()
        await src.aclose()


def test_a_bounded_read_leaves_the_rest_for_the_next(
    tree: tuple[InotifyTree, Seen, Path],
) -> None:
    t, seen, root = tree
    for i in range(400):  # more than one read's worth of events
        (root / f"f{i:03d}-{'x' * 60}.txt").write_text("x")
    first = t.read(most=1)
    assert 0 < first < t.read() + first  # the rest came with the next read
    assert {p for p, _ in seen.take()} >= {str(root / f"f399-{'x' * 60}.txt")}
