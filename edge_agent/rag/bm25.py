"""BM25 keyword index (bm25s) kept in step with the chunk store, with a language-neutral tokenizer.

bm25s builds static indexes, so this keeps two: `main`, rebuilt now and then in a
background thread, and `pending`, a small index over chunks added since `main` was
built, rebuilt on every write. Deleted chunks are masked out of `main` at once.
Results of the two are interleaved by rank. Callers hold an RWLock around use.
"""
from __future__ import annotations

import functools
import io
import logging
import re
import sys
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import bm25s
import numpy as np

log = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every build at DEBUG

# Bump when tokenize() changes: saved snapshots of token ids from another version are not used.
TOKENIZER_VERSION = 2  # 2: marks (e.g. Devanagari vowel signs) no longer cut words
_WORD = re.compile(r"\w+", re.UNICODE)
# (?<!\w): a code starts at a word's start; without it every position inside every word was tried
_COMPOUND = re.compile(r"(?<!\w)\w+(?:[-_./:]\w+)+", re.UNICODE)
_JOINED = re.compile(r"\w[-_./:]\w", re.UNICODE)


@functools.cache
def _mark_tables() -> tuple[dict[int, None], re.Pattern[str]]:
    """From one pass over the code points: every combining mark -> None (for str.translate), and
    \\w+ continued over Mn/Mc/Me, which \\w leaves out (vowel signs of Devanagari, Tamil, ...)."""
    combining: dict[int, None] = {}
    spans: list[list[int]] = []
    for c in range(sys.maxunicode + 1):
        ch = chr(c)
        if unicodedata.combining(ch):
            combining[c] = None
        if unicodedata.category(ch) in ("Mn", "Mc", "Me"):
            if spans and spans[-1][1] == c - 1:
                spans[-1][1] = c
            else:
                spans.append([c, c])
    cls = "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in spans)
    return combining, re.compile(rf"\w+(?:[{cls}]+\w*)*")


def _strip_marks(text: str) -> str:
    return text if text.isascii() else text.translate(_mark_tables()[0])


def _words(text: str) -> list[str]:
    return _WORD.findall(text) if text.isascii() else _mark_tables()[1].findall(text)


def tokenize(text: str) -> list[str]:
    """Lowercased, accent-folded unicode words; codes like "XK-99/B" also give one joined token.

    No stemming and no stop-word list, so Dutch, German or any other language is treated alike;
    words of scripts with vowel signs (Devanagari, Tamil, ...) stay whole.
    """
    text = _strip_marks(unicodedata.normalize("NFKD", text.casefold()))
    tokens = _words(text)
    if _JOINED.search(text):  # most prose has no word joined to the next by - _ . / :
        tokens.extend(_COMPOUND.findall(text))
    return tokens


