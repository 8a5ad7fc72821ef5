"""The `classify` job kind: one label out of a configured set for each document, CSV row or given text, with a score.

Two methods, both real:
- likelihood: the language model's log-probability of each label's tokens after the text (a
  completion-style prompt that lists the labels), all labels of a text scored in one batched pass
  through the scheduler (services.scoring), calibrated so that a label that is likely anywhere does
  not win everywhere: a run of at least SELF_TRAIN_MIN_PER_LABEL items per label takes away each
  label's mean score over up to RUN_CALIBRATION_SAMPLE of its items, evenly spaced (prepare_run; no
  labels used), a smaller run or a single text the labels' scores after a content-free text
  (contextual calibration). Names only, default model, 200 paragraphs of one split
  (scripts/bench_classify.py): content-free 0.350 -> run 0.400 on set a, 0.210 -> 0.330 on set b;
  dividing by the label's token count lost (0.320 / 0.205). The answer is always one of the labels.
- embedding: cosine similarity of the text's embedding to each label's prototype: the mean of the
  embeddings of "name: description" and of the label's examples, each text counting once (fast).
  (A softmax regression on the same embeddings was no better on the benchmark: 0.825 against 0.83
  at 16 examples per label, worse below.)
  Self-training (param self_train, on by default for a run of at least SELF_TRAIN_MIN_PER_LABEL
  items per label): a run has all its items at hand, so before its first item the prototypes are
  adapted to them (self_train_prototypes: soft k-means, i.e. EM of a von Mises-Fisher mixture,
  seeded by the labels' own texts, which keep counting in every round, together with each label's
  centred first cluster, see centred_anchors); every item is then classified by the adapted
  prototypes, its score the same softmax as without. Names only, on CPython's Library Reference
  (scripts/bench_classify.py, 200 items, mean of 6 splits): 0.626 -> 0.773 on one 8-label set,
  0.412 -> 0.599 on a second, 0.378 -> 0.519 on a third; +0.05..0.15 up to 4 examples per label,
  +0.01..0.02 at 8, none at 16 or more (so auto leaves it off there). The centred first cluster
  (against plain soft k-means): +0.03..0.04 on runs whose labels differ in size (all three sets),
  +0.04 / 0.00 / -0.01 on balanced 200-item runs, -0.01 / -0.03 on balanced 480-item runs
  (scripts/bench_classify_names.py, which also measures what was tried and dropped).
Embedding model: the classify model (Settings.classify_embedding_model, all-MiniLM-L6-v2 unless set: the more
accurate one from English label names), except for a run whose texts are mostly in a language that model was not
trained on and the documents' model was (multilingual-e5-small): that run embeds with the documents' model
(decided by prepare_run from a sample of its items, the same on a resumed run). Dutch Debian FAQ by chapter
(scripts/bench_classify.py --set nlfaq, 160 items, 8 labels, 3 splits), MiniLM against e5: names only 0.142 ->
0.210 self-trained (0.177 -> 0.306 plain), 1 example a label 0.298 -> 0.338, 2: 0.344 -> 0.398, 4: 0.448 -> 0.504,
8: 0.494 -> 0.535 (plain; self-trained 0.471 -> 0.517).
`auto` measures both on the examples (leave-one-out) when every label has one, and keeps the
more accurate (embedding on a tie: it is faster); without examples it uses embedding.
score: the chosen label's probability under a softmax over the labels.
"""
from __future__ import annotations

import csv
import hashlib
import io
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from edge_agent.jobs.embedding_classifier import (MAX_TEXT_CHARS, SELF_TRAIN_MIN_PER_LABEL, EmbeddingClassifier, Label,
                                                   _clip, _softmax, centred_anchors, self_train_prototypes)  # noqa: F401 (the last two re-exported)
from edge_agent.jobs.kinds import InvalidJobError, Item, ItemError, JobContext, RunInfo, document_filters
from edge_agent.services.embeddings import main_language
from edge_agent.services.errors import ServiceError, UnavailableError
from edge_agent.services.paths import open_regular  # a named pipe as csv_path would block the listing forever

log = logging.getLogger(__name__)

