"""ChatService: chat and text completions through the batch scheduler, as streams of per-choice events.

A request becomes one submission per choice (n > 1 and several prompts batch together); the
stream it returns is a services.generation.Generation (its event types are importable from here).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from edge_agent.engine.tokens import fewest_tokens
from edge_agent.engine.types import (
    BATCH_PRIORITY,
    MIN_TEMPERATURE,
    ContextLengthError,
    EngineError,
    QueueFullError,
    SamplingParams,
)
from edge_agent.services.answers import report
from edge_agent.services.constrained import OutputConstraint, grammar_loaded, grammar_tokenizer
from edge_agent.services.constrained import processors as grammar_processors
from edge_agent.services.errors import (
    BusyError,
    ContextLengthExceededError,
    InvalidRequestError,
    ModelNotFoundError,
    UnavailableError,
)
from edge_agent.services.grounding import (
    CannedHandle,
    DocumentRetriever,
    GroundedPrompt,
    GroundingPolicy,
    RagOptions,
    completion_question,
    question_of,
    strip_labels,
)
from edge_agent.services.generation import ChoiceDelta, ChoiceEnd, Generation, _Choice  # noqa: F401 (the event types, importable from here)
from edge_agent.services.grounded_chat import GroundedChat
from edge_agent.services.prompts import PromptFormatter
from edge_agent.services.tools import Tool, auto_constraint, call_constraint

log = logging.getLogger(__name__)

_SEED_SPACE = 2**64


@dataclass
class SamplingOptions:
    """What a request asks about sampling; None means the bundle's default, else OpenAI's."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    min_tokens: int = 0  # vLLM's: no EOS, stop token or stop string ends the answer before this many tokens
    presence_penalty: float = 0.0  # OpenAI's: minus this from the logit of every token already generated
    frequency_penalty: float = 0.0  # OpenAI's: minus this times how often each token was generated
    logprobs: int | None = None  # None: none; N: each token's log-probability and the N most likely (SamplingParams.logprobs)
    logit_bias: dict[int, float] | None = None  # OpenAI's: {token id: added to its logit before each choice}
    stop_token_ids: list[int] = field(default_factory=list)  # vLLM's: these tokens end the answer (left out of it)
    fill: bool = False  # with max_tokens None: up to max_tokens_limit (Ollama's num_predict -1), not default_max_tokens
    to_room: bool = False  # Ollama's: a max_tokens past the room left in the context is cut to that room, not refused


def sampling_options(req, max_tokens: int | None) -> SamplingOptions:
    """The options of an OpenAI chat/completions request (services.protocol._Sampling), for the live routes and batch files alike."""
    return SamplingOptions(
        max_tokens=max_tokens, temperature=req.temperature, top_p=req.top_p, top_k=req.top_k, min_p=req.min_p,
        repetition_penalty=req.repetition_penalty, seed=req.seed, stop=req.stop_list(), ignore_eos=bool(req.ignore_eos),
        min_tokens=req.min_tokens or 0, presence_penalty=req.presence_penalty or 0.0, frequency_penalty=req.frequency_penalty or 0.0,
        logprobs=req.logprob_count(), logit_bias=req.bias(), stop_token_ids=list(req.stop_token_ids or ()),
    )


class PenaltyProcessor:
    """OpenAI's presence and frequency penalties over the generated tokens (not the prompt) and its logit_bias
    ({token id: bias}, added at every step), after an optional inner processor (a grammar's -inf stays -inf)."""

    def __init__(self, presence: float, frequency: float, inner=None, bias: dict[int, float] | None = None):
        self.presence, self.frequency, self.inner = float(presence), float(frequency), inner
        self.bias_ids = np.fromiter((bias or {}).keys(), np.int64)
        self.bias_values = np.fromiter((bias or {}).values(), np.float32)

    def __call__(self, token_ids: list[int], logits: np.ndarray) -> np.ndarray:
        if self.inner is not None:
            logits = self.inner(token_ids, logits)
        if token_ids and (self.presence or self.frequency):
            ids, counts = np.unique(np.asarray(token_ids, np.int64), return_counts=True)
            ids, counts = ids[ids < logits.shape[-1]], counts[ids < logits.shape[-1]]
            logits[ids] -= (self.frequency * counts + self.presence).astype(logits.dtype)
        if self.bias_ids.size:
            logits[self.bias_ids] += self.bias_values.astype(logits.dtype)
        return logits


