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


def _deny_lock(monkeypatch, folder: Path) -> None:
    """The lock file of `folder` cannot be opened for writing, as for a user other than the folder's owner (root made
    it at install). (The tests run as root, whom no mode bit stops: the refusal is made here.)"""
    from edge_agent.rag import embedding_cache

    real = embedding_cache.file_lock

    def lock(path: Path):
        if Path(path).parent == folder:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(embedding_cache, "file_lock", lock)


def test_a_shared_cache_that_cannot_be_written_serves_its_export_as_it_is(tiny_st, tmp_path, monkeypatch):
    """A shared cache made by another user (root, at install) holds a current export: a daemon that cannot write there
    used to fail at the cache's lock file with a stack trace; it reads the export as it is, exporting nothing."""
    from edge_agent.rag.embedder import build_embedder
    from edge_agent.rag.embedding_cache import SHARED_CACHE

    model = tmp_path / "models" / "embeddings" / "tiny"
    shutil.copytree(tiny_st, model)
    first = build_embedder(_settings(tmp_path / "root-data", model))
    vectors = first.embed(["the archive code is probe"])
    _deny_lock(monkeypatch, model.parent / SHARED_CACHE)
    _no_export(monkeypatch)
    again = build_embedder(_settings(tmp_path / "a", model))
    assert again.folder == first.folder and np.allclose(again.embed(["the archive code is probe"]), vectors, atol=1e-6)
    assert not (tmp_path / "a" / "embedding-cache").exists()


def test_a_shared_cache_that_cannot_be_written_and_holds_no_export_falls_back_to_the_data_dir(tiny_st, tmp_path, monkeypatch):
    from edge_agent.rag.embedder import build_embedder, prepared_decision
    from edge_agent.rag.embedding_cache import SHARED_CACHE

    model = tmp_path / "models" / "embeddings" / "tiny"
    shutil.copytree(tiny_st, model)
    (model.parent / SHARED_CACHE).mkdir()
    _deny_lock(monkeypatch, model.parent / SHARED_CACHE)
    settings = _settings(tmp_path / "a", model)
    emb = build_embedder(settings)
    assert emb.folder.parent == tmp_path / "a" / "embedding-cache" and emb.embed(["probe"]).shape == (1, emb.dim)
    assert prepared_decision(settings) is not None  # found there again by the next start (export_place looks there first)
    _no_export(monkeypatch)
    assert build_embedder(settings).folder == emb.folder


def test_no_writable_cache_at_all_is_a_clear_error(tiny_st, tmp_path, monkeypatch):
    from edge_agent.rag.embedder import EmbedderError, build_embedder
    from edge_agent.rag.embedding_cache import SHARED_CACHE

    model = tmp_path / "models" / "embeddings" / "tiny"
    shutil.copytree(tiny_st, model)
    (model.parent / SHARED_CACHE).mkdir()
    _deny_lock(monkeypatch, model.parent / SHARED_CACHE)
    from edge_agent.rag import embedding_cache

    denied_too = embedding_cache.file_lock

    def lock(path: Path):
        if Path(path).parent == tmp_path / "a" / "embedding-cache":
            raise PermissionError(13, "Permission denied", str(path))
        return denied_too(path)

    monkeypatch.setattr(embedding_cache, "file_lock", lock)
    with pytest.raises(EmbedderError) as got:
        build_embedder(_settings(tmp_path / "a", model))
    message = str(got.value)
    assert "cannot be written (Permission denied)" in message and "chown" in message and "EDGE_AGENT_DATA_DIR" in message


def test_import_embedding_exports_where_serve_looks(tiny_st, model_cli, tmp_path, monkeypatch):
    """`model import-embedding` exported into the data_dir's cache while serve looked beside the model folder first:
    both exported the model (multilingual-e5-small: minutes each). Now the import's export is the one serve uses."""
    from edge_agent.rag.embedder import DECISION_FILE, build_embedder
    from edge_agent.rag.embedding_cache import SHARED_CACHE

    assert model_cli("import-embedding", str(tiny_st), "--name", "tiny-ml") == 0
    model = tmp_path / "models" / "embeddings" / "tiny-ml"
    exports = [p.parent for p in (model.parent / SHARED_CACHE).rglob(DECISION_FILE)] \
        if (model.parent / SHARED_CACHE).is_dir() else []
    assert len(exports) == 1, exports
    assert not list((tmp_path / "var").rglob("*.onnx"))  # nothing exported under the data_dir
    _no_export(monkeypatch)
    for data in ("var", "other"):
        s = _settings(tmp_path / data, model, quantize="auto")
        assert build_embedder(s).folder == exports[0]
