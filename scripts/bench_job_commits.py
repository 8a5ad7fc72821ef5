"""Items/s of job runs through the jobs service, two code trees side by side (e.g. before/after group commit).

Starts one worker process per tree (each loads the default bundle and the embedder once, with its own
SQLite database in a temp dir), then runs the same workloads in paired rounds, alternating which tree
goes first, and prints each workload's median items/s per tree and the median of the per-round ratios,
with /proc/loadavg before and after:

- classify-plain: a classify run (names only, embedding method, self_train false) of set a's texts;
- classify-self: the same run self-trained (self_train auto: every item is embedded before the first result);
- batch-embed: an OpenAI batch file of /v1/embeddings requests (one short text each) as a batch job;
- batch-chat: a batch file of short /v1/chat/completions requests (max_tokens 4);
- runner: the run loop alone, a run of `--items` items that are done as soon as they start (each success
  with a row written in the commit's transaction, as summaries and labels are): what SQLite costs per item.

    git archive main edge_agent | tar -x -C /tmp/tree-main
    .venv/bin/python scripts/bench_job_commits.py --before /tmp/tree-main --after . --rounds 5 [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = ("classify-plain", "classify-self", "batch-embed", "batch-chat", "runner")


class InstantKind:
    """Items "0".."n-1", each done when started; a success stores a row in `bench_effects` with its commit."""

    name = "bench-instant"
    prompt_version = "bench-1"

    def list_items(self, params, ctx, since):
        from edge_agent.jobs.kinds import Item

        return (Item(str(i), {"i": i}) for i in range(params["n"]))

    def start_item(self, item, params, ctx):
        from edge_agent.jobs.kinds import DonePending

        return DonePending(lambda: {"i": item.payload["i"]})

    def commit_effect(self, item, result, run_id, ctx):
        def effect(conn) -> None:
            conn.execute("INSERT INTO bench_effects(run_id, item_key) VALUES (?, ?)", (run_id, item.key))

        return effect


def run_instant(jobs, n: int):
    """A run of n instant items through a RunLoop over the jobs service's store; returns the finished run."""
    import threading

    from edge_agent.jobs.runner import RunLoop
    from edge_agent.store.jobs import JobRecord, new_id

    with jobs.db.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_effects(run_id TEXT, item_key TEXT, PRIMARY KEY(run_id, item_key))")
    job = jobs.store.create_job(JobRecord(id=new_id("job"), name=new_id("bench"), kind=InstantKind.name, params={"n": n}))
    run = jobs.store.create_run(job, {"n": n}, "manual", jobs.settings.jobs_concurrency, None, None, None, owner=jobs.owner)
    return RunLoop(jobs.store, InstantKind(), jobs.ctx, jobs.owner, threading.Event()).execute(run)