PROMPT_VERSION = "classify-1"
METHODS = ("auto", "likelihood", "embedding")
SOURCES = ("documents", "texts", "csv")
MAX_LABELS = 64
MAX_EXAMPLES = 32
CONTENT_FREE = "N/A"
SELF_TRAIN_UNTIL_EXAMPLES = 16  # unless every label has this many examples (there it no longer helped: -0.02 .. 0)
SELF_TRAIN_MAX_ITEMS = 20000  # a larger run adapts to an evenly spaced sample of this many items
EMBED_CHUNK = 256
LANGUAGE_SAMPLE = 24  # items whose language picks a run's embedding model (evenly spaced over the run)
RUN_CALIBRATION_SAMPLE = 32  # items (evenly spaced) whose mean label scores calibrate a run's likelihood method


def parse_labels(raw: Any) -> list[Label]:
    """Labels from a list of names or of {name, description, examples}. Raises InvalidJobError (empty, duplicate, malformed)."""
    if not isinstance(raw, list) or len(raw) < 2:
        raise InvalidJobError("labels must be a list of at least 2 labels (names, or {name, description, examples})", "labels")
    if len(raw) > MAX_LABELS:
        raise InvalidJobError(f"at most {MAX_LABELS} labels", "labels")
    out: list[Label] = []
    seen: set[str] = set()
    for i, r in enumerate(raw):
        if isinstance(r, str):
            r = {"name": r}
        if not isinstance(r, dict) or set(r) - {"name", "description", "examples"}:
            raise InvalidJobError(f"labels[{i}] must be a name or an object with name, description, examples", f"labels[{i}]")
        name = r.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InvalidJobError(f"labels[{i}] has an empty name: every label needs a non-empty name", f"labels[{i}].name")
        name = " ".join(name.split())
        if name.casefold() in seen:
            raise InvalidJobError(f"label {name!r} appears twice: labels must be distinct", f"labels[{i}].name")
        seen.add(name.casefold())
        desc = r.get("description") or ""
        examples = r.get("examples") or []
        if not isinstance(desc, str) or not isinstance(examples, list) or not all(isinstance(e, str) and e.strip() for e in examples):
            raise InvalidJobError(f"labels[{i}]: description must be text and examples a list of non-empty texts", f"labels[{i}]")
        if len(examples) > MAX_EXAMPLES:
            raise InvalidJobError(f"labels[{i}]: at most {MAX_EXAMPLES} examples", f"labels[{i}].examples")
        out.append(Label(name, desc.strip(), [e.strip() for e in examples]))
    return out


