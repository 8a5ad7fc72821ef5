"""The grounded half of ChatService (a mixin): retrieval for a chat or a completion, the passages that fit the prompt,
a base model's grounded prompt (passages first, the question last, in its language's scaffold) and its answer,
settled against the passages (services/answers.py) before any of it is sent.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from edge_agent.services.answers import cited, report, settle
from edge_agent.services.constrained import OutputConstraint
from edge_agent.services.errors import InvalidRequestError, ServiceError
from edge_agent.services.generation import ChoiceDelta, ChoiceEnd, Generation, _Choice
from edge_agent.services.grounding import (
    ANSWER_GRAMMAR,
    FOCUS_SENTENCES,
    INSTRUCTION,
    CannedHandle,
    DocumentsUnavailableError,
    GroundedPrompt,
    Grounding,
    RagOptions,
    Source,
    fit_sources,
    focus,
    question_of,
    source_of,
    strip_labels,
    with_sources,
)

# A base model's grounded answer when the request sets no max_tokens: the answers bench's (scripts/bench_rag.py --only
# answers, --answer-tokens). Without it 25 of 191 answers ran past 48 tokens, many to the 512 of the chat default, 3.2x
# the tokens decoded (12,793 against 3,937), and not one of the 215 answers of dev, heldout, blind, blind2 and blind8
# changed (the answer is a quoted sentence or the model's one line; the model's words only pick the sentence).
GROUNDED_ANSWER_TOKENS = 48

if TYPE_CHECKING:
    from edge_agent.services.chat import SamplingOptions

log = logging.getLogger(__name__)


class GroundedChat:
    """ChatService's grounded answers; it uses the service's formatter, engine, retriever, grounding policy, length
    checks and _start."""

    def _retrieve(self, query: str, rag: RagOptions) -> list:
        if self.retriever is None:
            raise DocumentsUnavailableError("documents are not served by this process (serve_documents is off)")
        return self.retriever.retrieve(query, rag)

    def _fit(self, chunks: list, base_tokens: int, limit: int, measure: Callable[[Grounding], int], label: str = "Source",
             instruction: str = INSTRUCTION) -> Grounding:
        """The chunks that fit in `limit` prompt tokens; measure(g) is the real prompt length with g.

        Token counts of the pieces estimate the prompt's; an overshoot shrinks the budget by as much and retries.
        """
        budget = limit - base_tokens
        for _ in range(4):
            g = fit_sources(chunks, budget, self.count_tokens, self.cut_tokens, label, instruction)
            if not g.sources:
                break
            over = measure(g) - limit
            if over <= 0:
                return g
            budget -= over
        return Grounding()

    def _ground_chat(self, messages: list[dict[str, str]], options: SamplingOptions, instruction: str,
                     rag: RagOptions) -> tuple[list[dict[str, str]], list[Source]] | GroundedPrompt:
        """A decline when no passage covers the question (GroundingPolicy); for a base model (no constraint),
        a GroundedPrompt: passages, then the question, in its language's scaffold; else messages with the
        best chunks that fit as a system message (or, if the template refuses one, in the last user turn)."""
        question = question_of(messages)
        # before the search, a prompt that cannot fit is refused (embedding a question of megabytes takes seconds,
        # ranking its sentences runs the model): the messages go in whole, sources or not, and are counted exactly
        # after the cheap floor (which lets a question of some thousand tokens through); a base model's grounded
        # prompt holds the question, its blanks collapsed, and the messages go alone only when that cannot fit
        base = None
        if self.formatter.kind == "completion" and not instruction:
            self._check_length(" ".join(question.split()), options)
        else:
            base = self.formatter.format_chat(messages, instruction=instruction, check=self.length_check(options))
            self._check_fits(len(base.ids), options)
        policy = self.grounding
        lang = policy.language_of(question)
        sc = policy.scaffold(lang)
        enc = self.formatter.encoder
        tail = "\n\n" + sc.question + " ".join(question.split()) + "\n" + sc.answer

        def ids_of(g: Grounding) -> list[int]:
            table: dict[str, str] = {}
            return enc.encode(enc.defuse(g.block + tail, table), table)  # passages and question are data

        bare = len(ids_of(Grounding())) if base is None else 0
        if base is None and bare > self._prompt_limit(options):
            self._check_fits(len(self.formatter.format_chat(messages, check=self.length_check(options)).ids), options)
        chunks = self._retrieve(question, rag)
        alike = self.retriever.similarity(question, chunks, lang) if policy.min_similarity > 0 and self.retriever else None
        why = policy.uncovered(question, chunks, lang, alike)
        if why is not None:  # what was searched is reported, none used
            return GroundedPrompt(sources=[replace(source_of(c), number=i, used=False) for i, c in enumerate(chunks, 1)],
                                  decline=sc.absent, question=question, language=lang, why=why)
        if base is None:
            limit = self._prompt_limit(options)
            likely = self._question_likelihood(question, sc) if policy.rerank > 1 else None
            cosine = self.retriever.sentence_similarity(question, lang) if policy.cross_sentences > 0 and self.retriever else None
            for n in range(FOCUS_SENTENCES, 0, -1):  # the sentences that hold the question's words, fewer if they do not fit
                g = focus(question, chunks, lang, sc.passage, n, likely, policy.rerank, cosine, policy.cross_sentences)
                ids = ids_of(g)
                if g.sources and len(ids) <= limit:
                    return GroundedPrompt(ids, g.sources, policy.stops(sc), None, question, lang, g.evidence, sc.absent,
                                          passages=[f"{getattr(c, 'title', '')}\n{c.text}" for c in chunks])
            g = self._fit(chunks, bare, limit, lambda g: len(ids_of(g)), sc.passage, "")  # one long sentence: cut
            if g.sources:
                return GroundedPrompt(ids_of(g), g.sources, policy.stops(sc), None, question, lang)  # no sentences to check against
            return messages, []
        in_user = False
        try:  # a template that refuses system messages gets the sources in the last user turn
            self.formatter.format_chat(with_sources(messages, "Sources."), instruction=instruction)
        except InvalidRequestError:
            in_user = True

        def measure(g: Grounding) -> int:
            return len(self.formatter.format_chat(with_sources(messages, g.block, in_user), instruction=instruction).ids)

        g = self._fit(chunks, len(base.ids), self._prompt_limit(options), measure, sc.passage, sc.instruction)
        if not g.sources:
            return messages, []
        options.stop = list(dict.fromkeys([*options.stop, "\n" + sc.passage + " [", "\nSource ["]))
        return with_sources(messages, g.block, in_user), g.sources

    def _question_likelihood(self, question: str, sc) -> Callable[[list[str]], list[float]]:
        """texts -> the model's log-probability per token of the question after each ("<passage label>: text" and the
        question label), in one batched scoring pass (services/scoring.py), remembered per list of texts; where the
        scoring fails (the engine busy stopping, a text too long) every text gets 0, so the word ranking stands."""
        from edge_agent.services.scoring import ContinuationScorer

        done: dict[tuple[str, ...], list[float]] = {}

        def likely(texts: list[str]) -> list[float]:
            key = tuple(texts)
            if key not in done:
                scorer = ContinuationScorer(self)
                cont = scorer.encode(" " + " ".join(question.split()), bos=False)
                pending = []
                try:
                    for t in texts:
                        pending.append(scorer.start(scorer.encode(f"{sc.passage}: {t}\n\n{sc.question.strip()}"), [cont]))
                    done[key] = [p.result()[0][0] / len(cont) for p in pending]
                except (ServiceError, ValueError) as e:
                    for p in pending:
                        p.cancel()
                    log.warning("grounded answer: sentences ranked by words only (%s)", e)
                    done[key] = [0.0] * len(texts)
            return done[key]

        return likely

    def _start_grounded(self, gp: GroundedPrompt, options: SamplingOptions, n: int, priority: int,
                        constraint: OutputConstraint | None) -> Generation:
        """A base model's grounded answer: its one-line completion when answers.settle keeps it (cited), else the
        best sentence quoted; or the decline without the model. The model runs to the end here (a short line), so
        the answer is checked before any of it is sent, and `sources` say which passages it used."""
        if gp.decline is not None:
            gen = Generation(self.model_name, [_Choice(i, CannedHandle(gp.decline)) for i in range(n)], 0, self.request_timeout_s)
            gen.sources = gp.sources
            gen.grounding = report(gp.language, [{"answer": "declined", "check": gp.why}] * n)
            return gen
        options.stop = list(dict.fromkeys([*options.stop, *gp.stop]))
        if options.max_tokens is None:  # the measured configuration, not the chat default (the answer is one short line)
            options.max_tokens = GROUNDED_ANSWER_TOKENS
        if constraint is None:
            import llguidance as llg

            constraint = OutputConstraint("grounded", llg.LLMatcher.grammar_from_lark(ANSWER_GRAMMAR))
        run = self._start([(gp.ids, "", i) for i in range(n)], [len(gp.ids)], options, priority, constraint)
        texts: dict[int, list[str]] = {c.index: [] for c in run.choices}
        ends: dict[int, ChoiceEnd] = {}
        for ev in run.events():
            if isinstance(ev, ChoiceDelta):
                texts[ev.index].append(ev.text)
            elif isinstance(ev, ChoiceEnd):
                ends[ev.index] = ev
        choices, reports, said = [], [], set()
        for i in sorted(texts):
            text, how = settle("".join(texts[i]), gp.question, gp.evidence, gp.language, gp.absent, self.grounding.model_words,
                               gp.passages)
            reason = ends[i].finish_reason if how["answer"] == "model" else "stop"
            choices.append(_Choice(i, CannedHandle(text, ends[i].completion_tokens, reason)))
            reports.append(how)
            said |= cited(text)
        gen = Generation(self.model_name, choices, run.usage.prompt_tokens, self.request_timeout_s)
        checked = said or all(h["check"] != "none" for h in reports)  # else used stays unknown
        gen.sources = [replace(s, used=s.number in said if checked else None) for s in gp.sources]
        gen.grounding = report(gp.language, reports)
        return gen

    def _ground_prompt(self, prompt: str, options: SamplingOptions, rag: RagOptions) -> tuple[str | list[str], list[Source]]:
        """[sources block, prompt] with the best chunks that fit, or prompt alone when none do; the block's words
        in the question's language (no instruction for a base model: it made the default model answer nothing)."""
        self._check_length(prompt, options)  # the prompt goes in whole, with or without sources: refused before the search
        prompt_tokens = len(self.engine.encode(prompt))
        self._check_fits(prompt_tokens, options)
        labels = self.formatter.labels
        query = strip_labels(prompt, labels["user"], labels["assistant"])
        chunks = self._retrieve(query, rag)
        if not chunks:
            return prompt, []
        sc = self.grounding.scaffold(self.grounding.language_of(query))
        g = self._fit(chunks, prompt_tokens, self._prompt_limit(options),
                      lambda g: len(self.formatter.encode_with_documents(g.block, prompt).ids), sc.passage,
                      "" if self.formatter.kind == "completion" else sc.instruction)
        if not g.sources:
            return prompt, []
        # a question-and-answer transcript: a new question line is a turn the caller did not ask for
        turn = [f"\n{lab}" for lab in (labels["user"].strip(), sc.question.strip()) if lab and lab in prompt]
        options.stop = list(dict.fromkeys([*options.stop, "\n" + sc.passage + " [", "\nSource [", *turn]))
        return [g.block, prompt], g.sources
