"""Facility memory: retrieval quality on a labelled set, and latency at 100k lessons.

    PYTHONPATH=src python bench/memory_eval.py bench/data/memory_eval.jsonl
    PYTHONPATH=src python bench/memory_eval.py FILE.jsonl --scale 100000 --json out.json

Loads the file's lessons into a real store (temporary SQLite file) through the
same scanner and trust rules the daemon applies, runs every labelled query
through the real retrieval as its principal, and prints MRR@10, hit@1/5,
scores per query style, poison@5 (share of queries where a planted lesson
of *another* principal reaches the top 5), must-not-return violations and
superseded-at-top (with history included, the case where it could happen).
Then it adds ``--scale`` synthetic lessons, re-runs the labelled queries
among them, and times pasted 20-term error queries (p50/p99).
See bench/memory.md for the file format and the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tenantry.memory import content, embedding, retrieval, scanner, signature, vocab
from tenantry.memory.models import DEFAULT_TTL_DAYS, Kind, Lesson, Scope, Source, Status, Trust
from tenantry.memory.store import LessonStore
from tenantry.memory.vectors import VectorIndex

DEFAULT_PRINCIPAL = "eval/claude-code/q"
DEFAULT_PROJECT = "chem42"


def load(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    lessons, queries = [], []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        obj = json.loads(line)
        if obj.get("type") == "lesson":
            lessons.append(obj)
        elif obj.get("type") == "query":
            queries.append(obj)
        else:
            raise SystemExit(f"{path}:{n}: type must be lesson or query")
    return lessons, queries


def to_lesson(d: dict[str, Any]) -> Lesson:
    """A file lesson as the store would hold it: trust capped by source and scanner."""
    key = str(d.get("created_by") or "import/agent/-")
    parts = key.split("/")
    kind = Kind(d.get("kind", "fact"))
    source = Source(d.get("source", "import"))
    trust = Trust.lowest(Trust(d.get("trust", "untrusted")), source.ceiling)
    subject = {str(k): str(v) for k, v in (d.get("subject") or {}).items()}
    findings = scanner.scan(d["title"], d["body"], " ".join(subject.values()))
    blocking = scanner.quarantining(findings, staff_written=source is Source.STAFF)
    if blocking:
        trust = Trust.UNTRUSTED
    sig = signature.normalize(d.get("error_signature") or "")
    return Lesson(
        id=d["id"],
        kind=kind,
        scope=Scope(d.get("scope", "facility")),
        title=d["title"],
        body=d["body"],
        owner_user=parts[0],
        owner_key=key,
        owner_project=str(d.get("project", "")),
        owner_agent=parts[1] if len(parts) > 1 else "agent",
        subject=subject,
        error_signature=sig,
        sig_hash=signature.signature_hash(sig),
        evidence=[str(e) for e in d.get("evidence") or []],
        sources=[source],
        trust=trust,
        status=Status(d.get("status", "active")),
        quarantined=bool(blocking),
        findings=findings,
        classes=content.classes(d["title"], d["body"], " ".join(subject.values())),
        superseded_by=d.get("superseded_by") or "",
        ttl_days=float(d.get("ttl_days") or DEFAULT_TTL_DAYS[kind]),
        verified_at=d.get("verified_at"),
    )


def held_out(q: dict[str, Any]) -> bool:
    """Kept out of tuning: ``"split": "heldout"``, or the fixed quarter sha256(id) % 4 == 0."""
    if q.get("split") == "heldout":
        return True
    return int(hashlib.sha256(str(q["id"]).encode()).hexdigest()[:8], 16) % 4 == 0


def fold(q: dict[str, Any]) -> int:
    """The development fold of a query (0-3), a fixed hash of its id independent of the split.

    A tuning change is judged by the development MRR@10 of each fold: a gain in
    one fold and losses in others is noise, not a better ranking.
    """
    return int(hashlib.sha256(str(q["id"]).encode()).hexdigest()[8:16], 16) % 4


def viewer_of(q: dict[str, Any]) -> retrieval.Viewer:
    key = str(q.get("principal") or DEFAULT_PRINCIPAL)
    return retrieval.Viewer(key, key.split("/")[0], str(q.get("project", DEFAULT_PROJECT)))


async def evaluate(
    store: LessonStore,
    queries: list[dict[str, Any]],
    planted: dict[str, str],
    vectors: VectorIndex | None = None,
    expander: vocab.Expander | None = None,
) -> dict[str, Any]:
    rr, h1, h5, poison, must_not, sup_top, stale_top = [], [], [], 0, 0, 0, 0
    styles: dict[str, list[float]] = {}
    folds: dict[int, list[float]] = {}
    misses = []
    for q in queries:
        viewer = viewer_of(q)
        hits = await retrieval.search(
            store, viewer, q["text"], limit=10, vectors=vectors, expander=expander
        )
        ids = [h.lesson.id for h in hits]
        relevant = set(q["relevant"])
        rank = next((i + 1 for i, x in enumerate(ids) if x in relevant), None)
        rr.append(1.0 / rank if rank else 0.0)
        h1.append(1.0 if rank == 1 else 0.0)
        h5.append(1.0 if rank and rank <= 5 else 0.0)
        styles.setdefault(q.get("style", "other"), []).append(rr[-1])
        folds.setdefault(fold(q), []).append(rr[-1])
        top5 = ids[:5]
        if any(x in planted and planted[x] != viewer.key for x in top5):
            poison += 1
        if set(q.get("must_not_return") or ()) & set(top5):
            must_not += 1
        if (
            hits
            and hits[0].lesson.id not in relevant
            and hits[0].lesson.status is not Status.ACTIVE
        ):
            stale_top += 1
        if rank != 1:
            misses.append({"id": q["id"], "rank": rank, "top": ids[:3]})
        with_history = await retrieval.search(
            store,
            viewer,
            q["text"],
            limit=1,
            include_history=True,
            vectors=vectors,
            expander=expander,
        )
        if with_history and not with_history[0].lesson.status.live:
            sup_top += 1
    n = len(queries) or 1
    return {
        "queries": n,
        "mrr@10": round(statistics.fmean(rr), 4),
        "hit@1": round(statistics.fmean(h1), 4),
        "hit@5": round(statistics.fmean(h5), 4),
        "per_style_mrr@10": {k: round(statistics.fmean(v), 4) for k, v in sorted(styles.items())},
        "per_style_n": {k: len(v) for k, v in sorted(styles.items())},
        "per_fold_mrr@10": [round(statistics.fmean(folds.get(i) or [0.0]), 4) for i in range(4)],
        "poison@5": round(poison / n, 4),
        "must_not_return@5": round(must_not / n, 4),
        "superseded_at_top": round(sup_top / n, 4),
        "stale@1": round(stale_top / n, 4),
        "misses": misses,
    }


# -- synthetic lessons for scale ------------------------------------------------------

ERRORS = [
    "error: {sym} undefined reference to `{ident}'",
    "ImportError: lib{ident}.so.{v}: cannot open shared object file: No such file or directory",
    "ModuleNotFoundError: No module named '{ident}'",
    'Lmod has detected the following error: The following module(s) are unknown: "{mod}"',
    "sbatch: error: Batch job submission failed: {slurm}",
    "srun: error: {host}: task {n}: {sig}",
    "{tool}: error while loading shared libraries: lib{ident}.so.{v}",
    "RuntimeError: {ident} failed with CUDA error: {cuda}",
    "OSError: [Errno {errno}] {oserr}: '{path}'",
    "CMake Error: Could NOT find {Ident} (missing: {IDENT}_LIBRARIES {IDENT}_INCLUDE_DIR)",
    "{tool}: fatal error: {ident}.h: No such file or directory",
    "Segmentation fault in {ident}::{sym} at {path}:{n}",
]
SLURM = [
    "Invalid qos specification",
    "Requested time limit is invalid",
    "Invalid partition name",
    "Invalid account or account/partition combination specified",
    "Requested node configuration is not available",
    "Job violates accounting/QOS policy",
]
CUDA = [
    "an illegal memory access was encountered",
    "out of memory",
    "invalid device ordinal",
    "device-side assert triggered",
    "unspecified launch failure",
]
OSERR = [
    "Disk quota exceeded",
    "No space left on device",
    "Permission denied",
    "Stale file handle",
    "Too many open files",
    "Read-only file system",
]
SIGS = ["Killed", "Segmentation fault", "Bus error", "Aborted", "Exited with exit code 1"]
TOOLS = [
    "gcc",
    "g++",
    "gfortran",
    "nvcc",
    "icx",
    "cmake",
    "make",
    "ninja",
    "pip",
    "conda",
    "mamba",
    "python",
    "pytest",
    "mpirun",
    "srun",
    "sbatch",
    "julia",
    "Rscript",
    "apptainer",
    "spack",
    "git",
    "rsync",
    "ld",
    "cargo",
    "go",
    "java",
    "matlab",
    "gromacs",
    "lammps",
    "vasp",
]
PARTS = [
    "cpu",
    "gpu",
    "gpu80",
    "debug",
    "bigmem",
    "long",
    "short",
    "v100",
    "preempt",
    "interactive",
]
_GLUE_TEXT = """
the a to of and in on with for after before when if is not but use set load run build job
node module partition error fix works fails file directory path version library env
variable compile link install export submit queue memory time limit quota gpu cpu core
thread rank task step output log script config option flag default cache scratch project
home lustre login compute cluster account allocation
"""
GLUE = _GLUE_TEXT.split()


def _syllables(rng: random.Random, k: int) -> str:
    cons, vow = "bcdfghjklmnprstvwxz", "aeiouy"
    return "".join(rng.choice(cons) + rng.choice(vow) for _ in range(k))


class Synth:
    """Lessons with a long-tailed vocabulary: HPC words, Zipf-distributed identifiers."""

    def __init__(self, seed: int, base_text: str) -> None:
        self.rng = random.Random(seed)
        base = sorted({w for w in base_text.lower().split() if w.isalpha() and len(w) > 2})
        self.idents = [_syllables(self.rng, self.rng.randint(2, 4)) for _ in range(40000)]
        self.vocab = GLUE + base + self.idents
        weights = [1.0 / (i + 1) ** 1.05 for i in range(len(self.vocab))]
        acc, total = [], 0.0
        for w in weights:
            total += w
            acc.append(total)
        self.cum = acc
        self.modules = [
            f"{self.rng.choice(self.idents)}/{self.rng.randint(1, 12)}.{self.rng.randint(0, 9)}"
            for _ in range(3000)
        ]

    def ident(self) -> str:
        # Zipf over identifiers: a few are everywhere, most are rare
        return self.idents[min(int(self.rng.paretovariate(0.7)) - 1, len(self.idents) - 1)]

    def error(self) -> str:
        r = self.rng
        ident = self.ident()
        return r.choice(ERRORS).format(
            sym=self.ident(),
            ident=ident,
            Ident=ident.capitalize(),
            IDENT=ident.upper(),
            v=r.randint(1, 40),
            mod=r.choice(self.modules),
            slurm=r.choice(SLURM),
            host=f"cn{r.randint(1, 999):04d}",
            n=r.randint(0, 4000),
            sig=r.choice(SIGS),
            tool=r.choice(TOOLS),
            cuda=r.choice(CUDA),
            errno=r.choice([2, 13, 28, 116, 122]),
            oserr=r.choice(OSERR),
            path=f"/{r.choice(['home', 'scratch', 'project'])}/{ident}/{self.ident()}",
        )

    def words(self, k: int) -> str:
        return " ".join(self.rng.choices(self.vocab, cum_weights=self.cum, k=k))

    def lesson(self, i: int) -> Lesson:
        r = self.rng
        err = self.error()
        sig = signature.normalize(err)
        kind = r.choice(list(Kind))
        tool = r.choice(TOOLS)
        subject = {"tool": tool, "module": r.choice(self.modules), "partition": r.choice(PARTS)}
        title = f"{tool}: {self.words(r.randint(3, 7))}"
        body = f"{self.words(r.randint(20, 60))} {err} {self.words(r.randint(5, 20))}"
        return Lesson(
            id=f"S{i:07d}",
            kind=kind,
            scope=Scope.FACILITY,
            title=title,
            body=body,
            owner_user=f"u{r.randint(1, 400)}",
            owner_key=f"u{i % 400}/claude-code/s{i}",
            subject=subject,
            error_signature=sig,
            sig_hash=signature.signature_hash(sig),
            sources=[Source.AGENT],
            trust=Trust.AGENT_OBSERVED,
            status=Status.ACTIVE,
        )

    def pasted_query(self, terms: int = 20) -> str:
        lines: list[str] = []
        while sum(len(x.split()) for x in lines) < terms:
            lines.append(self.error() if self.rng.random() < 0.7 else self.words(6))
        return " ".join("\n".join(lines).split(" ")[:terms])


async def latency(
    store: LessonStore, synth: Synth, n: int, vectors: VectorIndex | None
) -> dict[str, float]:
    viewer = retrieval.Viewer(DEFAULT_PRINCIPAL, "eval", DEFAULT_PROJECT)
    queries = [synth.pasted_query(20) for _ in range(n + 20)]
    for q in queries[:20]:  # warm the page cache and the read pool
        await retrieval.search(store, viewer, q, limit=5, vectors=vectors)
    times, cpu = [], []
    for q in queries[20:]:
        t0, c0 = time.perf_counter(), time.process_time()
        await retrieval.search(store, viewer, q, limit=5, vectors=vectors)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    times.sort()
    cpu.sort()

    def pct(xs: list[float], p: float) -> float:
        return round(xs[min(len(xs) - 1, int(len(xs) * p))], 2)

    return {
        "queries": n,
        "p50_ms": pct(times, 0.5),
        "p90_ms": pct(times, 0.9),
        "p99_ms": pct(times, 0.99),
        "max_ms": round(times[-1], 2),
        # CPU time of the whole process per query: what the query costs when the
        # machine is not shared (wall time above includes waiting for a core)
        "cpu_p50_ms": pct(cpu, 0.5),
        "cpu_p99_ms": pct(cpu, 0.99),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count() or 0,
    }


def daemon_latency(state: Path, synth: Synth, n: int, dense: bool = True) -> dict[str, float]:
    """Recall through a real daemon (``tenantry serve`` on ``state``, a Unix socket)."""
    import signal

    from _common import serve
    from tenantry.client.sync import Client, socket_answers
    from tenantry.core.settings import load as load_settings

    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TENANTRY_", "CLAUDE", "CODEX"))
    }
    env.update(TENANTRY_STATE_DIR=str(state), TENANTRY_SOCKET=str(state / "sock"))
    env["TENANTRY_MEMORY_DENSE"] = "true" if dense else "false"
    with open(state / "daemon.log", "ab") as log:
        proc = serve(env, log)
    try:
        deadline = time.monotonic() + 300  # a daemon first imports a legacy store file
        while not socket_answers(str(state / "sock")):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"the daemon did not start; see {state / 'daemon.log'}")
            time.sleep(0.05)
        # let the daemon finish its start-up work in the background (the vector sync, the
        # frequent terms' postings): wait until its CPU time stops rising
        settle = time.monotonic() + 180
        last = _proc_cpu_s(proc.pid)
        while time.monotonic() < settle:
            time.sleep(0.5)
            now = _proc_cpu_s(proc.pid)
            if now - last < 0.05:
                break
            last = now
        claims = {"agent": "claude-code", "session": "bench", "host": "bench", "project": ""}
        client = Client(load_settings(env=env), autostart=False, claims=claims)
        queries = [synth.pasted_query(20) for _ in range(n + 20)]
        for q in queries[:20]:
            client.call("memory.recall", {"query": q, "limit": 5})
        times = []
        daemon_cpu0, client_cpu0 = _proc_cpu_s(proc.pid), time.process_time()
        for q in queries[20:]:
            t0 = time.perf_counter()
            client.call("memory.recall", {"query": q, "limit": 5})
            times.append((time.perf_counter() - t0) * 1000)
        daemon_cpu = (_proc_cpu_s(proc.pid) - daemon_cpu0) * 1000 / max(1, n)
        client_cpu = (time.process_time() - client_cpu0) * 1000 / max(1, n)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    times.sort()
    return {
        "queries": n,
        "p50_ms": round(times[len(times) // 2], 2),
        "p90_ms": round(times[int(len(times) * 0.9)], 2),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2),
        "max_ms": round(times[-1], 2),
        # CPU per call, whatever the wait for a core: the daemon (all its threads)
        # and the client (connection, encoding)
        "daemon_cpu_ms": round(daemon_cpu, 2),
        "client_cpu_ms": round(client_cpu, 2),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count() or 0,
    }


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    raw_lessons, queries = load(Path(args.file))
    lessons = [to_lesson(d) for d in raw_lessons]
    planted = {
        d["id"]: str(d.get("created_by"))
        for d in raw_lessons
        if d.get("planted") or d.get("trust") == "untrusted"
    }
    out: dict[str, Any] = {
        "file": args.file,
        "lessons": len(lessons),
        "quarantined_on_load": sorted(les.id for les in lessons if les.quarantined),
        "heldout_ids": sorted(q["id"] for q in queries if held_out(q)),
    }
    expander = vocab.Expander.with_file(args.synonyms) if args.synonyms else None
    out["synonyms"] = args.synonyms
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "memory.sqlite3"
        reuse = db.exists()
        model = None if args.no_dense else embedding.bundled()
        out["dense"] = model.model if model else None
        async with LessonStore(db) as store:
            vectors = VectorIndex(db.with_suffix(".vectors"), model) if model else None
            if vectors is not None:
                vectors.open()
            if not reuse:
                await store.add_many(lessons, "eval")
            if vectors is not None:
                await vectors.sync(store)
            if not reuse:
                out["eval"] = await evaluate(store, queries, planted, vectors, expander)
                dev = [q for q in queries if not held_out(q)]
                out["eval_dev"] = await evaluate(store, dev, planted, vectors, expander)
                out["eval_heldout"] = await evaluate(
                    store, [q for q in queries if held_out(q)], planted, vectors, expander
                )
            if args.scale:
                synth = Synth(args.seed, " ".join(d["body"] for d in raw_lessons))
                t0 = time.perf_counter()
                batch = 5000
                for start in range(0, args.scale if not reuse else 0, batch):
                    chunk = [synth.lesson(i) for i in range(start, min(args.scale, start + batch))]
                    await store.add_many(chunk, "synthetic")
                load_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                if vectors is not None:
                    await vectors.sync(store)
                out["scale"] = {
                    "synthetic_lessons": store.n_docs - len(lessons),
                    "load_s": round(load_s, 1),
                    "embed_s": round(time.perf_counter() - t0, 1),
                }
                out["eval_at_scale"] = await evaluate(store, queries, planted, vectors, expander)
                out["eval_at_scale_dev"] = await evaluate(
                    store, [q for q in queries if not held_out(q)], planted, vectors, expander
                )
                out["eval_at_scale_heldout"] = await evaluate(
                    store, [q for q in queries if held_out(q)], planted, vectors, expander
                )
                out["latency_20_term_pasted"] = await latency(
                    store, synth, args.latency_queries, vectors
                )
        if args.daemon and args.scale:
            # the same store, now served by a real daemon (state dir = the store's folder)
            state = Path(tmp) / "state"
            state.mkdir(mode=0o700)
            if args.db:
                import shutil

                shutil.copyfile(db, state / "memory.sqlite3")
                if db.with_suffix(".vectors").exists():
                    shutil.copyfile(db.with_suffix(".vectors"), state / "memory.vectors")
            else:
                os.replace(db, state / "memory.sqlite3")
                if db.with_suffix(".vectors").exists():
                    os.replace(db.with_suffix(".vectors"), state / "memory.vectors")
            synth = Synth(args.seed + 1, " ".join(d["body"] for d in raw_lessons))
            out["daemon_latency"] = daemon_latency(
                state, synth, args.latency_queries, dense=not args.no_dense
            )
    return out


def report(res: dict[str, Any]) -> str:
    lines = [f"lessons: {res['lessons']} (quarantined on load: {len(res['quarantined_on_load'])})"]
    labels = {
        "eval": "labelled set, all queries",
        "eval_dev": "labelled set, development queries (used for tuning)",
        "eval_heldout": "labelled set, held-out queries (split heldout or sha256(id) % 4 == 0)",
    }
    scaled = ("eval_at_scale", "eval_at_scale_dev", "eval_at_scale_heldout")
    for name in ("eval", "eval_dev", "eval_heldout", *scaled):
        ev = res.get(name)
        if not ev:
            continue
        part = {"dev": ", development queries only", "heldout": ", held-out queries only"}
        label = labels.get(name) or (
            f"labelled set among {res['scale']['synthetic_lessons']:,} synthetic lessons"
            + part.get(name.rsplit("_", 1)[-1], "")
        )
        lines += [
            f"\n{label}: {ev['queries']} queries",
            f"  MRR@10 {ev['mrr@10']:.3f}   hit@1 {ev['hit@1']:.3f}   hit@5 {ev['hit@5']:.3f}",
            f"  poison@5 {ev['poison@5']:.3f}   must-not-return@5 {ev['must_not_return@5']:.3f}"
            f"   superseded-at-top {ev['superseded_at_top']:.3f}   stale@1 {ev['stale@1']:.3f}",
            "  per style (MRR@10, n): "
            + ", ".join(
                f"{k} {v:.3f} ({ev['per_style_n'][k]})" for k, v in ev["per_style_mrr@10"].items()
            ),
        ]
        if name.endswith("_dev"):  # the folds a tuning change is judged by (see fold())
            lines.append(
                "  MRR@10 per development fold: "
                + " ".join(f"{x:.3f}" for x in ev["per_fold_mrr@10"])
            )
    lat = res.get("latency_20_term_pasted")
    if lat:
        lines.append(
            f"\nlatency, pasted 20-term error query, {res['scale']['synthetic_lessons']:,}"
            f"+ lessons ({lat['queries']} queries): p50 {lat['p50_ms']} ms, p90 {lat['p90_ms']} ms,"
            f" p99 {lat['p99_ms']} ms, max {lat['max_ms']} ms; CPU time per query p50"
            f" {lat['cpu_p50_ms']} ms, p99 {lat['cpu_p99_ms']} ms (load average"
            f" {lat['loadavg_1m']} on {lat['cpus']} CPUs;"
            f" store built in {res['scale']['load_s']} s)"
        )
    dl = res.get("daemon_latency")
    if dl:
        lines.append(
            f"latency through the daemon (memory.recall over the Unix socket,"
            f" {dl['queries']} queries): p50 {dl['p50_ms']} ms, p90 {dl['p90_ms']} ms,"
            f" p99 {dl['p99_ms']} ms, max {dl['max_ms']} ms; CPU per call: daemon"
            f" {dl['daemon_cpu_ms']} ms, client {dl['client_cpu_ms']} ms (load average"
            f" {dl['loadavg_1m']} on {dl['cpus']} CPUs)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("file", help="JSONL with lesson and query records")
    ap.add_argument(
        "--scale", type=int, default=100_000, help="synthetic lessons to add (0 = none)"
    )
    ap.add_argument("--latency-queries", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--daemon",
        action="store_true",
        help="also time recall through a real daemon (tenantry serve) on the same store",
    )
    ap.add_argument("--db", help="keep the store in this file and reuse it on the next run")
    ap.add_argument(
        "--no-dense",
        action="store_true",
        help="lexical ranking only (no re-ranking with the bundled embedding model)",
    )
    ap.add_argument(
        "--synonyms",
        help="extend the default expansion table with this file's `regex = terms` lines"
        " (the memory_synonyms setting; in process only)",
    )
    ap.add_argument("--json", help="also write the full results (with misses) here")
    ap.add_argument(
        "--misses", action="store_true", help="print the queries not answered at rank 1"
    )
    args = ap.parse_args(argv)
    res = asyncio.run(run(args))
    print(report(res))
    if args.misses:
        for name in ("eval_dev", "eval_at_scale"):  # never the held-out part
            for m in (res.get(name) or {}).get("misses", []):
                if name == "eval_at_scale" and m["id"] in res["heldout_ids"]:
                    continue
                print(f"  {name} miss {m['id']}: rank {m['rank']} top {m['top']}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
