"""Switching the embedding model: the old vectors keep serving while every chunk is re-embedded in the
background (resumable), then the new model and its vectors take over. Real SQLite, FAISS, two real models."""
from __future__ import annotations

import time

import pytest
from tiny_models import make_sentence_transformer

TEXTS = {
    "Boiler": "The boiler shows error E-442 when the water pressure drops below one bar.",
    "Permit": "De vergunning voor de dakkapel komt van de gemeente en duurt acht weken.",
    "Canteen": "The canteen serves tomato soup on Mondays and pasta on Thursdays.",
    "Bikes": "The bicycle shed behind building C closes at ten in the evening.",
}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return make_sentence_transformer(tmp_path_factory.mktemp("tiny-reembed"))


def _wait(pred, timeout=120.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_switch_serves_old_vectors_until_the_new_ones_are_complete(make_service, make_settings, tiny_model, monkeypatch):
    from edge_agent.services.documents import DocumentService
    from edge_agent.services.reembed import META_SOURCE, BackgroundReembed

    svc = make_service()
    for title, text in TEXTS.items():
        svc.add_text(title, text)
    assert svc.store.get_meta("embedding_model") == "all-MiniLM-L6-v2/384"
    svc.close()
    settings = make_settings(embedding_model=str(tiny_model), embedding_quantize="off")

    # the new model is configured: the service opens at once with the old one serving (the switch held back here)
    with monkeypatch.context() as m:
        m.setattr(BackgroundReembed, "start", lambda self: self)
        svc = DocumentService.from_settings(settings)
    try:
        assert svc.embedder.model_id == "all-MiniLM-L6-v2/384" and svc.index.dim == 384
        assert [h.title for h in svc.retrieve("boiler error E-442", k=1)] == ["Boiler"]  # old vectors serve
        status = svc.stats()["reembed"]
        assert status == {"to": "tiny-multilingual/32", "state": "pending", "done": 0, "total": 4}
        # a chunk added during the switch: embedded with the old model now, picked up by the switch
        svc.add_text("Keys", "The key to the archive is kept by the porter at the main gate.")
        task = svc.reembed
        ids, texts = task.store.pending(task.model, 2)
        task.store.put(task.model, ids.tolist(), task.embedder.embed(texts))  # one batch done before a "restart"
        assert task.store.progress(task.model) == (2, 5)
    finally:
        svc.close()

    svc = DocumentService.from_settings(settings)  # resumes where it stopped
    try:
        assert svc.reembed.wait(120), svc.reembed.status()
        assert svc.embedder.model_id == "tiny-multilingual/32" and svc.index.dim == 32 and svc.index.dense.ntotal == 5
        assert svc.store.get_meta("embedding_model") == "tiny-multilingual/32"
        assert svc.store.get_meta(META_SOURCE) == str(tiny_model.resolve())
        assert "Keys" in {h.title for h in svc.retrieve("porter at the main gate", k=5)}
        assert svc.stats()["reembed"] == {"to": "tiny-multilingual/32", "state": "complete"}
        svc.add_text("Late", "A document added after the switch uses the new model.")
        assert svc.index.dense.ntotal == 6
    finally:
        svc.close()
    # the next start: nothing to switch, the new model serves and the check finds all in order
    svc = DocumentService.from_settings(settings)
    try:
        assert getattr(svc, "reembed", None) is None and svc.embedder.model_id == "tiny-multilingual/32"
        assert svc.last_check is not None and svc.last_check.ok, svc.last_check
    finally:
        svc.close()
