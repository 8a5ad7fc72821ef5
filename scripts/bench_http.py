#!/usr/bin/env python
"""HTTP benchmark of the daemon on loopback; prints one JSON object.

Measures, in one run on one machine:
  - total tokens/s of N concurrent streaming clients vs one client (target: >= 3x);
  - time to first token over HTTP on an idle server vs the engine's own (target: <= 1.2x);
  - latency of every probe while the queue is full: each must be refused with 429 (target: p95 < 50 ms,
    counting a timeout or any other status as a failure).

The engine's own TTFT is measured first in this process; then the server runs as a
subprocess (`python -m edge_agent.cli.serve`), so client and server do not share a GIL.

    python scripts/bench_http.py --model default            # models/default
    python scripts/bench_http.py --model /path/to/bundle --clients 16 --max-tokens 128
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PROMPT = "Question: What are the three most important things to know about running a small bakery?\nAnswer:"


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def engine_ttft(settings, prompt: str, runs: int) -> float:
    """Median submission-to-first-token of the engine alone (idle), in seconds."""
    from edge_agent.engine.types import SamplingParams
    from edge_agent.runtime import build_engine

    sched = build_engine(settings)
    try:
        ids = sched.engine.encode(prompt)
        sched.submit(ids, SamplingParams(max_tokens=2)).result()  # warm-up
        out = []
        for _ in range(runs):
            fin = sched.submit(ids, SamplingParams(max_tokens=1)).result()
            out.append(fin.usage.ttft_s)
        return statistics.median(out)
    finally:
        sched.stop()


class Server:
    """`python -m edge_agent.cli.serve` on a free loopback port."""

    def __init__(self, args, env_extra: dict[str, str]):
        env = dict(os.environ, EDGE_AGENT_SERVE_DOCUMENTS="false", **env_extra)
        cmd = [sys.executable, "-m", "edge_agent.cli.serve", "--port", "0", "--model", args.model]
        if args.models_dir:
            cmd += ["--models-dir", args.models_dir]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.port = None
        lines = []
        end = time.monotonic() + 300
        while self.port is None and time.monotonic() < end:
            line = self.proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            self.proc.kill()
            raise SystemExit("server did not start:\n" + "".join(lines))
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def get(self, path: str) -> dict:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("GET", path)
            return json.loads(c.getresponse().read())
        finally:
            c.close()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -9


def stream(port: int, prompt: str, max_tokens: int, hold: threading.Event | None = None) -> dict:
    """One streaming completion; times to the first text and the end, and the completion token count."""
    body = json.dumps({"model": "default", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    first = None
    tokens = 0
    status = None
    try:
        c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        status = r.status
        if status != 200:
            r.read()
            return {"status": status, "ttft": None, "total": time.perf_counter() - t0, "tokens": 0}
        while True:
            line = r.readline()
            if not line:
                break
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                break
            ev = json.loads(data)
            if ev.get("choices") and ev["choices"][0].get("text") and first is None:
                first = time.perf_counter() - t0
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
            if hold is not None and hold.is_set():
                break  # the caller wants this stream gone: closing the socket cancels it
    finally:
        c.close()
    return {"status": status, "ttft": first, "total": time.perf_counter() - t0, "tokens": tokens}


def _ms(x: float) -> float | None:
    return None if x == float("inf") else round(x, 2)


def post_status(port: int) -> tuple[int, float]:
    body = json.dumps({"model": "default", "prompt": "hi", "max_tokens": 4})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.perf_counter()
    try:
        c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        return r.status, time.perf_counter() - t0
    except TimeoutError:
        return 0, time.perf_counter() - t0  # reported among other_statuses as 0
    finally:
        c.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="default", help="bundle name under --models-dir, or a path")
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: one per physical core)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--ttft-runs", type=int, default=7)
    ap.add_argument("--overload-requests", type=int, default=200)
    ap.add_argument("--prompt", default=PROMPT)
    args = ap.parse_args()

    from edge_agent.config import Settings

    args.models_dir = str(Path(args.models_dir or Settings().models_dir).resolve())  # the server runs in the repo root
    overrides = {"model": args.model, "models_dir": args.models_dir}
    if args.threads:
        overrides["threads"] = args.threads
    settings = Settings(**overrides)
    result: dict = {"model": args.model, "clients": args.clients, "max_tokens": args.max_tokens,
                    "max_batch": settings.max_batch, "max_queue": settings.max_queue}

    result["engine_ttft_ms"] = round(engine_ttft(settings, args.prompt, args.ttft_runs) * 1000, 2)

    server = Server(args, {})
    try:
        port = server.port
        stream(port, args.prompt, 4)  # warm-up
        ttfts = [stream(port, args.prompt, 1)["ttft"] for _ in range(args.ttft_runs)]
        result["http_ttft_ms"] = round(statistics.median(ttfts) * 1000, 2)
        result["ttft_ratio"] = round(result["http_ttft_ms"] / result["engine_ttft_ms"], 3)

        one = stream(port, args.prompt, args.max_tokens)
        result["single_tok_s"] = round(one["tokens"] / one["total"], 2)
        prompts = [f"{args.prompt} ({i})" for i in range(args.clients)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            runs = list(pool.map(lambda p: stream(port, p, args.max_tokens), prompts))
        wall = time.perf_counter() - t0
        total = sum(r["tokens"] for r in runs)
        result["concurrent_tok_s"] = round(total / wall, 2)
        result["concurrent_all_finished"] = all(r["tokens"] == args.max_tokens for r in runs)
        result["concurrent_ttft_p50_ms"] = round(percentile([r["ttft"] * 1000 for r in runs if r["ttft"]], 50), 2)
        result["throughput_ratio"] = round(result["concurrent_tok_s"] / result["single_tok_s"], 3)

        print(json.dumps(result), file=sys.stderr, flush=True)
        # Overload: every batch slot and queue place held by long streams, then probe.
        fill = settings.max_batch + settings.max_queue
        release = threading.Event()
        long_tokens = max(64, min(settings.max_tokens_limit, settings.context_length - 256))
        holders = ThreadPoolExecutor(fill)
        futures = [holders.submit(stream, port, args.prompt, long_tokens, release) for _ in range(fill)]
        end = time.monotonic() + 120
        while time.monotonic() < end:
            ready = server.get("/ready")
            if ready["queue_depth"] >= settings.max_queue:
                break
            time.sleep(0.05)
        result["queue_depth_at_probe"] = server.get("/ready")["queue_depth"]
        probes = []
        with ThreadPoolExecutor(4) as pool:
            probes = list(pool.map(lambda _: post_status(port), range(args.overload_requests)))
        release.set()
        # every probe counts: one that was not refused at once (a timeout, a 200 after waiting,
        # any other status) counts with infinite latency, and any such probe fails the target
        lat = [dt * 1000 if status == 429 else float("inf") for status, dt in probes]
        refused = [x for x in lat if x != float("inf")]
        result["overload"] = {
            "requests": len(probes), "status_429": len(refused),
            "other_statuses": sorted({s for s, _ in probes if s != 429}),
            # None: that share of the probes was not refused (JSON has no infinity)
            "p50_ms": _ms(percentile(lat, 50)), "p95_ms": _ms(percentile(lat, 95)), "max_ms": _ms(max(lat)) if lat else None,
        }
        for f in futures:
            f.result()
        holders.shutdown()
        end = time.monotonic() + 10
        while server.get("/ready")["active"] and time.monotonic() < end:
            time.sleep(0.05)
        result["slots_freed_after_disconnect"] = server.get("/ready")["active"] == 0
    finally:
        result["server_exit_code"] = server.stop()
    result["targets"] = {
        "throughput_ratio_ge_3": result.get("throughput_ratio", 0) >= 3,
        "ttft_ratio_le_1_2": result.get("ttft_ratio", 99) <= 1.2,
        "overload_p95_lt_50ms": (result.get("overload", {}).get("p95_ms") or 1e9) < 50 and not result.get("overload", {}).get("other_statuses", [0]),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
