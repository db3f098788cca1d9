"""The index's use cases: register workspaces, and query them without the file system.

Every query takes an absolute ``path`` inside a registered workspace, returns
at most ``limit`` items plus ``next_cursor`` (pass it back as ``cursor`` for the
next page, null when done), and the workspace's freshness. ``verify=true``
re-stats only the returned paths and refreshes any that changed before answering.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Callable
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.core.events import Event, EventType
from tenantry.index import grep as grep_mod
from tenantry.index import query
from tenantry.index.component import IndexService
from tenantry.service.ops import OpContext, op, param

DEFAULT_LIMIT = 200
MAX_LIMIT = 2000

# MCP tool descriptions (tool name -> (op, description)); the MCP server registers them.
MCP_TOOLS: dict[str, tuple[str, str]] = {
    "find_files": (
        "index.find",
        "Find files and directories under an absolute path from the workspace index, without"
        " touching the parallel file system. Filters: name (glob on the file name, like"
        " find -name), iname, path_glob (glob on the whole path), type (f|d|l), min_size /"
        " max_size (bytes), changed_within_s, max_depth. sort: path | modified (oldest"
        " first, like rg --sort=modified) | -modified (newest first). Results are capped"
        " (limit) and paginated: pass next_cursor back as cursor. Honors .gitignore."
        " Set verify=true to re-stat the returned paths.",
    ),
    "grep_files": (
        "index.grep",
        "Search file contents with a regular expression (Python re syntax, matched per line"
        " like ripgrep) from the workspace index. Options: ignore_case, fixed (literal"
        " string), word, globs (ripgrep -g style, e.g. ['*.py', '!tests/**']), files_only"
        " (like rg -l), count (rg -c), before/after/context lines. Returns path, line"
        " number, text; capped and paginated with next_cursor. Skips binary and"
        " .gitignored files.",
    ),
    "list_dir": (
        "index.ls",
        "List a directory (absolute path) from the workspace index: name, type, size,"
        " mtime of each entry; paginated.",
    ),
    "stat_path": (
        "index.stat",
        "Type, size, mtime and mode of one path from the workspace index; verify=true"
        " re-stats it on the file system first.",
    ),
    "disk_usage": (
        "index.du",
        "Apparent size in bytes and file counts of a directory and of each child, from the"
        " workspace index, largest first.",
    ),
    "tree": (
        "index.tree",
        "The directory tree under a path down to max_depth (default 3), from the workspace"
        " index; capped at limit entries, shallowest levels first.",
    ),
    "recent_files": (
        "index.recent",
        "Files changed most recently under a path (newest first), optionally only within"
        " the last since_s seconds, from the workspace index.",
    ),
}


ADD_DESCRIPTION = (
    "Register a workspace directory (absolute path) with the index and crawl it, once;"
    " afterwards find_files, grep_files and the other index tools answer for it without"
    " touching the file system, and the index follows changes by itself."
)


def _svc(ctx: OpContext) -> IndexService:
    return ctx.runtime.component("index", IndexService)


def _limit(params: dict[str, Any], default: int = DEFAULT_LIMIT) -> int:
    limit = param(params, "limit", int, default)
    if limit < 1:
        raise UsageError("limit must be at least 1")
    return min(limit, MAX_LIMIT)


def _size(params: dict[str, Any], name: str) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return parse_size(value)
    return param(params, name, int)


def parse_size(text: str) -> int:
    """``123``, ``10k``, ``5M``, ``1G`` (binary units) -> bytes."""
    units = {"": 1, "c": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
    t = text.strip().lower().removesuffix("b")
    num, unit = (t[:-1], t[-1]) if t and t[-1] in units else (t, "")
    try:
        return int(float(num) * units[unit])
    except ValueError as exc:
        raise UsageError(f"invalid size {text!r}", hint="e.g. 4096, 10k, 5M") from exc


async def _answer(
    ctx: OpContext,
    name: str,
    params: dict[str, Any],
    run: Callable[[Any, query.Scope], dict[str, Any]],
) -> dict[str, Any]:
    """Resolve the path, run the query on a read connection, verify if asked, emit."""
    svc = _svc(ctx)
    path = param(params, "path", str, required=True)
    scope = svc.resolve(path)
    t0 = time.perf_counter()
    await svc.wait_fresh(scope)
    verify = param(params, "verify", bool, False)
    checked = refreshed = 0
    if verify and name in ("index.stat", "index.ls"):
        # the path itself first: it may be new, gone, or changed since the last refresh
        refreshed = await svc.verify(scope, [scope.abs(scope.rel)])
        checked = 1
    result = await svc.read(lambda conn: run(conn, scope))
    if verify and name != "index.stat":
        paths = sorted({i["path"] for i in result.get("items", []) if "path" in i})
        again = await svc.verify(scope, paths) if paths else 0
        if again:
            result = await svc.read(lambda conn: run(conn, scope))
        checked, refreshed = checked + len(paths), refreshed + again
    if verify:
        result["verified"] = {"checked": checked, "refreshed": refreshed}
    elapsed = time.perf_counter() - t0
    result["index"] = svc.state_of(scope)
    await ctx.runtime.emit(
        Event(
            EventType.INDEX_QUERY,
            principal=ctx.principal.key,
            subject=name,
            outcome="ok",
            duration_s=elapsed,
            data={"path": path, "results": len(result.get("items", []))},
        )
    )
    return result


@op("index.add", "Register a workspace and crawl it into the index.", action="index_build")
async def add(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    path = param(params, "path", str, required=True)
    return await _svc(ctx).add(path, wait=param(params, "wait", bool, False))


@op("index.remove", "Forget a workspace.", action="index_build")
async def remove(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    return await _svc(ctx).remove(param(params, "path", str, required=True))


@op("index.list", "Registered workspaces, their state and size.", action="index_query")
async def list_(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    out: dict[str, Any] = {"workspaces": await svc.describe_all(), "counters": svc.status()}
    if param(params, "footprint", bool, False):
        out["footprint"] = await svc.footprint()
    return out


@op("index.find", "Find paths by name, type, size and mtime.", action="index_query")
async def find(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    within = param(params, "changed_within_s", float)
    flt = query.FindFilter(
        name=param(params, "name", str),
        iname=param(params, "iname", str),
        path=param(params, "path_glob", str),
        kind=_kind(param(params, "type", str)),
        min_size=_size(params, "min_size"),
        max_size=_size(params, "max_size"),
        mtime_after=param(params, "mtime_after", float) if within is None else time.time() - within,
        mtime_before=param(params, "mtime_before", float),
        min_depth=param(params, "min_depth", int, 0),
        max_depth=param(params, "max_depth", int),
    )
    sort = param(params, "sort", str, "path")
    limit, cursor = _limit(params), param(params, "cursor", str)
    return await _answer(
        ctx,
        "index.find",
        params,
        lambda c, s: query.find(c, s, flt, sort=sort, limit=limit, cursor=cursor),
    )


def _kind(value: str | None) -> str | None:
    if value is None:
        return None
    if value not in ("f", "d", "l", "o"):
        raise UsageError(f"unknown type {value!r}", hint="f (file), d (directory), l (symlink)")
    return value


@op("index.grep", "Search file contents by regex (trigram prefilter).", action="index_query")
async def grep(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    context = param(params, "context", int, 0)
    globs = param(params, "globs", list, [])
    if not all(isinstance(g, str) for g in globs):
        raise UsageError("globs must be a list of strings")
    spec = grep_mod.GrepSpec(
        pattern=param(params, "pattern", str, required=True),
        ignore_case=param(params, "ignore_case", bool, False),
        fixed=param(params, "fixed", bool, False),
        word=param(params, "word", bool, False),
        globs=tuple(globs),
        files_only=param(params, "files_only", bool, False),
        count=param(params, "count", bool, False),
        before=param(params, "before", int, context),
        after=param(params, "after", int, context),
        max_line_chars=param(params, "max_line_chars", int, 2000),
    )
    spec.compile()  # a bad pattern is a usage error before any work
    limit, cursor = _limit(params), param(params, "cursor", str)
    return await _answer(
        ctx,
        "index.grep",
        params,
        lambda c, s: grep_mod.grep(c, s, spec, limit=limit, cursor=cursor),
    )


@op("index.ls", "List a directory.", action="index_query")
async def ls(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    limit, cursor = _limit(params), param(params, "cursor", str)
    return await _answer(
        ctx, "index.ls", params, lambda c, s: query.ls(c, s, limit=limit, cursor=cursor)
    )


@op("index.stat", "Stat one path.", action="index_query")
async def stat(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    return await _answer(ctx, "index.stat", params, lambda c, s: {"items": [query.stat(c, s)]})


@op("index.du", "Apparent disk usage of a directory and its children.", action="index_query")
async def du(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    limit = _limit(params, 50)
    return await _answer(ctx, "index.du", params, lambda c, s: query.du(c, s, limit=limit))


@op("index.tree", "Directory tree down to a depth.", action="index_query")
async def tree(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    depth = param(params, "max_depth", int, 3)
    limit = _limit(params, 500)
    return await _answer(
        ctx, "index.tree", params, lambda c, s: query.tree(c, s, max_depth=depth, limit=limit)
    )


@op("index.recent", "Files changed most recently.", action="index_query")
async def recent(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    since = param(params, "since_s", float)
    flt = query.FindFilter(kind="f", mtime_after=None if since is None else time.time() - since)
    limit, cursor = _limit(params, 50), param(params, "cursor", str)
    return await _answer(
        ctx,
        "index.recent",
        params,
        lambda c, s: query.find(c, s, flt, sort="-modified", limit=limit, cursor=cursor),
    )


@op(
    "index.git_status",
    "git status at a workspace root, with git asking the index's change feed what changed"
    " (fsmonitor) instead of statting every file; offloaded=false: run the real git.",
    action="index_query",
)
async def git_status(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    path = param(params, "path", str, required=True)
    args = param(params, "args", list, [])
    if not all(isinstance(a, str) for a in args):
        raise UsageError("args must be a list of strings")
    svc = _svc(ctx)
    ws, why = svc.git_offload(path)
    if ws is not None and ctx.principal.origin == "sandboxed":
        # git runs the repository's own commands (a .gitattributes clean filter, say),
        # which here would run in the daemon, outside the session's sandbox
        ws, why = None, "a sandboxed session runs git inside its sandbox"
    if ws is not None and not await asyncio.to_thread(os.path.isdir, os.path.join(ws.root, ".git")):
        ws, why = None, "the workspace root is not a git repository (.git directory)"
    if ws is None:
        return {"offloaded": False, "reason": why}
    run, synced = await svc.git_status(ws, args)
    await ctx.runtime.emit(
        Event(
            EventType.INDEX_QUERY,
            principal=ctx.principal.key,
            subject="index.git_status",
            outcome="ok" if run.rc == 0 else "error",
            duration_s=run.elapsed_s,
            data={"path": path, "synced": synced, "private_gitdir": run.private},
        )
    )
    return {
        "offloaded": True,
        "synced": synced,
        "rc": run.rc,
        "stdout_b64": base64.b64encode(run.stdout).decode(),
        "stderr_b64": base64.b64encode(run.stderr).decode(),
    }
