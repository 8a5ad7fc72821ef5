"""`edge-agent model import-embedding`: a tiny real sentence-transformers model (a BERT built from a config)
copied, exported to ONNX, checked and described by a manifest; bad folders get clear errors and leave nothing."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tiny_models import make_sentence_transformer


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory) -> Path:
    return make_sentence_transformer(tmp_path_factory.mktemp("tiny-st"))


def test_import_embedding_exports_checks_and_describes_the_model(tiny_st, model_cli, tmp_path, capsys):
    from edge_agent.rag.embedder import LANGUAGES_FILE, OnnxEmbedder

    assert model_cli("import-embedding", str(tiny_st), "--name", "tiny-ml", "--languages", "nl,en") == 0
    out = capsys.readouterr().out
    dest = tmp_path / "models" / "embeddings" / "tiny-ml"
    assert f"imported {tiny_st} as {dest}: 32-d vectors" in out and "languages: en, nl" in out
    manifest = json.loads((dest / LANGUAGES_FILE).read_text())
    assert manifest["languages"] == ["en", "nl"] and manifest["dim"] == 32 and manifest["model_id"] == "tiny-ml/32"
    kept = [t for t in manifest["tried"] if t["ok"]]
    assert (manifest["variant"] == "fp32") == (not kept) and (not kept or manifest["variant"] in kept[-1]["file"])
    assert all(t["ok"] == (t["cosine_min_vs_torch"] >= 0.99) for t in manifest["tried"])  # the cosine bar decides
    assert (dest / "modules.json").is_file() and not list(dest.parent.glob(".*tmp*"))  # copied whole, no temp folder left
    # the imported model serves: same vectors as torch (cosine), and it says which languages it covers
    emb = OnnxEmbedder(dest, cache_dir=tmp_path / "var" / "embedding-cache")
    assert emb.languages == ("en", "nl") and emb.dim == 32
    from sentence_transformers import SentenceTransformer

    texts = ["the archive code is probe", "de code van het archief"]
    ref = SentenceTransformer(str(tiny_st), device="cpu").encode(texts, normalize_embeddings=True)
    assert float((emb.embed(texts) * ref).sum(1).min()) >= 0.99
    assert emb.decision == OnnxEmbedder(dest, cache_dir=tmp_path / "var" / "embedding-cache").decision  # exported once
    # the same name again needs --force
    assert model_cli("import-embedding", str(tiny_st), "--name", "tiny-ml") == 2
    assert "exists" in capsys.readouterr().err
    assert model_cli("import-embedding", str(tiny_st), "--name", "tiny-ml", "--force") == 0
    assert json.loads((dest / LANGUAGES_FILE).read_text())["languages"] is None  # no --languages: not declared
    assert OnnxEmbedder(dest, cache_dir=tmp_path / "var" / "embedding-cache").languages is None


@pytest.mark.parametrize("damage, message", [
    ("no_tokenizer", "needs config.json and tokenizer.json"),
    ("no_modules", "modules.json is missing"),
    ("bad_name", "--name"),
    ("bad_languages", "ISO 639-1"),
])
def test_import_embedding_refuses_bad_input_and_leaves_nothing(tiny_st, model_cli, tmp_path, capsys, damage, message):
    import shutil

    src = tmp_path / "copy"
    shutil.copytree(tiny_st, src)
    argv = ["import-embedding", str(src), "--name", "x"]
    if damage == "no_tokenizer":
        (src / "tokenizer.json").unlink()
    elif damage == "no_modules":
        (src / "modules.json").unlink()
    elif damage == "bad_name":
        argv[-1] = "../escape"
    else:
        argv += ["--languages", "dutch"]
    assert model_cli(*argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "models" / "embeddings").exists() or not any((tmp_path / "models" / "embeddings").iterdir())


def test_fusion_trusts_an_imported_model_for_its_declared_languages(tiny_st, tmp_path):
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import OnnxEmbedder, import_embedding
    from edge_agent.services.documents import DocumentService

    import_embedding(tiny_st, "ml", tmp_path / "models", tmp_path / "cache", languages=["nl", "en"], quantize="off")
    emb = OnnxEmbedder(tmp_path / "models" / "embeddings" / "ml", cache_dir=tmp_path / "cache", quantize="off")
    svc = DocumentService.from_settings(Settings(data_dir=tmp_path / "var", index_dir=tmp_path / "index"), embedder=emb)
    try:
        svc.add_text("Archief", "De code van het archief is QX-7731 en de sleutel ligt bij de portier.")
        stats = svc.stats()["index"]
        assert stats["embedder_languages"] == ["en", "nl"]
        assert stats["languages"] == {"nl": {"chunks": 1, "embedder_covers": True}}
        assert np.isfinite(svc.index.dense.exact.index.reconstruct_n(0, 1)).all()
    finally:
        svc.close()


def test_a_model_with_prompts_gets_its_query_and_passage_prompts(tiny_st, tmp_path):
    """A model whose config names a query and a passage prompt (e5: "query: ", "passage: ") gets them before a search
    query and before the texts it embeds, in the onnxruntime runner and in sentence-transformers; one without prompts
    embeds a query as it embeds a text."""
    import shutil

    from edge_agent.rag.embedder import OnnxEmbedder, TorchEmbedder

    prompted = tmp_path / "prompted"
    shutil.copytree(tiny_st, prompted)
    (prompted / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"query": "the ", "passage": "de "}}))
    plain = OnnxEmbedder(tiny_st, cache_dir=tmp_path / "cache", quantize="off")
    emb = OnnxEmbedder(prompted, cache_dir=tmp_path / "cache", quantize="off")
    from edge_agent.rag.onnx_sentence import OrtSentenceModel

    assert isinstance(emb._model, OrtSentenceModel) and emb._model.prompts == {"query": "the ", "passage": "de "}
    text = "archief code probe"
    assert np.allclose(emb.embed_query(text), plain.embed(["the " + text])[0], atol=1e-5)
    assert np.allclose(emb.embed([text, "is het"]), plain.embed(["de " + text, "de is het"]), atol=1e-5)
    assert float(emb.embed_query(text) @ emb.embed([text])[0]) < 0.9999  # the prompts differ, so do the vectors
    assert np.allclose(plain.embed_query(text), plain.embed([text])[0], atol=1e-6)  # no prompts: as before
    assert emb.model_id.endswith("/32+prompts") and plain.model_id.endswith("/32")  # vectors of another space: re-embedded
    torch_emb, torch_plain = TorchEmbedder(prompted), TorchEmbedder(tiny_st)
    assert np.allclose(torch_emb.embed_query(text), torch_plain.embed(["the " + text])[0], atol=1e-5)
    assert np.allclose(torch_emb.embed([text]), torch_plain.embed(["de " + text]), atol=1e-5)


def _word_table(path: Path):
    """The initializer the Gather on input_ids reads (after the int8 table: the int8 rows), as a numpy array."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    inits = {t.name: t for t in model.graph.initializer}
    gather = next(n for n in model.graph.node if n.op_type == "Gather" and n.input[1] == "input_ids" and n.input[0] in inits)
    return numpy_helper.to_array(inits[gather.input[0]])


