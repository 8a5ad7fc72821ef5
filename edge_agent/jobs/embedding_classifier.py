"""The classify kind's embedding method: cosine similarity of a text's embedding to each label's prototype, and
the self-training that adapts the prototypes to a run's items (see jobs.classify for what was measured)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_TEXT_CHARS = 2000
EMBED_TEMPERATURE = 0.05  # softmax over cosines / this
SELF_TRAIN_ROUNDS = 20  # EM rounds (it settles in fewer; stops early when the prototypes stop moving)
SELF_TRAIN_MIN_PER_LABEL = 3  # self_train "auto": on for runs of at least this many items per label (jobs.classify)
SELF_TRAIN_FIRST_WEIGHT = 8.0  # the centred first assignment's weight (in items) in each label's anchor, see self_train_prototypes


@dataclass
class Label:
    name: str
    description: str = ""
    examples: list[str] = field(default_factory=list)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


# --- likelihood ------------------------------------------------------------------------


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _soft_rows(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def centred_anchors(vectors: np.ndarray, anchors: np.ndarray, weight: float = SELF_TRAIN_FIRST_WEIGHT,
                    temperature: float = EMBED_TEMPERATURE) -> np.ndarray:
    """anchors plus, for each label, `weight` items' worth of its first cluster among the (unit) vectors.

    The first assignment is the softmax of each vector's cosine to a label minus that label's mean
    cosine over all the vectors: a label text that is near every item (a broad name) no longer
    claims them all, and each label starts from the items that are nearer to it than usual. Kept in
    the anchor for every round, it holds small labels against big ones that would take their
    prototype. Raises ValueError on shapes.
    """
    vectors = np.asarray(vectors, np.float32)
    anchors = np.asarray(anchors, np.float32)
    if vectors.ndim != 2 or anchors.ndim != 2 or vectors.shape[1] != anchors.shape[1]:
        raise ValueError("vectors and anchors must be 2-d arrays of the same width")
    sims = vectors @ _unit(anchors).T
    first = _soft_rows((sims - sims.mean(axis=0, keepdims=True)) / temperature)
    return anchors + weight * _unit(first.T @ vectors)


def self_train_prototypes(vectors: np.ndarray, anchors: np.ndarray, rounds: int = SELF_TRAIN_ROUNDS,
                          temperature: float = EMBED_TEMPERATURE, first_weight: float = SELF_TRAIN_FIRST_WEIGHT) -> np.ndarray:
    """Prototypes adapted to a batch's own (unit) vectors: soft k-means seeded by the labels' anchors.

    anchors: per label, the sum of its own texts' unit embeddings (name or "name: description", and
    its examples). With at least SELF_TRAIN_MIN_PER_LABEL vectors per label, each anchor first gains
    the label's centred first cluster (centred_anchors, first_weight items' worth; 0 turns it off).
    E-step: each vector's probabilities over the labels, the classifier's own softmax (cosine /
    temperature); M-step: each prototype is the probability-weighted sum of the vectors plus its
    anchors (each of the label's texts counts as one item in every round, so a label keeps what the
    user said about it). Returns (labels, dim) unit prototypes. Raises ValueError on shapes.
    """
    vectors = np.asarray(vectors, np.float32)
    anchors = np.asarray(anchors, np.float32)
    if vectors.ndim != 2 or anchors.ndim != 2 or vectors.shape[1] != anchors.shape[1]:
        raise ValueError("vectors and anchors must be 2-d arrays of the same width")
    if first_weight and len(vectors) >= SELF_TRAIN_MIN_PER_LABEL * len(anchors):
        anchors = centred_anchors(vectors, anchors, first_weight, temperature)
    protos = _unit(anchors)
    if not len(vectors):
        return protos
    for _ in range(rounds):
        logits = vectors @ protos.T / temperature
        logits -= logits.max(axis=1, keepdims=True)
        resp = np.exp(logits)
        resp /= resp.sum(axis=1, keepdims=True)
        new = _unit(resp.T @ vectors + anchors)
        moved = float(np.abs(new - protos).max())
        protos = new
        if moved < 1e-5:
            break
    return protos


class EmbeddingClassifier:
    """Labels by cosine similarity to each label's prototype: the mean embedding of "name: description"
    and the label's examples (skip: one (label, example) left out, for leave-one-out measurement), or
    given prototypes (adapted to a run by self-training, see adapted()). query: embed with the model's query
    prompt (e5's "query: ", its advice for classification) instead of its passage prompt."""

    def __init__(self, embeddings, labels: list[Label], max_chars: int = MAX_TEXT_CHARS, skip: tuple[int, int] | None = None,
                 prototypes: Any = None, query: bool = False):
        self.embeddings = embeddings
        self.query = query
        self.labels = labels
        self.max_chars = max_chars
        self.self_trained = prototypes is not None
        self.anchors: np.ndarray | None = None
        if prototypes is not None:
            protos = np.asarray(prototypes, np.float32)
            if protos.shape[0] != len(labels) or protos.ndim != 2:
                raise ValueError("one prototype per label is needed")
            self.protos = _unit(protos)
            return
        anchors = []
        for li, lb in enumerate(labels):
            texts = [f"{lb.name}: {lb.description}" if lb.description else lb.name]
            texts += [e for ei, e in enumerate(lb.examples) if skip != (li, ei)]
            anchors.append(self.embed(texts).sum(axis=0))
        self.anchors = np.stack(anchors)
        self.protos = _unit(self.anchors)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit embeddings of texts (clipped to max_chars). Raises the embedding service's errors."""
        clipped = [_clip(t, self.max_chars) for t in texts]
        vecs, _ = self.embeddings.embed(clipped, query=True) if self.query else self.embeddings.embed(clipped)
        return _unit(np.asarray(vecs, np.float32))

    _embed = embed

    def adapted(self, vectors: np.ndarray, first_weight: float = SELF_TRAIN_FIRST_WEIGHT) -> "EmbeddingClassifier":
        """A classifier whose prototypes are self-trained on these unit vectors (a run's items). Raises ValueError."""
        if self.anchors is None:
            raise ValueError("only a classifier built from its labels' texts can be adapted")
        return EmbeddingClassifier(self.embeddings, self.labels, self.max_chars,
                                   prototypes=self_train_prototypes(vectors, self.anchors, first_weight=first_weight), query=self.query)

    def classify_many(self, texts: list[str]) -> list[tuple[str, float, dict[str, float]]]:
        return self.classify_vectors(self.embed(texts))

    def classify_vectors(self, vectors: np.ndarray) -> list[tuple[str, float, dict[str, float]]]:
        """(label, score, probabilities) for each unit vector."""
        logits = np.asarray(vectors, np.float32) @ self.protos.T / EMBED_TEMPERATURE
        out = []
        names = [lb.name for lb in self.labels]
        for row in logits:
            probs = _softmax(row)
            best = int(np.argmax(row))
            out.append((names[best], float(probs[best]), {n: round(float(p), 4) for n, p in zip(names, probs)}))
        return out

    def classify(self, text: str) -> tuple[str, float, dict[str, float]]:
        return self.classify_many([text])[0]


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n]
