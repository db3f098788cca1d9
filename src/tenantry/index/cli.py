"""``tenantry index|find|grep|ls|stat|du|tree|recent``: the workspace index from the shell.

Standard library only at import time; every command calls an ``index.*`` op.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from tenantry.cli.common import add_json, client_from, command, emit, group, table

TYPE_CHECKING = False  # `tenantry find` starts cold: no typing import
if TYPE_CHECKING:
    from typing import Any

RAW = argparse.RawDescriptionHelpFormatter
PAGES_MAX = 1000


def _abs(path: str | None) -> str:
    return os.path.abspath(path or os.getcwd())


def _duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    t = text.strip().lower()
    if t and t[-1] in units:
        return float(t[:-1]) * units[t[-1]]
    return float(t)


def _page_args(p: argparse.ArgumentParser, limit: int = 200) -> None:
    p.add_argument("--limit", type=int, default=limit, help=f"items per page (default {limit})")
    p.add_argument("--cursor", help="continue after a previous page (its next_cursor)")
    p.add_argument("--all", action="store_true", help="fetch every page")
    p.add_argument("--verify", action="store_true", help="re-stat the returned paths first")
    add_json(p)


def _fetch(args: argparse.Namespace, op: str, params: dict[str, Any]) -> dict[str, Any]:
    """Call ``op``; with ``--all`` follow ``next_cursor`` and merge the items."""
    client = client_from(args)
    params = {k: v for k, v in params.items() if v not in (None, False, [], "")}
    if getattr(args, "cursor", None):
        params["cursor"] = args.cursor
    if getattr(args, "verify", False):
        params["verify"] = True
    result: dict[str, Any] = client.call(op, params)
    if not getattr(args, "all", False):
        return result
    items = list(result.get("items", []))
    pages = 1
    while result.get("next_cursor") and pages < PAGES_MAX:
        result = client.call(op, {**params, "cursor": result["next_cursor"]})
        items += result.get("items", [])
        pages += 1
    result["items"] = items
    return result


def _more(result: dict[str, Any]) -> None:
    if result.get("next_cursor"):
        sys.stderr.write(f"(more results: --cursor {result['next_cursor']} or --all)\n")


INDEX_HELP = "manage the workspace index"
INDEX_ABOUT = (
    "Register workspaces whose metadata and text are indexed, so find,"
    " grep, ls, stat, du, tree and recent answer without touching the file system."
)
INDEX_EPILOG = (
    "examples:\n  tenantry index add ~/proj      crawl and follow ~/proj\n"
    "  tenantry index list --json     workspaces, state, sizes\n"
    "  tenantry index status ~/proj   freshness and footprint\n"
    "  tenantry index remove ~/proj   forget it"
)


def register(sub: Any) -> None:
    _, isub = group(
        sub, "index", INDEX_HELP, required=True, description=INDEX_ABOUT, epilog=INDEX_EPILOG
    )
    with command(isub, "add", _index_add, "register and crawl a workspace") as a:
        a.add_argument("path", nargs="?", help="directory (default: current)")
        a.add_argument("--no-wait", action="store_true", help="return before the crawl ends")
    with command(isub, "remove", _index_remove, "forget a workspace") as r:
        r.add_argument("path", nargs="?", help="workspace root (default: current)")
    with command(isub, "list", _index_list, "list workspaces"):
        pass
    with command(isub, "status", _index_status, "state, counters and footprint of the index") as st:
        st.add_argument("path", nargs="?", help="only the workspace holding PATH")
    _register_find(sub)
    _register_grep(sub)
    _register_git(sub)
    _register_listings(sub)


def register_only(sub: Any, name: str) -> None:
    """``register`` for one command: ``find`` and ``git`` (run cold by agents) alone."""
    if name == "find":
        _register_find(sub)
    elif name == "git":
        _register_git(sub)
    else:
        register(sub)


def _with_examples(sub: Any, name: str, helptext: str, *examples: str) -> Any:
    """A subcommand whose help ends with its examples, one per line as written."""
    epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples)
    return sub.add_parser(name, help=helptext, formatter_class=RAW, epilog=epilog)


def _register_find(sub: Any) -> None:
    f = _with_examples(
        sub,
        "find",
        "find paths from the index",
        "tenantry find '*.py'                        like find . -name '*.py'",
        "tenantry find src --name 'test_*'           names under src",
        "tenantry find src --type f --changed-within 1h",
        "tenantry find --sort modified --name '*.rs'  like rg --files --sort=modified",
    )
    f.add_argument(
        "targets",
        nargs="*",
        metavar="[PATH] [PATTERN]",
        help="where to look (default: current directory) and/or a name glob: an argument"
        " with * ? [ or that is not a directory is the name pattern",
    )
    f.add_argument("--name", help="glob on the file name (find -name)")
    f.add_argument("--iname", help="case-insensitive --name")
    f.add_argument("--path-glob", help="glob on the whole path (find -path)")
    f.add_argument("--type", choices=["f", "d", "l"], help="file, directory or symlink")
    f.add_argument("--min-size", help="at least this size (e.g. 10k)")
    f.add_argument("--max-size", help="at most this size (e.g. 1M)")
    f.add_argument("--changed-within", help="mtime within this long (e.g. 90s, 10m, 2h, 1d)")
    f.add_argument("--min-depth", type=int, help="skip shallower paths (find -mindepth)")
    f.add_argument("--max-depth", type=int, help="descend at most this deep (find -maxdepth)")
    f.add_argument("--sort", choices=["path", "modified", "-modified"], default="path")
    _page_args(f)
    f.set_defaults(handler=_find)


def _register_grep(sub: Any) -> None:
    g = _with_examples(
        sub,
        "grep",
        "search file contents from the index",
        "tenantry grep 'def \\w+_test' -n        regex, with line numbers",
        "tenantry grep -l TODO src -g '*.py'     files only, python files",
        "tenantry grep -F 'a.b(' -C 2            literal, 2 lines of context",
    )
    g.add_argument("pattern", help="regular expression (Python re syntax)")
    g.add_argument("path", nargs="?", help="where to search (default: current directory)")
    g.add_argument("-i", "--ignore-case", action="store_true")
    g.add_argument("-F", "--fixed-strings", action="store_true", help="pattern is a literal")
    g.add_argument("-w", "--word-regexp", action="store_true")
    g.add_argument("-l", "--files-with-matches", action="store_true")
    g.add_argument("-c", "--count", action="store_true", help="matching lines per file")
    g.add_argument("-n", "--line-number", action="store_true")
    g.add_argument("-A", "--after-context", type=int, default=0)
    g.add_argument("-B", "--before-context", type=int, default=0)
    g.add_argument("-C", "--context", type=int, default=0)
    g.add_argument("-g", "--glob", action="append", default=[], help="include/!exclude glob")
    _page_args(g)
    g.set_defaults(handler=_grep)


def _register_git(sub: Any) -> None:
    about = (
        "Runs `git status ARGS` at an indexed workspace's root with git asking the index what"
        " changed since its last run (core.fsmonitor, core.untrackedCache) instead of"
        " statting every file; the repository is not written (git's state goes to a private"
        " index in Tenantry's state directory). Output and exit code are git's. Elsewhere"
        " (not a workspace root, a change source that cannot see every change, no daemon)"
        " it runs the real git."
    )
    examples = (
        "examples:\n  tenantry git status --porcelain        in the workspace root\n"
        "  tenantry git -C ~/proj status -sb"
    )
    help_ = "git status answered with the index's change feed"
    with command(sub, "git", _git, help_, json=False, description=about, epilog=examples) as gs:
        gs.add_argument("-C", dest="dir", help="run as if started in DIR (like git -C)")
        gs.add_argument(
            "--no-optional-locks",
            action="store_true",
            help="accepted for git's sake; the repository is never written anyway",
        )
        gs.add_argument("subcommand", choices=["status"], help="only status is answered")
        gs.add_argument("args", nargs=argparse.REMAINDER, help="git status options, as for git")


def _register_listings(sub: Any) -> None:
    for name, helptext, handler, limit in (
        ("ls", "list a directory from the index", _ls, 200),
        ("stat", "stat a path from the index", _stat, 1),
        ("du", "apparent disk usage from the index", _du, 50),
        ("tree", "directory tree from the index", _tree, 500),
        ("recent", "recently changed files from the index", _recent, 50),
    ):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("path", nargs="?", help="path (default: current directory)")
        if name == "tree":
            c.add_argument("--max-depth", type=int, default=3)
        if name == "recent":
            c.add_argument("--since", help="only changes within this long (e.g. 10m)")
        _page_args(c, limit)
        c.set_defaults(handler=handler)


def _index_add(args: argparse.Namespace) -> int:
    res = client_from(args).call("index.add", {"path": _abs(args.path), "wait": not args.no_wait})
    emit(args, res, lambda r: f"{r['root']}: {r['state']}")
    return 0


def _index_remove(args: argparse.Namespace) -> int:
    res = client_from(args).call("index.remove", {"path": _abs(args.path)})
    emit(args, res, lambda r: f"{r['root']}: removed")
    return 0


def _ws_rows(res: dict[str, Any]) -> str:
    rows = [
        [w["root"], w["state"], str(w["entries"]), str(w["text_files"]), str(w["watching"])]
        for w in res["workspaces"]
    ]
    return table(rows, ["ROOT", "STATE", "ENTRIES", "TEXT", "WATCHING"])


def _index_list(args: argparse.Namespace) -> int:
    emit(args, client_from(args).call("index.list", {}), _ws_rows)
    return 0


def _index_status(args: argparse.Namespace) -> int:
    res = client_from(args).call("index.list", {"footprint": True})
    if args.path:
        p = _abs(args.path)
        res["workspaces"] = [
            w for w in res["workspaces"] if p == w["root"] or p.startswith(w["root"] + "/")
        ]

    def human(r: dict[str, Any]) -> str:
        fp = r.get("footprint") or {}
        lines = [_ws_rows(r), ""]
        lines += [f"{k}: {v}" for k, v in r["counters"].items()]
        lines += [f"{k}: {v}" for k, v in fp.items() if k != "tables"]
        return "\n".join(lines)

    emit(args, res, human)
    return 0


def find_targets(targets: list[str], name: str | None) -> tuple[str | None, str | None]:
    """(path, name glob) from ``tenantry find [PATH] [PATTERN]`` positionals."""
    path = None
    for t in targets:
        globby = any(ch in t for ch in "*?[")
        if path is None and not globby and (len(targets) > 1 or os.path.isdir(t)):
            path = t
        elif name is None:
            name = t
        else:
            raise SystemExit(f"tenantry find: one PATH and one PATTERN at most, got {targets}")
    return path, name


def _git(args: argparse.Namespace) -> int:
    import base64

    from tenantry.core.errors import TenantryError

    where = _abs(os.path.join(os.getcwd(), args.dir) if args.dir else None)
    try:
        res = client_from(args).call("index.git_status", {"path": where, "args": args.args})
    except TenantryError:
        res = {"offloaded": False}
    if not res.get("offloaded"):  # the real git, as the caller asked for it
        argv = ["git", *(["-C", args.dir] if args.dir else [])]
        argv += [*(["--no-optional-locks"] if args.no_optional_locks else []), "status", *args.args]
        sys.stdout.flush()
        os.execvp("git", argv)  # noqa: S606  # argv list: the real git, no shell
    sys.stdout.buffer.write(base64.b64decode(res["stdout_b64"]))
    sys.stdout.flush()
    sys.stderr.buffer.write(base64.b64decode(res["stderr_b64"]))
    return int(res["rc"])


def _find(args: argparse.Namespace) -> int:
    path, name = find_targets(args.targets, args.name)
    params = {
        "path": _abs(path),
        "name": name,
        "iname": args.iname,
        "path_glob": args.path_glob,
        "type": args.type,
        "min_size": args.min_size,
        "max_size": args.max_size,
        "changed_within_s": _duration(args.changed_within) if args.changed_within else None,
        "min_depth": args.min_depth,
        "max_depth": args.max_depth,
        "sort": args.sort,
        "limit": args.limit,
    }
    res = _fetch(args, "index.find", params)
    emit(args, res, lambda r: "\n".join(i["path"] for i in r["items"]))
    _more(res)
    return 0


def _grep(args: argparse.Namespace) -> int:
    params = {
        "path": _abs(args.path),
        "pattern": args.pattern,
        "ignore_case": args.ignore_case,
        "fixed": args.fixed_strings,
        "word": args.word_regexp,
        "files_only": args.files_with_matches,
        "count": args.count,
        "before": args.before_context or args.context,
        "after": args.after_context or args.context,
        "globs": args.glob,
        "limit": args.limit,
    }
    res = _fetch(args, "index.grep", params)
    emit(args, res, lambda r: render_grep(r["items"], args.line_number))
    _more(res)
    return 0 if res["items"] else 1


def render_grep(items: list[dict[str, Any]], numbers: bool) -> str:
    """ripgrep's --no-heading layout: ``path:N:text`` matches, ``path-N-text`` context."""
    out: list[str] = []
    prev: tuple[str, int] | None = None
    for it in items:
        if "line" not in it:
            out.append(f"{it['path']}:{it['count']}" if "count" in it else it["path"])
            continue
        if prev is not None and (prev[0] != it["path"] or it["line"] != prev[1] + 1):
            has_context = any(not i.get("match", True) for i in items)
            if has_context:
                out.append("--")
        sep = ":" if it["match"] else "-"
        num = f"{it['line']}{sep}" if numbers else ""
        out.append(f"{it['path']}{sep}{num}{it['text']}")
        prev = (it["path"], it["line"])
    return "\n".join(out)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _ls(args: argparse.Namespace) -> int:
    res = _fetch(args, "index.ls", {"path": _abs(args.path), "limit": args.limit})
    emit(
        args,
        res,
        lambda r: table(
            [
                [i["type"], str(i["size"]), _when(i["mtime"]), i["path"].rsplit("/", 1)[-1]]
                for i in r["items"]
            ],
            ["T", "SIZE", "MODIFIED", "NAME"],
        ),
    )
    _more(res)
    return 0


