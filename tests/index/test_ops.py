"""The index ops: pagination, verify, errors, events, and the MCP tool table."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import tenantry.index
from tenantry.core import errors
from tenantry.core.events import Event, EventType
from tenantry.core.models import Principal
from tenantry.index import ops as index_ops
from tenantry.index.component import IndexService
from tenantry.service.ops import REGISTRY, OpContext

from .conftest import make_tree, real_find


async def call(ctx: OpContext, op_name: str, /, **params: Any) -> Any:
    return await REGISTRY[op_name].fn(ctx, params)


async def all_pages(ctx: OpContext, op_name: str, /, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    res = await call(ctx, op_name, **params)
    items += res["items"]
    while res["next_cursor"]:
        assert len(res["items"]) <= params["limit"]
        res = await call(ctx, op_name, cursor=res["next_cursor"], **params)
        items += res["items"]
    return items


@pytest.fixture
async def tree(ctx: OpContext, tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    make_tree(root, seed=2, files=90)
    await call(ctx, "index.add", path=str(root), wait=True)
    return root


async def test_find_pages_cover_everything_once(ctx: OpContext, tree: Path) -> None:
    for sort in ("path", "modified", "-modified"):
        items = await all_pages(ctx, "index.find", path=str(tree), limit=7, sort=sort)
        paths = [i["path"] for i in items]
        assert len(paths) == len(set(paths))
        assert set(paths) == real_find(tree)
        if sort != "path":
            mtimes = [i["mtime"] for i in items]
            assert mtimes == sorted(mtimes, reverse=sort == "-modified")


async def test_grep_pages_match_one_big_page(ctx: OpContext, tree: Path) -> None:
    whole = await call(ctx, "index.grep", path=str(tree), pattern="needle|alpha", limit=2000)
    assert whole["next_cursor"] is None and len(whole["items"]) > 10
    paged = await all_pages(ctx, "index.grep", path=str(tree), pattern="needle|alpha", limit=3)
    assert paged == whole["items"]


async def test_ls_stat_du_tree_recent(ctx: OpContext, tree: Path) -> None:
    ls = await call(ctx, "index.ls", path=str(tree / "src"))
    names = {os.path.basename(i["path"]) for i in ls["items"]}
    assert names == {
        os.path.basename(p)
        for p in real_find(tree / "src", "-maxdepth", "1")
        if p != str(tree / "src")
    }
    f = sorted(real_find(tree / "docs", "-type", "f"))[0]
    st = (await call(ctx, "index.stat", path=f))["items"][0]
    real = os.stat(f)
    assert (st["size"], st["type"], st["mode"]) == (
        real.st_size,
        "f",
        f"{real.st_mode & 0o7777:04o}",
    )
    du = await call(ctx, "index.du", path=str(tree))
    files = list(real_find(tree, "-type", "f"))
    assert du["files"] == len(files)
    assert du["bytes"] == sum(os.path.getsize(p) for p in files)
    assert sum(c["bytes"] for c in du["children"]) == du["bytes"]
    tr = await call(ctx, "index.tree", path=str(tree), max_depth=1)
    assert {i["path"] for i in tr["items"]} == {
        os.path.relpath(p, tree) for p in real_find(tree, "-mindepth", "1", "-maxdepth", "1")
    }
    tr = await call(ctx, "index.tree", path=str(tree / "src"), max_depth=2)
    assert {i["path"] for i in tr["items"]} == {
        os.path.relpath(p, tree / "src")
        for p in real_find(tree / "src", "-mindepth", "1", "-maxdepth", "2")
    }
    capped = await call(ctx, "index.tree", path=str(tree), max_depth=5, limit=4)
    assert capped["truncated"] and [i["depth"] for i in capped["items"]] == [1, 1, 1, 1]
    recent = await call(ctx, "index.recent", path=str(tree), limit=5)
    newest = sorted(files, key=lambda p: (-os.stat(p).st_mtime_ns, p))[:5]
    assert [i["path"] for i in recent["items"]] == newest


async def test_verify_restats_returned_paths(manual_service: IndexService, tmp_path: Path) -> None:
    ctx = OpContext(Principal(uid=os.getuid(), user="t"), manual_service.runtime)
    root = tmp_path / "ws"
    root.mkdir()
    f = root / "a.txt"
    f.write_text("one\n")
    await call(ctx, "index.add", path=str(root), wait=True)
    with f.open("a") as fh:  # in place: no watcher, no dir mtime change
        fh.write("two needle\n")
    stale = await call(ctx, "index.stat", path=str(f))
    assert stale["items"][0]["size"] == 4
    fresh = await call(ctx, "index.stat", path=str(f), verify=True)
    assert fresh["items"][0]["size"] == f.stat().st_size
    assert fresh["verified"] == {"checked": 1, "refreshed": 1}
    hits = await call(ctx, "index.grep", path=str(root), pattern="needle")
    assert [i["line"] for i in hits["items"]] == [2]
    (root / "new.txt").write_text("fresh\n")  # the index has not seen it yet
    with pytest.raises(errors.NotFound):
        await call(ctx, "index.stat", path=str(root / "new.txt"))
    new = await call(ctx, "index.stat", path=str(root / "new.txt"), verify=True)
    assert new["items"][0]["size"] == 6
    (root / "new.txt").unlink()
    f.unlink()
    gone = await call(ctx, "index.find", path=str(root), type="f", verify=True)
    assert gone["items"] == [] and gone["verified"]["refreshed"] == 2


async def test_errors_are_actionable(ctx: OpContext, tree: Path, tmp_path: Path) -> None:
    with pytest.raises(errors.UsageError, match="absolute"):
        await call(ctx, "index.find", path="relative/dir")
    with pytest.raises(errors.NotFound) as nf:
        await call(ctx, "index.find", path=str(tmp_path / "elsewhere"))
    assert "tenantry index add" in (nf.value.hint or "")
    with pytest.raises(errors.UsageError, match="regular expression"):
        await call(ctx, "index.grep", path=str(tree), pattern="(unclosed")
    with pytest.raises(errors.Conflict):
        await call(ctx, "index.add", path=str(tree / "src"))
    with pytest.raises(errors.NotFound):
        await call(ctx, "index.stat", path=str(tree / "build"))  # ignored
    with pytest.raises(errors.NotFound):
        await call(ctx, "index.find", path=str(tree / "no" / "such"))
    with pytest.raises(errors.NotFound):
        await call(ctx, "index.grep", path=str(tree / "nosuch"), pattern="x")
    with pytest.raises(errors.UsageError, match="cursor"):
        await call(ctx, "index.find", path=str(tree), cursor="!!")


async def test_queries_emit_events_and_remove_forgets(ctx: OpContext, tree: Path) -> None:
    seen: list[Event] = []

    async def grab(ev: Event) -> None:
        seen.append(ev)

    ctx.runtime.bus.subscribe(grab)
    await call(ctx, "index.find", path=str(tree), name="*.md")
    assert [e.type for e in seen] == [EventType.INDEX_QUERY]
    assert seen[0].subject == "index.find" and seen[0].principal == ctx.principal.key
    listed = await call(ctx, "index.list", footprint=True)
    assert [w["root"] for w in listed["workspaces"]] == [str(tree)]
    assert listed["footprint"]["entries"] == listed["workspaces"][0]["entries"]
    await call(ctx, "index.remove", path=str(tree))
    assert (await call(ctx, "index.list"))["workspaces"] == []
    with pytest.raises(errors.NotFound):
        await call(ctx, "index.find", path=str(tree))


def test_mcp_tools_name_real_ops() -> None:
    for tool, (name, description) in index_ops.MCP_TOOLS.items():
        assert name in REGISTRY, tool
        assert len(description) > 40


def test_exported_members() -> None:
    for name in tenantry.index.__all__:
        assert hasattr(tenantry.index, name)


async def test_restart_keeps_the_index(tmp_path: Path) -> None:
    from .conftest import runtime

    root = tmp_path / "ws"
    make_tree(root, seed=9, files=30)
    rt = runtime(tmp_path, index_sweep_s=0)
    svc = IndexService(rt)
    await svc.start()
    await svc.add(str(root), wait=True)
    await svc.aclose()
    (root / "docs" / "late.md").write_text("while the daemon was down\n")
    svc = IndexService(runtime(tmp_path, index_sweep_s=0))
    await svc.start()
    try:
        await svc.wait_ready(str(root))
        scope = svc.resolve(str(root / "docs" / "late.md"))
        from tenantry.index.query import stat

        assert (await svc.read(lambda c: stat(c, scope)))["size"] > 0
    finally:
        await svc.aclose()
