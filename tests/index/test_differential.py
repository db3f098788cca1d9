"""The index against the real tools: same answers as ``find`` and ``rg`` on the same tree,
before and right after the tree changes (once the watcher or sweep has caught up)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tenantry.core.events import Event, EventType
from tenantry.index.component import IndexService
from tenantry.index.grep import GrepSpec

from .conftest import (
    OLD,
    index_find,
    index_grep_items,
    make_tree,
    needs_rg,
    real_find,
    rg_files,
    rg_lines,
    rg_list,
    wait_until,
)

pytestmark = needs_rg

FIND_CASES: list[tuple[dict[str, object], list[str]]] = [
    ({}, []),
    ({"kind": "f"}, ["-type", "f"]),
    ({"kind": "d"}, ["-type", "d"]),
    ({"name": "*.py"}, ["-name", "*.py"]),
    ({"name": "file1?.txt"}, ["-name", "file1?.txt"]),
    ({"name": "[Tx]*[!y]"}, ["-name", "[Tx]*[!y]"]),
    ({"iname": "test*"}, ["-iname", "test*"]),
    ({"path": "*/src/*"}, ["-path", "*/src/*"]),
    ({"max_depth": 1}, ["-maxdepth", "1"]),
    ({"min_depth": 2, "max_depth": 3}, ["-mindepth", "2", "-maxdepth", "3"]),
    ({"kind": "f", "min_size": 101}, ["-type", "f", "-size", "+100c"]),
    ({"kind": "f", "max_size": 49}, ["-type", "f", "-size", "-50c"]),
    (
        {"kind": "f", "mtime_after": OLD + 80 * 3600 + 1},
        ["-type", "f", "-newermt", "@" + str(OLD + 80 * 3600 + 1)],
    ),
]

GREP_CASES: list[tuple[dict[str, object], list[str]]] = [
    ({"pattern": "needle"}, []),
    ({"pattern": "id[0-9]+$"}, []),
    ({"pattern": "^alpha (beta|gamma)"}, []),
    ({"pattern": "todo", "ignore_case": True}, ["-i"]),
    ({"pattern": "quux", "word": True}, ["-w"]),
    ({"pattern": "a.b", "fixed": True}, ["-F"]),
    ({"pattern": "delta", "globs": ("*.py",)}, ["-g", "*.py"]),
    ({"pattern": "widget", "globs": ("!src/",)}, ["-g", "!src/"]),
    ({"pattern": "beta", "globs": ("!pkg", "*.c")}, ["-g", "!pkg", "-g", "*.c"]),
    ({"pattern": "e", "globs": ("*.md",)}, ["-g", "*.md"]),
]


async def check_find(svc: IndexService, root: Path) -> list[str]:
    """Every find case; returns the mismatching cases (empty when all agree)."""
    bad = []
    for kw, args in FIND_CASES:
        got = await index_find(svc, root, **kw)
        want = real_find(root, *args)
        if got != want:
            bad.append(f"{kw}: extra {sorted(got - want)[:5]} missing {sorted(want - got)[:5]}")
    return bad


async def check_grep(svc: IndexService, root: Path) -> list[str]:
    bad = []
    files = await index_find(svc, root, kind="f")
    all_files = rg_files(root)
    if files != all_files:
        bad.append(f"files: {sorted(files ^ all_files)[:5]}")
    for kw, args in GREP_CASES:
        spec = GrepSpec(files_only=True, **kw)  # type: ignore[arg-type]
        got = {i["path"] for i in await index_grep_items(svc, root, spec)}
        want = rg_list(root, str(kw["pattern"]), *args)
        if "globs" in kw:  # rg's -g re-includes ignored files; the index never holds them
            want &= all_files
        if got != want:
            bad.append(f"-l {kw}: extra {sorted(got - want)[:3]} missing {sorted(want - got)[:3]}")
        spec = GrepSpec(before=1, after=2, **kw)  # type: ignore[arg-type]
        lines = {
            (i["path"], i["line"], i["text"], i["match"])
            for i in await index_grep_items(svc, root, spec)
        }
        want_lines = rg_lines(root, str(kw["pattern"]), "-B1", "-A2", *args)
        if "globs" in kw:
            want_lines = {x for x in want_lines if x[0] in all_files}
        if lines != want_lines:
            bad.append(f"lines {kw}: {sorted(lines ^ want_lines)[:3]}")
    return bad


async def agrees(svc: IndexService, root: Path) -> bool:
    return not await check_find(svc, root) and not await check_grep(svc, root)


def mutate(root: Path, step: int, *, in_place: bool = True) -> None:
    """One batch of edits of every kind: create, edit, rename, delete, dirs, ignore rules."""
    (root / f"src/new{step}.py").write_text(f"needle created {step}\nalpha beta\n")
    (root / "docs" / f"note{step}.md").write_text("widget\n")
    target = sorted((root / "src").glob("*.txt"))
    if target and in_place:
        with target[0].open("a") as fh:
            fh.write(f"needle appended {step} quux\n")
    elif target:  # an editor's atomic save: write a temporary file, rename it over
        tmp = target[0].with_name(".tmp-save")
        tmp.write_text(target[0].read_text() + f"needle appended {step} quux\n")
        os.replace(tmp, target[0])
    movable = sorted((root / "docs").glob("file*"))
    if movable:
        movable[0].rename(root / "src" / "pkg" / f"moved{step}_{movable[0].name}")
    victims = sorted((root / "src" / "pkg").glob("x*"))
    if victims:
        victims[0].unlink()
    newdir = root / f"fresh{step}" / "inner"
    newdir.mkdir(parents=True)
    (newdir / "a.c").write_text("int needle;\n")
    (newdir / "b.log").write_text("needle ignored\n")
    if (root / "sub" / "gen").exists():
        shutil.rmtree(root / "sub" / "gen")
    with (root / ".gitignore").open("a") as fh:
        fh.write(f"fresh{step}/inner/*.c\n")


async def crawled(service: IndexService, tmp_path: Path, **tree: int) -> Path:
    """A generated tree under ``tmp_path/ws``, registered and crawled."""
    root = tmp_path / "ws"
    make_tree(root, **tree)
    await service.add(str(root), wait=True)
    return root


async def assert_agrees(service: IndexService, root: Path) -> None:
    """The index answers find and grep as find and rg do."""
    assert await check_find(service, root) == []
    assert await check_grep(service, root) == []


async def test_crawl_matches_find_and_rg(service: IndexService, tmp_path: Path) -> None:
    root = await crawled(service, tmp_path)
    await assert_agrees(service, root)


async def test_watcher_keeps_results_identical_after_mutations(
    service: IndexService, tmp_path: Path
) -> None:
    root = await crawled(service, tmp_path, seed=11, files=120)
    for step in range(2):
        mutate(root, step)
        caught_up = await wait_until(lambda: agrees(service, root), timeout=15)
        assert caught_up, (await check_find(service, root), await check_grep(service, root))


async def test_sweep_alone_catches_directory_changes(
    manual_service: IndexService, tmp_path: Path
) -> None:
    """No watcher (as on a parallel file system): the directory sweep finds the changes."""
    root = await crawled(manual_service, tmp_path, seed=3, files=80)
    mutate(root, 0, in_place=False)
    ws = manual_service.resolve(str(root)).ws
    assert await manual_service.sweep(ws) > 0
    await assert_agrees(manual_service, root)


async def test_command_finished_refreshes_its_cwd(
    manual_service: IndexService, tmp_path: Path
) -> None:
    root = await crawled(manual_service, tmp_path, seed=5, files=60)
    mutate(root, 0)  # includes an in-place edit
    event = Event(
        EventType.COMMAND_FINISHED,
        subject="c1",
        outcome="completed",
        data={"cwd": str(root), "argv": ["sh"]},
    )
    await manual_service.runtime.bus.publish(event)
    await manual_service.wait_fresh(manual_service.resolve(str(root)))
    await assert_agrees(manual_service, root)


async def test_renames_and_deletes_right_after(service: IndexService, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("needle\n")
    await service.add(str(root), wait=True)
    os.rename(root / "a", root / "z")
    assert await wait_until(lambda: agrees(service, root))
    (root / "z" / "b" / "f.txt").unlink()
    assert await wait_until(lambda: agrees(service, root))
    assert await index_find(service, root, name="f.txt") == set()


@pytest.mark.parametrize("edits", [1, 3])
async def test_same_size_edit_in_the_same_tick_is_seen(
    service: IndexService, tmp_path: Path, edits: int
) -> None:
    """A rewrite that keeps size and lands in the same timestamp tick (racy file)."""
    root = tmp_path / "ws"
    root.mkdir()
    f = root / "f.txt"
    f.write_text("aaaa\n")
    await service.add(str(root), wait=True)
    for i in range(edits):
        f.write_text(f"bbb{i}\n")

    async def seen() -> bool:
        items = await index_grep_items(service, root, GrepSpec(f"bbb{edits - 1}"))
        return len(items) == 1

    assert await wait_until(seen)