@dataclass
class _Part:
    """One bm25s index over some chunks: row i holds chunk `ids[i]`."""

    retriever: bm25s.BM25 | None
    ids: np.ndarray
    n_vocab: int  # global token ids below this are known to `retriever`
    alive: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    @classmethod
    def build(cls, ids: np.ndarray, docs: Sequence[np.ndarray], vocab: dict[str, int]) -> "_Part":
        n_vocab = len(vocab)
        if len(ids) == 0:
            return cls(None, np.zeros(0, np.int64), n_vocab)
        retriever = bm25s.BM25()
        # bm25s wants ids < vocabulary size: pass the global vocabulary as it stands now
        retriever.index((list(docs), dict(vocab)), show_progress=False)
        return cls(retriever, np.asarray(ids, dtype=np.int64), n_vocab, np.ones(len(ids), np.float32))

    def search(self, token_ids: list[int], k: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if self.retriever is None or not token_ids:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        known = [t for t in token_ids if t < self.n_vocab]
        if not known:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        mask = self.alive
        if allowed is not None:
            mask = mask * np.isin(self.ids, allowed).astype(np.float32)
        scores = self.retriever.get_scores_from_ids(known, weight_mask=mask)
        hit = np.flatnonzero(scores > 0)
        if len(hit) > k:
            hit = hit[np.argpartition(-scores[hit], k - 1)[:k]]
        hit = hit[np.argsort(-scores[hit], kind="stable")]
        return self.ids[hit], scores[hit].astype(np.float32)


class Bm25Index:
    """BM25 over chunk texts keyed by chunk id; `add`/`remove` are cheap, merging happens in the background."""

    def __init__(self, merge_after_s: float = 1.0, sync_merge_max: int = 2000):
        self.vocab: dict[str, int] = {}
        self.docs: dict[int, np.ndarray] = {}   # chunk id -> token ids (the source of truth here)
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

    def _encode(self, text: str) -> np.ndarray:
        vocab = self.vocab
        out = []
        for tok in tokenize(text):
            tid = vocab.get(tok)
            if tid is None:
                tid = vocab[tok] = len(vocab)
            out.append(tid)
        return np.asarray(out, dtype=np.int32)

    def encode_many(self, texts: Iterable[str]) -> list[np.ndarray]:
        """Token ids for texts (grows the vocabulary; callers hold the write lock)."""
        return [self._encode(t) for t in texts]

    # --- writes (write lock held) ----------------------------------------
    def rebuild(self, ids: np.ndarray, texts: Sequence[str]) -> None:
        """Replace everything with these chunks (used at start-up and by rebuild)."""
        self.vocab = {}
        self.docs = dict(zip((int(i) for i in ids), self.encode_many(texts)))
        self._generation += 1
        self._build_main_now()

    def _build_main_now(self) -> None:
        ids = np.fromiter(sorted(self.docs), dtype=np.int64, count=len(self.docs))
        self.main = _Part.build(ids, [self.docs[int(i)] for i in ids], self.vocab)
        self.pending_ids, self.pending = [], _Part(None, np.zeros(0, np.int64), 0)

    def apply(self, add_ids: Sequence[int], add_docs: Sequence[np.ndarray], remove_ids: Sequence[int]) -> bool:
        """Add and remove chunks; returns True if a background merge should be scheduled."""
        for i in remove_ids:
            self.docs.pop(int(i), None)
        if len(remove_ids) and len(self.main.ids):
            gone = np.isin(self.main.ids, np.asarray(remove_ids, dtype=np.int64))
            if gone.any():
                alive = self.main.alive.copy()
                alive[gone] = 0.0
                self.main = _Part(self.main.retriever, self.main.ids, self.main.n_vocab, alive)
        for i, d in zip(add_ids, add_docs):
            self.docs[int(i)] = d
        self._generation += 1
        if len(self.docs) <= self.sync_merge_max:
            self._build_main_now()
            return False
        removed = {int(i) for i in remove_ids}
        self.pending_ids = [i for i in self.pending_ids if i not in removed] + [int(i) for i in add_ids]
        pids = np.asarray(self.pending_ids, dtype=np.int64)
        self.pending = _Part.build(pids, [self.docs[int(i)] for i in pids], self.vocab)
        return bool(self.pending_ids) or bool(len(self.main.alive) and self.main.alive.min() == 0)

    # --- snapshot (read lock held) ------------------------------------------
    def snapshot(self) -> bytes:
        """The chunks' token ids and the vocabulary as bytes (see from_snapshot)."""
        ids = np.fromiter(sorted(self.docs), dtype=np.int64, count=len(self.docs))
        lens = np.fromiter((len(self.docs[int(i)]) for i in ids), dtype=np.int64, count=len(ids))
        tokens = np.concatenate([self.docs[int(i)] for i in ids]) if len(ids) else np.zeros(0, np.int32)
        words = sorted(self.vocab, key=self.vocab.__getitem__)  # position = token id; no token holds a newline
        buf = io.BytesIO()
        np.savez(buf, ids=ids, lens=lens, tokens=tokens.astype(np.int32), vocab=np.frombuffer("\n".join(words).encode(), np.uint8))
        return buf.getvalue()

    @classmethod
    def from_snapshot(cls, data: bytes) -> "Bm25Index":
        """An index holding a snapshot's chunks (its `main` not built yet); raises ValueError if it is inconsistent."""
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            ids, lens, tokens, blob = z["ids"], z["lens"], z["tokens"], z["vocab"]
        words = bytes(blob).decode().split("\n") if len(blob) else []
        if len(ids) != len(lens) or int(lens.sum()) != len(tokens) or len(set(words)) != len(words):
            raise ValueError("inconsistent BM25 snapshot")
        if len(tokens) and (int(tokens.min()) < 0 or int(tokens.max()) >= len(words)):
            raise ValueError("BM25 snapshot token ids outside its vocabulary")
        out = cls()
        out.vocab = {w: i for i, w in enumerate(words)}
        out.docs = dict(zip(ids.tolist(), np.split(tokens, np.cumsum(lens)[:-1]) if len(ids) else []))
        return out

    def catch_up(self, chunk_ids: np.ndarray, texts_of: Callable[[np.ndarray], Iterable[tuple[np.ndarray, list[str]]]]) -> int:
        """Hold exactly chunk_ids (as of a snapshot): drop the others, encode the missing ones from
        texts_of(missing) batches of (ids, texts), then build; returns how many were encoded."""
        have = np.fromiter(self.docs, dtype=np.int64, count=len(self.docs))
        for i in np.setdiff1d(have, chunk_ids).tolist():
            del self.docs[i]
        missing = np.setdiff1d(chunk_ids, have)
        if len(missing):
            for ids, texts in texts_of(missing):
                self.docs.update(zip(ids.tolist(), self.encode_many(texts)))
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
            t0 = time.monotonic()
            part = _Part.build(ids, docs, vocab)
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
    def search(self, query: str, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (chunk ids, scores): main and pending results interleaved by rank."""
        token_ids = [self.vocab[t] for t in dict.fromkeys(tokenize(query)) if t in self.vocab]
        ids_a, sc_a = self.main.search(token_ids, k, allowed)
        if self.pending.retriever is None:
            return ids_a, sc_a
        ids_b, sc_b = self.pending.search(token_ids, k, allowed)
        ids, scores, seen = [], [], set()
        for j in range(max(len(ids_a), len(ids_b))):
            for arr, sc in ((ids_a, sc_a), (ids_b, sc_b)):
                if j < len(arr) and int(arr[j]) not in seen:
                    seen.add(int(arr[j]))
                    ids.append(int(arr[j]))
                    scores.append(float(sc[j]))
        return np.asarray(ids[:k], dtype=np.int64), np.asarray(scores[:k], dtype=np.float32)
