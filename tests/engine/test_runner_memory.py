"""An idle engine gives its batch logits rows back to the system and decodes the same afterwards."""
from __future__ import annotations

import numpy as np


def _step(model, ids: np.ndarray) -> np.ndarray:
    b = 3
    for slot in range(b):
        model.prefill(slot, ids, 0)
    return model.decode(np.array([5, 6, 7]), np.full(b, len(ids))).copy()


def test_idle_gives_the_logits_rows_back_and_decodes_the_same(llama_engine):
    m = llama_engine.model
    assert m.logits.nbytes >= 2 * 4096  # whole pages to give back
    ids = np.array(llama_engine.encode("The quick brown fox jumps"), np.int64)
    before = _step(m, ids)
    assert m.logits.any()
    m.shrink(0)  # what the scheduler does once it is idle
    assert not m.logits[: 4096 // (4 * m.vocab_size) or 1].any()  # given back: the pages read as zeros again
    assert np.array_equal(_step(m, ids), before)
