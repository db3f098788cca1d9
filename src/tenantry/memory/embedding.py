"""A small static embedding model for lessons and queries, loaded from files on disk.

The model is WordLlama's ``l2_supercat`` (token embeddings distilled from
LLaMA 2 and trained for sentence similarity, 256 dimensions). Its weights and
tokenizer ship inside the ``wordllama`` wheel, so nothing is downloaded at run
time: this module only *locates* the package's data files and reads them with
``tokenizers`` and ``safetensors``. It never imports ``wordllama``: its loader
(0.4) looks for the tokenizer under ``tokenizer/`` while the wheel ships it
under ``tokenizers/``, so with downloads disabled it fails, and otherwise it
would fetch the file from the network.

A text's vector is the average of its tokens' vectors, normalized to unit
length (WordLlama's own pooling). Before tokenizing, the parts of a text that
vary between runs and carry no meaning (paths, job ids, numbers, host names,
hex addresses) are stripped the way error signatures are, so a pasted error and
the lesson about it are compared on their words.

When the wheel or its dependencies are missing, ``bundled()`` returns None and
retrieval runs on the lexical index alone.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

MODEL = "wordllama-l2_supercat-256"
_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
DIM = 256
MAX_TOKENS = 256  # tokens embedded per text (the start of a long body is enough)

# Varying parts of pasted output, dropped before tokenizing (see ``signature``).
_NOISE = re.compile(
    r"\x1b\[[0-9;]*[a-zA-Z]"  # ANSI colour codes
    r"|\b\d{4}-\d{2}-\d{2}[tT ]\d{2}:\d{2}:\d{2}\S*"  # timestamps
    r"|\b(?:https?|file|s3)://\S+"  # URLs
    r"|(?<![\w.-])(?:~|\.{1,2})?(?:/[\w.+@%=-]+){2,}/?"  # paths with two or more parts
    r"|\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b"  # hex addresses and hashes
    r"|\b[a-zA-Z]+-?\d{3,}[a-zA-Z0-9-]*\b"  # host names: cn0123, nid001234
    r"|\b\d[\d.:,]*\b"  # numbers, versions, clock times
)
_SPACE = re.compile(r"\s+")


def clean(text: str) -> str:
    """The text without the parts that vary between runs (paths, ids, numbers, hosts)."""
    return _SPACE.sub(" ", _NOISE.sub(" ", text)).strip()


def package_files() -> tuple[Path, Path] | None:
    """The bundled model's weights and tokenizer files, or None if not installed."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    weights, tokenizer = root / _WEIGHTS, root / _TOKENIZER
    if not (weights.is_file() and tokenizer.is_file()):
        return None
    return weights, tokenizer


class Embedder:
    """Texts to unit vectors with a static token-embedding model."""

    model = MODEL

    def __init__(self, weights: Path, tokenizer: Path) -> None:
        import numpy as np
        from safetensors import safe_open
        from tokenizers import Tokenizer

        self._np = np
        with safe_open(str(weights), framework="np") as f:
            table = f.get_tensor("embedding.weight")
        self._table: Matrix = np.ascontiguousarray(table, dtype=np.float32)
        self._tok = Tokenizer.from_file(str(tokenizer))
        self._tok.no_padding()
        self._tok.no_truncation()
        self.dim = int(self._table.shape[1])

    def embed(self, texts: list[str]) -> Matrix:
        """One unit row per text (a text with no tokens gets a zero row)."""
        np = self._np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return cast("Matrix", out)
        cleaned = [clean(t) for t in texts]
        if len(cleaned) == 1:  # a query: no batch (and no thread pool hand-off) for one text
            encoded = [self._tok.encode(cleaned[0], add_special_tokens=False)]
        else:
            encoded = self._tok.encode_batch(cleaned, add_special_tokens=False)
        limit = self._table.shape[0] - 1
        for i, enc in enumerate(encoded):
            ids = enc.ids[:MAX_TOKENS]
            if not ids:
                continue
            vec = self._table[np.minimum(np.asarray(ids, dtype=np.int64), limit)].mean(axis=0)
            norm = float(np.linalg.norm(vec))
            if norm > 0:
                out[i] = vec / norm
        return cast("Matrix", out)

    def embed_one(self, text: str) -> Matrix:
        return cast("Matrix", self.embed([text])[0])


_BUNDLED: list[Embedder | None] = []


def bundled() -> Embedder | None:
    """The model shipped in the ``wordllama`` wheel (loaded once), or None without it."""
    if not _BUNDLED:
        files = package_files()
        model: Embedder | None = None
        if files is not None:
            try:
                model = Embedder(*files)
            except ImportError:
                model = None
        _BUNDLED.append(model)
    return _BUNDLED[0]
