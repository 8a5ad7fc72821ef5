"""Grounded answers of a model bundle on the evaluation corpus (used by scripts/bench_rag.py --only answers).

Factual questions (Dutch and English) whose answer is a short span of one passage: the share of
answers that contain the fact; questions the documents do not answer: the share that decline.
"""
from __future__ import annotations

import time
from pathlib import Path

from rag_eval_sets import ABSENT, EN_FACTS, NL_QUESTIONS


def _norm(s: str) -> str:
    return " ".join(s.casefold().split())


def bench_answers(svc, bundle: Path, settings, k: int = 4, max_tokens: int = 48) -> dict:
    """Ask every question through ChatService with rag (greedy); returns the fractions and the answers."""
    from edge_agent.rag import language
    from edge_agent.runtime import build_engine
    from edge_agent.services.chat import ChatService, SamplingOptions
    from edge_agent.services.grounding import SCAFFOLDS, GroundingPolicy, RagOptions

    scheduler = build_engine(settings.model_copy(update={"model": str(bundle), "context_length": 2048, "max_batch": 4}))
    try:
        chat = ChatService(scheduler)
        chat.attach_documents(lambda: svc)
        chat.grounding = GroundingPolicy(settings.rag_min_coverage, dict(settings.rag_absent_answers))
        absent_texts = {chat.grounding.scaffold(lang).absent for lang in SCAFFOLDS}

        def ask(q: str) -> str:
            gen = chat.chat([{"role": "user", "content": q}], SamplingOptions(max_tokens=max_tokens, temperature=0), rag=RagOptions(k=k))
            return gen.collect()[0].text.strip()

        t0 = time.perf_counter()
        rows = []
        for lang, qs in (("nl", [(q, f) for q, _, f in NL_QUESTIONS]), ("en", [(q, f) for q, _, f in EN_FACTS])):
            for q, fact in qs:
                a = ask(q)
                rows.append({"lang": lang, "q": q, "fact": fact, "answer": a, "has_fact": _norm(fact) in _norm(a),
                             "declined": a in absent_texts, "empty": not a})
        absent = [{"lang": lang, "q": q, "answer": (a := ask(q)), "declined": a in absent_texts, "empty": not a} for q, lang in ABSENT]
        for r in rows + absent:  # the best passage's share of the question's content words (what the decline rule sees)
            lang = chat.grounding.language_of(r["q"])
            r["coverage"] = round(max((language.coverage(r["q"], c.text, lang) for c in svc.retrieve(r["q"], k=k)), default=0.0), 2)
        out = {"k": k, "max_tokens": max_tokens, "seconds": round(time.perf_counter() - t0, 1)}
        for lang in ("nl", "en"):
            rs = [r for r in rows if r["lang"] == lang]
            out[f"{lang}_with_fact"] = round(sum(r["has_fact"] for r in rs) / len(rs), 3)
            out[f"{lang}_declined_wrongly"] = round(sum(r["declined"] for r in rs) / len(rs), 3)
            out[f"{lang}_questions"] = len(rs)
        out["with_fact"] = round(sum(r["has_fact"] for r in rows) / len(rows), 3)
        out["empty_answers"] = sum(r["empty"] for r in rows + absent)
        out["absent_declined"] = round(sum(r["declined"] for r in absent) / len(absent), 3)
        out["absent_questions"] = len(absent)
        out["answers"] = rows + absent
        return out
    finally:
        scheduler.stop()
