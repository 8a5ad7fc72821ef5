"""The GPU check's measuring part (run by scripts/gpu-check): one JSON line on stdout.

Detection (hardware.detect with the default bundle's needs), the GPU session (device = cuda:
a failure is reported, not hidden by the fallback), greedy parity against the CPU on fixed
prompts (free-running: identical continuations and the share of tokens before the first
divergence; teacher-forced: top-1 agreement when both are fed the CPU's tokens, the fairer
measure since one near-tie ends a free run), and decode / prefill 512 / 16-stream throughput on both, measured by the same
harness as `edge-agent bench` (edge_agent.bench.ours). Exit status: 0 measured, 1 no usable
GPU, 2 the GPU session failed.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

PROMPTS = [
    "Question: What is the capital of France?\nAnswer:",
    "The quick brown fox",
    "def fibonacci(n):\n",
    "Once upon a time, in a small village,",
    "Article: The city council approved a new budget on Monday, raising spending on schools and roads.\n\nOne-sentence summary:",
    "Amsterdam is de hoofdstad van",
    "The three primary colors are",
    "import numpy as np\n\n# compute the mean of a list\n",
]


def parity(gpu_sched, cpu_sched, n_tokens: int) -> dict:
    from edge_agent.engine.types import SamplingParams

    rows, same_prompts, matched, total = [], 0, 0, 0
    for prompt in PROMPTS:
        params = SamplingParams(max_tokens=n_tokens, temperature=0, ignore_eos=True)
        a = cpu_sched.generate(prompt, params).token_ids
        b = gpu_sched.generate(prompt, params).token_ids
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        same_prompts += a == b
        matched += first
        total += len(a)
        rows.append({"prompt": prompt[:40], "first_divergence": None if a == b else first})
    return {
        "prompts": len(PROMPTS), "tokens_each": n_tokens, "identical": same_prompts,
        "match_rate": round(matched / total, 4) if total else None, "per_prompt": rows,
    }


def teacher_forced(bundle, threads: int, n_tokens: int) -> dict:
    """Top-1 agreement with the CPU's greedy tokens fed to both (one divergence does not count twice).

    Two one-slot engines outside any scheduler: each step runs `prefill` of one token at its position.
    """
    import numpy as np

    from edge_agent.engine.engine import OnnxEngine

    gpu = OnnxEngine(bundle, threads=threads, max_batch=1, context_length=1024, device="cuda")
    cpu = OnnxEngine(bundle, threads=threads, max_batch=1, context_length=1024, device="cpu")
    agree = total = 0
    max_abs = []
    for prompt in PROMPTS:
        ids = np.array(cpu.encode(prompt), np.int64)
        lc, lg = cpu.model.prefill(0, ids, 0).copy(), gpu.model.prefill(0, ids, 0).copy()
        pos = len(ids)
        for _ in range(n_tokens):
            tok = int(lc.argmax())
            agree += int(lg.argmax()) == tok
            total += 1
            max_abs.append(float(np.abs(lc - lg).max()))
            step = np.array([tok], np.int64)
            lc, lg = cpu.model.prefill(0, step, pos).copy(), gpu.model.prefill(0, step, pos).copy()
            pos += 1
    return {"top1_agreement": round(agree / total, 4), "steps": total, "median_max_abs_logit_diff": round(float(np.median(max_abs)), 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("models/default"))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=32, help="greedy tokens per parity prompt")
    ap.add_argument("--quick", action="store_true", help="32 generated tokens per throughput run instead of 128")
    args = ap.parse_args(argv)

    import onnxruntime as ort

    from edge_agent.engine.bundle import load_bundle
    from edge_agent.engine.engine import gpu_need
    from edge_agent.hardware import DeviceError, detect, query_gpus

    out: dict = {"check": "gpu", "host": platform.node(), "onnxruntime": ort.__version__, "providers": ort.get_available_providers()}
    bundle = load_bundle(args.bundle, verify=True)
    hw = detect("auto", gpu_need(bundle, 16, 2048))
    gpus = query_gpus()
    out["detection"] = {"device": hw.device, "reason": hw.reason, "gpus": gpus if isinstance(gpus, str) else [g.__dict__ for g in gpus]}
    if hw.device != "cuda":
        out["gpu"] = False
        print(json.dumps(out))
        return 1
    from edge_agent.bench.ours import OurEngines
    from edge_agent.engine import gpu_graph

    t = time.perf_counter()
    try:
        gpu_graph.ensure_gpu_graph(bundle)
        out["gpu_graph"] = {"seconds": round(time.perf_counter() - t, 1), **{k: v for k, v in gpu_graph.cached_record(bundle).items() if k != "folder"}}
        t = time.perf_counter()
        gpu = OurEngines(args.bundle, args.threads, 16, 256, "cuda", args.quick)
    except (DeviceError, Exception) as e:
        out.update(gpu=False, session_error=f"{type(e).__name__}: {str(e).splitlines()[0][:400] if str(e) else ''}")
        print(json.dumps(out))
        return 2
    out["gpu"] = True
    out["gpu_load_s"] = round(time.perf_counter() - t, 1)
    eng = gpu.daemon.engine
    out["gpu_engine"] = {"device": eng.device, "slots": eng.max_batch, "fallback_reason": eng.fallback_reason}
    cpu = OurEngines(args.bundle, args.threads, 16, 256, "cpu", args.quick)
    out["cpu_threads"] = cpu.threads
    out["parity"] = parity(gpu.daemon, cpu.daemon, args.tokens)
    out["parity"]["teacher_forced"] = teacher_forced(bundle, args.threads, args.tokens)
    out["throughput"] = {"cuda": gpu.round(), "cpu": cpu.round()}
    c, g = out["throughput"]["cpu"], out["throughput"]["cuda"]
    out["speedup"] = {k: round(g[k] / c[k], 2) for k in ("decode_tok_s", "prefill_tok_s", "batch16_tok_s") if c.get(k)}
    gpu.close()
    cpu.close()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
