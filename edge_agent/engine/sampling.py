"""Next-token choice: greedy, temperature, top-k, top-p, min-p, repetition penalty, seed."""
from __future__ import annotations

import numpy as np

from edge_agent.engine.types import SamplingParams, TokenLogprob

# Candidates ranked first when no top_k limits them (more only when top_p / min_p / the draw need them).
_CANDIDATES = 2048
# top_candidates' sampling stride for its threshold
_STRIDE = 64


def is_greedy(p: SamplingParams) -> bool:
    """True when the plain argmax of the raw logits is the answer (no penalty, no processor)."""
    return p.temperature == 0 and p.repetition_penalty == 1.0 and p.logits_processor is None


def suppress(logits: np.ndarray, ids) -> np.ndarray:
    """A copy of logits [vocab] in which the token ids `ids` can never be chosen (-inf); ids past the vocabulary are ignored."""
    out = logits.copy()
    idx = np.fromiter((i for i in ids if 0 <= i < out.shape[0]), np.int64)
    out[idx] = -np.inf
    return out


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


def token_logprob(logits: np.ndarray, token: int, top: int) -> TokenLogprob:
    """token's log-probability under log_softmax(logits [vocab]) and the `top` most likely tokens' (best first, ties by id).

    The raw logits of the step: what vLLM returns by default (no temperature, penalty or processor applied).
    Cost: one max, exp and sum over the vocabulary (float32 exp, float64 sum: ~0.2 ms for 262,144 logits).
    Raises ValueError when the logits are not finite.
    """
    m = float(logits.max())
    lse = m + float(np.log(np.exp(logits - np.float32(m)).sum(dtype=np.float64)))
    if not np.isfinite(lse):
        raise ValueError("the logits are not finite")
    best: list[tuple[int, float]] = []
    if top > 0:
        k = min(top, logits.shape[0])
        ids = top_candidates(logits, k)
        ids = ids[np.lexsort((ids, -logits[ids]))]
        best = [(int(i), float(logits[i]) - lse) for i in ids]
    return TokenLogprob(int(token), float(logits[token]) - lse, best)


def _ranked(logits: np.ndarray, cand: np.ndarray, temperature: float, top: float) -> tuple[np.ndarray, np.ndarray]:
    """cand in falling order of their logits, with their unnormalised probabilities exp(l/T - top)."""
    probs = np.exp(logits[cand].astype(np.float64) / temperature - top)
    order = np.argsort(-probs, kind="stable")
    return cand[order], probs[order]


def sample(logits: np.ndarray, p: SamplingParams, rng: np.random.Generator, history: np.ndarray) -> int:
    """Pick one token id from logits [vocab] (modified in place).

    Without top_k the draw is over the whole vocabulary: the 2048 most likely tokens are ranked first,
    and the rest is only looked at when top_p, min_p or the random draw reaches past them.
    Raises ValueError when the logits (after a processor) leave no finite distribution.
    """
    apply_repetition_penalty(logits, history, p.repetition_penalty)
    if p.temperature == 0:
        best = int(np.argmax(logits))
        if not np.isfinite(logits[best]):
            raise ValueError("the logits are not finite")
        return best
    vocab = logits.shape[0]
    capped = not 0 < p.top_k < vocab  # no top_k: candidates are a first cut, not a limit
    k = min(vocab, _CANDIDATES) if capped else p.top_k
    cand = top_candidates(logits, k) if k < vocab else np.arange(vocab)
    top = float(logits[cand].max()) / p.temperature
    cand, probs = _ranked(logits, cand, p.temperature, top)
    if capped and k < vocab:
        z = float(np.exp(logits.astype(np.float64) / p.temperature - top).sum())
        # Grow the candidates while the cut could drop tokens top_p or min_p would keep (flat distributions).
        while k < vocab and ((p.top_p < 1.0 and probs.sum() < p.top_p * z) or (p.min_p > 0 and probs[-1] >= p.min_p * probs[0])):
            k = min(vocab, k * 8)
            cand, probs = _ranked(logits, top_candidates(logits, k) if k < vocab else np.arange(vocab),
                                  p.temperature, top)
    else:
        z = float(probs.sum())
    keep = probs.shape[0]
    if p.top_p < 1.0:
        keep = min(keep, int(np.searchsorted(np.cumsum(probs) / z, p.top_p)) + 1)
    if p.min_p > 0:
        keep = min(keep, max(1, int((probs >= p.min_p * probs[0]).sum())))
    if capped and keep == probs.shape[0] < vocab:
        return _draw_with_tail(logits, cand, probs, z, p.temperature, top, rng)
    probs = probs[:keep]
    total = probs.sum()
    if not np.isfinite(total) or total <= 0:
        raise ValueError("the next-token distribution is not finite")
    return int(cand[rng.choice(keep, p=probs / total)])


def _draw_with_tail(logits: np.ndarray, cand: np.ndarray, probs: np.ndarray, z: float, temperature: float,
                    top: float, rng: np.random.Generator) -> int:
    """One exact draw from the whole distribution: the candidates' cumulative mass first, the rest of the
    vocabulary (computed only then) when the draw falls past them. Raises ValueError when it is not finite."""
    if not np.isfinite(z) or z <= 0:
        raise ValueError("the next-token distribution is not finite")
    u = rng.random() * z
    cum = np.cumsum(probs)
    if u < cum[-1]:
        return int(cand[min(int(np.searchsorted(cum, u, side="right")), cand.shape[0] - 1)])
    rest = np.exp(logits.astype(np.float64) / temperature - top)
    rest[cand] = 0.0
    tail = np.cumsum(rest)
    if not tail[-1] > 0:
        return int(cand[-1])
    i = int(np.searchsorted(tail, u - cum[-1], side="right"))
    return i if i < tail.shape[0] else int(np.flatnonzero(rest)[-1])  # rounding past the end
