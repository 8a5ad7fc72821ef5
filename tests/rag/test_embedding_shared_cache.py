"""The embedding model's ONNX export is shared: a fresh data_dir exported the model again (multilingual-e5-small, about
4 minutes before /ready). build_embedder keeps it beside the model folder (or in the user's cache), as the engine keeps
its prepacked weights; a data_dir's own cache (the offline installer's copy, earlier installs) is still used first."""
from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tiny_models import make_sentence_transformer


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory) -> Path:
    return make_sentence_transformer(tmp_path_factory.mktemp("tiny-st"))


def _settings(data_dir: Path, model: Path, quantize: str = "off") -> SimpleNamespace:
    return SimpleNamespace(data_dir=data_dir, embedding_model=str(model), models_dir=model.parent.parent,
                           embedding_quantize=quantize, embedding_batch=16, threads=1)


def _no_export(monkeypatch) -> None:
    from edge_agent.rag import embedder

    def refuse(folder):
        raise AssertionError(f"exported again into {folder}")

    monkeypatch.setattr(embedder, "export_onnx", refuse)


def test_a_fresh_data_dir_reuses_the_export_beside_the_model_folder(tiny_st, tmp_path, monkeypatch):
    from edge_agent.rag.embedder import build_embedder, prepared_decision
    from edge_agent.rag.embedding_cache import SHARED_CACHE

    model = tmp_path / "models" / "embeddings" / "tiny"
    shutil.copytree(tiny_st, model)
    first = _settings(tmp_path / "a", model)
    assert prepared_decision(first) is None  # nothing exported yet (and looking made nothing)
    assert not (tmp_path / "a").exists() and not (model.parent / SHARED_CACHE).exists()
    emb = build_embedder(first)
    assert emb.folder.parent == model.parent / SHARED_CACHE and emb.folder.name.endswith("-off")
    vectors = emb.embed(["the archive code is probe"])
    assert not (tmp_path / "a" / "embedding-cache").exists()  # nothing under the data_dir

    _no_export(monkeypatch)
    second = _settings(tmp_path / "b", model)  # a fresh data_dir: found, not exported again
    assert prepared_decision(second) is not None
    again = build_embedder(second)
    assert again.folder == emb.folder and np.allclose(again.embed(["the archive code is probe"]), vectors, atol=1e-6)
    assert not list(model.rglob(".embedding-cache"))  # outside the model folder: its fingerprint does not change


def test_a_data_dirs_own_export_comes_first(tiny_st, tmp_path, monkeypatch):
    """The offline installer puts the export it ships in <data_dir>/embedding-cache (install.sh), as every install
    before this one exported there: such an export is used, not made again elsewhere."""
    from edge_agent.rag.embedder import OnnxEmbedder, build_embedder, prepared_decision

    model = tmp_path / "models" / "embeddings" / "tiny"
    shutil.copytree(tiny_st, model)
    data = tmp_path / "var"
    own = OnnxEmbedder(model, cache_dir=data / "embedding-cache", quantize="off").folder  # as install.sh lays it out
    _no_export(monkeypatch)
    settings = _settings(data, model)
    assert prepared_decision(settings) is not None and prepared_decision(settings, shared=False) is not None
    assert build_embedder(settings).folder == own


def test_the_users_cache_serves_where_the_model_folder_is_read_only(tiny_st, tmp_path, monkeypatch):
    """A model folder whose parent cannot be written (a read-only models_dir) keeps its export in
    $XDG_CACHE_HOME/edge-agent/embedding-cache, shared by every data_dir too."""
    import os

    from edge_agent.rag import embedding_cache
    from edge_agent.rag.embedder import build_embedder

    model = tmp_path / "ro" / "tiny"
    shutil.copytree(tiny_st, model)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    real = os.access
    # (the tests run as root, whom no mode bit stops: the parent is taken for read-only as a non-root user finds it)
    monkeypatch.setattr(embedding_cache.os, "access", lambda p, mode: False if Path(p) == model.parent else real(p, mode))
    emb = build_embedder(_settings(tmp_path / "a", model))
    assert emb.folder.parent == tmp_path / "xdg" / "edge-agent" / "embedding-cache"
    _no_export(monkeypatch)
    assert build_embedder(_settings(tmp_path / "b", model)).folder == emb.folder
