"""Tools the model may call (services.tools.auto_constraint: a call or words, the model decides; Ollama's tools and OpenAI's
tool_choice "auto") on a bundle: whether it calls, and the rate (tokens over the whole request, prefill included) in paired
alternating rounds: A the same prompt (the tool listing as the system text) with no grammar, B with tools, C no tools at
all (tool_choice "none": what "auto" cost before the model could call on the OpenAI routes).

usage: .venv/bin/python scripts/bench_auto_tools.py [--bundle models/default] [--rounds 4] [--tokens 64]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUESTIONS = ("What is the weather in Paris?", "What is 2 plus 3?", "Hello! How are you?", "Wat is het weer in Amsterdam?",
             "Tell me a joke.")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("models/default"))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()

    from edge_agent.config import Settings
    from edge_agent.runtime import build_runtime
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.tools import Tool, answer_call, describe

    tmp = Path(tempfile.mkdtemp(prefix="bench-auto-tools-"))
    settings = Settings(models_dir=args.bundle.parent, model=args.bundle.name, data_dir=tmp / "var", index_dir=tmp / "index",
                        max_batch=2, context_length=1024)
    rt = build_runtime(settings, load_documents=False)
    tools = [Tool("get_weather", "The current weather in a city", {"type": "object", "properties": {"city": {"type": "string"}},
                                                                     "required": ["city"]}),
             Tool("add", "Add two numbers", {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                                             "required": ["a", "b"]})]

    def ask(question: str, with_tools: bool | None, tokens: int):
        """with_tools None: no tools and no listing."""
        listing = [] if with_tools is not False else [{"role": "system", "content": describe(tools, None, auto=True)}]
        gen = rt.chat.chat([*listing, {"role": "user", "content": question}], SamplingOptions(max_tokens=tokens, temperature=0),
                           tools=tools if with_tools else None, may_call=bool(with_tools))
        t = time.perf_counter()
        [r] = gen.collect()
        return r, gen.usage.completion_tokens, time.perf_counter() - t

    try:
        for q in QUESTIONS:
            r, _, _ = ask(q, True, 48)
            call = answer_call(r.text, r.finish_reason, tools)
            print(f"{q!r}: {'call ' + repr(call) if call else 'words ' + repr(r.text[:60])}")
        variants = (("A same prompt, no grammar", False), ("B tools", True), ("C no tools", None))
        rates: dict[str, list[float]] = {name: [] for name, _ in variants}
        for rnd in range(args.rounds):
            for name, wt in variants[:: 1 if rnd % 2 == 0 else -1]:
                _, n, dt = ask("Schrijf een kort gedicht over de zee.", wt, args.tokens)
                rates[name].append(n / dt)
        for name, xs in rates.items():
            print(f"{name}: median {statistics.median(xs):.1f} tok/s over {len(xs)} rounds ({', '.join(f'{x:.1f}' for x in xs)})")
    finally:
        rt.close()


if __name__ == "__main__":
    main()
