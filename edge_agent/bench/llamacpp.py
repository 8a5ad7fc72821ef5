"""llama.cpp beside us: its own C++ tools (built by scripts/build-llama-cpp), or, where they are
not built, the Python binding as a labelled fallback.

Each method is one measurement of one round, so the harness can alternate it with ours.
Raises LlamaCppError when a tool fails (a build that crashes on this CPU is reported, not fatal).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

TOOLS = ("llama-bench", "llama-batched-bench", "llama-quantize", "llama-perplexity")
DEFAULT_BIN = Path(".cache/llama.cpp/bin")


class LlamaCppError(Exception):
    """A llama.cpp tool failed or printed nothing we could read."""


def tools_dir() -> Path | None:
    """Where the C++ tools are: $EDGE_AGENT_LLAMA_CPP_BIN, else .cache/llama.cpp/bin; None when not built."""
    d = Path(os.environ.get("EDGE_AGENT_LLAMA_CPP_BIN", DEFAULT_BIN))
    return d if all(os.access(d / t, os.X_OK) for t in TOOLS) else None


def _run(cmd: list[str], timeout: float) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LlamaCppError(f"{Path(cmd[0]).name} ran past {timeout:.0f} s") from None
    if out.returncode != 0:
        why = f"signal {-out.returncode}" if out.returncode < 0 else f"exit {out.returncode}"
        raise LlamaCppError(f"{Path(cmd[0]).name} failed ({why})")
    return out.stdout


class LlamaCppTools:
    """llama-bench, llama-batched-bench, llama-quantize and llama-perplexity on one GGUF family."""

    source = "llama.cpp C++ tools"

    def __init__(self, bin_dir: Path, threads: int, cache: Path):
        self.bin = bin_dir
        self.threads = threads
        self.cache = cache
        cache.mkdir(parents=True, exist_ok=True)

    def quantize(self, gguf: Path, kind: str) -> Path:
        """gguf re-quantized to `kind` (Q8_0, F16, ...), cached beside the other models."""
        out = self.cache / f"{gguf.stem}.{kind}.gguf"
        if not out.is_file() or out.stat().st_mtime < gguf.stat().st_mtime:
            tmp = out.with_suffix(".tmp")
            _run([str(self.bin / "llama-quantize"), "--allow-requantize", str(gguf), str(tmp), kind], 900)
            os.replace(tmp, out)
        return out

    def single(self, gguf: Path, n_prompt: int = 512, n_gen: int = 128) -> dict[str, float]:
        """One repetition of `llama-bench -p 512 -n 128`: prefill and decode tokens/s."""
        out = _run([str(self.bin / "llama-bench"), "-m", str(gguf), "-t", str(self.threads), "-p", str(n_prompt),
                    "-n", str(n_gen), "-r", "1", "-o", "json"], 600)
        try:
            rows = json.loads(out)
            pp = next(r["avg_ts"] for r in rows if r["n_prompt"] == n_prompt and r["n_gen"] == 0)
            tg = next(r["avg_ts"] for r in rows if r["n_gen"] == n_gen and r["n_prompt"] == 0)
        except (ValueError, KeyError, StopIteration):
            raise LlamaCppError("llama-bench printed no result") from None
        return {"prefill_tok_s": float(pp), "decode_tok_s": float(tg)}

    def batched(self, gguf: Path, parallel: int = 16, n_prompt: int = 128, n_gen: int = 128) -> float:
        """Total decode tokens/s of `parallel` sequences generating together (llama-batched-bench)."""
        ctx = parallel * (n_prompt + n_gen) + 256
        out = _run([str(self.bin / "llama-batched-bench"), "-m", str(gguf), "-t", str(self.threads), "-c", str(ctx),
                    "-b", "2048", "-ub", "512", "-npp", str(n_prompt), "-ntg", str(n_gen), "-npl", str(parallel),
                    "--output-format", "jsonl"], 1200)
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                return float(json.loads(line)["speed_tg"])
        raise LlamaCppError("llama-batched-bench printed no result")

    def perplexity(self, gguf: Path, text_file: Path, ctx: int = 1024) -> float:
        """llama-perplexity's final estimate (each window scores its second half, llama.cpp's method)."""
        out = subprocess.run([str(self.bin / "llama-perplexity"), "-m", str(gguf), "-t", str(self.threads), "-f", str(text_file),
                              "-c", str(ctx), "-b", str(ctx)], capture_output=True, text=True, timeout=900)
        m = re.search(r"Final estimate: PPL = ([0-9.]+)", out.stdout + out.stderr)
        if out.returncode != 0 or not m:
            raise LlamaCppError("llama-perplexity printed no estimate")
        return float(m.group(1))


class LlamaCppBinding:
    """The fallback: llama-cpp-python in a child process answering one round at a time.

    Slower per token than the C++ tools (Python between tokens), so its rows are labelled as
    the binding's. A child process because a build that crashes must not take our results along.
    """

    source = "llama-cpp-python binding (fallback: C++ tools not built)"

    def __init__(self, gguf: Path, threads: int, n_gen: int):
        code = (f"from pathlib import Path; from edge_agent.bench.llamacpp import binding_rounds; "
                f"binding_rounds(Path({str(gguf)!r}), {threads}, {n_gen})")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise LlamaCppError(f"llama-cpp-python failed to load ({self._why()})")

    def _why(self) -> str:
        code = self.proc.wait()
        return f"signal {-code}" if code < 0 else f"exit {code}"

    def single(self, gguf: Path | None = None) -> dict[str, float]:
        try:
            self.proc.stdin.write("round\n")
            self.proc.stdin.flush()
            return json.loads(self.proc.stdout.readline())
        except (OSError, ValueError):
            raise LlamaCppError(f"llama-cpp-python failed ({self._why()})") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def binding_rounds(gguf_path: Path, threads: int, n_gen: int) -> None:
    """The binding child's side: per "round" line on stdin, one 512-token prefill and one greedy
    decode of n_gen tokens; a JSON line of tokens/s for each on stdout."""
    from llama_cpp import Llama

    from edge_agent.bench.quality import reference_text

    llm = Llama(model_path=str(gguf_path), n_threads=threads, n_threads_batch=threads, n_ctx=2048, n_batch=512, verbose=False)
    toks = llm.tokenize(reference_text().encode(), add_bos=True)
    while len(toks) < 512:
        toks = toks + toks[1:]
    toks = toks[:512]
    llm.eval(toks[:64])  # warm-up
    print("ready", flush=True)
    for _ in sys.stdin:
        llm.reset()
        t = time.perf_counter()
        llm.eval(toks)
        prefill = 512 / (time.perf_counter() - t)
        gen = llm.generate(toks[:32], temp=0.0, reset=True)
        next(gen)
        t = time.perf_counter()
        for _ in range(n_gen - 1):
            next(gen)
        decode = (n_gen - 1) / (time.perf_counter() - t)
        print(json.dumps({"prefill_tok_s": prefill, "decode_tok_s": decode}), flush=True)


