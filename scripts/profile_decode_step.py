#!/usr/bin/env python
"""Where a batched decode step spends its time: onnxruntime's profiler per op group, and the Python around it.

Runs the engine's own runner (engine.runner.OnnxModel, the daemon's 16 slots) over a bundle: for each
case (rows x context) it prefills `rows` slots to `context` tokens, then times --steps decode steps
(real text: the bench's reference text, greedy continuations; lengths growing by one a step, as the daemon's).
With --threads 1 the unprofiled parts are the calling thread's CPU time (onnxruntime runs on it), steady
on a busy machine; the profiler's node times stay wall time, so read their shares, not their sums. Two sessions: one with onnxruntime's profiler (its per-node
times, grouped by what they are for; the profiler adds its own cost per node), one without (the wall
time of each part of a step: the embedding lookup, the session run, the re-scoring of the head's top
logits, trimming the windowed layers, the scheduler's greedy argmax row by row, and sample() with the
bundle's default sampling for every row). Medians over the steps, min and max beside them.

Usage: python -m scripts.profile_decode_step [models/default] [--cases 16x256,16x512,1x512] [--steps 20] [--threads 2]
       [--json out.json]
"""
from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

from edge_agent.bench.ours import prompt_ids  # noqa: E402
from edge_agent.engine.bundle import load_bundle  # noqa: E402
from edge_agent.engine.engine import OnnxEngine  # noqa: E402
from edge_agent.engine.sampling import sample  # noqa: E402
from edge_agent.engine.types import SamplingParams  # noqa: E402

# wall time; with --threads 1 onnxruntime runs on the calling thread and this becomes its CPU time (steadier on a busy machine)
CLOCK = time.perf_counter
# the nodes of the graph's per-row activation scaling around each int8 matmul (models.onnx_builder)
ROW_SCALING = {"Abs", "ReduceMax", "Max", "Div", "QuantizeLinear", "Concat", "Slice"}


def group(op: str, name: str, shapes: str, vocab: int) -> str:
    """What a node's time is for."""
    if op in ("DynamicQuantizeMatMul", "MatMulNBits", "MatMulInteger", "MatMulIntegerToFloat", "MatMul"):
        return f"head ({op})" if str(vocab) in shapes else f"body matmuls ({op})"
    if op == "GroupQueryAttention":
        return "attention (GroupQueryAttention)"
    if op in ("SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization"):
        return "norms (RMS, skip + RMS)"
    if op == "RotaryEmbedding":
        return "rotary"
    if op == "FastGelu":
        return "activation (FastGelu)"
    if op in ROW_SCALING:
        return "per-row activation scaling (Abs, ReduceMax, Max, Div, QuantizeLinear; builder 1: Concat guard, Slice)"
    if op == "Mul":
        return "Mul (row scale back, gelu * up)"
    if op in ("Reshape", "Squeeze", "Shape", "Identity", "Unsqueeze"):
        return "reshapes, shapes"
    if op == "Split":
        return "Split copies (qkv, gate/up)"
    return f"other ({op})"


def session_factory(profile: bool, threads: int, prefix: str):
    """Sessions as runner.make_session makes them (spinning on), with the profiler when asked."""
    def make(path: Path, n_threads: int = threads, providers=None) -> ort.InferenceSession:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "1")
        so.enable_mem_pattern, so.log_severity_level = False, 3
        if profile:
            so.enable_profiling = True
            so.profile_file_prefix = prefix
        return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return make


def timed(obj, attr: str, into: dict[str, float], key: str) -> None:
    """Wrap obj.attr so that each call adds its wall time to into[key]."""
    f = getattr(obj, attr)

    def wrapper(*a, **k):
        t = CLOCK()
        try:
            return f(*a, **k)
        finally:
            into[key] += CLOCK() - t
    setattr(obj, attr, wrapper)


