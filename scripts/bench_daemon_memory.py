#!/usr/bin/env python
"""Peak resident memory of the real daemon: idle once /ready, then N concurrent completions of
a P-token prompt and G new tokens each; prints one JSON object.

`edge-agent bench` measures the engine alone (with the daemon's prefix cache budget); this
measures the whole daemon as `edge-agent serve` runs it: grammar tokenizer, embedder and
document index, jobs, HTTP threads. It runs on a free loopback port with a fresh data and index
folder; the prepared embedding model (`edge-agent setup`) is copied there from data_dir so
that nothing is exported (without one, documents are off and the JSON says so).

    python scripts/bench_daemon_memory.py                      # models/default, 16 x (512 + 128)
    python scripts/bench_daemon_memory.py --streams 1
    python scripts/bench_daemon_memory.py --first-use --streams 0   # what the on-demand parts cost when first used

--first-use: before the streams, one /v1/embeddings request and one JSON-mode chat request, each
twice (the first loads the embedding model / builds the grammar tokenizer, services/on_demand.py):
their latencies and the RSS after each.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def status_mb(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def request(port: int, method: str, path: str, body: dict | None = None, timeout: float = 600) -> tuple[int, dict]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"{}")
    finally:
        c.close()


def prompts(bundle: Path, n: int, length: int) -> list[str]:
    """n distinct texts of about `length` tokens (the bench's reference text at offsets 29 tokens apart)."""
    from tokenizers import Tokenizer

    from edge_agent.bench.quality import reference_text

    tok = Tokenizer.from_file(str(bundle / "tokenizer.json"))
    ids = tok.encode(reference_text(), add_special_tokens=False).ids
    while len(ids) < length + 29 * n:
        ids = ids + ids
    return [tok.decode(ids[29 * i: 29 * i + length - 1]) for i in range(n)]


class StreamGaps:
    """A streamed completion in a thread; finish() -> (largest, median) seconds between its chunks."""

    def __init__(self, port: int, model: str):
        self.times: list[float] = []
        body = {"model": model, "prompt": "Once upon a time", "max_tokens": 400, "temperature": 0, "ignore_eos": True, "stream": True}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        self.resp = self.conn.getresponse()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        while len(self.times) < 20 and self.thread.is_alive():  # decoding steadily before the other request starts
            time.sleep(0.05)

    def _read(self) -> None:
        for line in self.resp:
            if line.startswith(b"data: "):
                self.times.append(time.perf_counter())

    def finish(self) -> tuple[float, float]:
        time.sleep(1.0)
        self.conn.close()
        self.thread.join(5)
        gaps = sorted(b - a for a, b in zip(self.times, self.times[1:]))
        return (round(gaps[-1], 3), round(gaps[len(gaps) // 2], 3)) if gaps else (0.0, 0.0)


def first_use(port: int, pid: int, model: str, documents: bool) -> dict:
    """Latency (s) of the first and second embedding and JSON-mode requests, and the RSS (MB) after each first one."""
    out: dict = {}
    calls = [("json", "/v1/chat/completions", {"model": model, "max_tokens": 8, "temperature": 0, "response_format": {"type": "json_object"},
                                               "messages": [{"role": "user", "content": "A fox as JSON."}]})]
    if documents:
        calls.insert(0, ("embed", "/v1/embeddings", {"model": "default", "input": ["The invoice is overdue."]}))
    for name, path, body in calls:
        for turn in ("first", "second"):
            stream = None
            if name == "json":  # a stream decoding meanwhile: how long the build pauses it (the build holds the GIL)
                stream = StreamGaps(port, model)
            t = time.perf_counter()
            code, _ = request(port, "POST", path, body)
            out[f"{name}_{turn}_s"] = round(time.perf_counter() - t, 3)
            if stream is not None:
                out[f"stream_gap_during_json_{turn}_max_s"], out["stream_gap_median_s"] = stream.finish()
            if code != 200:
                raise SystemExit(f"{path} answered {code}")
            if turn == "first":
                time.sleep(1)
                out[f"rss_after_{name}_mb"] = status_mb(pid, "VmRSS")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--first-use", action="store_true", help="time the first embedding and JSON-mode requests (see above)")
    args = ap.parse_args()

    from edge_agent.config import Settings
    from edge_agent.rag.embedder import prepared_decision

    settings = Settings(model=args.model)
    tmp = Path(tempfile.mkdtemp(prefix="edge-agent-memory-"))
    env = dict(os.environ, EDGE_AGENT_DATA_DIR=str(tmp / "var"), EDGE_AGENT_INDEX_DIR=str(tmp / "index"), EDGE_AGENT_MODEL=args.model)
    documents = False
    try:
        documents = prepared_decision(settings) is not None
    except Exception:
        pass
    if documents:
        shutil.copytree(Path(settings.data_dir) / "embedding-cache", tmp / "var" / "embedding-cache", symlinks=True)
    else:
        env["EDGE_AGENT_SERVE_DOCUMENTS"] = "false"
    proc = subprocess.Popen([sys.executable, "-m", "edge_agent.cli.serve", "--port", "0"], cwd=REPO, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        port, end = None, time.monotonic() + 300
        while port is None and time.monotonic() < end:
            line = proc.stderr.readline()
            if not line:
                raise SystemExit("the daemon exited before listening")
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            port = int(m.group(1)) if m else None
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        ready: dict = {}
        while time.monotonic() < end:
            code, ready = request(port, "GET", "/ready", timeout=10)
            if code == 200:
                break
            time.sleep(0.5)
        time.sleep(2)  # what the background loads freed goes back first
        res = {"model": args.model, "documents": documents, "ready_parts": sorted(ready.get("parts", {})),
               "idle_rss_mb": status_mb(proc.pid, "VmRSS"), "load_peak_rss_mb": status_mb(proc.pid, "VmHWM"),
               "load_before": open("/proc/loadavg").read().split()[0]}
        res["ready_details"] = {k: v.get("detail") for k, v in ready.get("parts", {}).items() if k in ("grammar", "embedder")}
        if args.first_use:
            res.update(first_use(port, proc.pid, args.model, documents))
        if args.streams < 1:
            print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in res.items()}))
            return 0
        texts = prompts(settings.bundle_path(), args.streams, args.prompt_tokens)
        body = {"model": args.model, "max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True}
        t = time.perf_counter()
        with ThreadPoolExecutor(args.streams) as ex:
            done = list(ex.map(lambda p: request(port, "POST", "/v1/completions", {**body, "prompt": p}), texts))
        res.update(
            streams=args.streams, seconds=round(time.perf_counter() - t, 1),
            ok=sum(1 for code, _ in done if code == 200),
            prompt_tokens=[r.get("usage", {}).get("prompt_tokens") for _, r in done][:1],
            peak_rss_mb=status_mb(proc.pid, "VmHWM"), after_rss_mb=status_mb(proc.pid, "VmRSS"),
            prefix_cache_mb=settings.prefix_cache_mb,
        )
        print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in res.items()}))
        return 0 if res["ok"] == args.streams else 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
