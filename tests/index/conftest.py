"""Fixtures for the index tests: generated trees, a running IndexService, real find/rg."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.events import Bus
from tenantry.core.models import Principal
from tenantry.core.settings import load
from tenantry.index.changes import ManualSource
from tenantry.index.component import IndexService
from tenantry.index.grep import GrepSpec
from tenantry.index.grep import grep as index_grep
from tenantry.index.query import FindFilter, find
from tenantry.service.ops import OpContext
from tenantry.service.runtime import Runtime

RG = shutil.which("rg")
needs_rg = pytest.mark.skipif(RG is None, reason="ripgrep (apt-get install ripgrep) is needed")

WORDS = "alpha beta gamma delta needle haystack widget frobnicate quux TODO FIXME".split()  # noqa: SIM905
OLD = 1_600_000_000  # a fixed old mtime base: nothing is racy, mtime filters are stable


def make_tree(root: Path, seed: int = 7, files: int = 160) -> None:
    """A deterministic tree: nested dirs, text and binary files, .gitignore rules, dotfiles."""
    rnd = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    dirs = [
        "",
        "src",
        "src/pkg",
        "src/pkg/deep",
        "docs",
        "build",
        "logs",
        "sub",
        "sub/gen",
        ".hidden",
        "empty",
        "data",
    ]
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / ".gitignore").write_text("build/\n*.log\n!keep.log\n/data/*.tmp\nsub/**/gen_*\n")
    (root / "src" / ".gitignore").write_text("*.pyc\ncache/\n")
    (root / "src" / "cache").mkdir()
    (root / "src" / "cache" / "c.txt").write_text("needle in cache\n")
    exts = [".py", ".txt", ".md", ".c", ".log", ".pyc", ".tmp", ""]
    for i in range(files):
        d = rnd.choice([*dirs[:-2], "data"])
        ext = rnd.choice(exts)
        prefix = rnd.choice(["gen_", "file", "Test", "x", ".dot"])
        path = root / d / f"{prefix}{i}{ext}"
        lines = []
        for _ in range(rnd.randint(0, 12)):
            words = rnd.choices(WORDS, k=rnd.randint(1, 6))
            if rnd.random() < 0.2:
                words.append(f"id{rnd.randint(0, 99)}")
            lines.append(" ".join(words))
        body = "\n".join(lines) + ("\n" if lines and rnd.random() < 0.9 else "")
        if rnd.random() < 0.08:
            path.write_bytes(b"\x00\x01needle binary\x00" + body.encode())
        else:
            path.write_text(body)
        os.utime(path, (OLD + i * 3600, OLD + i * 3600))
    (root / "logs" / "keep.log").write_text("needle kept\n")
    for d in dirs:
        os.utime(root / d, (OLD, OLD))


def git_ignored(root: Path, paths: list[str]) -> set[str]:
    """Paths git's own ignore logic excludes (checked one by one, with their parents)."""
    if not paths:
        return set()
    out = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "--no-index", "--stdin"],
        input="\n".join(paths) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    return {line.strip() for line in out.stdout.splitlines() if line.strip()}


def real_find(root: Path, *args: str) -> set[str]:
    """``find ROOT args`` minus what the index skips (.git and git-ignored paths)."""
    out = subprocess.run(["find", str(root), *args], capture_output=True, text=True, check=True)
    paths = [p for p in out.stdout.splitlines() if p]
    rels = [os.path.relpath(p, root) for p in paths if p != str(root)]
    # a path is skipped if it or any ancestor is ignored
    candidates = sorted(
        {"/".join(r.split("/")[: i + 1]) for r in rels for i in range(r.count("/") + 1)}
    )
    ignored = git_ignored(root, [c + ("/" if (root / c).is_dir() else "") for c in candidates])
    ignored = {i.rstrip("/") for i in ignored} | {".git"}

    def skipped(rel: str) -> bool:
        parts = rel.split("/")
        return any("/".join(parts[: i + 1]) in ignored for i in range(len(parts)))

    return {p for p in paths if p == str(root) or not skipped(os.path.relpath(p, root))}


def rg(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert RG is not None
    return subprocess.run(
        [RG, "--hidden", "--no-require-git", "-g", "!.git", *args, str(root)],
        capture_output=True,
        text=True,
        check=False,
    )


def rg_files(root: Path) -> set[str]:
    return set(rg(root, "--files").stdout.splitlines())


def rg_list(root: Path, pattern: str, *args: str) -> set[str]:
    return set(rg(root, "-l", *args, "--", pattern).stdout.splitlines())


def rg_lines(root: Path, pattern: str, *args: str) -> set[tuple[str, int, str, bool]]:
    """(path, line, text, is_match) from ``rg --json``."""
    out = set()
    for raw in rg(root, "--json", *args, "--", pattern).stdout.splitlines():
        msg = json.loads(raw)
        if msg["type"] in ("match", "context"):
            d = msg["data"]
            text = d["lines"].get("text", "").rstrip("\n")
            out.add((d["path"]["text"], d["line_number"], text, msg["type"] == "match"))
    return out


async def index_find(svc: IndexService, root: Path, **kw: Any) -> set[str]:
    scope = svc.resolve(str(root))
    sort = kw.pop("sort", "path")
    flt = FindFilter(**kw)
    res = await svc.read(lambda c: find(c, scope, flt, sort=sort, limit=1_000_000))
    return {i["path"] for i in res["items"]}


async def index_grep_items(svc: IndexService, root: Path, spec: GrepSpec) -> list[dict[str, Any]]:
    scope = svc.resolve(str(root))
    res = await svc.read(lambda c: index_grep(c, scope, spec, limit=1_000_000))
    return list(res["items"])


async def wait_until(
    check: Callable[[], Awaitable[bool]], timeout: float = 10.0, interval: float = 0.02
) -> bool:
    """Poll ``check`` until it is true or ``timeout`` passes (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(interval)


def runtime(tmp_path: Path, **overrides: Any) -> Runtime:
    settings = load(env={}, overrides={"state_dir": str(tmp_path / "state"), **overrides})
    return Runtime(settings, journal=None, bus=Bus(), backend=None)  # type: ignore[arg-type]


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[IndexService]:
    """A service with inotify on and the periodic sweep off."""
    svc = IndexService(runtime(tmp_path, index_sweep_s=0))
    svc.runtime.components["index"] = svc
    await svc.start()
    yield svc
    await svc.aclose()


@pytest.fixture
async def manual_service(tmp_path: Path) -> AsyncIterator[IndexService]:
    """A service with no watcher: only sweeps, events and verify refresh it."""
    svc = IndexService(runtime(tmp_path, index_sweep_s=0), source=ManualSource())
    svc.runtime.components["index"] = svc
    await svc.start()
    yield svc
    await svc.aclose()


@pytest.fixture
def ctx(service: IndexService) -> OpContext:
    return OpContext(Principal(uid=os.getuid(), user="t"), service.runtime)