class LikelihoodClassifier:
    """Labels by the language model's calibrated likelihood of each label after the text."""

    def __init__(self, chat, labels: list[Label], priority: int = 0, shots: list[tuple[str, str]] | None = None,
                 max_chars: int = MAX_TEXT_CHARS, calibration: Any = None):
        """calibration: each label's score to take away (e.g. its mean over a run's texts, run_calibration);
        without it, the labels' scores after a content-free text."""
        from edge_agent.services.scoring import ContinuationScorer

        self.scorer = ContinuationScorer(chat)
        self.labels = labels
        self.priority = priority
        self.max_chars = max_chars
        self.shots = shots or []
        self.continuations = [self.scorer.encode(" " + lb.name, bos=False) for lb in labels]
        self._calibration: np.ndarray | None = None
        self.calibrated_by = "content-free"
        if calibration is not None:
            cal = np.asarray(calibration, np.float64)
            if cal.shape != (len(labels),):
                raise ValueError("one calibration score per label is needed")
            self._calibration, self.calibrated_by = cal, "run"
        self._lock = threading.Lock()

    def prompt(self, text: str) -> str:
        head = "Categories: " + ", ".join(lb.name for lb in self.labels) + ".\n\n"
        shots = "".join(f"Text: {_clip(t, 400)}\nCategory: {name}\n\n" for t, name in self.shots)
        return f"{head}{shots}Text: {_clip(text, self.max_chars)}\nCategory:"

    def start(self, text: str):
        """Submit every label's scoring for text (non-blocking); .result() of the returned object -> (label, score, probs)."""
        cal = self.calibration()
        return _LikelihoodPending(self, self.start_raw(text), cal)

    def start_raw(self, text: str):
        """Submit every label's scoring for text, uncalibrated; .result() -> [(sum of log-probs, tokens)] per label."""
        return self.scorer.start(self._fit(self.scorer.encode(self.prompt(text))), self.continuations, self.priority)

    def run_calibration(self, texts: list[str], cancelled=lambda: False) -> np.ndarray | None:
        """Each label's mean score (uncalibrated) over texts: a run's own prior of the labels, to take away instead
        of the content-free one (a label the model finds likely after any text of the run no longer wins them all).
        None when cancelled first. Raises the scorer's errors."""
        pending = [self.start_raw(t) for t in texts]
        rows = []
        try:
            for p in pending:
                while True:
                    if cancelled():
                        return None
                    try:
                        rows.append([s for s, _ in p.result(1.0)])
                        break
                    except TimeoutError:
                        continue
        finally:
            for p in pending:
                if not p.done():
                    p.cancel()
        return np.asarray(rows, np.float64).mean(axis=0)

    def _fit(self, ids: list[int]) -> list[int]:
        room = self.scorer.engine.context_length - max(len(c) for c in self.continuations) - 1
        if len(ids) > room:  # keep the start (BOS, categories) and the end ("Category:")
            ids = ids[: room // 2] + ids[len(ids) - (room - room // 2):]
        return ids

    def calibration(self) -> np.ndarray:
        """Each label's log-likelihood after a content-free text (computed once)."""
        with self._lock:
            if self._calibration is None:
                ids = self.scorer.encode(self.prompt(CONTENT_FREE))
                scored = self.scorer.start(ids, self.continuations, self.priority).result()
                self._calibration = np.array([s for s, _ in scored])
            return self._calibration

    def classify(self, text: str) -> tuple[str, float, dict[str, float]]:
        return self.start(text).result()


class _LikelihoodPending:
    def __init__(self, clf: LikelihoodClassifier, pending, cal: np.ndarray):
        self.clf, self.pending, self.cal = clf, pending, cal

    def done(self) -> bool:
        return self.pending.done()

    def result(self, timeout: float | None = None) -> tuple[str, float, dict[str, float]]:
        scored = self.pending.result(timeout)
        raw = np.array([s for s, _ in scored]) - self.cal
        probs = _softmax(raw)
        best = int(np.argmax(probs))
        names = [lb.name for lb in self.clf.labels]
        return names[best], float(probs[best]), {n: round(float(p), 4) for n, p in zip(names, probs)}

    def cancel(self) -> None:
        self.pending.cancel()


# --- embedding ---------------------------------------------------------------------------
def choose_method(chat, embeddings, labels: list[Label], priority: int = 0, query: bool = False) -> tuple[str, dict[str, float]]:
    """auto: leave-one-out accuracy of both methods on the labels' examples; embedding without examples or on a tie."""
    if not all(lb.examples for lb in labels) or chat is None:
        return "embedding", {}
    pairs = [(li, ei) for li, lb in enumerate(labels) for ei in range(len(lb.examples))]
    emb_ok = lik_ok = 0
    for li, ei in pairs:
        text = labels[li].examples[ei]
        emb = EmbeddingClassifier(embeddings, labels, skip=(li, ei), query=query)
        emb_ok += emb.classify(text)[0] == labels[li].name
    lik = LikelihoodClassifier(chat, labels, priority)
    pending = [(li, lik.start(labels[li].examples[ei])) for li, ei in pairs]
    for li, pnd in pending:
        lik_ok += pnd.result()[0] == labels[li].name
    acc = {"embedding": emb_ok / len(pairs), "likelihood": lik_ok / len(pairs)}
    return ("likelihood" if acc["likelihood"] > acc["embedding"] else "embedding"), acc


# --- the job kind ----------------------------------------------------------------------
class _Pending:
    def __init__(self, future=None, inner=None, finish=None):
        self.future, self.inner, self.finish = future, inner, finish

    def done(self) -> bool:
        return self.future.done() if self.future is not None else self.inner.done()

    def result(self, timeout: float | None = None) -> dict:
        try:
            if self.future is not None:
                return self.future.result(timeout)
            return self.finish(self.inner.result(timeout))
        except UnavailableError:
            raise  # shutting down or cancelled: the item stays pending (the runner does not fail it)
        except ServiceError as e:
            raise ItemError(e.message) from None

    def cancel(self) -> None:
        if self.future is not None:
            self.future.cancel()
        else:
            self.inner.cancel()


class ClassifyKind:
    """params: labels, method (auto|likelihood|embedding), self_train (auto|true|false), source (documents|texts|csv)
    and its selection, label_set."""

    name = "classify"
    prompt_version = PROMPT_VERSION

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._cache: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self._vectors: dict[str, dict[str, np.ndarray]] = {}  # prototypes id -> item key -> unit vector (from prepare_run)
        self._run_vectors: dict[str, str] = {}  # run id -> its prototypes id

    def validate(self, params: dict, ctx: JobContext) -> dict:
        """Normalised params. Raises InvalidJobError (labels empty or repeated, unknown method/source, CSV outside ingest_roots)."""
        allowed = {"labels", "method", "source", "document_ids", "path_prefix", "types", "texts", "csv_path", "text_column",
                   "id_column", "label_set", "max_chars", "changed_only", "self_train"}
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise InvalidJobError(f"unknown classify params {unknown}: use {', '.join(sorted(allowed))}", unknown[0])
        labels = parse_labels(params.get("labels"))
        method = params.get("method", "auto")
        if method not in METHODS:
            raise InvalidJobError(f"method must be one of {', '.join(METHODS)}", "method")
        self_train = params.get("self_train", "auto")
        if not (isinstance(self_train, bool) or self_train == "auto"):  # (0 and 1 are not booleans here)
            raise InvalidJobError("self_train must be true, false or \"auto\" (on for runs of at least "
                                  f"{SELF_TRAIN_MIN_PER_LABEL} items per label, unless every label has "
                                  f"{SELF_TRAIN_UNTIL_EXAMPLES} examples)", "self_train")
        if self_train is True and method == "likelihood":
            raise InvalidJobError("self_train adapts the embedding method; use method embedding or auto, or drop self_train",
                                  "self_train")
        source = params.get("source", "documents")
        if source not in SOURCES:
            raise InvalidJobError(f"source must be one of {', '.join(SOURCES)}", "source")
        out: dict[str, Any] = {"labels": [lb.__dict__ for lb in labels], "method": method, "source": source,
                               "label_set": str(params.get("label_set") or "default")[:128],
                               "max_chars": int(params.get("max_chars") or MAX_TEXT_CHARS), "self_train": self_train}
        if source == "texts":
            texts = params.get("texts")
            if not isinstance(texts, list) or not texts or not all(isinstance(t, (str, dict)) for t in texts):
                raise InvalidJobError("texts must be a non-empty list of texts or {id, text} objects", "texts")
            out["texts"] = [t if isinstance(t, dict) else {"id": str(i), "text": t} for i, t in enumerate(texts)]
        elif source == "csv":
            from edge_agent.services.paths import PathNotAllowedError, resolve_confined

            try:
                out["csv_path"] = str(resolve_confined(str(params.get("csv_path") or ""), ctx.settings.ingest_roots))
            except (PathNotAllowedError, FileNotFoundError) as e:
                raise InvalidJobError(f"csv_path: {e}; it must be a CSV file under ingest_roots", "csv_path") from None
            out["text_column"] = params.get("text_column") or "text"
            out["id_column"] = params.get("id_column")
        else:  # the same selection as summarize: a relative path_prefix under the ingest roots, types checked
            out.update(document_filters(params, ctx))
            ids = params.get("document_ids")
            if ids is not None:
                if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                    raise InvalidJobError("document_ids must be a list of document ids (numbers)", "document_ids")
                out["document_ids"] = ids
        if method in ("likelihood", "auto") and ctx.chat is None and method == "likelihood":
            raise InvalidJobError("method likelihood needs the language model, which this process does not load", "method")
        return out

    # items
    def list_items(self, params: dict, ctx: JobContext, since: float | None) -> Iterator[Item]:
        src = params["source"]
        if src == "texts":
            for i, t in enumerate(params["texts"]):
                yield Item(key=f"text:{i}", payload={"id": str(t.get("id", i)), "text": str(t.get("text", ""))})
        elif src == "csv":
            yield from _csv_items(params)
        else:
            from edge_agent.store.summaries import SummaryStore

            docs = SummaryStore(_db(ctx)).select_documents(params.get("path_prefix"), params.get("types"),
                                                          since if params.get("changed_only") else None)
            wanted = set(params.get("document_ids") or [])
            for d in docs:
                if not wanted or d["id"] in wanted:
                    yield Item(key=f"doc:{d['id']}", payload={"document_id": d["id"], "content_hash": d["content_hash"]})

    def remote_item(self, item: Item, params: dict, ctx: JobContext) -> Item:
        """The item made self-contained (a document's text in the payload) for a worker without the database."""
        if "document_id" not in item.payload or "text" in item.payload:
            return item
        return Item(item.key, {**item.payload, "text": self._text(item, ctx)})

    def _text(self, item: Item, ctx: JobContext) -> str:
        if "document_id" not in item.payload or "text" in item.payload:
            return item.payload.get("text", "")
        from edge_agent.store.summaries import SummaryStore

        got = SummaryStore(_db(ctx)).document_text(item.payload["document_id"])
        if got is None:
            raise ItemError("the document is gone")
        doc, chunks = got
        return (doc.get("title") or "") + "\n" + "\n".join(c["text"] for c in chunks)

    @staticmethod
    def _embeddings(params: dict, ctx: JobContext) -> Any:
        """The embedding service of the run: the documents' model where prepare_run chose it, else the classify model."""
        if params.get("_embedder") == "documents" and ctx.embeddings is not None:
            return ctx.embeddings
        return ctx.label_embeddings

    def _classifier(self, params: dict, ctx: JobContext) -> tuple[str, Any]:
        emb = self._embeddings(params, ctx)
        query = emb is not ctx.label_embeddings  # the documents' model, chosen for the texts' language: e5's query prompt
        key = (repr(params["labels"]), params["method"], params["max_chars"], id(ctx.chat), id(emb),
               getattr(emb, "model_name", None),  # a switched embedding model gets new prototypes
               params.get("_prototypes_id"), tuple(params.get("_calibration") or ()))
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        labels = [Label(**lb) for lb in params["labels"]]
        method = params["method"]
        if params.get("_prototypes") is not None:  # adapted to this run by prepare_run (here or on the owner of a remote run)
            clf = EmbeddingClassifier(emb, labels, params["max_chars"], prototypes=params["_prototypes"], query=query)
            with self._lock:
                if len(self._cache) >= 64:
                    self._cache.clear()
                self._cache[key] = ("embedding", clf)
            return "embedding", clf
        if method == "auto":
            method, _ = choose_method(ctx.chat, emb, labels, ctx.priority, query=query)
        if method == "likelihood":
            clf: Any = LikelihoodClassifier(ctx.chat, labels, ctx.priority, max_chars=params["max_chars"],
                                            calibration=params.get("_calibration"))
        else:
            clf = EmbeddingClassifier(emb, labels, params["max_chars"], query=query)
        with self._lock:
            if len(self._cache) >= 64:  # one entry per label set and per self-trained run: keep it bounded
                self._cache.clear()
            self._cache[key] = (method, clf)
        return method, clf

    def prepare_run(self, run: RunInfo, items: list[Item], ctx: JobContext) -> dict | None:
        """The run's params with its embedding model chosen (_embedder, see _choose_embedder) and prototypes
        self-trained on all its items (embedding method, self_train on), or None when neither applies.

        Called by the run loop before the run's first item (again on a resumed run, with the same
        items, so the choice and the prototypes come out the same). The items' vectors are kept for start_item.
        Raises the embedding service's errors (the run then goes on with the labels' own prototypes).
        """
        chosen = self._choose_embedder(run, items, ctx)
        params = chosen or run.params
        method = params.get("method")
        if method == "auto" and ctx.chat is not None and all(lb.get("examples") for lb in params["labels"]):
            try:
                method, _ = self._classifier(params, ctx)  # auto's choice, made once here (kept for the items)
            except ServiceError:
                return chosen
        if method == "likelihood":
            return self._calibrate_run(run, items, ctx, params) or chosen
        mode = params.get("self_train", "auto")
        if mode is False or params.get("method") == "likelihood" or params.get("_prototypes") is not None:
            return chosen
        if mode == "auto" and (len(items) < SELF_TRAIN_MIN_PER_LABEL * len(params["labels"])
                               or all(len(lb.get("examples") or []) >= SELF_TRAIN_UNTIL_EXAMPLES for lb in params["labels"])):
            return chosen
        try:
            method, clf = self._classifier(params, ctx)
        except ServiceError:
            return chosen  # items fail one by one with the reason
        if method != "embedding" or clf.anchors is None:
            return chosen
        pool = items if len(items) <= SELF_TRAIN_MAX_ITEMS else items[:: -(-len(items) // SELF_TRAIN_MAX_ITEMS)]
        keys: list[str] = []
        chunks: list[np.ndarray] = []
        for i in range(0, len(pool), EMBED_CHUNK):
            if ctx.cancelled():
                return chosen
            texts = []
            for it in pool[i: i + EMBED_CHUNK]:
                try:
                    text = self._text(it, ctx)
                except ItemError:
                    continue  # fails on its own when started
                if text.strip():
                    keys.append(it.key)
                    texts.append(text)
            if texts:  # one text a call on the kind's two threads, as items are: 2-3x the items/s of one batched call here
                chunks.append(np.concatenate(list(self._threads().map(lambda t: clf.embed([t]), texts))))
        if not chunks:
            return chosen
        vectors = np.concatenate(chunks)
        adapted = clf.adapted(vectors)
        pid = hashlib.sha256(adapted.protos.tobytes()).hexdigest()[:16]
        with self._lock:
            while len(self._vectors) >= 2:  # runs side by side keep theirs; older ones go
                self._vectors.pop(next(iter(self._vectors)))
            self._vectors[pid] = dict(zip(keys, vectors))
            self._run_vectors[run.id] = pid
        log.info("run %s: prototypes self-trained on %d items", run.id, len(vectors))
        return {**params, "method": "embedding", "_prototypes": adapted.protos.tolist(), "_prototypes_id": pid}

    def _calibrate_run(self, run: RunInfo, items: list[Item], ctx: JobContext, params: dict) -> dict | None:
        """The run's params with "_calibration" (the likelihood method's per-label scores to take away: their mean
        over up to RUN_CALIBRATION_SAMPLE of its items, evenly spaced) and method likelihood, or None for a run of
        fewer than SELF_TRAIN_MIN_PER_LABEL items per label (it keeps the content-free calibration)."""
        labels = [Label(**lb) for lb in params["labels"]]
        if params.get("_calibration") is not None or ctx.chat is None or len(items) < SELF_TRAIN_MIN_PER_LABEL * len(labels):
            return None
        texts = []
        for it in items[:: -(-len(items) // RUN_CALIBRATION_SAMPLE)]:
            try:
                text = self._text(it, ctx)
            except (ItemError, ServiceError):
                continue  # fails on its own when started
            if text.strip():
                texts.append(text)
        if len(texts) < SELF_TRAIN_MIN_PER_LABEL:
            return None
        clf = LikelihoodClassifier(ctx.chat, labels, ctx.priority, max_chars=params["max_chars"])
        try:
            cal = clf.run_calibration(texts, ctx.cancelled)
        except ServiceError:
            return None  # items fail one by one with the reason
        if cal is None:
            return None
        log.info("run %s: likelihood calibrated by %d of its items", run.id, len(texts))
        return {**params, "method": "likelihood", "_calibration": [float(x) for x in cal]}

    def _choose_embedder(self, run: RunInfo, items: list[Item], ctx: JobContext) -> dict | None:
        """The run's params with "_embedder": "documents" when most of a sample of its items are in a language the
        classify model was not trained on and the documents' model was (e.g. Dutch: all-MiniLM-L6-v2 is English
        only, multilingual-e5-small is not), else None (the classify model)."""
        params = run.params
        docs, own = ctx.embeddings, ctx.classify_embeddings
        if params.get("method") == "likelihood" or "_embedder" in params or docs is None or own is None:
            return None
        sample = items[:: -(-len(items) // LANGUAGE_SAMPLE)] if items else []
        texts = []
        for it in sample:
            try:
                texts.append(self._text(it, ctx)[:MAX_TEXT_CHARS])
            except (ItemError, ServiceError):
                continue
        try:
            lang = main_language(texts)
            if lang is None or own.covers(lang) or not docs.covers(lang):
                return None
        except ServiceError:
            return None  # a model that does not load: the items say so
        log.info("run %s: its texts are mostly %r, which %s was not trained on: embedding with %s", run.id, lang,
                 own.model_name, docs.model_name)
        return {**params, "_embedder": "documents"}

    def start_item(self, item: Item, params: dict, ctx: JobContext) -> _Pending:
        with self._lock:
            vec = self._vectors.get(params.get("_prototypes_id") or "", {}).pop(item.key, None)
        try:
            method, clf = self._classifier(params, ctx)
            text = "" if vec is not None else self._text(item, ctx)
        except ServiceError as e:
            raise ItemError(e.message) from None
        if vec is None and not text.strip():
            raise ItemError("the text is empty")
        base = {k: item.payload[k] for k in ("document_id", "row", "id") if k in item.payload}
        extra = ({"self_trained": clf.self_trained, "embedding_model": self._embeddings(params, ctx).model_name}
                 if method == "embedding" else {"calibration": clf.calibrated_by})

        def finish(res: tuple[str, float, dict]) -> dict:
            label, score, probs = res
            return {**base, "label": label, "score": round(score, 4), "method": method, "label_set": params["label_set"],
                    "scores": probs, **extra}

        if method == "likelihood":
            return _Pending(inner=clf.start(text), finish=finish)
        if vec is not None:
            return _Pending(future=_done(finish(clf.classify_vectors(vec[None])[0])))
        return _Pending(future=self._threads().submit(lambda: finish(clf.classify(text))))

    def _threads(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(2, thread_name_prefix="edge-agent-classify")
            return self._pool

    def finish_run(self, run: RunInfo, ctx: JobContext) -> None:
        """Drop the vectors prepare_run kept for the run's items (those not started, e.g. after a deadline)."""
        with self._lock:
            self._vectors.pop(self._run_vectors.pop(run.id, ""), None)

    def commit_effect(self, item: Item, result: dict, run_id: str, ctx: JobContext):
        """Store a document's label with it, in the transaction that commits the item (nothing for texts and rows)."""
        if "document_id" not in result:
            return None
        from edge_agent.store.labels import LabelStore

        return LabelStore.save_effect(result["document_id"], result.get("label_set", "default"), result["label"], result["score"],
                                      result["method"], item.payload.get("content_hash"), run_id, ctx.bundle_id, PROMPT_VERSION)


def _done(value: dict):
    from concurrent.futures import Future

    fut: Future = Future()
    fut.set_result(value)
    return fut


def _db(ctx: JobContext):
    db = getattr(ctx, "db", None)
    if db is None:
        from edge_agent.jobs.batch_files import stores

        db = stores(ctx.settings).db
    return db


def _csv_items(params: dict) -> Iterator[Item]:
    """One item per CSV row (the text column; the id column or the row number as id)."""
    with open_regular(params["csv_path"]) as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:  # Excel's "CSV" (not "CSV UTF-8") is Windows-1252, as the document loader reads it too
        text = data.decode("cp1252", errors="replace")
    try:  # Excel with Dutch (German, French...) regional settings separates fields with ';'
        dialect = csv.Sniffer().sniff(text.split("\n", 1)[0], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    reader = csv.DictReader(io.StringIO(text), dialect=dialect)
    col, idcol = params["text_column"], params.get("id_column")
    if reader.fieldnames is None or col not in reader.fieldnames:
        raise InvalidJobError(f"the CSV has no column {col!r}; its columns: {', '.join(reader.fieldnames or [])}", "text_column")
    for n, row in enumerate(reader, start=1):
        yield Item(key=f"row:{n}", payload={"row": n, "id": (row.get(idcol) if idcol else None) or str(n), "text": row.get(col) or ""})
