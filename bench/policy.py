"""Policy decision latency over 10,000 mixed requests.

Requests are drawn round-robin from the corpus (tests/policy/cases.jsonl:
shell evasions, sbatch shapes, paths, job ownership, and the allow cases),
shuffled with a fixed seed. Three numbers per request:

- ``decision (warm cache)``: the whole ``Judge.evaluate`` with its caches as
  they run in the daemon (the mix repeats the corpus, like agents repeat
  commands): a repeated raw request is answered from the decision cache after
  its file-system looks are checked again, before any normalization;
- ``decision (cold cache)``: the same with both caches (the raw-request
  decisions and the engine's outcomes) cleared before every decision, so every
  request is normalized and every Cedar call evaluated;
- ``normalize only``: shell/Slurm/path normalization without Cedar;
- ``cedar only``: one uncached Cedar authorization of a normalized request;
- ``warm, forwarded env``: thread CPU of a repeated ``run_command`` that carries an
  80-variable environment (the same dict each time, as the daemon holds a session's);
- per action, the cold decision;
- with ``--split``: where a cold decision's thread CPU goes (Cedar calls, the
  resource entities' parsing, normalization, the rest), over all corpus cases
  and over the slowest tenth of them.

Usage: PYTHONPATH=src python bench/policy.py [--n 10000] [--json] [--split]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tenantry.safety.policy.cases import case_params, case_principal, load_cases
from tenantry.safety.policy.engine import Engine
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.judge import Judge
from tenantry.safety.policy.normalize import build

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "policy" / "cases.jsonl"
FACTS = ROOT / "tests" / "policy" / "facts.json"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def _quantiles(xs: list[float], mean: bool = False) -> dict[str, float]:
    """Median and 99th percentile (and the mean), rounded to 0.1."""
    out = {"p50": round(statistics.median(xs), 1), "p99": round(pct(xs, 99), 1)}
    if mean:
        out["mean"] = round(statistics.fmean(xs), 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--split", action="store_true", help="where the cold time goes")
    args = ap.parse_args()

    load_before = list(os.getloadavg())
    t0 = time.perf_counter()
    engine = Engine()
    load_ms = (time.perf_counter() - t0) * 1e3
    judge = Judge(engine, Facts.load(FACTS), read_files=False, hour=12)
    cases = load_cases(CASES)
    work = [
        (case_principal(c), c["action"], case_params(c["action"], c["args"], c.get("context")))
        for c in cases
    ]
    rng = random.Random(7)
    mix = [work[i % len(work)] for i in range(args.n)]
    rng.shuffle(mix)
    for p, a, params in work:  # warm caches (tree-sitter parser, principals)
        judge.evaluate(p, a, params)

    whole: list[float] = []
    whole_cpu: list[float] = []
    by_action: dict[str, list[float]] = defaultdict(list)
    requests_per = []
    for p, a, params in mix:
        c = time.thread_time()
        t = time.perf_counter()
        d = judge.evaluate(p, a, params)
        us = (time.perf_counter() - t) * 1e6
        whole_cpu.append((time.thread_time() - c) * 1e6)
        whole.append(us)
        requests_per.append(len(d.checks))

    # a command with the environment a client forwards (80 variables, a long PATH), the
    # same dict each time as the daemon holds it for a session: a warm decision
    env = {f"VAR_{i}": "x" * (20 + i % 40) for i in range(80)}
    env["PATH"] = ":".join(f"/opt/tool{i}/bin" for i in range(30)) + ":/usr/bin:/bin"
    agent = next(p for p, a, _ in work if a == "run_command" and p.is_agent)
    with_env = {"argv": ["make", "-j4"], "cwd": "/home/alice/proj", "env": env, "where": "auto"}
    judge.evaluate(agent, "run_command", with_env)
    env_warm: list[float] = []
    for _ in range(2000):
        c = time.thread_time()
        judge.evaluate(agent, "run_command", with_env)
        env_warm.append((time.thread_time() - c) * 1e6)

    cold: list[float] = []
    cold_cpu: list[float] = []
    for p, a, params in mix:
        engine.clear_cache()  # every Cedar request a miss: the worst case
        judge.clear_cache()  # and every request normalized again
        c = time.thread_time()
        t = time.perf_counter()
        judge.evaluate(p, a, params)
        us = (time.perf_counter() - t) * 1e6
        cold_cpu.append((time.thread_time() - c) * 1e6)
        cold.append(us)
        by_action[a].append(us)

    cedar: list[float] = []
    prepared = []
    for p, a, params in mix[:2000]:
        uid, ents = judge.entities(p)
        for req in build(p, a, params, judge.env).requests:
            prepared.append((uid, ents, req))
    for uid, ents, req in prepared:
        engine.clear_cache()
        t = time.perf_counter()
        engine.decide(uid, ents, req)
        cedar.append((time.perf_counter() - t) * 1e6)
    normalize: list[float] = []
    for p, a, params in mix[:2000]:
        t = time.perf_counter()
        build(p, a, params, judge.env)
        normalize.append((time.perf_counter() - t) * 1e6)

    out: dict[str, Any] = {
        "requests": len(mix),
        "distinct_cases": len(work),
        "policies": len(engine.rules),
        "load_ms": round(load_ms, 1),
        "decision_us": _quantiles(whole, mean=True),
        "decision_cpu_us": _quantiles(whole_cpu),
        "decision_cold_cpu_us": _quantiles(cold_cpu),
        "decision_env_cpu_us": _quantiles(env_warm),
        "load_average": list(os.getloadavg()),
        "load_average_before": load_before,
        "decision_cold_us": _quantiles(cold, mean=True),
        "normalize_us": _quantiles(normalize),
        "cedar_us": {**_quantiles(cedar), "calls": len(cedar)},
        "cedar_calls_per_decision": round(statistics.fmean(requests_per), 2),
        "by_action_us": {
            a: {"n": len(xs), "p50": round(statistics.median(xs), 1), "p99": round(pct(xs, 99), 1)}
            for a, xs in sorted(by_action.items())
        },
    }
    if args.split:
        out["cold_split_us"] = split(engine, judge, work)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{out['requests']} requests from {out['distinct_cases']} corpus cases, "
          f"{out['policies']} policies (load {out['load_ms']} ms)")  # fmt: skip
    print(f"load average before {out['load_average_before']}, after {out['load_average']}")
    for label, key in (("decision (warm cache)", "decision_us"),
                       ("  cpu time", "decision_cpu_us"),
                       ("decision (cold cache)", "decision_cold_us"),
                       ("  cpu time", "decision_cold_cpu_us"),
                       ("warm, forwarded env", "decision_env_cpu_us"),
                       ("normalize only", "normalize_us"),
                       ("cedar only, 1 request", "cedar_us")):  # fmt: skip
        s = out[key]
        print(f"{label:22} p50 {s['p50']:8.1f} us   p99 {s['p99']:8.1f} us")
    print(f"Cedar requests per decision: {out['cedar_calls_per_decision']}")
    for a, s in out["by_action_us"].items():
        print(f"  {a:16} n={s['n']:5}  p50 {s['p50']:8.1f} us  p99 {s['p99']:8.1f} us")
    for label, parts in out.get("cold_split_us", {}).items():
        print(f"cold cpu, {label}: " + ", ".join(f"{k} {v:.0f} us" for k, v in parts.items()))


def split(engine: Engine, judge: Judge, work: list[Any]) -> dict[str, dict[str, float]]:
    """Mean thread CPU per cold decision by part, over all cases and the slowest tenth."""
    import cedarpy

    from tenantry.safety.policy import judge as judge_mod

    spent: dict[str, float] = defaultdict(float)

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **kw: Any) -> Any:
            c = time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] += time.thread_time() - c

        return run

    patches: list[tuple[Any, str]] = [(cedarpy, "is_authorized_batch"), (judge_mod, "build")]
    if hasattr(cedarpy, "Entities"):
        patches.append((cedarpy.Entities, "with_added_json_str"))
    saved = [(obj, name, getattr(obj, name)) for obj, name in patches]
    names = {
        "is_authorized_batch": "cedar",
        "build": "normalize",
        "with_added_json_str": "entities",
    }
    for obj, name, fn in saved:
        setattr(obj, name, timed(names[name], fn))

    def cold(w: Any) -> dict[str, float]:
        spent.clear()
        engine.clear_cache()
        judge.clear_cache()
        c = time.thread_time()
        judge.evaluate(*w)
        total = time.thread_time() - c
        return {"total": total, **spent}

    try:
        runs = [[cold(w) for w in work] for _ in range(3)]
    finally:
        for obj, name, fn in saved:
            setattr(obj, name, fn)
    per_case = [
        {k: statistics.median(r[i].get(k, 0.0) for r in runs) * 1e6 for k in runs[0][i]}
        for i in range(len(work))
    ]
    for parts in per_case:
        parts["rest"] = parts["total"] - sum(v for k, v in parts.items() if k != "total")
    slow = sorted(per_case, key=lambda x: x["total"], reverse=True)[: max(1, len(work) // 10)]
    keys = ["total", "normalize", "cedar", "entities", "rest"]
    return {
        label: {k: round(statistics.fmean(x.get(k, 0.0) for x in xs), 1) for k in keys}
        for label, xs in (("all cases", per_case), ("slowest tenth", slow))
    }


if __name__ == "__main__":
    main()
