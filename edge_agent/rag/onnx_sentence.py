"""A sentence-transformers ONNX folder run with onnxruntime and tokenizers alone (no torch).

sentence-transformers' ONNX backend imports torch, transformers and optimum to run a
22 MB int8 graph: in the daemon that was ~400 MB of resident memory for the embedder
(measured with the default bundle: +405 MB against +30 MB for this class). This runs the
same graph in the same way for the common pipeline, a Transformer module, mean Pooling and
Normalize (all-MiniLM-L6-v2 and most sentence-transformers models): texts sorted by length,
batches padded to their longest text, truncation at max_seq_length, the attention-masked
mean of the token embeddings, then L2 normalisation. Folders with any other module
(`supported` says) still go through sentence-transformers.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

_TRANSFORMER = "sentence_transformers.base.modules.transformer.Transformer"
_POOLING = ("sentence_transformers.sentence_transformer.modules.pooling.Pooling", "sentence_transformers.models.Pooling")
_NORMALIZE = ("sentence_transformers.sentence_transformer.modules.normalize.Normalize", "sentence_transformers.models.Normalize")
_TRANSFORMERS = (_TRANSFORMER, "sentence_transformers.models.Transformer")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def supported(folder: Path) -> bool:
    """True when folder is a Transformer -> mean Pooling (-> Normalize) pipeline this class runs exactly."""
    modules = _read_json(folder / "modules.json")
    if not isinstance(modules, list) or len(modules) not in (2, 3):
        return False
    types = [m.get("type") for m in modules if isinstance(m, dict)]
    if len(types) != len(modules) or types[0] not in _TRANSFORMERS or types[1] not in _POOLING:
        return False
    if len(types) == 3 and types[2] not in _NORMALIZE:
        return False
    pooling = _read_json(folder / str(modules[1].get("path", "")) / "config.json")
    if not isinstance(pooling, dict):
        return False
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True}
    mode = pooling.get("pooling_mode")
    mean_only = modes == {"pooling_mode_mean_tokens"} if modes else mode == "mean"
    bert = _read_json(folder / "sentence_bert_config.json") or {}
    return bool(mean_only and pooling.get("include_prompt", True) and not bert.get("do_lower_case", False)
                and (folder / "tokenizer.json").is_file())


def prompts(folder: Path) -> dict[str, str]:
    """The model's named prompts (config_sentence_transformers.json "prompts", e.g. e5's {"query": "query: ",
    "passage": "passage: "}); empty when it has none."""
    found = (_read_json(folder / "config_sentence_transformers.json") or {}).get("prompts")
    return {str(k): str(v) for k, v in found.items() if isinstance(v, str) and v} if isinstance(found, dict) else {}


def embedding_dimension(folder: Path) -> int | None:
    """The pooling module's output size from its configuration, or None when it does not say."""
    modules = _read_json(folder / "modules.json")
    if not isinstance(modules, list) or len(modules) < 2 or not isinstance(modules[1], dict):
        return None
    pooling = _read_json(folder / str(modules[1].get("path", "")) / "config.json") or {}
    dim = pooling.get("word_embedding_dimension") or pooling.get("embedding_dimension")
    return int(dim) if isinstance(dim, int) and dim > 0 else None


def max_seq_length(folder: Path) -> int:
    """sentence-transformers' rule: sentence_bert_config's max_seq_length, else the tokenizer's model_max_length."""
    bert = _read_json(folder / "sentence_bert_config.json") or {}
    if isinstance(bert.get("max_seq_length"), int):
        return int(bert["max_seq_length"])
    cfg = _read_json(folder / "tokenizer_config.json") or {}
    limit = cfg.get("model_max_length")
    model = _read_json(folder / "config.json") or {}
    positions = int(model.get("max_position_embeddings") or 512)
    return int(limit) if isinstance(limit, int) and limit < 100_000 else positions


def plain_tokenizer(folder: Path):  # -> tokenizers.Tokenizer
    """The folder's fast tokenizer without truncation or padding."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


class OrtSentenceModel:
    """The encode() of a sentence-transformers ONNX model, on onnxruntime and tokenizers.

    Raises onnxruntime's and tokenizers' errors for unreadable files.
    """

    def __init__(self, folder: Path, file_name: str, session_options: Any, tokenizer: Any = None):
        """tokenizer: the folder's tokenizer without truncation or padding (see `plain_tokenizer`), shared with the
        chunker (a multilingual vocabulary costs ~280 MB resident a copy); loaded here when not given."""
        import onnxruntime as ort

        self.max_seq_length = max_seq_length(folder)
        modules = _read_json(folder / "modules.json")
        self.normalize = len(modules) == 3
        self.tokenizer = tokenizer if tokenizer is not None else plain_tokenizer(folder)
        # truncation is done per text (as tokenizers' own would: the text's tokens cut so that the special ones fit),
        # so the shared tokenizer keeps no truncation setting for the chunker to trip over
        self._content_max = max(1, self.max_seq_length - self.tokenizer.num_special_tokens_to_add(False))
        self.session = ort.InferenceSession(str(folder / file_name), session_options, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self.session.get_inputs()]
        pooling = _read_json(folder / str(modules[1].get("path", "")) / "config.json") or {}
        self.dim = int(pooling.get("word_embedding_dimension") or pooling.get("embedding_dimension")
                       or self.session.get_outputs()[0].shape[-1])
        self.prompts = prompts(folder)

    def get_embedding_dimension(self) -> int:
        return self.dim

    def _batch(self, texts: list[str]) -> np.ndarray:
        encs = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        for e in encs:
            e.truncate(self._content_max)
        encs = [self.tokenizer.post_process(e) for e in encs]
        n = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), n), np.int64)
        mask = np.zeros((len(encs), n), np.int64)
        types = np.zeros((len(encs), n), np.int64)
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = e.attention_mask
            types[i, : len(e.ids)] = e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        tokens = self.session.run(None, {k: feeds[k] for k in self._inputs})[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (tokens * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        if self.normalize:
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled.astype(np.float32, copy=False)

    def encode(self, texts: Sequence[str], batch_size: int = 32, normalize_embeddings: bool = False, prompt_name: str | None = None,
               **_: Any) -> np.ndarray:
        """Vectors [len(texts), dim] (float32), computed in batches of texts of similar length; prompt_name: the model's
        prompt of that name (see `prompts`) put before each text, as sentence-transformers does."""
        prompt = self.prompts[prompt_name] if prompt_name else ""
        texts = [prompt + t for t in texts]
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.dim), np.float32)
        for start in range(0, len(texts), batch_size):
            idx = order[start: start + batch_size]
            out[idx] = self._batch([texts[i] for i in idx])
        if normalize_embeddings and not self.normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out
