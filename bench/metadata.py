"""Metadata offload benchmark: direct tools vs the Tenantry index behind a slow file system.

Generates a workspace of N files, mounts it through a FUSE passthrough that adds a
delay to every metadata operation and counts them (bench/fusedelay.py), then in
one run measures on the mount:

* direct tools: ``find``, ``rg --files``, ``rg --files --sort=modified`` (Claude
  Code's Glob), ``rg -l PATTERN``, ``git status``;
* the index: crawl cost, then ``index.find``/``grep``/``ls``/``stat``/``du``/
  ``tree``/``recent`` ops (wall time p50/p95 over repeats, metadata operations);
* one directory sweep, inotify latency on a local directory, and the footprint.

    python bench/metadata.py --files 100000 --delay-ms 0.5

Needs /dev/fuse, Debian fuse3 + libfuse3-dev, pyfuse3, ripgrep and git. Run as
a user who may mount FUSE (root here). Results go to stdout (Markdown) and
``WORK/results.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.context import ForkContext, SpawnContext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import fusedelay

WORDS = (  # noqa: SIM905
    "import return class def self value result error config data path file index "
    "query cache lease job node task queue state event agent policy budget memory"
).split()
NEEDLE = "frobnicate_widget"


def generate(src: Path, n: int, seed: int = 1) -> None:
    """n files in a 3-level tree (~40 files per directory), 1 % holding NEEDLE."""
    marker = src / ".bench-files"
    if marker.exists() and marker.read_text() == str(n):
        return
    if src.exists():
        shutil.rmtree(src)
    rnd = random.Random(seed)
    per_dir = 40
    ndirs = max(1, n // per_dir)
    fan = max(2, round(ndirs ** (1 / 3)))
    made = 0
    (src).mkdir(parents=True)
    (src / ".gitignore").write_text("*.log\nbuild/\n")
    for d in range(ndirs):
        rel = Path(f"m{d // (fan * fan) % fan:02d}") / f"p{d // fan % fan:02d}" / f"d{d % fan:02d}"
        if d >= fan**3:
            rel = rel / f"x{d // fan**3}"
        (src / rel).mkdir(parents=True, exist_ok=True)
        for k in range(per_dir):
            if made >= n:
                break
            ext = rnd.choice([".py", ".py", ".c", ".md", ".txt", ".json"])
            lines = [
                " ".join(rnd.choices(WORDS, k=rnd.randint(3, 12)))
                for _ in range(rnd.randint(5, 25))
            ]
            if rnd.random() < 0.01:
                lines.insert(rnd.randrange(len(lines)), f"call {NEEDLE}(x)")
            body = "\n".join(lines) + "\n"
            path = src / rel / f"f{k:03d}{ext}"
            if rnd.random() < 0.02:
                path.write_bytes(b"\x00BIN" + body.encode())
            else:
                path.write_text(body)
            made += 1
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@b",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@b",
    }
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    subprocess.run(["git", "-C", str(src), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(src), "commit", "-qm", "bench"], check=True, env=env)
    marker.write_text(str(n))


class Mount:
    def __init__(
        self,
        src: Path,
        mnt: Path,
        delay: float,
        cache_s: float,
        options: tuple[str, ...] = (),
        start: str = "fork",  # "spawn" from a process that runs threads (a test's daemon)
    ) -> None:
        self.src, self.mnt = src, mnt
        ctx: SpawnContext | ForkContext = (
            multiprocessing.get_context("spawn")
            if start == "spawn"
            else multiprocessing.get_context("fork")
        )
        self.counters = ctx.Array("q", len(fusedelay.OPS))
        self.uids = ctx.Array("q", fusedelay.UID_SLOTS)  # delayed operations per caller uid
        self.proc = ctx.Process(
            target=fusedelay.serve,
            args=(str(src), str(mnt), delay, self.counters, cache_s, options, self.uids),
            daemon=True,
        )

    def __enter__(self) -> Mount:
        self.mnt.mkdir(parents=True, exist_ok=True)
        subprocess.run(["fusermount3", "-u", "-q", str(self.mnt)], check=False)
        self.proc.start()
        deadline = time.monotonic() + 20
        while not os.path.ismount(self.mnt):
            if time.monotonic() > deadline or not self.proc.is_alive():
                raise RuntimeError("the FUSE mount did not come up")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["fusermount3", "-u", str(self.mnt)], check=False)
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.terminate()

    def snapshot(self) -> dict[str, int]:
        with self.counters.get_lock():
            return dict(zip(fusedelay.OPS, self.counters[:], strict=True))

    def by_uid(self) -> dict[int, int]:
        """Delayed (metadata) operations so far, per caller uid (nonzero ones only)."""
        with self.uids.get_lock():
            counts = self.uids[:]
        return {uid: n for uid, n in enumerate(counts) if n}

    @staticmethod
    def meta(before: dict[str, int], after: dict[str, int]) -> tuple[int, dict[str, int]]:
        diff = {k: after[k] - before[k] for k in after}
        return sum(v for k, v in diff.items() if k in fusedelay.DELAYED), diff


def run_direct(mount: Mount, label: str, argv: list[str]) -> dict[str, Any]:
    before = mount.snapshot()
    t0 = time.perf_counter()
    out = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    )
    wall = time.perf_counter() - t0
    ops, diff = Mount.meta(before, mount.snapshot())
    lines = len(out.stdout.splitlines())
    print(f"  direct {label}: {wall:.2f}s, {ops} metadata ops, {lines} lines", flush=True)
    return {
        "label": label,
        "argv": argv,
        "wall_s": wall,
        "meta_ops": ops,
        "ops": diff,
        "lines": lines,
        "rc": out.returncode,
    }


async def run_tenantry(mount: Mount, args: argparse.Namespace, state: Path) -> dict[str, Any]:
    from tenantry.core.events import Bus
    from tenantry.core.models import Principal
    from tenantry.core.settings import load
    from tenantry.index import ops as index_ops
    from tenantry.index.component import IndexService
    from tenantry.service.ops import REGISTRY, OpContext
    from tenantry.service.runtime import Runtime

    del index_ops  # registers the ops
    settings = load(
        env={}, overrides={"state_dir": str(state), "index_watch": False, "index_sweep_s": 0}
    )
    rt = Runtime(settings, journal=None, bus=Bus(), backend=None)  # type: ignore[arg-type]
    svc = IndexService(rt)
    rt.components["index"] = svc
    await svc.start()
    out: dict[str, Any] = {}
    try:
        root = str(mount.mnt)
        before = mount.snapshot()
        t0 = time.perf_counter()
        await svc.add(root, wait=True)
        crawl_s = time.perf_counter() - t0
        ops, diff = Mount.meta(before, mount.snapshot())
        out["crawl"] = {"wall_s": crawl_s, "meta_ops": ops, "ops": diff}
        print(f"  crawl: {crawl_s:.1f}s, {ops} metadata ops", flush=True)
        ctx = OpContext(Principal(uid=os.getuid(), user="bench"), rt)
        some_dir = f"{root}/m00/p00/d00"
        some_file = f"{some_dir}/f000.py"
        queries: list[tuple[str, str, dict[str, Any]]] = [
            ("find --name '*.py' (page of 200)", "index.find", {"path": root, "name": "*.py"}),
            ("find --name f001.py (exact, page)", "index.find", {"path": root, "name": "f001.py"}),
            ("find --name 'nosuch*' (no match)", "index.find", {"path": root, "name": "nosuch*"}),
            (
                "find --type f (all pages, every file)",
                "index.find*",
                {"path": root, "type": "f", "limit": 2000},
            ),
            (
                "find --sort modified (Glob, page)",
                "index.find",
                {"path": root, "name": "*.py", "sort": "-modified"},
            ),
            (
                "grep -l NEEDLE",
                "index.grep",
                {"path": root, "pattern": NEEDLE, "files_only": True, "limit": 2000},
            ),
            (
                "grep 'error \\w+ index' (page of 200)",
                "index.grep",
                {"path": root, "pattern": r"error \w+ index"},
            ),
            ("ls DIR", "index.ls", {"path": some_dir}),
            ("stat FILE", "index.stat", {"path": some_file}),
            ("du ROOT", "index.du", {"path": root}),
            ("tree ROOT --max-depth 2", "index.tree", {"path": root, "max_depth": 2}),
            ("recent ROOT", "index.recent", {"path": root}),
        ]
        results = []
        for label, name, params in queries:
            all_pages = name.endswith("*")
            fn = REGISTRY[name.rstrip("*")].fn
            times, total_ops, items = [], 0, 0
            repeat = max(3, args.repeat // 5) if all_pages else args.repeat
            for _ in range(repeat):
                before = mount.snapshot()
                t0 = time.perf_counter()
                res = await fn(ctx, dict(params))
                items = len(res.get("items", []))
                while all_pages and res.get("next_cursor"):
                    res = await fn(ctx, {**params, "cursor": res["next_cursor"]})
                    items += len(res.get("items", []))
                times.append(time.perf_counter() - t0)
                total_ops += Mount.meta(before, mount.snapshot())[0]
            times.sort()
            row = {
                "label": label,
                "op": name,
                "p50_ms": statistics.median(times) * 1e3,
                "p95_ms": times[int(0.95 * (len(times) - 1))] * 1e3,
                "meta_ops_per_query": total_ops / repeat,
                "items": items,
            }
            print(
                f"  tenantry {label}: p50 {row['p50_ms']:.2f} ms, ops {row['meta_ops_per_query']}"
                f", items {items}",
                flush=True,
            )
            results.append(row)
        out["queries"] = results
        before = mount.snapshot()
        t0 = time.perf_counter()
        changed = await svc.sweep(svc.resolve(root).ws)
        ops, _ = Mount.meta(before, mount.snapshot())
        out["sweep"] = {"wall_s": time.perf_counter() - t0, "meta_ops": ops, "changed": changed}
        out["footprint"] = await svc.footprint()
    finally:
        await svc.aclose()
    return out


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


async def run_changes(mount: Mount, args: argparse.Namespace, state: Path) -> dict[str, Any]:
    """Metadata ops the index spends to follow one change, with the FUSE server's own
    tree watched (``index_watch_backing``, the stand-in for a changelog): per change,
    from making it in the source tree until the index answers it and every re-check
    has run; no other traffic on the mount meanwhile."""
    from tenantry.core.events import Bus
    from tenantry.core.models import Principal
    from tenantry.core.settings import load
    from tenantry.index import crawl
    from tenantry.index import ops as index_ops
    from tenantry.index.component import IndexService
    from tenantry.service.ops import REGISTRY, OpContext
    from tenantry.service.runtime import Runtime

    del index_ops
    root, src = str(mount.mnt), mount.src
    settings = load(
        env={},
        overrides={
            "state_dir": str(state),
            "index_sweep_s": 0,
            "index_watch_backing": f"{root}={src}",
        },
    )
    rt = Runtime(settings, journal=None, bus=Bus(), backend=None)  # type: ignore[arg-type]
    svc = IndexService(rt)
    rt.components["index"] = svc
    await svc.start()
    ctx = OpContext(Principal(uid=os.getuid(), user="bench"), rt)

    async def quiet() -> None:
        while svc._timers or svc._tasks or svc._pending:  # re-checks included
            await svc.settle()
            await asyncio.sleep(0.2)

    async def visible(op: str, params: dict[str, Any], want: bool) -> float:
        t0 = time.perf_counter()
        while bool((await REGISTRY[op].fn(ctx, dict(params)))["items"]) != want:
            if time.perf_counter() - t0 > 30:
                raise RuntimeError(f"{op} {params} never became {want}")
            await asyncio.sleep(0.01)
        return time.perf_counter() - t0

    rows: dict[str, list[tuple[int, float]]] = {}
    originals: dict[Path, tuple[bytes, int]] = {}
    kinds: dict[str, dict[str, int]] = {}  # the first change's operations, by type
    try:
        await svc.add(root, wait=True)
        await quiet()
        dirs = sorted({p.parent for p in src.rglob("f000.*") if ".git" not in p.parts})
        rnd = random.Random(3)
        rnd.shuffle(dirs)
        for i, d in enumerate(dirs[: args.changes]):
            rel = d.relative_to(src)
            victim = next(f for f in sorted(d.glob("f0*.*")) if b"\0" not in f.read_bytes())
            originals[victim] = (victim.read_bytes(), victim.stat().st_mtime_ns)
            steps: list[tuple[str, Any, str, dict[str, Any], bool]] = [
                (
                    "edit (append in place)",
                    lambda v=victim, i=i: _append(v, f"edited_token_{i}\n"),
                    "index.grep",
                    {"path": root, "pattern": f"edited_token_{i}", "fixed": True},
                    True,
                ),
                (
                    "create",
                    lambda d=d, i=i: (d / f"new{i}.txt").write_text(f"created_token_{i}\n"),
                    "index.find",
                    {"path": f"{root}/{rel}", "name": f"new{i}.txt"},
                    True,
                ),
                (
                    "rename",
                    lambda d=d, i=i: (d / f"new{i}.txt").rename(d / f"renamed{i}.txt"),
                    "index.find",
                    {"path": f"{root}/{rel}", "name": f"renamed{i}.txt"},
                    True,
                ),
                (
                    "delete",
                    lambda d=d, i=i: (d / f"renamed{i}.txt").unlink(),
                    "index.find",
                    {"path": f"{root}/{rel}", "name": f"renamed{i}.txt"},
                    False,
                ),
            ]
            for label, change, op, params, want in steps:
                await asyncio.sleep(
                    args.cache_s + 0.1
                )  # the mount's caches expire, as between edits
                before = mount.snapshot()
                change()
                lat = await visible(op, params, want)
                await quiet()
                ops, diff = Mount.meta(before, mount.snapshot())
                rows.setdefault(label, []).append((ops, lat))
                kinds.setdefault(label, diff)
                if label.startswith("edit"):  # what `tenantry git status` costs after it
                    git_label = "tenantry git status after the edit"
                    before = mount.snapshot()
                    t0 = time.perf_counter()
                    await git_status(ctx, src, root)
                    ops, diff = Mount.meta(before, mount.snapshot())
                    rows.setdefault(git_label, []).append((ops, time.perf_counter() - t0))
                    kinds.setdefault(git_label, diff)
    finally:
        await svc.aclose()
        for path, (data, mtime_ns) in originals.items():  # the workspace as generated
            path.write_bytes(data)
            os.utime(path, ns=(mtime_ns, mtime_ns))
    out = {}
    for label, vals in rows.items():
        ops_list = sorted(v[0] for v in vals)
        lat_list = sorted(v[1] for v in vals)
        out[label] = {
            "n": len(vals),
            "ops_p50": statistics.median(ops_list),
            "ops_max": ops_list[-1],
            "visible_p50_ms": statistics.median(lat_list) * 1e3,
            "first_by_type": {k: v for k, v in kinds[label].items() if v},
        }
        print(
            f"  change {label}: {out[label]['ops_p50']:g} ops (p50, max {ops_list[-1]}),"
            f" visible in {out[label]['visible_p50_ms']:.0f} ms, re-check window"
            f" {crawl.RACY_S} s; first: {out[label]['first_by_type']}",
            flush=True,
        )
    return out


async def git_status(ctx: Any, src: Path, root: str) -> None:
    """``index.git_status --porcelain`` at ``root``; it must be what git prints in ``src``."""
    from tenantry.service.ops import REGISTRY

    res = await REGISTRY["index.git_status"].fn(ctx, {"path": root, "args": ["--porcelain"]})
    if not res["offloaded"]:
        raise RuntimeError(f"git status not offloaded: {res['reason']}")
    args = ["git", "-C", str(src), "--no-optional-locks", "status", "--porcelain"]
    want = subprocess.run(args, capture_output=True, check=True).stdout
    if base64.b64decode(res["stdout_b64"]) != want:
        raise RuntimeError("the offloaded git status differs from git's")


async def watch_latency(trials: int = 20) -> dict[str, Any]:
    """Seconds from creating a file in a watched local directory to the index answering."""
    from tenantry.core.events import Bus
    from tenantry.core.settings import load
    from tenantry.index.component import IndexService
    from tenantry.index.query import FindFilter, find
    from tenantry.service.runtime import Runtime

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "a" / "b").mkdir(parents=True)
        settings = load(
            env={}, overrides={"state_dir": str(Path(tmp) / "state"), "index_sweep_s": 0}
        )
        svc = IndexService(Runtime(settings, journal=None, bus=Bus(), backend=None))  # type: ignore[arg-type]
        await svc.start()
        await svc.add(str(ws), wait=True)
        scope = svc.resolve(str(ws))
        lat = []
        for i in range(trials):
            name = f"new{i}.txt"
            t0 = time.perf_counter()
            (ws / "a" / "b" / name).write_text("x\n")
            flt = FindFilter(name=name)

            def one(c: Any, f: FindFilter = flt) -> dict[str, Any]:
                return find(c, scope, f)

            while not (await svc.read(one))["items"]:
                if time.perf_counter() - t0 > 10:
                    break
                await asyncio.sleep(0.001)
            lat.append(time.perf_counter() - t0)
        await svc.aclose()
    lat.sort()
    return {"trials": trials, "p50_ms": statistics.median(lat) * 1e3, "max_ms": lat[-1] * 1e3}


def report(res: dict[str, Any]) -> str:
    a = res["args"]
    lines = [
        f"workspace: {a['files']} files, delay {a['delay_ms']} ms per metadata op,"
        f" kernel cache {a['cache_s']} s",
        "",
        "| direct command on the mount | wall | metadata ops | ops x delay |",
        "|---|---:|---:|---:|",
    ]
    delay_s = a["delay_ms"] / 1e3
    for d in res["direct"]:
        lines.append(
            f"| {d['label']} | {d['wall_s']:.2f} s | {d['meta_ops']} |"
            f" {d['meta_ops'] * delay_s:.2f} s |"
        )
    t = res["tenantry"]
    for label, key in (("Tenantry crawl (once)", "crawl"), ("Tenantry sweep (dirs only)", "sweep")):
        lines.append(
            f"| {label} | {t[key]['wall_s']:.2f} s | {t[key]['meta_ops']} |"
            f" {t[key]['meta_ops'] * delay_s:.2f} s |"
        )
    lines += [
        "",
        "| Tenantry query | p50 | p95 | metadata ops/query | items |",
        "|---|---:|---:|---:|---:|",
    ]
    for q in t["queries"]:
        lines.append(
            f"| {q['label']} | {q['p50_ms']:.2f} ms | {q['p95_ms']:.2f} ms |"
            f" {q['meta_ops_per_query']:g} | {q['items']} |"
        )
    fp = t["footprint"]
    lines += [
        "",
        f"footprint: {fp.get('path_bytes_per_entry')} bytes/entry (paths+stat+indexes),"
        f" content {fp.get('content_bytes')} bytes for {fp.get('text_bytes')} bytes of"
        f" text = {fp.get('content_ratio')}x",
    ]
    if res.get("changes"):
        lines += ["", report_changes(res)]
    w = res.get("watch")
    if w:
        lines.append(
            f"inotify latency (local dir): p50 {w['p50_ms']:.1f} ms, max {w['max_ms']:.1f}"
            f" ms over {w['trials']} creates"
        )
    return "\n".join(lines)


def report_changes(res: dict[str, Any]) -> str:
    lines = [
        "| change (backing tree watched) | metadata ops (p50) | max | visible (p50) |",
        "|---|---:|---:|---:|",
    ]
    for label, c in res["changes"].items():
        lines.append(
            f"| {label} | {c['ops_p50']:g} | {c['ops_max']} | {c['visible_p50_ms']:.0f} ms |"
        )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--delay-ms", type=float, default=0.5)
    p.add_argument(
        "--cache-s",
        type=float,
        default=1.0,
        help="kernel entry/attr cache timeout (libfuse default 1 s; 0 = none)",
    )
    p.add_argument("--repeat", type=int, default=21)
    p.add_argument("--work", default="/tmp/tenantry-bench-metadata")
    p.add_argument("--skip-direct", action="store_true")
    p.add_argument(
        "--changes", type=int, default=8, help="directories to edit/create/rename/delete in"
    )
    p.add_argument("--only-changes", action="store_true", help="just the change-refresh table")
    args = p.parse_args()
    work = Path(args.work)
    src, mnt, state = work / "src", work / "mnt", work / "state"
    t0 = time.perf_counter()
    generate(src, args.files)
    print(f"workspace ready ({time.perf_counter() - t0:.0f}s)", flush=True)
    if state.exists():
        shutil.rmtree(state)
    res: dict[str, Any] = {"args": vars(args)}
    with Mount(src, mnt, args.delay_ms / 1e3, args.cache_s) as mount:
        m = str(mnt)
        direct = [
            ("find", ["find", m, "-name", "*.py"]),
            ("rg --files", ["rg", "--files", m]),
            ("Glob: rg --files --sort=modified", ["rg", "--files", "--sort=modified", m]),
            ("rg -l PATTERN", ["rg", "-l", NEEDLE, m]),
            ("git status", ["git", "-C", m, "--no-optional-locks", "status", "--porcelain"]),
            # FUSE inode numbers differ from those in git's index, so plain git status
            # re-reads every file; comparing only size and mtime shows the fresh-index cost
            (
                "git status (checkStat=minimal)",
                [
                    "git",
                    "-C",
                    m,
                    "-c",
                    "core.checkStat=minimal",
                    "-c",
                    "core.trustctime=false",
                    "--no-optional-locks",
                    "status",
                    "--porcelain",
                ],
            ),
        ]
        if not args.only_changes:
            res["direct"] = [] if args.skip_direct else [run_direct(mount, *d) for d in direct]
            res["tenantry"] = asyncio.run(run_tenantry(mount, args, state))
        if args.changes > 0:
            changes_state = work / "state-changes"
            if changes_state.exists():
                shutil.rmtree(changes_state)
            res["changes"] = asyncio.run(run_changes(mount, args, changes_state))
    if args.only_changes:
        (work / "results-changes.json").write_text(json.dumps(res, indent=2, default=str))
        print(report_changes(res))
        return 0
    res["watch"] = asyncio.run(watch_latency())
    (work / "results.json").write_text(json.dumps(res, indent=2, default=str))
    print(report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
