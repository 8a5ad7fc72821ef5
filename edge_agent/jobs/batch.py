"""The `batch` job kind: an OpenAI batch file (JSONL requests) in, OpenAI-format output and error files out.

Each input line is `{"custom_id", "method", "url", "body"}` with url /v1/chat/completions,
/v1/completions or /v1/embeddings. Every line becomes one item (key `line:<n>`), validated with
the same protocol models as the live routes and run through the same services at the job's
(batch) priority, many in flight at once so they decode together in the engine's continuous batching.

Output lines are exactly the OpenAI Batch API's (and `vllm run-batch`'s):
  {"id": "batch_req_<hex>", "custom_id": ..., "response": {"status_code": 200, "request_id": "req_<hex>",
   "body": {...the route's response...}}, "error": null}
A request the route would refuse (invalid body, unknown model, context too long) is answered as the
route would, in the error file: "response": {"status_code": 400, ..., "body": {"error": {...}}}.
A line that is not a request at all (invalid JSON, no custom_id, a duplicate custom_id, an unknown
url or method) gets "response": null and "error": {"code", "message", "line"}. One bad line never
fails the run, but for a line whose url is not the batch's endpoint: OpenAI fails such a batch before
any line runs, and so does this (status failed, errors [{"code": "mismatched_url", "line", ...}]).
"""
from __future__ import annotations

import base64
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from edge_agent.jobs.kinds import InvalidJobError, Item, ItemError, JobContext, RunInfo
from edge_agent.services import grounding
from edge_agent.services import protocol as p
from edge_agent.services import responses_protocol as rp
from edge_agent.services.chat import sampling_options
from edge_agent.services.logprobs import TextOffsets, chat_content, completion_logprobs
from edge_agent.services.tools import read_answer
from edge_agent.services.generation import Generation
from edge_agent.services.errors import BusyError, ServiceError, UnavailableError

ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses")
COMPLETION_WINDOWS = ("24h",)
MAX_LINES = 50_000
MAX_CUSTOM_ID = 512
BUSY_RETRY_S = 0.2
WORKERS = 64  # threads that wait on generations in flight (the engine does the work)
PROMPT_VERSION = "batch-1"
MISMATCHED_URL = "mismatched_url"
MISMATCH = "differs from the batch's endpoint"
_MISMATCH_AT = re.compile(rf"\bline (\d+): url \S+ {re.escape(MISMATCH)}")


def _hex() -> str:
    return secrets.token_hex(12)


def line_error(custom_id: str | None, line: int, code: str, message: str) -> dict:
    """An error-file line for input that is not a request (no HTTP status applies)."""
    return {"id": f"batch_req_{_hex()}", "custom_id": custom_id, "response": None,
            "error": {"code": code, "message": message, "line": line}}


def response_line(custom_id: str, status: int, body: dict) -> dict:
    """An output (200) or error-file (4xx/5xx) line with the route's response body."""
    return {"id": f"batch_req_{_hex()}", "custom_id": custom_id,
            "response": {"status_code": status, "request_id": f"req_{_hex()}", "body": body}, "error": None}