def run_case(engine: OnnxEngine, rows: int, context: int, steps: int, label: list[str], name: str, params: SamplingParams):
    """Prefill `rows` slots to `context` tokens, then `steps` + 2 decode steps; returns per-step part times (s)."""
    model = engine.model
    model.shrink(0)
    model.release_slots(0)
    rng = np.random.default_rng(rows * 1000 + context)
    label[0] = "prefill"
    tok = np.zeros(rows, np.int64)
    for slot in range(rows):  # real text (random ids make flat rows: hundreds of candidates to re-score each)
        ids = np.array(prompt_ids(engine, context, offset=37 * slot))
        for at in range(0, context, 256):
            tok[slot] = int(np.argmax(model.prefill(slot, ids[at:at + 256], at)))
    lengths = np.full(rows, context, np.int64)
    parts: dict[str, list[float]] = collections.defaultdict(list)
    for step in range(steps + 2):
        label[0] = name if step >= 2 else "warm-up"
        acc_snapshot(model)  # drop what the prefills and earlier steps added
        t = CLOCK()
        logits = model.decode(tok, lengths)
        t1 = CLOCK()
        inside = acc_snapshot(model)
        picks = [int(np.argmax(logits[i])) for i in range(rows)]  # the scheduler's greedy pick, row by row
        t2 = CLOCK()
        history = np.zeros(0, np.int64)
        for i in range(rows):
            sample(logits[i], params, rng, history)
        t3 = CLOCK()
        tok = np.array(picks, np.int64)
        lengths = lengths + 1
        if step < 2:
            continue
        parts["decode() total"].append(t1 - t)
        for k, v in inside.items():
            parts[k].append(v)
        parts["greedy argmax, row by row"].append(t2 - t1)
        parts[f"sample() every row ({params.temperature}/{params.top_k}/{params.top_p}/{params.min_p})"].append(t3 - t2)
    parts["capacity"] = [float(model.capacity)]
    return parts


_ACC: dict[int, dict[str, float]] = {}


def acc_snapshot(model) -> dict[str, float]:
    """The wrapped parts' time since the last call (and reset)."""
    a = _ACC[id(model)]
    out = {k: v for k, v in a.items()}
    for k in a:
        a[k] = 0.0
    return out