def test_a_small_word_table_stays_fp32_and_the_manifest_says_why(tiny_st, tmp_path):
    """Below TABLE_INT8_MIN_ELEMENTS (64 MiB of float32: the packaged MiniLM's 47 MB table) the table is not made
    int8: little memory to save, and the default's vectors (so its answers) would move."""
    from edge_agent.rag.embedder import import_embedding

    m = import_embedding(tiny_st, "small", tmp_path / "models", tmp_path / "cache")
    assert m["table"] == "fp32" and "64 MiB" in m["table_note"] and not m["variant"].endswith("_table8")
    assert not any(t["file"].endswith("_table8.onnx") for t in m["tried"])
    assert _word_table(Path(m["export_folder"]) / "onnx" / f"model_{m['variant']}.onnx").dtype == np.float32


def test_the_word_embedding_table_is_int8_per_row_when_its_vectors_stay_within_the_bar(tiny_st, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    from edge_agent.rag import embedding_variants
    from edge_agent.rag.embedder import OnnxEmbedder, import_embedding

    monkeypatch.setattr(embedding_variants, "TABLE_INT8_MIN_ELEMENTS", 0)  # the tiny model's table stands for a large one
    m = import_embedding(tiny_st, "t8", tmp_path / "models", tmp_path / "cache", languages=["nl", "en"])
    assert m["table"] == "int8" and m["variant"].endswith("_table8") and "table_note" not in m
    chosen = m["tried"][-1]
    assert chosen["ok"] and chosen["cosine_min_vs_torch"] >= 0.99 and chosen["file"].endswith("_table8.onnx")
    assert m["tried"][-2]["ok"] and m["tried"][-2]["file"] == chosen["file"].replace("_table8", "")  # its fp32-table twin passed first
    folder = Path(m["export_folder"])
    fp32_table = _word_table(folder / "onnx" / "model.onnx")
    int8_table = _word_table(folder / chosen["file"])
    assert int8_table.dtype == np.int8 and int8_table.shape == fp32_table.shape
    used = np.abs(fp32_table).max(axis=1) > 0  # the padding row is all zeros
    assert used.sum() > 10 and (np.abs(int8_table).max(axis=1)[used] == 127).all()  # one scale per row: each uses the full range
    assert (folder / chosen["file"]).stat().st_size < (folder / chosen["file"].replace("_table8", "")).stat().st_size
    emb = OnnxEmbedder(tmp_path / "models" / "embeddings" / "t8", cache_dir=tmp_path / "cache")
    assert emb.decision["file_name"] == chosen["file"]
    texts = ["the archive code is probe", "de code van het archief", "een probe sentence", "is het"]
    ref = SentenceTransformer(str(tiny_st), device="cpu").encode(texts, normalize_embeddings=True)
    assert float((emb.embed(texts) * ref).sum(1).min()) >= 0.99


def test_an_int8_table_below_the_bar_stays_fp32_and_the_manifest_says_so(tiny_st, tmp_path, monkeypatch):
    """A table whose int8 rows lose too much (here: rows shuffled after quantizing, as a table with extreme rows
    would) fails the same cosine check; the variant that passed is kept with its fp32 table."""
    from onnx import numpy_helper

    from edge_agent.rag import embedding_variants
    from edge_agent.rag.embedder import import_embedding

    real = embedding_variants.quantize_table

    def damaged(model):
        done = real(model)
        for i, t in enumerate(model.graph.initializer):
            if t.name.endswith(".qtable"):
                q = numpy_helper.to_array(t)
                model.graph.initializer[i].CopyFrom(numpy_helper.from_array(q[np.random.default_rng(0).permutation(len(q))], t.name))
        return done

    monkeypatch.setattr(embedding_variants, "quantize_table", damaged)
    monkeypatch.setattr(embedding_variants, "TABLE_INT8_MIN_ELEMENTS", 0)  # the tiny model's table stands for a large one
    m = import_embedding(tiny_st, "t32", tmp_path / "models", tmp_path / "cache")
    assert m["table"] == "fp32" and "below cosine 0.99" in m["table_note"] and not m["variant"].endswith("_table8")
    table_try = m["tried"][-1]
    assert table_try["file"].endswith("_table8.onnx") and not table_try["ok"] and table_try["cosine_min_vs_torch"] < 0.99
    assert _word_table(Path(m["export_folder"]) / "onnx" / f"model_{m['variant']}.onnx").dtype == np.float32


def test_each_int8_candidate_is_checked_alone(tiny_st, tmp_path, monkeypatch):
    """One large model in memory at a time (multilingual-e5-small peaked at 6.6 GB when the export's session, an fp32
    session, the torch model and a candidate's session lived together): when a candidate is loaded for its check, no
    torch model and no other onnxruntime session is alive, and the fp32 file is never loaded at all."""
    import gc

    import onnxruntime
    import transformers

    from edge_agent.rag import embedding_variants
    from edge_agent.rag.embedder import OnnxEmbedder, import_embedding

    def alive() -> tuple[int, int]:
        gc.collect()
        objs = gc.get_objects()
        return (sum(isinstance(o, transformers.PreTrainedModel) for o in objs),
                sum(isinstance(o, onnxruntime.InferenceSession) for o in objs))

    before = alive()
    loads = []
    real = OnnxEmbedder._load

    def load(self, folder, file_name):
        loads.append((file_name, alive()))
        return real(self, folder, file_name)

    monkeypatch.setattr(OnnxEmbedder, "_load", load)
    monkeypatch.setattr(embedding_variants, "TABLE_INT8_MIN_ELEMENTS", 0)  # two candidates: the first and its int8-table twin
    m = import_embedding(tiny_st, "alone", tmp_path / "models", tmp_path / "cache")
    assert [f for f, _ in loads] == [t["file"] for t in m["tried"]] and len(loads) == 2
    assert all(held == before for _, held in loads), loads


def test_the_word_table_set_aside_while_optimizing_and_quantizing_changes_no_byte(tiny_st, tmp_path, monkeypatch):
    """The O2 file and the int8 candidates are written with the word-embedding table set aside (a few rows stand in
    for it, so optimum and quantize_dynamic copy ~90 MB instead of multilingual-e5-small's 470 MB); the files are the
    ones written with the table in place, byte for byte (quantize_dynamic marks tensors of 1 KiB or more: the
    stand-in must be marked alike)."""
    import shutil

    from edge_agent.rag import embedding_variants as ev
    from edge_agent.rag.embedder import OnnxEmbedder

    folder = OnnxEmbedder(tiny_st, cache_dir=tmp_path / "cache", quantize="off").folder  # the fp32 export
    monkeypatch.setattr(ev, "TABLE_INT8_MIN_ELEMENTS", 0)  # the tiny model's table stands for a large one
    variants = [ev.CANDIDATES[0], ev.with_int8_table(ev.CANDIDATES[0])]
    aside, whole = shutil.copytree(folder, tmp_path / "aside"), shutil.copytree(folder, tmp_path / "whole")
    for v in variants:
        assert ev.write_variant(aside, v)
    monkeypatch.setattr(ev, "set_aside_word_table", lambda model: None)
    for v in variants:
        assert ev.write_variant(whole, v)
    for name in [ev.O2_FILE] + [v.file_name for v in variants]:
        assert (aside / name).read_bytes() == (whole / name).read_bytes(), name
    assert not [p.name for p in aside.rglob("*") if p.name.startswith(".O2-") or p.name.endswith(".tmp")]


def test_the_word_table_left_out_of_the_torch_export_changes_no_byte(tiny_st, tmp_path, monkeypatch):
    """A large word table is left out while torch exports (64 rows stand in, config vocab_size to match) and written
    into model.onnx after: every file of the export folder is the one the plain export writes, config.json included,
    but the model card (README.md, whose usage example would run the stand-in on words it lacks)."""
    from edge_agent.rag import embedder, embedding_export, embedding_variants

    def files(folder: Path) -> dict[str, bytes]:
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    monkeypatch.setattr(embedding_variants, "TABLE_INT8_MIN_ELEMENTS", 0)  # the tiny model's table stands for a large one
    seen = []
    real = embedding_export.set_aside_torch_table
    monkeypatch.setattr(embedding_export, "set_aside_torch_table", lambda folder: seen.append(real(folder)) or seen[-1])
    export = embedder._cache_folder(tiny_st, tmp_path / "aside")[2]
    export.parent.mkdir(parents=True)
    died = export.with_name(export.name + ".tmp999999.full.safetensors")  # weights set aside by an export that died
    died.write_bytes(b"x")
    aside = embedder.OnnxEmbedder(tiny_st, cache_dir=tmp_path / "aside", quantize="off").folder
    assert aside == export and not died.exists()
    assert seen and seen[0][0].dims == [94, 32] and not seen[0][1].exists()  # set aside, and the full weights back in place
    monkeypatch.setattr(embedding_export, "set_aside_torch_table", lambda folder: (None, None))
    whole = embedder.OnnxEmbedder(tiny_st, cache_dir=tmp_path / "whole", quantize="off").folder
    plain, got = files(whole), files(aside)
    plain.pop("README.md"), got.pop("README.md", None)
    assert got == plain
    assert not list((tmp_path / "aside").glob("*.safetensors"))


@pytest.mark.parametrize("card, expected", [
    ("---\nlanguage: en\nlicense: apache-2.0\n---\n# all-MiniLM-L6-v2\n", ["en"]),  # as all-MiniLM-L6-v2's card
    ("---\nlanguage:\n- multilingual\n- nl\n- en-US\n- de\ntags:\n- sentence-transformers\n---\ntext\n", ["de", "en", "nl"]),
    ("---\nlanguage:\n- multilingual\n---\n", []),  # unspecified: not declared
    ("# a card without front matter\nlanguage: en\n", []),
    ("---\nlanguage: [en, nl\n---\n", []),  # broken YAML: not declared, no crash
])
def test_the_model_cards_languages_are_read(tmp_path, card, expected):
    from edge_agent.rag.embedder import card_languages

    (tmp_path / "README.md").write_text(card, encoding="utf-8")
    assert card_languages(tmp_path) == expected
    assert card_languages(tmp_path / "no-such-folder") == []


def test_import_without_languages_takes_the_model_cards(tiny_st, model_cli, tmp_path, capsys):
    import shutil

    from edge_agent.rag.embedder import LANGUAGES_FILE, OnnxEmbedder

    folder = tmp_path / "usb" / "carded"
    shutil.copytree(tiny_st, folder)
    (folder / "README.md").write_text("---\nlanguage:\n- nl\n- en\n---\n# a Dutch-English model\n", encoding="utf-8")
    assert model_cli("import-embedding", str(folder), "--name", "carded") == 0
    assert "languages: en, nl (from its model card)" in capsys.readouterr().out
    dest = tmp_path / "models" / "embeddings" / "carded"
    manifest = json.loads((dest / LANGUAGES_FILE).read_text())
    assert manifest["languages"] == ["en", "nl"] and manifest["languages_from"] == "model card"
    assert OnnxEmbedder(dest, cache_dir=tmp_path / "var" / "embedding-cache").languages == ("en", "nl")
    # --languages wins over the card
    assert model_cli("import-embedding", str(folder), "--name", "carded", "--force", "--languages", "de") == 0
    manifest = json.loads((dest / LANGUAGES_FILE).read_text())
    assert manifest["languages"] == ["de"] and manifest["languages_from"] == "given"


def test_query_embeddings_carry_the_models_query_prompt(tiny_st, tmp_path):
    """A model with named prompts (e5: "query: ", "passage: "): embed gives passages theirs, embed_queries (and the
    embedding service's query=True, which classify uses for e5) the query prompt, one vector each as embed_query does."""
    import shutil

    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.services.embeddings import EmbeddingService

    folder = tmp_path / "prompted"
    shutil.copytree(tiny_st, folder)
    cfg = folder / "config_sentence_transformers.json"
    conf = json.loads(cfg.read_text()) if cfg.is_file() else {}
    cfg.write_text(json.dumps({**conf, "prompts": {"query": "query: ", "passage": "passage: "}}))
    emb = OnnxEmbedder(folder, cache_dir=tmp_path / "cache")
    texts = ["the archive code is probe", "de code van het archief"]
    queries = emb.embed_queries(texts)
    assert np.allclose(queries[1], emb.embed_query(texts[1]), atol=1e-4)  # (padded in a batch of two: ~3e-5)
    assert float((queries * emb.embed(texts)).sum(1).max()) < 0.9999  # not the passage vectors
    svc = EmbeddingService(lambda: emb)
    assert np.allclose(svc.embed(texts, query=True)[0], queries, atol=1e-6)
    assert np.allclose(svc.embed(texts)[0], emb.embed(texts), atol=1e-6)