def _service_error(e: BaseException) -> BaseException:
    """The service error an engine refusal stands for (queue full, too long, engine down), or e itself."""
    if isinstance(e, QueueFullError):
        return BusyError(str(e), e.retry_after)
    if isinstance(e, ContextLengthError):
        return ContextLengthExceededError(str(e), e.prompt_tokens, e.max_tokens, e.context_length)
    if isinstance(e, EngineError):
        return UnavailableError(str(e))
    return e


class ChatService(GroundedChat):
    """Chat and text completions over one BatchScheduler (one model)."""

    def __init__(self, scheduler, *, request_timeout_s: float = 300.0, default_max_tokens: int = 512, max_tokens_limit: int = 4096,
                 aliases: Sequence[str] = (), documents_aliases: Sequence[str] = ()):
        """aliases: more names the model answers to (Settings.model_aliases); documents_aliases: names that answer from
        the documents (Settings.documents_model_aliases: grounded_by)."""
        self.scheduler = scheduler
        self.documents_aliases: tuple[str, ...] = tuple(a for a in documents_aliases if a)
        self.aliases: tuple[str, ...] = tuple(dict.fromkeys(a for a in (*aliases, *self.documents_aliases) if a))
        self.engine = scheduler.engine
        bundle = self.engine.bundle
        self.model_name: str = self.engine.name
        self.created = _created(bundle.manifest.get("created"))
        self.fingerprint = system_fingerprint(bundle.manifest, self.engine.context_length)
        self.context_length: int = int(self.engine.context_length)
        self.vocab_size: int = int(self.engine.vocab_size)
        self.defaults: dict = dict(bundle.generation_defaults or {})
        special = bundle.manifest.get("special_tokens", {})
        self.formatter = PromptFormatter(bundle.prompt_format, self.engine.tokenizer, special.get("bos"), special.get("eos"))
        self.request_timeout_s = request_timeout_s
        self.default_max_tokens = default_max_tokens
        self.max_tokens_limit = max_tokens_limit
        self.accepting = True
        self.retriever: DocumentRetriever | None = None
        self.grounding = GroundingPolicy()  # the runtime sets GroundingPolicy.from_settings(settings)
        self.on_grammar: Callable[[str, str | None], None] = lambda state, detail: None  # /ready's part "grammar"

    def attach_documents(self, documents: Callable[[], object], status: Callable[[], str | None] = lambda: None) -> None:
        """Where rag requests find documents: documents() returns the DocumentService, or None while it loads."""
        self.retriever = DocumentRetriever(documents, status)

    def prepare_grammar(self) -> None:
        """Build llguidance's view of the tokenizer unless built: once, under a lock, on the first request that needs
        it (1.6-2.5 s on Gemma's 262k vocabulary, holding the GIL; services/on_demand.py). Raises UnavailableError
        (and reports the part degraded) when it cannot be built."""
        tok = self.engine.tokenizer
        if grammar_loaded(tok):
            return
        try:
            grammar_tokenizer(tok, self.vocab_size, self.engine.stop_token_ids)
        except Exception as e:
            log.error("building the grammar tokenizer for structured outputs failed: %s: %s", type(e).__name__, e)
            self.on_grammar("degraded", f"{type(e).__name__} when first needed; see the daemon's log")
            raise UnavailableError("structured outputs are unavailable: their grammar tokenizer could not be built; "
                                   "see the daemon's log") from None
        from edge_agent.engine.engine import release_free_heap

        release_free_heap()  # building it leaves freed heap mapped (as parsing tokenizer.json does)
        took = getattr(tok, "_edge_llg_seconds", None)
        self.on_grammar("ready", "loaded on first use" + (f" in {took:.2f} s" if took is not None else ""))

    # --- facts --------------------------------------------------------------------
    @property
    def queue_depth(self) -> int:
        return self.scheduler.queue_depth

    @property
    def active(self) -> int:
        return self.scheduler.active

    @property
    def ready(self) -> bool:
        return self.accepting

    def token_texts(self):
        """Token ids to their text and bytes for logprobs (services.logprobs.TokenTexts of this model's tokenizer)."""
        from edge_agent.services.logprobs import token_texts

        return token_texts(self.engine.tokenizer)

    @property
    def names(self) -> tuple[str, ...]:
        """The names the model answers to: its id, then its aliases."""
        return (self.model_name, *self.aliases)

    def check_model(self, name: str) -> None:
        """Raise ModelNotFoundError unless name is one of the model's names or "default"."""
        if name != "default" and name not in self.names:
            raise ModelNotFoundError(name, list(self.names))

    @classmethod
    def from_settings(cls, scheduler, settings) -> "ChatService":
        """The chat service over scheduler as Settings configure it (limits, model and documents aliases)."""
        return cls(scheduler, request_timeout_s=settings.request_timeout_s, default_max_tokens=settings.default_max_tokens,
                   max_tokens_limit=settings.max_tokens_limit, aliases=settings.model_aliases,
                   documents_aliases=settings.documents_model_aliases)

    def grounded_by(self, name: str | None, rag: RagOptions | None) -> tuple[RagOptions | None, bool]:
        """The request's rag options and whether its answer lists its sources in the text: a documents alias
        (documents_model_aliases) grounds a request that sent none, with the default options, and lists them.
        chat() and complete() apply it to the model name they are given, so every route that names one is grounded alike."""
        if name is not None and name in self.documents_aliases:
            return rag or RagOptions(), True
        return rag, False

    def time_limit(self, priority: int) -> float | None:
        """The wall-clock limit of a generation at this priority: request_timeout_s for a request someone waits on,
        none for background work (jobs, batch files: priority BATCH_PRIORITY or more), which waits behind users and
        behind its own run's other items; a run's deadline or cancel stops it. (With the limit, a nightly summarize of
        large documents failed items "past the request time limit" while their sections were still queued.)"""
        return None if priority >= BATCH_PRIORITY else self.request_timeout_s

    # --- requests -----------------------------------------------------------------
    def chat(self, messages: list[dict], options: SamplingOptions, n: int = 1, json_object: bool = False, priority: int = 0,
             rag: RagOptions | None = None, constraint: OutputConstraint | None = None, tools: list[Tool] | None = None,
             call: str | None = None, template_kwargs: dict | None = None, may_call: bool = False,
             model: str | None = None) -> Generation:
        """Format messages for this model and start n choices; with rag, ground them in retrieved chunks first.

        constraint (or json_object=True for OutputConstraint.json_object()) makes every choice
        follow a grammar. call (with tools) forces a tool call: "" any of the tools, else the one
        named (services/tools.py; read each choice with tools.CallReader). template_kwargs: more variables for the
        chat template (PromptFormatter.format_chat; not with rag). may_call (with tools, call None): the model chooses
        between a call and words, or an answer that follows constraint when it is a JSON format (tools.auto_constraint; read
        an answer with tools.CallReader(may_answer=True) or tools.answer_call); not with rag. Raises InvalidRequestError,
        ContextLengthExceededError, BusyError, UnavailableError (DocumentsUnavailableError, with
        retry_after, while the documents load). model: the name the request used (a route passes it, as our name: a
        documents alias grounds the answer, rag or not, and lists its cited sources in its text; grounded_by).
        """
        rag, listed = self.grounded_by(model, rag)
        if listed and tools and (call is not None or may_call):  # the grounded answer is words: no call can come of it
            raise InvalidRequestError(f"tools are not available with the documents model {model!r} (it answers from the "
                                      "documents): leave `tools` out (or send tool_choice \"none\"), or send the request to "
                                      "another model", param="tools")
        gen = self._chat(messages, options, n, json_object, priority, rag, constraint, tools, call, template_kwargs, may_call)
        gen.sources_in_text = listed
        return gen

    def _chat(self, messages: list[dict], options: SamplingOptions, n: int, json_object: bool, priority: int,
              rag: RagOptions | None, constraint: OutputConstraint | None, tools: list[Tool] | None, call: str | None,
              template_kwargs: dict | None, may_call: bool) -> Generation:
        if tools and (call is not None or may_call):
            if call is not None and (constraint is not None or json_object or rag is not None):
                raise InvalidRequestError("a forced tool call cannot be combined with a response format or rag", param="tool_choice")
            if rag is not None:
                raise InvalidRequestError("tools the model may call cannot be combined with rag", param="tools")
            native = self.formatter.takes_tools
            answer = OutputConstraint.json_object() if json_object and constraint is None else constraint
            constraint = call_constraint(tools, call or None, hint=not native) if call is not None else \
                auto_constraint(tools, hint=not native, answer=answer)
            prompt = self.formatter.format_chat(messages, instruction=constraint.instruction,
                                                tools=[t.listing() for t in tools] if native else None, check=self.length_check(options),
                                                template_kwargs=template_kwargs)
            if call is None:  # words may follow: a base model's transcript stops as any answer's
                options.stop = list(dict.fromkeys([*options.stop, *prompt.stop]))
            return self._start([(prompt.ids, prompt.prefill, i) for i in range(n)], [len(prompt.ids)], options, priority, constraint)
        if constraint is None and json_object:
            constraint = OutputConstraint.json_object()
        _no_logprobs_with_rag(options, rag)
        if rag is not None and template_kwargs:
            raise InvalidRequestError("chat_template_kwargs cannot be combined with rag (a grounded prompt is built by the server): "
                                      "leave one of them out", param="chat_template_kwargs")
        instruction = constraint.instruction if constraint is not None else ""
        sources = None
        if rag is not None:
            grounded = self._ground_chat(messages, options, instruction, rag)
            if isinstance(grounded, GroundedPrompt):
                return self._start_grounded(grounded, options, n, priority, constraint)
            messages, sources = grounded
        prompt = self.formatter.format_chat(messages, instruction=instruction, check=self.length_check(options),
                                            template_kwargs=template_kwargs)
        options.stop = list(dict.fromkeys([*options.stop, *prompt.stop]))
        jobs = [(prompt.ids, prompt.prefill, i) for i in range(n)]
        gen = self._start(jobs, [len(prompt.ids)], options, priority, constraint)
        gen.sources = sources
        if rag is not None:
            gen.grounding = report(self.grounding.language_of(question_of(messages)), [{"answer": "model", "check": "none"}] * n)
        return gen

    def complete(self, prompts: list[str | list[int]], options: SamplingOptions, n: int = 1, echo: bool = False, priority: int = 0,
                 rag: RagOptions | None = None, constraint: OutputConstraint | None = None, model: str | None = None) -> Generation:
        """Start n choices for each prompt (text, or token ids); choice index = prompt * n + j.

        A text prompt is the caller's raw prompt: control-token markers in it count (as in
        llama.cpp's server and vLLM). With rag (one text prompt), the sources (data: never
        control tokens) are put in front of the prompt; echo shows the prompt as given. A base model asked one line
        (a question, bare or as "Question: ...\nAnswer:") answers it as chat() does: passages, the question in its
        language's scaffold, the checked answer or a decline (after the passages, a bare question made the default
        model repeat it or stop at once); a longer prompt (the caller's own template) is completed as written.
        constraint makes every choice follow a grammar (e.g. OutputConstraint.choice(labels)).
        model: the name the request used, as chat() takes it (a documents alias grounds the answer).
        Raises InvalidRequestError, ContextLengthExceededError (param "prompt"), BusyError, UnavailableError.
        """
        rag, listed = self.grounded_by(model, rag)
        try:
            gen = self._complete(prompts, options, n, echo, priority, rag, constraint)
        except ContextLengthExceededError as e:
            e.param = "prompt"  # the field a completions client sent (the error names "messages" for chat)
            raise
        gen.sources_in_text = listed
        return gen

    def _complete(self, prompts: list[str | list[int]], options: SamplingOptions, n: int, echo: bool, priority: int,
                  rag: RagOptions | None, constraint: OutputConstraint | None) -> Generation:
        capacity = self.scheduler.max_queue + self.scheduler.max_batch
        if n * len(prompts) > capacity:
            raise InvalidRequestError(f"n x number of prompts must be at most {capacity} on this server", param="n")
        _no_logprobs_with_rag(options, rag)
        shown = list(prompts)
        sources = None
        if rag is not None:
            if len(prompts) != 1 or not isinstance(prompts[0], str):
                raise InvalidRequestError("rag needs exactly one prompt, as text", param="rag")
            asked = completion_question(prompts[0], self.formatter.labels) \
                if self.formatter.kind == "completion" and constraint is None else None
            if asked:  # a question to a base model: answered as a chat question is (a bare one was echoed, run on)
                gp = self._ground_chat([{"role": "user", "content": asked}], options, "", rag)
                if isinstance(gp, GroundedPrompt):
                    gen = self._start_grounded(gp, options, n, priority, None)
                    for c in gen.choices:
                        c.prefix = prompts[0] if echo else ""
                    return gen
            grounded, sources = self._ground_prompt(prompts[0], options, rag)
            prompts = [grounded]
        jobs, lengths, hidden = [], [], []
        for p, prompt in enumerate(prompts):
            if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):  # (sources block, prompt)
                ids = self.formatter.encode_with_documents(prompt[0], prompt[1]).ids
                text = shown[p]  # type: ignore[assignment]
            elif isinstance(prompt, str):
                self._check_length(prompt, options)
                ids = self.engine.encode(prompt)
                text = shown[p]  # type: ignore[assignment]
                if echo and options.logprobs is not None:
                    hidden.append(self._added_in_front(prompt, ids))
            else:
                bad = [t for t in prompt if not 0 <= t < self.vocab_size]
                if bad:
                    raise InvalidRequestError(f"token id {bad[0]} is outside this model's vocabulary (0..{self.vocab_size - 1})", param="prompt")
                ids, text = list(prompt), self.engine.decode(prompt) if echo else ""
            lengths.append(len(ids))
            hidden += [0] * (len(lengths) - len(hidden))  # token ids and documents: the tokens as they are
            jobs += [(ids, text if echo else "", p * n + j) for j in range(n)]
        if echo and options.logprobs is not None:
            self._check_scorable([jobs[k * n][0] for k in range(len(prompts))])
        if options.max_tokens == 0:  # OpenAI's and vLLM's prompt scoring: echo alone, nothing generated
            if not echo:
                raise InvalidRequestError("max_tokens must be at least 1 (0 only with echo, to return or score the prompt alone)",
                                          param="max_tokens")
            gen = Generation(self.model_name, [_Choice(index, CannedHandle("", 0, "length"), prefix) for _, prefix, index in jobs],
                             sum(lengths), self.request_timeout_s + 5.0)
        else:
            gen = self._start(jobs, lengths, options, priority, constraint)
        try:
            scores = self._score_prompts([jobs[k * n][0] for k in range(len(prompts))], options.logprobs, priority, hidden) \
                if echo and options.logprobs is not None else []
        except BaseException:
            gen.cancel()
            raise
        for c in gen.choices if scores else ():
            c.scores = scores[c.index // n]
        gen.sources = sources
        if rag is not None:
            query = strip_labels(shown[0], self.formatter.labels["user"], self.formatter.labels["assistant"])  # type: ignore[arg-type]
            gen.grounding = report(self.grounding.language_of(query), [{"answer": "model", "check": "none"}] * len(jobs))
        return gen

    # --- grounding ----------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """Model tokens of text as data (no BOS, special-token look-alikes as text)."""
        return len(self.formatter.encode_data(text))

    def cut_tokens(self, text: str, n: int) -> str:
        """The first n model tokens of text, as text."""
        offsets = self.engine.tokenizer.encode(text, add_special_tokens=False).offsets
        return text if n >= len(offsets) else text[: offsets[max(n, 1) - 1][1]]

    def _check_length(self, text: str, options: SamplingOptions) -> None:
        """Raise ContextLengthExceededError when text cannot fit without tokenizing it: its fewest possible tokens
        (engine.tokens.fewest_tokens, a floor: a prompt that fits is never refused) leave no room for max_tokens
        (1 when unset). A 2 MB prompt took 3.7 s of a server thread to encode before its 400."""
        least = fewest_tokens(self.engine.tokenizer, text, over=self.context_length - _least_room(options))
        if least and least + _least_room(options) > self.context_length:  # 0: no floor (or an empty text); the real count decides
            raise self._too_long(least, options, f"at least {least}")

    def _check_fits(self, prompt_tokens: int, options: SamplingOptions) -> None:
        """Raise ContextLengthExceededError when a prompt of prompt_tokens (an exact count) leaves no room for max_tokens
        (1 when unset): the refusal the engine would give, before work is spent on the prompt (a grounded answer's search)."""
        if prompt_tokens + _least_room(options) > self.context_length:
            raise self._too_long(prompt_tokens, options)

    def _too_long(self, prompt_tokens: int, options: SamplingOptions, counted: str = "") -> ContextLengthExceededError:
        """The refusal of a prompt of prompt_tokens (said as `counted` when given: "at least N") that leaves no room."""
        asked = f"{_least_room(options)} more were requested" if _asks_room(options) else "no room is left for a completion"
        return ContextLengthExceededError(
            f"this model's context is {self.context_length} tokens and the prompt has {counted or prompt_tokens} tokens: {asked}; "
            "shorten the prompt" + (" or lower max_tokens" if _asks_room(options) else ""),
            prompt_tokens, options.max_tokens if _asks_room(options) else 0, self.context_length,
        )

    def length_check(self, options: SamplingOptions) -> Callable[[str], None]:
        """A format_chat check: refuses a prompt text that cannot fit before it is tokenized (_check_length)."""
        return lambda text: self._check_length(text, options)

    def _prompt_limit(self, options: SamplingOptions) -> int:
        """Most prompt tokens that leave the answer its room (max_tokens, else a quarter of the context up to the default)."""
        room = options.max_tokens if options.max_tokens is not None else min(self.default_max_tokens, max(16, self.context_length // 4))
        return self.context_length - room

    def _params(self, options: SamplingOptions, prompt_tokens: int, index: int) -> SamplingParams:
        d = self.defaults
        room = self.context_length - prompt_tokens
        if not _asks_room(options) and room < 1:
            raise self._too_long(prompt_tokens, options)
        if options.max_tokens is None:
            max_tokens = min(self.max_tokens_limit if options.fill else self.default_max_tokens, room)
        else:
            max_tokens = options.max_tokens
            if max_tokens > self.max_tokens_limit:
                raise InvalidRequestError(f"max_tokens must be at most {self.max_tokens_limit}", param="max_tokens")
            if options.to_room:
                max_tokens = min(max_tokens, room)
        if options.min_tokens > max_tokens:
            raise InvalidRequestError(f"min_tokens ({options.min_tokens}) must be at most max_tokens ({max_tokens}): "
                                      "lower min_tokens or raise max_tokens", param="min_tokens")

        def pick(name: str, fallback):
            v = getattr(options, name)
            return v if v is not None else d.get(name, fallback)

        temperature, top_p = pick("temperature", 1.0), pick("top_p", 1.0)
        if top_p == 0 or temperature < MIN_TEMPERATURE:  # "only the most likely token" (and no overflow in logits / T)
            temperature, top_p = 0.0, 1.0
        seed = None if options.seed is None else (options.seed + index) % _SEED_SPACE
        params = SamplingParams(
            max_tokens=max_tokens, temperature=float(temperature), top_k=int(pick("top_k", 0)), top_p=float(top_p),
            min_p=float(pick("min_p", 0.0)), repetition_penalty=float(pick("repetition_penalty", 1.0)), seed=seed,
            stop=list(options.stop), ignore_eos=options.ignore_eos, min_tokens=options.min_tokens, logprobs=options.logprobs,
            stop_token_ids=list(options.stop_token_ids),
        )
        try:
            return params.validate()
        except ValueError as e:
            raise InvalidRequestError(str(e)) from None

    def _check_scorable(self, prompts: list[list[int]]) -> None:
        """Raise InvalidRequestError when a prompt to score (echo with logprobs) has, after its first token, one the model
        never writes (BOS, pad, unk, image markers): each token is scored by forcing it, and those cannot be forced (it was
        a 500 "scoring the prompt failed")."""
        never = self.engine.never_generated_set
        for p, ids in enumerate(prompts):
            k = next((k for k in range(1, len(ids)) if ids[k] in never), None)
            if k is not None:
                shown = self.engine.decode([ids[k]], skip_special_tokens=False)
                raise InvalidRequestError(f"prompt {p} has the control token {shown!r} (id {ids[k]}) at token {k}: the model never "
                                          "writes it, so it cannot be scored; leave it out of a prompt sent with echo and logprobs",
                                          param="prompt")

    def _added_in_front(self, prompt: str, ids: list[int]) -> int:
        """How many of a text prompt's ids the tokenizer put in front of its text (BOS): an echo leaves them out, as OpenAI
        and vLLM show no token the client did not send (a "<bos>" the client wrote in its text is its own, and shown)."""
        own = self.engine.encode(prompt, add_special_tokens=False)
        added = len(ids) - len(own)
        return added if added > 0 and ids[added:] == own else 0

    def _score_prompts(self, prompts: list[list[int]], top: int, priority: int, hidden: list[int]) -> list:
        """Start scoring each prompt's tokens (echo with logprobs: services.logprobs.PromptScores, one decode step a token,
        in up to 8 segments side by side); hidden[k]: how many of prompt k's first tokens its entries leave out.
        Raises BusyError, ContextLengthExceededError, UnavailableError as _start does."""
        from edge_agent.services.logprobs import start_prompt_scores

        out: list = []
        most = max(1, self.scheduler.max_queue // 2 // max(1, len(prompts)))  # half the queue at most: room for the choices
        try:
            for ids, hide in zip(prompts, hidden):
                out.append(start_prompt_scores(self.scheduler, ids, top, priority, self.time_limit(priority), min(8, most), hide))
        except BaseException as e:
            for sc in out:
                sc.cancel()
            err = _service_error(e)
            if err is e:
                raise
            raise err from None
        return out

    def _start(self, jobs, prompt_lengths: list[int], options: SamplingOptions, priority: int,
               constraint: OutputConstraint | None) -> Generation:
        if not self.accepting:
            raise UnavailableError("the server is shutting down; retry on another instance or later")
        if constraint is not None and options.min_tokens:
            raise InvalidRequestError("min_tokens cannot be combined with a response format: the output ends where its grammar does",
                                      param="min_tokens")
        if constraint is not None and options.ignore_eos:
            raise InvalidRequestError("ignore_eos cannot be combined with a response format: the output ends where its grammar does",
                                      param="ignore_eos")
        for param, ids in (("logit_bias", options.logit_bias or ()), ("stop_token_ids", options.stop_token_ids)):
            outside = sorted(t for t in ids if t >= self.vocab_size)
            if outside:
                raise InvalidRequestError(f"{param} names token ids outside this model's vocabulary (0..{self.vocab_size - 1}): "
                                          f"{', '.join(map(str, outside[:5]))}; POST /tokenize gives a text's ids", param=param)
        if constraint is not None:
            self.prepare_grammar()
        procs = grammar_processors(self.engine.tokenizer, self.vocab_size, self.engine.stop_token_ids, constraint, len(jobs)) \
            if constraint is not None else []
        planned = []
        for j, (ids, prefix, index) in enumerate(jobs):
            if not ids:
                raise InvalidRequestError("the prompt is empty", param="prompt")
            params = self._params(options, len(ids), index)
            if procs:
                params.logits_processor = procs[j]  # masks natively for greedy and sampled choices alike
            if options.presence_penalty or options.frequency_penalty or options.logit_bias:
                params.logits_processor = PenaltyProcessor(options.presence_penalty, options.frequency_penalty, params.logits_processor,
                                                           options.logit_bias)
            planned.append((ids, params, prefix, None, index))
        choices: list[_Choice] = []
        try:
            for ids, params, prefix, guard, index in planned:
                handle = self.scheduler.submit(ids, params, priority=priority, timeout_s=self.time_limit(priority))
                choices.append(_Choice(index, handle, prefix, guard))
        except BaseException as e:
            for c in choices:
                c.handle.cancel()
            err = _service_error(e)
            if err is e and isinstance(e, ValueError):
                err = InvalidRequestError(str(e))
            if err is e:
                raise
            raise err from None
        choices.sort(key=lambda c: c.index)
        limit = self.time_limit(priority)
        return Generation(self.model_name, choices, sum(prompt_lengths), None if limit is None else limit + 5.0)


def _asks_room(options: SamplingOptions) -> bool:
    """Whether the prompt must leave max_tokens free: it is set and not cut to the room left (to_room)."""
    return options.max_tokens is not None and not options.to_room


def _least_room(options: SamplingOptions) -> int:
    """The fewest tokens a prompt must leave free: max_tokens (_asks_room), else 1."""
    return options.max_tokens if _asks_room(options) else 1


def _no_logprobs_with_rag(options: SamplingOptions, rag: RagOptions | None) -> None:
    """Raise InvalidRequestError for logprobs with rag: a grounded answer may be quoted from the passages, not generated."""
    if rag is not None and options.logprobs is not None:
        raise InvalidRequestError("logprobs cannot be combined with rag (a grounded answer may be quoted from the passages, "
                                  "which has no log-probabilities): leave one of them out", param="logprobs")


def system_fingerprint(manifest: dict, context_length: int) -> str:
    """OpenAI's system_fingerprint of a model as served: its files, the context length and this package's version, hashed."""
    import hashlib
    import json

    from edge_agent import __version__

    facts = {"files": manifest.get("files", {}), "context_length": int(context_length), "version": __version__}
    return "fp_" + hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:10]


def _created(stamp) -> int:
    import datetime as dt

    try:
        return int(dt.datetime.fromisoformat(str(stamp)).timestamp())
    except (TypeError, ValueError):
        return 0