def instrument(model) -> None:
    a = _ACC.setdefault(id(model), collections.defaultdict(float))
    timed(model.session, "run_with_iobinding", a, "  session run")
    timed(model.embedding, "lookup", a, "  embedding lookup")
    if model.rescorer is not None:
        timed(model.rescorer, "apply", a, "  head re-scoring (top logits exact)")
    timed(model, "trim_windows", a, "  trim_windows")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", nargs="?", default="models/default")
    ap.add_argument("--cases", default="16x256,16x512,1x512", help="rows x context, comma-separated")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    global CLOCK
    if args.threads == 1:
        CLOCK = time.thread_time
    cases = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",")]
    load_before = open("/proc/loadavg").read().split()[:3]
    b = load_bundle(Path(args.bundle), verify=False)
    g = b.manifest.get("generation", {})
    params = SamplingParams(temperature=g.get("temperature", 0.8), top_k=g.get("top_k", 40), top_p=g.get("top_p", 0.95),
                            min_p=g.get("min_p", 0.05))
    prefix = str(Path(tempfile.mkdtemp(prefix="decode-profile-")) / "profile")
    engines = {}
    for prof in (False, True):
        engines[prof] = OnnxEngine(b, threads=args.threads, max_batch=args.slots, context_length=2048, device="cpu",
                                   session_factory=session_factory(prof, args.threads, prefix))
        instrument(engines[prof].model)
    vocab = engines[True].vocab_size
    label = ["load"]
    labels: list[str] = []
    prof_model = engines[True].model
    run = prof_model._run

    def labelled_run(io):
        labels.append(label[0])
        return run(io)
    prof_model._run = labelled_run

    wall: dict[str, dict[str, list[float]]] = {}
    for rows, context in cases:
        name = f"{rows} rows at {context}"
        wall[name] = run_case(engines[False], rows, context, args.steps, ["x"], name, params)
        run_case(engines[True], rows, context, args.steps, label, name, params)
    path = engines[True].model.session.end_profiling()
    events = json.loads(Path(path).read_text())
    Path(path).unlink()
    runs = sorted((e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"), key=lambda e: e["ts"])
    # the profiler's model_run events are the session's runs in order (the first may be the engine's warm-up)
    runs = runs[len(runs) - len(labels):]
    nodes = sorted((e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")), key=lambda e: e["ts"])
    load_after = open("/proc/loadavg").read().split()[:3]
    report = {"bundle": b.name, "threads": args.threads, "slots": args.slots, "steps": args.steps,
              "load_before": load_before, "load_after": load_after, "cases": {}}
    print(f"{b.name}: {args.threads} threads, {args.slots} slots, {args.steps} steps a case; load before {' '.join(load_before)}, "
          f"after {' '.join(load_after)}")
    j = 0
    for rows, context in cases:
        name = f"{rows} rows at {context}"
        per_run: list[dict[str, float]] = []
        op_runs: list[dict[str, float]] = []
        run_durs = []
        for r, lab in zip(runs, labels):
            if lab != name:
                continue
            lo, hi = r["ts"], r["ts"] + r["dur"]
            while j < len(nodes) and nodes[j]["ts"] < lo:
                j += 1
            by: dict[str, float] = collections.defaultdict(float)
            ops: dict[str, float] = collections.defaultdict(float)
            k = j
            head_until = -1  # the dual head's If node: its branch's nodes are timed inside it (and counted as the head)
            while k < len(nodes) and nodes[k]["ts"] < hi:
                e = nodes[k]
                op = e["args"].get("op_name", "?")
                if op == "If":
                    by["(If node, the head's branch inside)"] += e["dur"]
                    head_until = e["ts"] + e["dur"]
                    k += 1
                    continue
                where = f"head: {op}" if e["ts"] < head_until else group(op, e["name"], json.dumps(e["args"].get("input_type_shape")), vocab)
                by[where] += e["dur"]
                ops[op] += e["dur"]
                by["(node count)"] += 1
                k += 1
            by["nodes' sum"] = sum(v for key, v in by.items() if not key.startswith("("))
            by["session run (profiled)"] = r["dur"]
            per_run.append(by)
            op_runs.append(ops)
            run_durs.append(r["dur"])
        keys = sorted({k for d in per_run for k in d}, key=lambda k: -statistics.median(d.get(k, 0) for d in per_run))
        med = {k: statistics.median(d.get(k, 0.0) for d in per_run) for k in keys}
        step_med = med["session run (profiled)"]
        print(f"\n## {name} (capacity {int(wall[name]['capacity'][0])}), profiled session: median of {len(per_run)} steps")
        print("| what | ms | share of the run |\n| --- | --- | --- |")
        for k in keys:
            if k == "(node count)":
                continue
            print(f"| {k} | {med[k] / 1000:.2f} | {100 * med[k] / step_med:.1f}% |")
        print(f"| (nodes run a step) | {med['(node count)']:.0f} | |")
        print(f"\n## {name}, unprofiled session: wall per step, median [min, max] of {args.steps}")
        print("| part | ms |\n| --- | --- |")
        w = wall[name]
        for k, v in w.items():
            if k == "capacity":
                continue
            print(f"| {k} | {1000 * statistics.median(v):.2f} [{1000 * min(v):.2f}, {1000 * max(v):.2f}] |")
        report["cases"][name] = {
            "profiled_ms": {k: round(v / 1000, 3) for k, v in med.items()},
            "ops_ms": {op: round(statistics.median(d.get(op, 0.0) for d in op_runs) / 1000, 3)
                       for op in sorted({o for d in op_runs for o in d})},
            "wall_ms": {k: [round(1000 * statistics.median(v), 3), round(1000 * min(v), 3), round(1000 * max(v), 3)]
                        for k, v in w.items() if k != "capacity"},
            "capacity": int(w["capacity"][0]),
        }
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
