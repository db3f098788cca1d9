"""The CLI commands end to end, with the ops served in-process (no daemon needed)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tenantry.cli.main as cli
from tenantry.core.models import Principal
from tenantry.index import cli as index_cli
from tenantry.index import ops as index_ops
from tenantry.index.component import IndexService
from tenantry.service.ops import REGISTRY, OpContext

from .conftest import make_tree, needs_rg, real_find, rg, runtime


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[IndexService]:
    assert index_ops.MCP_TOOLS  # the ops are registered
    lt = LoopThread()

    async def make() -> IndexService:
        svc = IndexService(runtime(tmp_path, index_sweep_s=0))
        svc.runtime.components["index"] = svc
        await svc.start()
        return svc

    svc: IndexService = lt.run(make())
    ctx = OpContext(Principal(uid=os.getuid(), user="t"), svc.runtime)

    class InProcess:
        def call(self, op: str, params: dict[str, Any] | None = None) -> Any:
            return lt.run(REGISTRY[op].fn(ctx, params or {}))

    monkeypatch.setattr(index_cli, "client_from", lambda args: InProcess())
    yield svc
    lt.run(svc.aclose())
    lt.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


@needs_rg
def test_find_and_grep_print_what_find_and_rg_print(
    served: IndexService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    make_tree(root, seed=4, files=60)
    assert run(capsys, "index", "add", str(root))[0] == 0
    code, out = run(capsys, "find", str(root), "--name", "*.py", "--all")
    assert code == 0
    assert set(out.splitlines()) == real_find(root, "-name", "*.py")
    code, out = run(capsys, "find", str(root), "*.md", "--all")  # `tenantry find PATH PATTERN`
    assert set(out.splitlines()) == real_find(root, "-name", "*.md")
    code, out = run(capsys, "grep", "-n", "needle", str(root), "--all")
    assert code == 0
    assert set(out.splitlines()) == set(
        rg(root, "-n", "--no-heading", "needle").stdout.splitlines()
    )
    code, out = run(capsys, "grep", "-c", "alpha", str(root), "--all")
    assert set(out.splitlines()) == set(rg(root, "-c", "alpha").stdout.splitlines())
    code, out = run(capsys, "grep", "-l", "--json", "no-such-text-anywhere", str(root))
    assert code == 1 and json.loads(out)["items"] == []
    code, out = run(capsys, "index", "list", "--json")
    assert json.loads(out)["workspaces"][0]["root"] == str(root)


@needs_rg
def test_grep_context_layout_matches_rg(
    served: IndexService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "one"
    root.mkdir()
    (root / "f.txt").write_text("a\nhit 1\nb\nc\nd\nhit 2\nhit 3\ne\nf\ng\nh\nhit 4\n")
    run(capsys, "index", "add", str(root))
    code, out = run(capsys, "grep", "-n", "-C", "1", "hit", str(root))
    assert code == 0
    want = rg(root, "-n", "-C1", "--no-heading", "hit").stdout
    assert out == want


def test_ls_stat_du_tree_recent_human_and_json(
    served: IndexService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / "d" / "x.py").write_text("print(1)\n")
    run(capsys, "index", "add", str(root))
    assert "x.py" in run(capsys, "ls", str(root / "d"))[1]
    assert "size: 9" in run(capsys, "stat", str(root / "d" / "x.py"))[1]
    assert json.loads(run(capsys, "du", str(root), "--json")[1])["bytes"] == 9
    assert "  x.py" in run(capsys, "tree", str(root))[1]
    assert str(root / "d" / "x.py") in run(capsys, "recent", str(root))[1]
    code, out = run(capsys, "stat", str(root / "nope"), "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "not_found"


@pytest.mark.parametrize("command", ["index", "find", "grep", "ls", "stat", "du", "tree", "recent"])
def test_help_teaches(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "usage: tenantry" in out
    if command in ("index", "find", "grep"):
        assert "examples:" in out


def test_find_positionals(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    d = str(tmp_path / "src")
    assert index_cli.find_targets(["*.py"], None) == (None, "*.py")
    assert index_cli.find_targets([d], None) == (d, None)
    assert index_cli.find_targets([d, "*.py"], None) == (d, "*.py")
    assert index_cli.find_targets([str(tmp_path / "nosuchname")], None)[1] is not None
    assert index_cli.find_targets(["src", "config"], None) == ("src", "config")
