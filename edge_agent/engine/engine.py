"""OnnxEngine: a loaded bundle (graph, tokenizer, cache) ready to run steps."""
from __future__ import annotations

import ctypes
import logging
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from edge_agent.engine.bundle import Bundle
from edge_agent.engine.runner import CacheShape, Embedding, OnnxModel, make_session
from edge_agent.hardware import detect

log = logging.getLogger(__name__)


def release_free_heap() -> None:
    """Give freed heap pages back to the OS (glibc only; a no-op elsewhere).

    Parsing a 33 MB tokenizer.json and building the session leave ~200 MB of
    freed-but-mapped heap behind; without this it counts as resident memory.
    """
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class OnnxEngine:
    """The language model of one bundle: tokenizer, session and key/value cache slots."""

    def __init__(
        self,
        bundle: Bundle,
        threads: int = 0,
        max_batch: int = 16,
        context_length: int | None = None,
        device: str = "auto",
    ):
        self.bundle = bundle
        arch = bundle.architecture
        self.vocab_size = int(arch["vocab_size"])
        self.context_length = min(bundle.context_length, context_length or bundle.context_length)
        self.max_batch = max_batch
        hw = detect(device)
        self.device = hw.device
        self.threads = threads or hw.physical_cores
        self.tokenizer = Tokenizer.from_file(str(bundle.tokenizer_file))
        release_free_heap()  # parsing tokenizer.json leaves ~200 MB of freed heap mapped
        self.stop_token_ids = frozenset(bundle.stop_token_ids)
        session = make_session(bundle.model_file, self.threads, list(hw.providers))
        cache = CacheShape(
            layers=int(arch["num_layers"]),
            kv_heads=int(arch["num_kv_heads"]),
            head_dim=int(arch["head_dim"]),
            slots=max_batch,
            max_len=self.context_length,
        )
        self.model = OnnxModel(session, cache, self.vocab_size, Embedding(bundle.path))
        release_free_heap()
        log.info(
            "loaded %s (%s, %d layers) on %s with %d threads, %d slots x %d tokens",
            bundle.name, arch["arch"], cache.layers, self.device, self.threads, max_batch, self.context_length,
        )

    @property
    def name(self) -> str:
        return self.bundle.name

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of text; the bundle's tokenizer adds BOS where the model expects it."""
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int] | np.ndarray, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    @classmethod
    def from_path(cls, path: Path, **kwargs) -> "OnnxEngine":
        from edge_agent.engine.bundle import load_bundle

        return cls(load_bundle(path), **kwargs)
