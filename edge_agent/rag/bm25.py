"""BM25 keyword index (bm25s) kept in step with the chunk store, with per-language terms.

Each chunk's language is detected when it is encoded and kept (also in the snapshot); its terms
are stemmed with that language's Snowball stemmer (see language.py). A query is analysed in the
index languages it is likely to be in.

bm25s builds static indexes, so this keeps two: `main`, rebuilt now and then in a
background thread, and `pending`, a small index over chunks added since `main` was
built, rebuilt on every write. Deleted chunks are masked out of `main` at once.
Results of the two are interleaved by rank. Callers hold an RWLock around use.

Three fields, each its own bm25s index over the same rows, scored with FIELD_WEIGHTS and summed: the
words of the chunk; character n-grams of its long words where the language writes compounds as one
word (see language.subword_terms); the terms of its document title and section heading (a chunk is
encoded from (header, text) or a plain text). A term's first character says its field.
"""
from __future__ import annotations

import io
import logging
from array import array
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import bm25s
import numpy as np

from edge_agent.rag import language

log = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every build at DEBUG

# Bump when the terms change: saved snapshots of token ids from another version are not used.
TOKENIZER_VERSION = 4  # 3: per-language Snowball stems and stop words, each chunk's language stored; 4: n-gram and header fields
FIELDS = 3  # words, character n-grams, title/heading (language.field_of)
GRAM_MAX_DF = 0.1  # a query's n-grams in more than this share of rows (and over 1000) are skipped: little weight, long postings
FIELD_WEIGHTS = (1.0, 0.3, 0.2)  # words, n-grams, title/heading: chosen on the dev sets (scripts/bench_rag.py)


def chunk_header(title: str | None, heading: str | None) -> str:
    """The header BM25 indexes with a chunk: its document's title and its section heading."""
    return "\n".join(p for p in (title, heading) if p)


def tokenize(text: str) -> list[str]:
    """Lowercased, accent-folded unicode words; codes like "XK-99/B" also give one joined token.

    No stemming and no stop-word list (see language.terms for the per-language terms BM25 uses);
    words of scripts with vowel signs (Devanagari, Tamil, ...) stay whole.
    """
    return language.terms(text, language.UNKNOWN)