def error_body(message: str, type: str = "invalid_request_error", param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# --- reading the input file ---------------------------------------------------------
def batch_lines(data: bytes) -> list[str]:
    """The lines of a batch file. Raises InvalidJobError when it is not UTF-8 text, has no request (as OpenAI's
    Batch API refuses it) or more than MAX_LINES."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = _utf16_jsonl(data)
    if text is None:
        raise InvalidJobError("the batch file is not UTF-8 text (JSONL: one JSON request per line; PowerShell: "
                              "Out-File -Encoding utf8)", "input_file_id")
    lines = text.splitlines()
    requests = sum(1 for raw in lines if raw.strip())
    if not requests:
        raise InvalidJobError("the batch file has no requests: write one JSON request per line "
                              '({"custom_id", "method", "url", "body"})', "input_file_id")
    if requests > MAX_LINES:
        raise InvalidJobError(f"the batch file has more than {MAX_LINES} requests: split it into several batches", "input_file_id")
    return lines


def parse_batch(data: bytes, endpoint: str | None = None) -> list[Item]:
    """One item per non-blank line, in order; a line that is not a request gets its error in the payload.

    UTF-16 with a byte-order mark (what Windows PowerShell 5's `>` and Out-File write) is read too.
    Raises InvalidJobError when the file is not UTF-8 text, has no request or more than MAX_LINES.
    """
    lines = batch_lines(data)
    items: list[Item] = []
    seen: set[str] = set()
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        items.append(Item(key=f"line:{n}", payload=_parse_line(raw, n, endpoint, seen)))
    return items


def _utf16_jsonl(data: bytes) -> str | None:
    """The text of a UTF-16 file with a byte-order mark whose first request begins with "{", else None."""
    if data[:2] not in (b"\xff\xfe", b"\xfe\xff"):
        return None
    try:
        text = data.decode("utf-16")
    except UnicodeDecodeError:
        return None
    return text if text.lstrip().startswith("{") else None


def _parse_line(raw: str, n: int, endpoint: str | None, seen: set[str]) -> dict:
    def bad(code: str, message: str, custom_id: str | None = None) -> dict:
        return {"line": n, "custom_id": custom_id, "error": {"code": code, "message": message}}

    try:
        obj = json.loads(raw, parse_constant=_reject_constant)
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError, UnicodeEncodeError) as e:
        where = f" ({e.msg} at column {e.colno})" if isinstance(e, json.JSONDecodeError) else ""
        return bad("invalid_json", f"line {n} is not valid JSON{where}: each line must be one JSON object")
    if not isinstance(obj, dict):
        return bad("invalid_json", f"line {n} is not a JSON object")
    cid = obj.get("custom_id")
    if not isinstance(cid, str) or not cid or len(cid) > MAX_CUSTOM_ID:
        return bad("missing_custom_id", f"line {n} needs a custom_id: a non-empty string of at most {MAX_CUSTOM_ID} characters")
    if cid in seen:
        return bad("duplicate_custom_id", f"custom_id {cid!r} on line {n} was used on an earlier line: each request needs its own", cid)
    seen.add(cid)
    unknown = sorted(set(obj) - {"custom_id", "method", "url", "body"})
    if unknown:
        return bad("invalid_request", f"line {n} has unknown fields {unknown}: only custom_id, method, url, body", cid)
    if obj.get("method", "POST") != "POST":
        return bad("invalid_method", f"line {n}: method must be POST", cid)
    url = obj.get("url")
    if url not in ENDPOINTS:
        return bad("invalid_url", f"line {n}: url must be one of {', '.join(ENDPOINTS)}", cid)
    if endpoint is not None and url != endpoint:
        return bad(MISMATCHED_URL, f"line {n}: url {url} {MISMATCH} {endpoint}", cid)
    body = obj.get("body")
    if not isinstance(body, dict):
        return bad("invalid_body", f"line {n}: body must be a JSON object (the request as the route takes it)", cid)
    return {"line": n, "custom_id": cid, "url": url, "body": body}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def check_endpoint(items: list[Item]) -> None:
    """Raises InvalidJobError (the run fails before any line runs, as OpenAI fails such a batch) when a line's url is not
    the batch's endpoint: the lines of an OpenAI batch all go to its endpoint, and one elsewhere was a mistake."""
    bad = [it.payload for it in items if it.payload.get("error", {}).get("code") == MISMATCHED_URL]
    if bad:
        more = f" (and {len(bad) - 1} more line{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
        raise InvalidJobError(f"{bad[0]['error']['message']}{more}: every line of a batch must use its endpoint; put the other "
                              "requests in a batch of their own", "url")


def endpoint_error(message: str) -> dict | None:
    """The batch error (OpenAI's {code, message, param, line}) of a run that check_endpoint failed, else None."""
    m = _MISMATCH_AT.search(message)
    if m is None:
        return None
    return {"code": MISMATCHED_URL, "message": message[m.start():], "param": "url", "line": int(m.group(1))}


def _validation_message(e: ValidationError) -> tuple[str, str | None]:
    """The route's message for a body that fails validation: the most telling error, with its parameter."""
    errs = e.errors(include_url=False, include_input=False)
    err = max(errs, key=lambda x: (not (x["type"].endswith("_type") or x["type"] in _TYPE_ERRORS), len(x["loc"])))
    param = ""
    for item in err["loc"]:
        if isinstance(item, int):
            param += f"[{item}]"
        elif isinstance(item, str) and item.isidentifier() and not item[0].isupper() and item not in ("str", "int", "float", "bool", "list", "none"):
            param += f".{item}" if param else item
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":  # as the live route says it (api/errors.read_json)
        msg = p.unknown_field(param)
    return (f"invalid value for {param!r}: {msg}" if param else msg), (param or None)


_TYPE_ERRORS = {"literal_error", "model_type", "is_instance_of", "union_tag_invalid", "none_required"}


# --- running one request ------------------------------------------------------------
class RequestFailed(Exception):
    """A request answered with an HTTP error (status, OpenAI error body)."""

    def __init__(self, status: int, body: dict):
        super().__init__(body["error"]["message"])
        self.status, self.body = status, body


@dataclass
class BatchRequestRunner:
    """Runs one validated batch line through the services, as the live route would (without streaming)."""

    chat: Any
    embeddings: Any
    settings: Any
    priority: int
    cancelled: Callable[[], bool] = lambda: False

    def run(self, payload: dict) -> dict:
        """The output line for this line's request. Raises RequestFailed (route-level error) for the error file."""
        url, body = payload["url"], payload["body"]
        try:
            if url == "/v1/embeddings":
                out, tokens = self._embeddings(body), 0
            elif url == "/v1/responses":
                with rp.named_for_responses():
                    out, tokens = self._respond(body)
            else:
                out, tokens = self._generate(url, body)
            line = response_line(payload["custom_id"], 200, out)
            line["usage"] = {"completion_tokens": tokens}  # for the run's token count; not written to the output file
            return line
        except ValidationError as e:
            msg, param = _validation_message(e)
            raise RequestFailed(400, error_body(msg, param=param, code="invalid_value")) from None
        except UnavailableError as e:
            if self.chat is not None and not getattr(self.chat, "accepting", True):
                raise  # the daemon is shutting down: not the line's fault, it runs again after the restart
            raise RequestFailed(e.status, error_body(e.message, e.type, e.param, e.code)) from None
        except ServiceError as e:
            raise RequestFailed(e.status, error_body(e.message, e.type, e.param, e.code)) from None

    def _context(self) -> dict:
        s = self.settings
        return {"max_tokens_limit": s.max_tokens_limit, "max_messages": s.max_messages}

    def _generate(self, url: str, body: dict) -> tuple[dict, int]:
        if self.chat is None:
            raise RequestFailed(503, error_body("no language model is loaded in this process", "server_error", code="unavailable"))
        model = p.ChatCompletionRequest if url == "/v1/chat/completions" else p.CompletionRequest
        req = model.model_validate(body, context=self._context())
        if req.stream:
            raise RequestFailed(400, error_body("stream is not supported in a batch: leave it out or set it to false", param="stream",
                                                code="invalid_value"))
        self.chat.check_model(req.model)
        priority = max(self.priority, req.priority or 0)
        rag = _rag(req)
        if isinstance(req, p.ChatCompletionRequest):
            messages = [m.to_dict() for m in req.messages]
            max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
            constraint = req.output_constraint()
            tools, call, may_call = req.tool_list(), req.forced_call(), req.may_call()
            start = lambda: self.chat.chat(messages, sampling_options(req, max_tokens), n=req.n or 1, constraint=constraint,  # noqa: E731
                                           priority=priority, rag=rag, tools=tools, call=call,
                                           template_kwargs=req.chat_template_kwargs, may_call=may_call, model=req.model)
        else:
            constraint = req.output_constraint()
            start = lambda: self.chat.complete(req.prompts(), sampling_options(req, req.max_tokens), n=req.n or 1,  # noqa: E731
                                               echo=bool(req.echo), priority=priority, rag=rag, constraint=constraint,
                                               model=req.model)
        gen = self._submit(start)
        texts, ends, lps = self._wait(gen)
        usage = p.Usage.of(gen.usage)  # prompt_tokens_details too, as the live route gives it (it was null here)
        gen.note_citations(texts.values())
        sources, grounding = p.sources_of(gen), p.grounding_of(gen)
        if isinstance(req, p.ChatCompletionRequest):
            answers = {i: read_answer(texts[i], ends[i], tools, call or None, may_call) if call is not None or may_call
                       else (texts[i], None, ends[i]) for i in texts}
            legacy = req.legacy_functions()
            choices = [p.ChatChoice(index=i, message=p.AssistantMessage.of(answers[i][0], answers[i][1], legacy),
                                    finish_reason=p.legacy_finish(answers[i][2], legacy),
                                    logprobs=None if lps[i] is None else p.ChatLogprobs(content=chat_content(lps[i], self.chat.token_texts())))
                       for i in sorted(texts)]
            out = p.ChatCompletion(id=f"chatcmpl-{gen.id}", created=gen.created, model=gen.model, choices=choices, usage=usage,
                                   system_fingerprint=self.chat.fingerprint,
                                   sources=sources, grounding=grounding)
        else:
            tt = self.chat.token_texts()
            choices = [p.CompletionChoice(index=i, text=texts[i], finish_reason=ends[i],
                                          logprobs=None if lps[i] is None else completion_logprobs(lps[i], tt, TextOffsets(tt)))
                       for i in sorted(texts)]
            out = p.Completion(id=f"cmpl-{gen.id}", created=gen.created, model=gen.model, choices=choices, usage=usage, sources=sources,
                               system_fingerprint=self.chat.fingerprint,
                               grounding=grounding)
        absent = {f for f, v in (("sources", sources), ("grounding", grounding)) if v is None}
        return out.model_dump(mode="json", exclude=absent or None), gen.usage.completion_tokens

    def _respond(self, body: dict) -> tuple[dict, int]:
        """A /v1/responses line: the chat request it stands for, answered as the route answers it (not streamed)."""
        if self.chat is None:
            raise RequestFailed(503, error_body("no language model is loaded in this process", "server_error", code="unavailable"))
        req = rp.ResponseCreateRequest.model_validate(body, context=self._context())
        if req.stream:
            raise RequestFailed(400, error_body("stream is not supported in a batch: leave it out or set it to false", param="stream",
                                                code="invalid_value"))
        self.chat.check_model(req.model)
        options = req.sampling()
        priority = max(self.priority, req.priority or 0)
        gen = self._submit(lambda: rp.start(self.chat, req, options, priority, _rag(req)))
        texts, ends, lps = self._wait(gen)
        gen.note_citations(texts.values())
        texts_of = self.chat.token_texts() if options.logprobs is not None else None
        done = rp.finished(req, gen, texts[0], ends[0], rp.logprobs_of(lps[0], texts_of))
        return rp.dump(done), gen.usage.completion_tokens

    def _submit(self, start: Callable[[], Generation]) -> Generation:
        """Start the generation; while the engine's queue is full, wait and retry (a batch yields to interactive work)."""
        while True:
            try:
                return start()
            except BusyError:
                if self.cancelled():
                    raise RequestFailed(503, error_body("the batch was cancelled", "server_error", code="cancelled")) from None
                time.sleep(BUSY_RETRY_S)

    def _wait(self, gen: Generation) -> tuple[dict[int, str], dict[int, str], dict[int, list | None]]:
        """Every choice's text, finish reason and logprobs (Generation.gather); raises RequestFailed when the batch is cancelled."""
        def check() -> None:
            if self.cancelled():
                gen.cancel()
                raise RequestFailed(503, error_body("the batch was cancelled", "server_error", code="cancelled"))
        return gen.gather(check)

    def _embeddings(self, body: dict) -> dict:
        req = p.EmbeddingRequest.model_validate(body)
        svc = self.embeddings
        if svc is None:
            raise RequestFailed(503, error_body("embedding model not loaded", "server_error", code="unavailable"))
        svc.check_model(req.model)
        texts = [req.input] if isinstance(req.input, str) else list(req.input)
        got = svc.embed_texts(texts, dimensions=req.dimensions, truncate=req.truncate)
        as_b64 = req.encoding_format == "base64"
        data = [p.EmbeddingData(index=i, embedding=base64.b64encode(v.astype("<f4").tobytes()).decode() if as_b64 else v.tolist())
                for i, v in enumerate(got.vectors)]
        usage = p.EmbeddingUsage(prompt_tokens=got.tokens, total_tokens=got.tokens, truncated_inputs=got.truncated)
        out = p.EmbeddingList(data=data, model=svc.model_name or req.model, usage=usage)
        return out.model_dump(mode="json")


def _rag(req: p._Sampling) -> grounding.RagOptions | None:
    r = req.rag
    if r is None:
        return None
    return grounding.RagOptions(k=r.k, filters=r.filters.to_dict() if r.filters else None, mode=r.mode)


def run_line(runner: BatchRequestRunner, payload: dict) -> dict:
    """The output line for one parsed line. Raises ItemError whose message is the error-file line as JSON,
    UnavailableError while the daemon shuts down (the line stays pending and runs after the restart)."""
    if "error" in payload:
        e = payload["error"]
        raise ItemError(json.dumps(line_error(payload.get("custom_id"), payload["line"], e["code"], e["message"])))
    cid = payload["custom_id"]
    try:
        line = runner.run(payload)
    except RequestFailed as e:
        raise ItemError(json.dumps(response_line(cid, e.status, e.body))) from None
    return line


def error_line_of(message: str, payload: dict) -> dict:
    """The error-file line of a failed item (its ItemError message, or a plain message from elsewhere)."""
    try:
        line = json.loads(message)
        if isinstance(line, dict) and "custom_id" in line:
            return line
    except ValueError:
        pass
    return response_line(payload.get("custom_id"), 500, error_body(message or "the request failed", "server_error", code="failed"))


# --- the job kind ------------------------------------------------------------------------
class _Pending:
    def __init__(self, future: Future, cancel: Callable[[], None]):
        self._future = future
        self._cancel = cancel

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> dict:
        return self._future.result(timeout)

    def cancel(self) -> None:
        self._cancel()
        self._future.cancel()


class BatchKind:
    """OpenAI batch files as a job kind (params: input_file_id, endpoint, completion_window; batch_id when made by /v1/batches)."""

    name = "batch"
    prompt_version = PROMPT_VERSION

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="edge-agent-batch")
            return self._pool

    def validate(self, params: dict, ctx: JobContext) -> dict:
        """Normalised params. Raises InvalidJobError for an unknown file, endpoint or window."""
        from edge_agent.jobs.batch_files import stores

        unknown = sorted(set(params) - {"input_file_id", "endpoint", "completion_window", "batch_id"})
        if unknown:
            raise InvalidJobError(f"unknown batch params {unknown}: use input_file_id, endpoint, completion_window", unknown[0])
        endpoint = params.get("endpoint")
        if endpoint not in ENDPOINTS:
            raise InvalidJobError(f"endpoint must be one of {', '.join(ENDPOINTS)}", "endpoint")
        window = params.get("completion_window", "24h")
        if window not in COMPLETION_WINDOWS:
            raise InvalidJobError("completion_window must be 24h", "completion_window")
        file_id = params.get("input_file_id")
        try:
            data = stores(ctx.settings, getattr(ctx, "db", None)).files.read_bytes(file_id) if isinstance(file_id, str) else None
        except (KeyError, FileNotFoundError):
            data = None
        if data is None:
            raise InvalidJobError(f"input file {file_id!r} not found: upload it with POST /v1/files (purpose=batch)", "input_file_id")
        batch_lines(data)  # an empty, non-text or too long file is refused now, not by a run that fails later
        out = {"input_file_id": file_id, "endpoint": endpoint, "completion_window": window}
        if params.get("batch_id"):
            out["batch_id"] = str(params["batch_id"])
        return out

    def list_items(self, params: dict, ctx: JobContext, since: float | None) -> Iterator[Item]:
        from edge_agent.jobs.batch_files import stores

        try:
            data = stores(ctx.settings, getattr(ctx, "db", None)).files.read_bytes(params["input_file_id"])
        except (KeyError, FileNotFoundError):
            raise InvalidJobError(f"input file {params['input_file_id']!r} is gone", "input_file_id") from None
        items = parse_batch(data, params.get("endpoint"))
        check_endpoint(items)
        yield from items

    def start_item(self, item: Item, params: dict, ctx: JobContext) -> _Pending:
        runner = BatchRequestRunner(ctx.chat, ctx.embeddings, ctx.settings, ctx.priority)
        stop = threading.Event()
        runner.cancelled = lambda: stop.is_set() or ctx.cancelled()
        return _Pending(self._executor().submit(run_line, runner, item.payload), stop.set)

    def finish_run(self, run: RunInfo, ctx: JobContext) -> None:
        """Write the output and error files of the run's results, in input order, and link them to the batch."""
        from edge_agent.jobs.batch_files import write_run_outputs

        write_run_outputs(run, ctx.settings, getattr(ctx, "db", None))


def write_jsonl(path: Path, lines: list[dict]) -> None:
    """Write lines as JSONL whole or not at all (edge_agent.fsutil.write_atomic)."""
    from edge_agent.fsutil import write_atomic

    write_atomic(path, ((dump_line(line) + "\n").encode("utf-8") for line in lines))


def dump_line(line: dict) -> str:
    """One output-file line: the OpenAI fields only (the run's own `usage` bookkeeping is left out)."""
    return json.dumps({k: line[k] for k in ("id", "custom_id", "response", "error") if k in line}, ensure_ascii=False, separators=(",", ":"))
