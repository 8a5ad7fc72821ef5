"""Interactive requests keep their latency while a job run keeps the engine busy (a loose bound; the figure is in bench_jobs)."""
from __future__ import annotations

import statistics
import threading
import time

from jobs_helpers import doc_text


def _ttft(chat) -> float:
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.generation import ChoiceDelta

    t0 = time.perf_counter()
    gen = chat.complete(["Question: What is the capital of France?\nAnswer:"], SamplingOptions(max_tokens=2, temperature=0.0,
                                                                                                  ignore_eos=True))
    for ev in gen.events():
        if isinstance(ev, ChoiceDelta):
            out = time.perf_counter() - t0
            gen.cancel()
            return out
    return time.perf_counter() - t0


def test_interactive_ttft_while_a_run_is_busy(make_runtime):
    rt = make_runtime(max_batch=8, max_queue=64)
    for i in range(40):
        rt.documents.add_text(f"doc {i}", doc_text(i, 4))
    sched = rt.chat.scheduler
    slots = int(getattr(sched, "batch_slots", 6))
    rt.jobs.create_job("busy", "summarize", {"max_tokens": 400}, limits={"concurrency": slots})
    idle = [_ttft(rt.chat) for _ in range(6)]
    holder: dict = {}
    t = threading.Thread(target=lambda: holder.setdefault("run", rt.jobs.run_foreground("busy")), daemon=True)
    t.start()
    end = time.monotonic() + 60
    while sched.active < slots and time.monotonic() < end:
        time.sleep(0.01)
    assert sched.active >= slots, "the run did not fill the batch slots"
    busy = []
    for _ in range(6):
        busy.append(_ttft(rt.chat))
        assert sched.active >= 2  # still busy while we measured
    for run in rt.jobs.list_runs("busy", 0, 1)[0]:
        rt.jobs.cancel_run(run.id)
    t.join(60)
    assert holder["run"].status == "cancelled"
    # a waiting interactive request takes a reserved slot (or preempts a batch sequence): it never waits
    # for a summary to finish (seconds); a loose bound, for a loaded 2-core machine
    assert statistics.median(busy) <= 5 * statistics.median(idle) + 0.25, (idle, busy)
    assert max(busy) < 2.0, (idle, busy)
