"""Next-token choice: greedy, temperature, top-k, top-p, min-p, repetition penalty, seed."""
from __future__ import annotations

import numpy as np

from edge_agent.engine.types import SamplingParams

# Candidates examined before top-p needs a full sort of the vocabulary.
_CANDIDATES = 2048
# top_candidates' sampling stride for its threshold
_STRIDE = 64


def is_greedy(p: SamplingParams) -> bool:
    """True when the plain argmax of the raw logits is the answer (no penalty, no processor)."""
    return p.temperature == 0 and p.repetition_penalty == 1.0 and p.logits_processor is None


def apply_repetition_penalty(logits: np.ndarray, history: np.ndarray, penalty: float) -> None:
    """In place, as in CTRL / llama.cpp: divide positive logits of seen tokens, multiply negative ones."""
    if penalty == 1.0 or history.size == 0:
        return
    seen = np.unique(history)
    vals = logits[seen]
    logits[seen] = np.where(vals > 0, vals / penalty, vals * penalty)


def top_candidates(logits: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest of logits [vocab] (in no particular order; ties at the k-th value broken arbitrarily).

    A threshold comes from every 64th logit (its (2k/64 + 2)-th largest: about 3k logits reach it), one
    comparison pass keeps the logits at or above it, and the exact selection runs over those few.
    When fewer than k (or a quarter of the vocabulary or more) pass, it selects over the whole
    vocabulary. A logit left out is below every kept one, so the result is the k largest either way.
    """
    vocab = logits.shape[0]
    if vocab >= 4 * _STRIDE * k:
        probe = logits[::_STRIDE].copy()
        j = 2 * k // _STRIDE + 2
        thr = np.partition(probe, probe.shape[0] - j)[probe.shape[0] - j]
        cand = np.flatnonzero(logits >= thr)
        if k <= cand.shape[0] < vocab // 4:
            return cand[np.argpartition(logits[cand], cand.shape[0] - k)[cand.shape[0] - k :]]
    return np.argpartition(logits, vocab - k)[vocab - k :]  # no negated copy of the vocabulary


def sample(logits: np.ndarray, p: SamplingParams, rng: np.random.Generator, history: np.ndarray) -> int:
    """Pick one token id from logits [vocab] (modified in place)."""
    apply_repetition_penalty(logits, history, p.repetition_penalty)
    if p.temperature == 0:
        best = int(np.argmax(logits))
        if not np.isfinite(logits[best]):
            raise ValueError("the logits are not finite")
        return best
    vocab = logits.shape[0]
    k = p.top_k if 0 < p.top_k < vocab else min(vocab, _CANDIDATES)
    if k < vocab:
        cand = top_candidates(logits, k)
    else:
        cand = np.arange(vocab)
    scaled = logits[cand].astype(np.float64) / p.temperature
    top = scaled.max()
    probs = np.exp(scaled - top)
    if p.top_k == 0 and k < vocab:
        # Mass outside the candidates still counts towards the normaliser.
        z = np.exp(logits.astype(np.float64) / p.temperature - top).sum()
    else:
        z = probs.sum()
    order = np.argsort(-probs, kind="stable")
    cand, probs = cand[order], probs[order]
    keep = probs.shape[0]
    if p.top_p < 1.0:
        cum = np.cumsum(probs) / z
        if p.top_k == 0 and k < vocab and cum[-1] < p.top_p:
            # Very flat distribution: the candidates do not reach top_p; use the whole vocabulary.
            cand = np.argsort(-logits, kind="stable")
            probs = np.exp(logits[cand].astype(np.float64) / p.temperature - top)
            cum = np.cumsum(probs) / z
            keep = probs.shape[0]
        keep = min(keep, int(np.searchsorted(cum, p.top_p)) + 1)
    if p.min_p > 0:
        keep = min(keep, max(1, int((probs >= p.min_p * probs[0]).sum())))
    probs = probs[:keep]
    total = probs.sum()
    if not np.isfinite(total) or total <= 0:
        raise ValueError("the next-token distribution is not finite")
    return int(cand[rng.choice(keep, p=probs / total)])
