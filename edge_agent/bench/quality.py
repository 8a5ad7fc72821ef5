"""Perplexity of our bundle and of the de-quantized fp32 weights on the same tokens."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine


def reference_text() -> str:
    """Real prose nobody on the team wrote: the CPython licence shipped with the interpreter,
    or, where a distribution leaves it out, the standard library's own module documentation."""
    lic = Path(os.__file__).parent / "LICENSE.txt"
    if lic.is_file():
        return lic.read_text(encoding="utf-8", errors="replace")
    import argparse, collections, json as _json, logging, pathlib, subprocess, threading, typing  # noqa: E401

    return "\n\n".join(m.__doc__ or "" for m in (argparse, collections, _json, logging, pathlib, subprocess, threading, typing))


def perplexity_ours(bundle_path: Path, threads: int, n_tokens: int, device: str = "cpu",
                    int4_head_max_rows: int | None = None) -> tuple[float, list[int]]:
    """Every position of the first n_tokens of the reference text scored, one token at a time (one row a
    step: the head one stream decodes with; int4_head_max_rows 0 scores a dual bundle's int8 head)."""
    bundle = load_bundle(bundle_path, verify=False)
    engine = OnnxEngine(bundle, threads=threads, max_batch=1, context_length=n_tokens + 1, device=device,
                        int4_head_max_rows=int4_head_max_rows)
    ids = engine.encode(reference_text())[:n_tokens]
    nll = 0.0
    for i in range(len(ids) - 1):
        logits = engine.model.prefill(0, np.array([ids[i]], np.int64), i).astype(np.float64)
        m = logits.max()
        nll += m + np.log(np.exp(logits - m).sum()) - logits[ids[i + 1]]
    return float(np.exp(nll / (len(ids) - 1))), ids


def perplexity_fp32(gguf_path: Path, ids: list[int]) -> float:
    """The same positions through transformers on the GGUF's de-quantized fp32 weights."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].double()
    nll = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="mean")
    return float(torch.exp(nll))