def worker(tree: str, models_dir: str, items: int, chat_items: int) -> None:
    """Serve workloads named on stdin, one JSON line of {workload, items, seconds} per command on stdout."""
    sys.path.insert(0, tree)
    sys.path.insert(1, str(REPO / "scripts"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import tempfile

    import pydoc_labels
    from edge_agent.config import Settings
    from edge_agent.jobs.batch_files import stores
    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.runtime import build_runtime

    import edge_agent
    assert Path(edge_agent.__file__).resolve().is_relative_to(Path(tree).resolve()), edge_agent.__file__
    tmp = tempfile.TemporaryDirectory(prefix="bench-job-commits-")
    settings = Settings(models_dir=Path(models_dir), model="default", serve_documents=False,
                        data_dir=Path(tmp.name) / "var", index_dir=Path(tmp.name) / "index")
    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    rt = build_runtime(settings, documents=embedder, load_documents=False, start_jobs=False)
    chapters = pydoc_labels.SETS["a"]
    names = list(chapters.values())
    evals, _ = pydoc_labels.split(max(1, items // len(names)), 0, seed=0, chapters=chapters)
    texts = [{"id": str(i), "text": t} for i, (t, _) in enumerate(evals)][:items]
    files = stores(settings, rt.jobs.db).files

    def batch_file(url: str, n: int) -> str:
        lines = []
        for i in range(n):
            t = texts[i % len(texts)]["text"][:300]
            body = ({"model": "default", "input": t} if url == "/v1/embeddings" else
                    {"model": "default", "messages": [{"role": "user", "content": "Say one word about: " + t[:120]}],
                     "max_tokens": 4, "temperature": 0})
            lines.append(json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": url, "body": body}))
        return files.create("batch", f"{url.strip('/').replace('/', '-')}.jsonl", ("\n".join(lines) + "\n").encode()).id

    inputs = {"batch-embed": (batch_file("/v1/embeddings", items), "/v1/embeddings"),
              "batch-chat": (batch_file("/v1/chat/completions", chat_items), "/v1/chat/completions")}
    print(json.dumps({"ready": True, "edge_agent": edge_agent.__file__}), flush=True)
    count = 0
    for line in sys.stdin:
        workload = line.strip()
        if not workload:
            continue
        count += 1
        name = f"{workload}-{count}"
        if workload == "runner":
            t0 = time.perf_counter()
            run = run_instant(rt.jobs, items)
            secs = time.perf_counter() - t0
            print(json.dumps({"workload": workload, "items": run.counts["succeeded"], "failed": run.counts["failed"],
                              "total": run.total_items, "seconds": secs}), flush=True)
            continue
        if workload.startswith("classify"):
            st = False if workload == "classify-plain" else "auto"
            rt.jobs.create_job(name, "classify", {"labels": names, "method": "embedding", "source": "texts", "texts": texts,
                                                  "self_train": st})
        else:
            file_id, endpoint = inputs[workload]
            rt.jobs.create_job(name, "batch", {"input_file_id": file_id, "endpoint": endpoint})
        t0 = time.perf_counter()
        run = rt.jobs.run_foreground(name)
        secs = time.perf_counter() - t0
        print(json.dumps({"workload": workload, "items": run.counts["succeeded"], "failed": run.counts["failed"],
                          "total": run.total_items, "seconds": secs}), flush=True)
    rt.close()
    tmp.cleanup()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="code tree A (a folder with edge_agent/)")
    ap.add_argument("--after", default=str(REPO), help="code tree B")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted")
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--chat-items", type=int, default=64)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--models-dir", default=str(REPO / "models"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.models_dir, args.items, args.chat_items)
        return 0
    workloads = [w for w in args.workloads.split(",") if w]
    trees = {"before": args.before, "after": args.after}
    procs = {}
    for tag, tree in trees.items():
        procs[tag] = subprocess.Popen(
            [sys.executable, __file__, "--before", "-", "--worker", str(Path(tree).resolve()), "--models-dir", args.models_dir,
             "--items", str(args.items), "--chat-items", str(args.chat_items)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(Path(tree).resolve()))
    try:
        for tag, p in procs.items():
            ready = json.loads(p.stdout.readline())
            assert ready.get("ready"), ready
        load0 = open("/proc/loadavg").read().split()[:3]
        got: dict[str, dict[str, list[float]]] = {w: {"before": [], "after": []} for w in workloads}
        ratios: dict[str, list[float]] = {w: [] for w in workloads}
        for r in range(-args.warmup, args.rounds):
            for w in workloads:
                order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
                speed = {}
                for tag in order:
                    p = procs[tag]
                    p.stdin.write(w + "\n")
                    p.stdin.flush()
                    res = json.loads(p.stdout.readline())
                    assert res["items"] + res["failed"] == res["total"], res
                    speed[tag] = res["total"] / res["seconds"]
                if r < 0:
                    continue  # a warm-up round (first runs build classifiers, fill caches)
                for tag in order:
                    got[w][tag].append(speed[tag])
                ratios[w].append(speed["after"] / speed["before"])
                print(f"round {r} {w}: before {speed['before']:.1f}/s after {speed['after']:.1f}/s "
                      f"ratio {ratios[w][-1]:.2f}", file=sys.stderr, flush=True)
        load1 = open("/proc/loadavg").read().split()[:3]
    finally:
        for p in procs.values():
            p.stdin.close()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()

    def median(xs: list[float]) -> float:
        s = sorted(xs)
        return (s[len(s) // 2] + s[(len(s) - 1) // 2]) / 2

    out = {"rounds": args.rounds, "items": args.items, "chat_items": args.chat_items, "load_before": load0, "load_after": load1,
           "results": {w: {"before_items_per_s": round(median(got[w]["before"]), 1),
                           "after_items_per_s": round(median(got[w]["after"]), 1),
                           "ratio_median": round(median(ratios[w]), 2), "ratios": [round(x, 2) for x in ratios[w]]}
                       for w in workloads}}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{args.rounds} paired rounds, load {' '.join(load0)} -> {' '.join(load1)}")
        for w, r in out["results"].items():
            print(f"  {w:15s} before {r['before_items_per_s']:7.1f}/s  after {r['after_items_per_s']:7.1f}/s  "
                  f"after/before median {r['ratio_median']:.2f}  ({' '.join(map(str, r['ratios']))})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