def _stat(args: argparse.Namespace) -> int:
    res = _fetch(args, "index.stat", {"path": _abs(args.path)})
    emit(args, res, lambda r: "\n".join(f"{k}: {v}" for k, v in r["items"][0].items()))
    return 0


def _du(args: argparse.Namespace) -> int:
    res = _fetch(args, "index.du", {"path": _abs(args.path), "limit": args.limit})

    def human(r: dict[str, Any]) -> str:
        lines = [f"{c['bytes']:>14}  {c['path']}" for c in r["children"]]
        lines.append(f"{r['bytes']:>14}  {r['path']}  ({r['files']} files, {r['dirs']} dirs)")
        return "\n".join(lines)

    emit(args, res, human)
    return 0


def _tree(args: argparse.Namespace) -> int:
    res = _fetch(
        args,
        "index.tree",
        {"path": _abs(args.path), "max_depth": args.max_depth, "limit": args.limit},
    )

    def human(r: dict[str, Any]) -> str:
        lines = [r["root"]]
        for i in r["items"]:
            name = i["path"].rsplit("/", 1)[-1] + ("/" if i["type"] == "d" else "")
            lines.append("  " * i["depth"] + name)
        if r.get("truncated"):
            lines.append("... (truncated: raise --limit or lower --max-depth)")
        return "\n".join(lines)

    emit(args, res, human)
    return 0


def _recent(args: argparse.Namespace) -> int:
    params = {
        "path": _abs(args.path),
        "since_s": _duration(args.since) if args.since else None,
        "limit": args.limit,
    }
    res = _fetch(args, "index.recent", params)
    emit(args, res, lambda r: "\n".join(f"{_when(i['mtime'])}  {i['path']}" for i in r["items"]))
    _more(res)
    return 0
