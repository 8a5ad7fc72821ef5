"""The BM25 snapshot: saved on close, loaded and brought up to date on start instead of re-encoding every chunk."""
from __future__ import annotations

import pytest

from edge_agent.rag.bm25 import Bm25Index


@pytest.fixture
def encoded(monkeypatch):
    """How many chunk texts BM25 encodes (start-up work the snapshot saves)."""
    count = {"texts": 0}
    real = Bm25Index.encode_many

    def counting(self, texts):
        texts = list(texts)
        count["texts"] += len(texts)
        return real(self, texts)

    monkeypatch.setattr(Bm25Index, "encode_many", counting)
    return count


def _titles(svc, query):
    return [h.title for h in svc.retrieve(query, k=3, mode="bm25")]


def test_snapshot_is_loaded_after_a_clean_stop(make_service, encoded):
    svc = make_service()
    svc.add_text("Boiler", "The boiler shows error E-442 when the pressure is low.")
    svc.add_text("Permit", "De vergunning voor de dakkapel komt van de gemeente.")
    svc.close()
    assert (svc.index.bm25_path).is_file()
    encoded["texts"] = 0
    again = make_service()
    assert encoded["texts"] == 0  # nothing re-encoded
    assert _titles(again, "E-442") == ["Boiler"] and _titles(again, "vergunning dakkapel") == ["Permit"]


def test_a_stale_snapshot_is_brought_up_to_date(make_service, encoded):
    svc = make_service()
    first = svc.add_text("Boiler", "The boiler shows error E-442 when the pressure is low.")
    svc.close()  # snapshot: Boiler only
    svc = make_service()
    svc.add_text("Permit", "De vergunning voor de dakkapel komt van de gemeente.")
    svc.delete(first.document_id)
    svc.owner.release()  # killed: no snapshot written at close
    encoded["texts"] = 0
    again = make_service()
    assert encoded["texts"] == 1  # only the chunk the snapshot lacked
    assert _titles(again, "vergunning dakkapel") == ["Permit"] and _titles(again, "E-442 boiler") == []
    assert again.index.bm25_ids().tolist() == again.store.chunk_ids().tolist()


@pytest.mark.parametrize("damage", ["flip", "other_store", "truncate", "other_tokenizer"])
def test_a_damaged_or_foreign_snapshot_is_not_used(make_service, encoded, damage, monkeypatch):
    svc = make_service()
    svc.add_text("Boiler", "The boiler shows error E-442 when the pressure is low.")
    svc.close()
    path = svc.index.bm25_path
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-30] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "other_tokenizer":  # saved by a version whose tokenize() differed
        monkeypatch.setattr("edge_agent.rag.retrieval.TOKENIZER_VERSION", 99)
    else:
        svc = make_service()
        svc.store.set_meta("store_id", "another-database")  # as if var/ had been replaced
        svc.owner.release()
    encoded["texts"] = 0
    again = make_service()
    assert encoded["texts"] == 1  # rebuilt from SQLite
    assert _titles(again, "E-442") == ["Boiler"]
