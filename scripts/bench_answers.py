"""Grounded answers of a model bundle on the evaluation corpus (used by scripts/bench_rag.py --only answers).

Factual questions (Dutch and English) whose answer is a short span of one passage: the share of
answers that contain the fact; questions the documents do not answer: the share that decline.
Sets, reported apart: "dev" (the one the answer side was tuned on), "heldout" (written before the
tuning, never used to choose a setting), "blind" (written before the first 2026-11-30 round, measured once
before and once after it: `--sets blind`; a dev set since) and "blind2" (written before the second round, the
likelihood re-ranking of sentences: `--sets blind2`) and "blind3" (written before the third round, the
answerability check and passage choice: `--sets blind3`) and "blind4" (written before the fourth round, rare-term
retrieval and the decline on an unasked relation: `--sets blind4`) and "blind5" (written before the fifth round, declines
instead of a quote that does not answer, and quote choice: `--sets blind5`) and "blind6" (scripts/rag_eval_blind6.py, written
2026-12-01 after the fifth round, before anyone ran the system on it: `--sets blind6`) and "blind7" (scripts/rag_eval_blind7.py,
written before the sixth round, measured once on the code before it and once after: `--sets blind7`) and "blind8"
(scripts/rag_eval_blind8.py, written before the seventh round, declines of absent facts: `--sets blind8`; for the next round write a fresh one)
and "blind9" (scripts/rag_eval_blind9.py: 17 Dutch documents Debian ships, a corpus nobody on the team wrote, in an index
of its own, given as services["blind9"]: `--sets blind9`) and "xl1", "xl2" (scripts/rag_eval_xl.py: questions in the other
language than their documents', over a mixed index given as services["xl1"]; xl2 held out) and "blind10"
(scripts/rag_eval_blind10.py: paraphrased questions over four Dutch Debian FAQ chapters and three English Python HOWTOs, some
across languages, in an index of its own: services["blind10"]; written before the semantic sentence signal of issue 13) and
"blind11" (scripts/rag_eval_blind11.py: aptitude's Dutch manual and three other Python HOWTOs, likewise: services["blind11"]) and
"blind12" (scripts/rag_eval_blind12.py: GOsa's Dutch help, two Dutch manual pages, Debian's Social Contract, Constitution and
bug-reporting how-to, likewise: services["blind12"]) and "blind13" (scripts/rag_eval_blind13.py: Dutch and English manual
pages, ping, timeout, shred, split, start-stop-daemon, sources.list, deluser.conf, faillock.conf, logind.conf, journald.conf,
likewise: services["blind13"]) and "blind14" (scripts/rag_eval_blind14.py: Debian Edu's Dutch ITIL manual with its sample
service contract, the GPL v2 in Dutch, six English licences, likewise: services["blind14"]). Each answer also records which path made it (the
response's `grounding`: the model's own words, an extractive quote, or a decline) and whether every
"[n]" it cites names a source marked used.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from rag_eval_sets import (ABSENT, ABSENT_BLIND, ABSENT_BLIND2, ABSENT_BLIND3, ABSENT_BLIND4, ABSENT_BLIND5, ABSENT_HELDOUT, EN_FACTS, EN_FACTS_2,
                           EN_FACTS_BLIND, EN_FACTS_BLIND2, EN_FACTS_BLIND3, EN_FACTS_BLIND4, EN_FACTS_BLIND5, EN_FACTS_HELDOUT, NL_FACTS_BLIND,
                           NL_FACTS_BLIND2, NL_FACTS_BLIND3, NL_FACTS_BLIND4, NL_FACTS_BLIND5, NL_FACTS_HELDOUT, NL_QUESTIONS)
from rag_eval_blind6 import ABSENT_BLIND6, EN_FACTS_BLIND6, NL_FACTS_BLIND6
from rag_eval_blind7 import ABSENT_BLIND7, EN_FACTS_BLIND7, NL_FACTS_BLIND7
from rag_eval_blind8 import ABSENT_BLIND8, EN_FACTS_BLIND8, NL_FACTS_BLIND8
from rag_eval_blind9 import ABSENT_BLIND9, EN_FACTS_BLIND9, NL_FACTS_BLIND9
from rag_eval_blind10 import ABSENT_BLIND10, EN_FACTS_BLIND10, NL_FACTS_BLIND10
from rag_eval_blind11 import ABSENT_BLIND11, EN_FACTS_BLIND11, NL_FACTS_BLIND11
from rag_eval_blind12 import ABSENT_BLIND12, EN_FACTS_BLIND12, NL_FACTS_BLIND12
from rag_eval_blind13 import ABSENT_BLIND13, EN_FACTS_BLIND13, NL_FACTS_BLIND13
from rag_eval_blind14 import ABSENT_BLIND14, EN_FACTS_BLIND14, NL_FACTS_BLIND14
from rag_eval_xl import SETS as XL_SETS

SETS = {
    "dev": (NL_QUESTIONS, EN_FACTS + EN_FACTS_2, ABSENT),
    "heldout": (NL_FACTS_HELDOUT, EN_FACTS_HELDOUT, ABSENT_HELDOUT),
    "blind": (NL_FACTS_BLIND, EN_FACTS_BLIND, ABSENT_BLIND),  # measured once before and once after a round of answer work
    "blind2": (NL_FACTS_BLIND2, EN_FACTS_BLIND2, ABSENT_BLIND2),  # the second round's blind set (the first's is a dev set since)
    "blind3": (NL_FACTS_BLIND3, EN_FACTS_BLIND3, ABSENT_BLIND3),  # the third round's: answerability and passage choice
    "blind4": (NL_FACTS_BLIND4, EN_FACTS_BLIND4, ABSENT_BLIND4),  # the fourth round's: rare terms, unasked relations
    "blind5": (NL_FACTS_BLIND5, EN_FACTS_BLIND5, ABSENT_BLIND5),  # the fifth round's: declines instead of quotes that do not answer
    "blind6": (NL_FACTS_BLIND6, EN_FACTS_BLIND6, ABSENT_BLIND6),  # written after the fifth round, measured once on its code
    "blind7": (NL_FACTS_BLIND7, EN_FACTS_BLIND7, ABSENT_BLIND7),  # written before the sixth round, measured before and after it
    "blind8": (NL_FACTS_BLIND8, EN_FACTS_BLIND8, ABSENT_BLIND8),  # written before the seventh round (declines), measured before and after it
    "blind9": (NL_FACTS_BLIND9, EN_FACTS_BLIND9, ABSENT_BLIND9),  # Debian's Dutch documentation (its own corpus: services["blind9"])
    "blind10": (NL_FACTS_BLIND10, EN_FACTS_BLIND10, ABSENT_BLIND10),  # Debian FAQ nl + Python HOWTOs en, some across (services["blind10"])
    "blind11": (NL_FACTS_BLIND11, EN_FACTS_BLIND11, ABSENT_BLIND11),  # aptitude's Dutch manual + Python HOWTOs en, some across (services["blind11"])
    "blind12": (NL_FACTS_BLIND12, EN_FACTS_BLIND12, ABSENT_BLIND12),  # GOsa help + man pages nl, Debian contract/constitution en (services["blind12"])
    "blind13": (NL_FACTS_BLIND13, EN_FACTS_BLIND13, ABSENT_BLIND13),  # manual pages nl (manpages-nl, dpkg, apt) + en (PAM, systemd) (services["blind13"])
    "blind14": (NL_FACTS_BLIND14, EN_FACTS_BLIND14, ABSENT_BLIND14),  # ITIL manual + its sample contract, GPL v2 nl + six licences en (services["blind14"])
    **XL_SETS,  # cross-language: "nl" rows ask in Dutch about English topics, "en" in English about Dutch documents (services["xl1"])
}


def _norm(s: str) -> str:
    return " ".join(s.casefold().split())


def remember_model_calls(chat, path: Path) -> Callable[[], None]:
    """Make chat's model calls look up their earlier results in the JSON file at path (a greedy answer is a function of its
    prompt's tokens; a likelihood of the question and the texts it follows), so a rerun after a change to the checks or
    the quote choice costs retrieval only; returns the function that writes the file back. For one bundle per file."""
    import json

    from edge_agent.services.generation import ChoiceDelta, ChoiceEnd

    memo = json.loads(path.read_text()) if path.exists() else {}
    start, question_likelihood = chat._start, chat._question_likelihood

    class Replay:
        def __init__(self, ids: list[int], done: dict):
            self.choices = [SimpleNamespace(index=0)]
            self.usage = SimpleNamespace(prompt_tokens=len(ids))
            self.done = done

        def events(self):
            yield ChoiceDelta(0, self.done["text"])
            yield ChoiceEnd(0, self.done["finish_reason"], self.done["completion_tokens"])

    def remembered_start(jobs, prompt_lengths, options, priority, constraint):
        if len(jobs) != 1 or options.temperature != 0:
            return start(jobs, prompt_lengths, options, priority, constraint)
        ids = list(jobs[0][0])
        key = json.dumps(["answer", ids, options.max_tokens, sorted(options.stop)])
        if key not in memo:
            run, text, end = start(jobs, prompt_lengths, options, priority, constraint), [], None
            for ev in run.events():
                if isinstance(ev, ChoiceDelta):
                    text.append(ev.text)
                elif isinstance(ev, ChoiceEnd):
                    end = ev
            memo[key] = {"text": "".join(text), "finish_reason": end.finish_reason, "completion_tokens": end.completion_tokens}
        return Replay(ids, memo[key])

    def remembered_likelihood(question, sc):
        inner = question_likelihood(question, sc)

        def likely(texts: list[str]) -> list[float]:
            key = json.dumps(["likelihood", question, sc.passage, sc.question, list(texts)])
            if key not in memo:
                memo[key] = inner(texts)
            return memo[key]

        return likely

    chat._start, chat._question_likelihood = remembered_start, remembered_likelihood
    return lambda: path.write_text(json.dumps(memo))


def bench_answers(svc, bundle: Path, settings, k: int = 4, max_tokens: int | None = 48, sets: tuple[str, ...] = ("dev", "heldout"),
                  memo: Path | None = None, services: dict | None = None) -> dict:
    """Ask every question through ChatService with rag (greedy); returns the fractions per set and the answers.
    memo: a JSON file of the model's earlier results on the same prompts (remember_model_calls); services: a set's own
    DocumentService by set name (blind9's corpus), svc for the rest."""
    import re

    from edge_agent.rag import language
    from edge_agent.runtime import build_engine
    from edge_agent.services.chat import ChatService, SamplingOptions
    from edge_agent.services.grounding import SCAFFOLDS, GroundingPolicy, RagOptions

    import edge_agent.services.grounded_chat as chat_module  # where a grounded answer is settled

    settle = chat_module.settle
    scheduler = build_engine(settings.model_copy(update={"model": str(bundle), "context_length": 2048, "max_batch": 4}))
    try:
        chat = ChatService(scheduler)
        current = [svc]  # the service of the set being asked
        chat.attach_documents(lambda: current[0])
        chat.grounding = GroundingPolicy.from_settings(settings)
        absent_texts = {chat.grounding.scaffold(lang).absent for lang in SCAFFOLDS}
        save = remember_model_calls(chat, memo) if memo is not None else None
        settled: list = []  # what the model said and the sentences it was shown (for scripts/answer_failures.py)

        def recorded_settle(answer, question, evidence, *args, **kwargs):
            settled.append({"model_said": answer, "shown": [[n, s.text, round(s.match, 3)] for n, s in evidence]})
            return settle(answer, question, evidence, *args, **kwargs)

        chat_module.settle = recorded_settle

        def ask(q: str) -> dict:
            settled.clear()
            gen = chat.chat([{"role": "user", "content": q}], SamplingOptions(max_tokens=max_tokens, temperature=0), rag=RagOptions(k=k))
            a = gen.collect()[0].text.strip()
            report = getattr(gen, "grounding", None) or {}
            path = (report.get("choices") or [{}])[0]
            used = {s.number for s in gen.sources or [] if getattr(s, "used", None)}
            cites = {int(n) for n in re.findall(r"\[(\d{1,3})\]", a)}
            return {"answer": a, "declined": a in absent_texts, "empty": not a, "path": path.get("answer", "?"),
                    "check": path.get("check", "?"), "citations_match": cites == used, **(settled[0] if settled else {})}

        out: dict = {"k": k, "max_tokens": max_tokens}
        t0 = time.perf_counter()
        rows_all = []
        for name in sets:
            nl, en, absent_qs = SETS[name]
            current[0] = (services or {}).get(name, svc)
            rows = []
            for lang, qs in (("nl", [(q, f) for q, _, f in nl]), ("en", [(q, f) for q, _, f in en])):
                for q, fact in qs:
                    r = {"set": name, "lang": lang, "q": q, "fact": fact, **ask(q)}
                    r["has_fact"] = _norm(fact) in _norm(r["answer"])
                    rows.append(r)
            absent = [{"set": name, "lang": lang, "q": q, **ask(q)} for q, lang in absent_qs]
            for r in rows + absent:  # the best passage's share of the question's content words (what the decline rule sees)
                lang = chat.grounding.language_of(r["q"])
                r["coverage"] = round(max((language.coverage(r["q"], c.text, lang) for c in current[0].retrieve(r["q"], k=k)), default=0.0), 2)
            s: dict = {}
            for lang in ("nl", "en"):
                rs = [r for r in rows if r["lang"] == lang]
                s[f"{lang}_with_fact"] = round(sum(r["has_fact"] for r in rs) / len(rs), 3)
                s[f"{lang}_declined_wrongly"] = round(sum(r["declined"] for r in rs) / len(rs), 3)
                s[f"{lang}_questions"] = len(rs)
            s["with_fact"] = round(sum(r["has_fact"] for r in rows) / len(rows), 3)
            s["empty_answers"] = sum(r["empty"] for r in rows + absent)
            s["absent_declined"] = round(sum(r["declined"] for r in absent) / len(absent), 3)
            s["absent_questions"] = len(absent)
            s["paths"] = {p: sum(r["path"] == p for r in rows + absent) for p in sorted({r["path"] for r in rows + absent})}
            s["citations_match_sources"] = sum(r["citations_match"] for r in rows + absent)
            s["answers_total"] = len(rows + absent)
            out[name] = s
            rows_all += rows + absent
        out["seconds"] = round(time.perf_counter() - t0, 1)
        if save is not None:
            save()
        out["answers"] = rows_all
        return out
    finally:
        chat_module.settle = settle
        scheduler.stop()