@dataclass
class _Part:
    """One bm25s index over some chunks: row i holds chunk `ids[i]`."""

    retriever: bm25s.BM25 | None  # the word field (None: no rows)
    ids: np.ndarray
    n_vocab: int  # global token ids below this are known to `retriever`
    alive: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    fields: tuple = ()  # per field (language.field_of): its bm25s index, None where no row has a term of it

    @classmethod
    def build(cls, ids: np.ndarray, docs: Sequence[np.ndarray], vocab: dict[str, int], field_of: np.ndarray | None = None) -> "_Part":
        n_vocab = len(vocab)
        if len(ids) == 0:
            return cls(None, np.zeros(0, np.int64), n_vocab)
        parts: list[bm25s.BM25 | None] = []
        fa = np.zeros(n_vocab, np.int8) if field_of is None else np.asarray(field_of[:n_vocab], np.int8)
        present = set(np.unique(fa).tolist()) if n_vocab else {0}
        for f in range(FIELDS):
            if f not in present:
                parts.append(None)
                continue
            field_docs = list(docs) if len(present) == 1 else [d[fa[d] == f] for d in docs]
            retriever = bm25s.BM25()
            # bm25s wants ids < vocabulary size: pass the global vocabulary as it stands now
            retriever.index((field_docs, dict(vocab)), show_progress=False)
            parts.append(retriever)
        return cls(parts[0] or next(p for p in parts if p is not None), np.asarray(ids, dtype=np.int64), n_vocab,
                   np.ones(len(ids), np.float32), tuple(parts))

    def search(self, groups: Sequence[list[int]], k: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k rows for the query's token ids per field, field scores weighted by FIELD_WEIGHTS and summed."""
        if self.retriever is None or not any(groups):
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        mask = self.alive
        if allowed is not None:
            mask = mask * np.isin(self.ids, allowed).astype(np.float32)
        scores = None
        for f, token_ids in enumerate(groups):
            retriever = self.fields[f] if f < len(self.fields) else None
            known = [t for t in token_ids if t < self.n_vocab]
            if retriever is None or not known or not FIELD_WEIGHTS[f]:
                continue
            if f == 1:  # common n-grams ("~atie") cost the most time and say the least
                indptr, most = retriever.scores["indptr"], max(GRAM_MAX_DF * len(self.ids), 1000)
                known = [t for t in known if indptr[t + 1] - indptr[t] <= most]
                if not known:
                    continue
            s = retriever.get_scores_from_ids(known, weight_mask=mask)
            scores = s * FIELD_WEIGHTS[f] if scores is None else scores + s * FIELD_WEIGHTS[f]
        if scores is None:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        hit = np.flatnonzero(scores > 0)
        if len(hit) > k:
            hit = hit[np.argpartition(-scores[hit], k - 1)[:k]]
        hit = hit[np.argsort(-scores[hit], kind="stable")]
        return self.ids[hit], scores[hit].astype(np.float32)


class Bm25Index:
    """BM25 over chunk texts keyed by chunk id; `add`/`remove` are cheap, merging happens in the background."""

    def __init__(self, merge_after_s: float = 1.0, sync_merge_max: int = 2000):
        self.vocab: dict[str, int] = {}
        self.field_of = array("b")  # token id -> its field (language.field_of)
        self.docs: dict[int, np.ndarray] = {}   # chunk id -> token ids (the source of truth here)
        self.langs: dict[int, str] = {}         # chunk id -> its language (ISO 639-1, "und")
        self.lang_counts: Counter[str] = Counter()
        self.main = _Part(None, np.zeros(0, np.int64), 0)
        self.pending_ids: list[int] = []
        self.pending = _Part(None, np.zeros(0, np.int64), 0)
        self.merge_after_s = merge_after_s
        self.sync_merge_max = sync_merge_max
        self._merge_thread: threading.Thread | None = None
        self._merge_requested = threading.Event()
        self._generation = 0

    def __len__(self) -> int:
        return len(self.docs)

    def _encode(self, text: "str | tuple[str, str]") -> tuple[np.ndarray, str]:
        header, body = text if isinstance(text, tuple) else ("", text)
        vocab = self.vocab
        lang = language.detect(body)
        out = []
        for tok in language.terms(body, lang) + language.subword_terms(body, lang) + language.header_terms(header, lang):
            tid = vocab.get(tok)
            if tid is None:
                tid = vocab[tok] = len(vocab)
                self.field_of.append(language.field_of(tok))
            out.append(tid)
        return np.asarray(out, dtype=np.int32), lang

    def encode_many(self, texts: Iterable["str | tuple[str, str]"]) -> list[tuple[np.ndarray, str]]:
        """(token ids, language) of each chunk text or (title and heading, text) (grows the vocabulary;
        callers hold the write lock)."""
        return [self._encode(t) for t in texts]

    def _put(self, ids: Iterable[int], encoded: Iterable[tuple[np.ndarray, str]]) -> None:
        for i, (d, lang) in zip(ids, encoded):
            i = int(i)
            old = self.langs.get(i)
            if old is not None:
                self.lang_counts[old] -= 1
            self.docs[i], self.langs[i] = d, lang
            self.lang_counts[lang] += 1

    def _drop(self, i: int) -> None:
        if self.docs.pop(i, None) is not None:
            lang = self.langs.pop(i, language.UNKNOWN)
            self.lang_counts[lang] -= 1
            if self.lang_counts[lang] <= 0:
                del self.lang_counts[lang]

    def _fields(self) -> np.ndarray:
        return np.frombuffer(self.field_of, dtype=np.int8).copy() if len(self.field_of) else np.zeros(0, np.int8)

    def fields_used(self) -> dict[str, int]:
        """Vocabulary size per field (for index stats)."""
        counts = np.bincount(self._fields(), minlength=FIELDS) if len(self.field_of) else np.zeros(FIELDS, np.int64)
        return {"words": int(counts[0]), "subwords": int(counts[1]), "headers": int(counts[2])}

    def word_set(self, chunk_id: int) -> frozenset[int]:
        """The distinct word terms (no n-grams, no header terms) of a chunk; empty for an unknown one."""
        d = self.docs.get(int(chunk_id))
        if d is None or not len(d):
            return frozenset()
        fa = np.frombuffer(self.field_of, dtype=np.int8)
        return frozenset(d[fa[d] == 0].tolist())

    def languages(self) -> dict[str, int]:
        """Chunks per language, most first."""
        return dict(self.lang_counts.most_common())

    def query_languages(self, query: str) -> list[str]:
        """The index languages the query is likely in, most likely first (see language.likely)."""
        return language.likely(query, self.lang_counts)

    # --- writes (write lock held) ----------------------------------------
    def rebuild(self, ids: np.ndarray, texts: Sequence[str]) -> None:
        """Replace everything with these chunks (used at start-up and by rebuild)."""
        self.vocab, self.field_of, self.docs, self.langs, self.lang_counts = {}, array("b"), {}, {}, Counter()
        self._put(ids, self.encode_many(texts))
        self._generation += 1
        self._build_main_now()

    def _build_main_now(self) -> None:
        ids = np.fromiter(sorted(self.docs), dtype=np.int64, count=len(self.docs))
        self.main = _Part.build(ids, [self.docs[int(i)] for i in ids], self.vocab, self._fields())
        self.pending_ids, self.pending = [], _Part(None, np.zeros(0, np.int64), 0)

    def apply(self, add_ids: Sequence[int], add_docs: Sequence[tuple[np.ndarray, str]], remove_ids: Sequence[int]) -> bool:
        """Add (encode_many's output) and remove chunks; returns True if a background merge should be scheduled."""
        for i in remove_ids:
            self._drop(int(i))
        if len(remove_ids) and len(self.main.ids):
            gone = np.isin(self.main.ids, np.asarray(remove_ids, dtype=np.int64))
            if gone.any():
                alive = self.main.alive.copy()
                alive[gone] = 0.0
                self.main = _Part(self.main.retriever, self.main.ids, self.main.n_vocab, alive, self.main.fields)
        self._put(add_ids, add_docs)
        self._generation += 1
        if len(self.docs) <= self.sync_merge_max:
            self._build_main_now()
            return False
        removed = {int(i) for i in remove_ids}
        self.pending_ids = [i for i in self.pending_ids if i not in removed] + [int(i) for i in add_ids]
        pids = np.asarray(self.pending_ids, dtype=np.int64)
        self.pending = _Part.build(pids, [self.docs[int(i)] for i in pids], self.vocab, self._fields())
        return bool(self.pending_ids) or bool(len(self.main.alive) and self.main.alive.min() == 0)

    # --- snapshot (read lock held) ------------------------------------------
    def snapshot(self) -> bytes:
        """The chunks' token ids and the vocabulary as bytes (see from_snapshot)."""
        ids = np.fromiter(sorted(self.docs), dtype=np.int64, count=len(self.docs))
        lens = np.fromiter((len(self.docs[int(i)]) for i in ids), dtype=np.int64, count=len(ids))
        tokens = np.concatenate([self.docs[int(i)] for i in ids]) if len(ids) else np.zeros(0, np.int32)
        words = sorted(self.vocab, key=self.vocab.__getitem__)  # position = token id; no token holds a newline
        buf = io.BytesIO()
        langs = "\n".join(self.langs.get(int(i), language.UNKNOWN) for i in ids)
        np.savez(buf, ids=ids, lens=lens, tokens=tokens.astype(np.int32), vocab=np.frombuffer("\n".join(words).encode(), np.uint8),
                 langs=np.frombuffer(langs.encode(), np.uint8))
        return buf.getvalue()

    @classmethod
    def from_snapshot(cls, data: bytes) -> "Bm25Index":
        """An index holding a snapshot's chunks (its `main` not built yet); raises ValueError if it is inconsistent."""
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            if "langs" not in z.files:
                raise ValueError("BM25 snapshot without chunk languages")
            ids, lens, tokens, blob, lblob = z["ids"], z["lens"], z["tokens"], z["vocab"], z["langs"]
        words = bytes(blob).decode().split("\n") if len(blob) else []
        langs = bytes(lblob).decode().split("\n") if len(ids) else []
        if len(langs) != len(ids):
            raise ValueError("BM25 snapshot languages do not match its chunks")
        if len(ids) != len(lens) or int(lens.sum()) != len(tokens) or len(set(words)) != len(words):
            raise ValueError("inconsistent BM25 snapshot")
        if len(tokens) and (int(tokens.min()) < 0 or int(tokens.max()) >= len(words)):
            raise ValueError("BM25 snapshot token ids outside its vocabulary")
        out = cls()
        out.vocab = {w: i for i, w in enumerate(words)}
        out.field_of = array("b", (language.field_of(w) for w in words))
        out._put(ids.tolist(), zip(np.split(tokens, np.cumsum(lens)[:-1]) if len(ids) else [], langs))
        return out

    def catch_up(self, chunk_ids: np.ndarray, texts_of: Callable[[np.ndarray], Iterable[tuple[np.ndarray, list[str]]]]) -> int:
        """Hold exactly chunk_ids (as of a snapshot): drop the others, encode the missing ones from
        texts_of(missing) batches of (ids, texts), then build; returns how many were encoded."""
        have = np.fromiter(self.docs, dtype=np.int64, count=len(self.docs))
        for i in np.setdiff1d(have, chunk_ids).tolist():
            self._drop(i)
        missing = np.setdiff1d(chunk_ids, have)
        if len(missing):
            for ids, texts in texts_of(missing):
                self._put(ids.tolist(), self.encode_many(texts))
        self._generation += 1
        self._build_main_now()
        return len(missing)

    # --- background merge -------------------------------------------------
    def schedule_merge(self, lock) -> None:
        """Rebuild `main` over all chunks in a background thread, a little after the last write."""
        self._merge_requested.set()
        if self._merge_thread is None or not self._merge_thread.is_alive():
            self._merge_thread = threading.Thread(target=self._merge_loop, args=(lock,), name="bm25-merge", daemon=True)
            self._merge_thread.start()

    def _merge_loop(self, lock) -> None:
        while self._merge_requested.is_set():
            time.sleep(self.merge_after_s)
            self._merge_requested.clear()
            with lock.read():
                generation = self._generation
                ids = np.fromiter(sorted(self.docs), dtype=np.int64, count=len(self.docs))
                docs = [self.docs[int(i)] for i in ids]
                vocab = dict(self.vocab)
                fields = self._fields()
            t0 = time.monotonic()
            part = _Part.build(ids, docs, vocab, fields)
            with lock.write():
                if generation == self._generation:
                    self.main, self.pending_ids = part, []
                    self.pending = _Part(None, np.zeros(0, np.int64), 0)
                else:
                    self._merge_requested.set()  # writes came in meanwhile: go again
            log.debug("BM25 merge of %d chunks took %.1f s", len(ids), time.monotonic() - t0)

    def wait_merged(self, timeout: float = 120.0) -> None:
        """Block until no merge is pending or running (tests, CLI)."""
        end = time.monotonic() + timeout
        while self._merge_thread is not None and self._merge_thread.is_alive() and time.monotonic() < end:
            self._merge_thread.join(0.1)

    # --- reads (read lock held) -------------------------------------------
    def search(self, query: str, k: int, allowed: np.ndarray | None = None, langs: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (chunk ids, scores) for a query analysed in langs (default: query_languages(query));
        main and pending results interleaved by rank."""
        if langs is None:
            langs = self.query_languages(query)
        groups: list[list[int]] = [[] for _ in range(FIELDS)]
        for t in language.query_field_terms(query, langs):
            tid = self.vocab.get(t)
            if tid is not None:
                groups[self.field_of[tid]].append(tid)
        ids_a, sc_a = self.main.search(groups, k, allowed)
        if self.pending.retriever is None:
            return ids_a, sc_a
        ids_b, sc_b = self.pending.search(groups, k, allowed)
        ids, scores, seen = [], [], set()
        for j in range(max(len(ids_a), len(ids_b))):
            for arr, sc in ((ids_a, sc_a), (ids_b, sc_b)):
                if j < len(arr) and int(arr[j]) not in seen:
                    seen.add(int(arr[j]))
                    ids.append(int(arr[j]))
                    scores.append(float(sc[j]))
        return np.asarray(ids[:k], dtype=np.int64), np.asarray(scores[:k], dtype=np.float32)
