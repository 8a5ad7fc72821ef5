"""Coarse head, exact top: the logits that can matter, recomputed from the int8 rows of a tied embedding.

A bundle whose output projection is int4 blocks (onnxruntime's MatMulNBits) tied to the embedding
reads 107 MB per decoded token instead of the int8 head's 168 MB, but its logits carry the int4
error (Gemma 3 270M: perplexity 1.072x fp32 against 1.024x for the int8 head). Such a graph also
returns the final normed hidden state of each row ("hidden"); a bundle with both heads ("dual") takes
the int4 one only for steps of few rows (runner.INT4_HEAD_MAX_ROWS), where reading fewer bytes wins,
and its int8 head for the rest; both are re-scored, so a sequence's greedy tokens do not depend on
how many rows its steps share (the int8 head's own logits, from uint8 activations, differ from the
exact ones at near-ties: 2 of 16 sequences changed a token within 41 when batched, before). The cost
at 16 rows was within noise (scripts/bench_rescore.py --margins=-inf, 1.004x). For every row, the logits within
`margin` of the row's largest int4 logit are replaced by the exact dot products of that hidden
state with the int8 embedding rows (one scale each; the very rows an int8 head would hold) in
float32. Every token that greedy decoding, top-k / top-p / min-p sampling or a perplexity
measurement weighs noticeably is then scored from the int8 rows; the rest keep their int4
logits, which are too far below the top to be drawn with more than a tiny probability.

The margin is above twice the int4 head's largest error (measured on the default model, see
MARGIN): then the token with the largest exact logit is always among the candidates, so greedy
output is the int8 rows' argmax over fp32 activations. The candidates depend on the row alone
(no batch-wide threshold), so a row gives the same logits alone and in a batch. Cost per row:
one max and one comparison pass over the vocabulary (~0.1 ms for 262,144 logits) and the candidate
rows: HOT_ROWS of them are kept in this process (common tokens come back step after step), the
others are read with pread (the table stays in the page cache, not in this process's memory).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from edge_agent.engine.runner import Embedding

# Logits within MARGIN of a row's largest int4 logit are recomputed. Gemma 3 270M, the bench's 2048 tokens
# (/tmp probe: one forward pass, each margin applied to the same int4 logits, 512 candidates at most):
# perplexity over fp32 with the int4 head alone 1.0725x, the exact int8 rows 1.0241x; re-scored with
# margin 4: 1.0342x (12 candidates a row on average), 6: 1.0295x (45), 7: 1.0280x (78), 8: 1.0279x (125).
# Its largest int4 logit error was 4.1 (median of rows 2.0): greedy picks equalled the exact rows' at
# every position from margin 3 on, where the int4 head alone differed at 243 of 2047.
MARGIN = 7.0
# At most this many candidates a row (the highest int4 logits among them): a flat row costs a bounded time.
MAX_CANDIDATES = 512
# Rows kept in this process (int8, 2.6 MB for Gemma 3): the candidates are mostly the same common tokens
# step after step, and a kept row costs a gather instead of a pread (~1 us each).
HOT_ROWS = 4096


class HeadRescorer:
    """Replaces the candidate logits of an int4 head tied to an int8 embedding by exact ones (in place)."""

    def __init__(self, embedding: "Embedding", divisor: float, softcap: float | None = None,
                 margin: float = MARGIN, max_candidates: int = MAX_CANDIDATES):
        if embedding.scale is None or embedding.dtype != np.int8:
            raise ValueError("re-scoring needs an int8 embedding with one scale per row")
        self.embedding = embedding
        self.row_scale = (embedding.scale / np.float32(divisor)).astype(np.float32)
        self.softcap = softcap
        self.margin = float(margin)
        self.max_candidates = int(max_candidates)
        self.candidates = 0  # candidates re-scored so far (for benchmarks)
        self.rows = 0
        self.reads = 0  # rows read from the table (not kept)
        self._mask = np.empty(embedding.rows, np.bool_)
        self._slot = np.full(embedding.rows, -1, np.int32)  # token id -> row of _hot, or -1
        self._hot = np.empty((min(HOT_ROWS, embedding.rows), embedding.dim), np.int8)
        self._owner = np.full(self._hot.shape[0], -1, np.int64)  # row of _hot -> token id
        self._next = 0  # the kept row replaced next (round robin)

    @classmethod
    def from_metadata(cls, meta: dict[str, str], embedding: "Embedding") -> "HeadRescorer | None":
        """The re-scorer a graph asks for in its metadata (edge_agent.rescore_divisor), or None."""
        divisor = meta.get("edge_agent.rescore_divisor")
        if divisor is None:
            return None
        softcap = meta.get("edge_agent.final_softcap")
        return cls(embedding, float(divisor), float(softcap) if softcap else None,
                   float(meta.get("edge_agent.rescore_margin", MARGIN)), int(meta.get("edge_agent.rescore_max_candidates", MAX_CANDIDATES)))

    def candidates_of(self, row: np.ndarray) -> np.ndarray:
        """Indices whose logit is within the margin of the row's largest (the highest max_candidates of them)."""
        np.greater_equal(row, row.max() - self.margin, out=self._mask)  # no fresh 256 kB mask a row
        cand = np.flatnonzero(self._mask)
        if cand.shape[0] > self.max_candidates:
            cand = cand[np.argpartition(row[cand], cand.shape[0] - self.max_candidates)[cand.shape[0] - self.max_candidates:]]
        return cand

    def int8_rows(self, ids: np.ndarray) -> np.ndarray:
        """The int8 rows of distinct ids [n] ([n, dim]): kept ones gathered, the others read and kept."""
        slots = self._slot[ids]
        miss = ids[slots < 0]
        if miss.shape[0]:
            n = self._hot.shape[0]
            if ids.shape[0] > n:
                return self.embedding.read(ids)
            in_use = np.zeros(n, np.bool_)
            in_use[slots[slots >= 0]] = True  # never replace a row this call gathers
            order = (self._next + np.arange(n)) % n
            put = order[~in_use[order]][: miss.shape[0]]
            self._next = int(put[-1] + 1) % n
            old = self._owner[put]
            self._slot[old[old >= 0]] = -1
            self._hot[put] = self.embedding.read(miss)
            self._owner[put] = miss
            self._slot[miss] = put
            self.reads += int(miss.shape[0])
            slots = self._slot[ids]
        return self._hot[slots]

    def exact(self, ids: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """Logits of ids [n] for one hidden state [dim] from the int8 rows, in float32."""
        w = self.int8_rows(ids).astype(np.float32)
        y = (w @ hidden.astype(np.float32)) * self.row_scale[ids]
        if self.softcap:
            y = np.tanh(y / self.softcap) * self.softcap
        return y.astype(np.float32)

    def apply(self, logits: np.ndarray, hidden: np.ndarray) -> None:
        """Re-score each row of logits [B, vocab] with its hidden state [B, dim], in place."""
        for b in range(logits.shape[0]):
            row = logits[b]
            cand = self.candidates_of(row)
            row[cand] = self.exact(cand, hidden[b])
            self.candidates += int(cand.shape[0])
        self.rows += logits.shape[0]
