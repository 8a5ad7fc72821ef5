"""The embedder runs its ONNX graph on onnxruntime alone: the same vectors as sentence-transformers' ONNX
backend, without importing torch (~370 MB of the daemon's resident memory)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from edge_agent.rag.onnx_sentence import OrtSentenceModel, supported

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    "The access code for the Zeeland archive is QX-7731-B.", "De vergadering is verplaatst.", "", "日本語のテキスト",
    "ÉCOLE Naïve café", "word " * 400,  # past max_seq_length: truncated the same way
] + [f"sentence {i} about invoices, routers and trains" * (1 + i % 4) for i in range(20)]


def test_same_vectors_as_sentence_transformers(embedder):
    from sentence_transformers import SentenceTransformer

    assert isinstance(embedder._model, OrtSentenceModel) and supported(embedder.folder)
    fn = embedder.decision["file_name"]
    st = SentenceTransformer(str(embedder.folder), device="cpu", backend="onnx", local_files_only=True,
                             model_kwargs={"file_name": fn, "session_options": embedder._session_options(fn)})
    assert embedder.max_tokens == st.max_seq_length and embedder.dim == st.get_embedding_dimension()
    ours = embedder.embed(TEXTS)
    theirs = st.encode(TEXTS, batch_size=embedder.batch_size, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.shape == theirs.shape and ours.dtype == np.float32
    assert float(np.abs(ours - theirs).max()) < 1e-5


def test_a_folder_with_other_modules_is_not_claimed(tmp_path, embedder):
    import shutil

    folder = tmp_path / "m"
    shutil.copytree(embedder.folder, folder, ignore=shutil.ignore_patterns("*.onnx", "*.safetensors"))
    assert supported(folder)
    cfg = folder / "1_Pooling" / "config.json"
    pooling = json.loads(cfg.read_text())
    cfg.write_text(json.dumps({**{k: v for k, v in pooling.items() if not k.startswith("pooling_mode")}, "pooling_mode": "cls"}))
    assert not supported(folder)
    modules = json.loads((folder / "modules.json").read_text())
    (folder / "modules.json").write_text(json.dumps(modules + [{"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}]))
    assert not supported(folder)


def test_loading_the_embedder_imports_no_torch(embedder):
    code = ("import json, sys; from pathlib import Path; from edge_agent.rag.embedder import OnnxEmbedder; "
            f"e = OnnxEmbedder(cache_dir=Path({str(embedder.folder.parent)!r})); e.embed(['hello']); "
            "print(json.dumps({m: m in sys.modules for m in ('torch', 'transformers', 'sentence_transformers')}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"torch": False, "transformers": False, "sentence_transformers": False}


def test_the_chunker_and_the_model_share_one_untruncated_tokenizer(embedder):
    """A multilingual vocabulary costs ~280 MB resident a copy: the chunker's tokenizer is the model's own, and
    sharing it leaves the chunker's counts untruncated and the model's inputs truncated."""
    from edge_agent.rag.embedder import OnnxEmbedder

    long_text = "word " * 3 * embedder.max_tokens
    for e in (embedder, OnnxEmbedder(cache_dir=embedder.folder.parent, load=False)):
        tok = e.tokenizer  # asked before an on-demand model is loaded, too
        assert len(tok.encode(long_text, add_special_tokens=False).ids) == 3 * embedder.max_tokens
        vec = e.embed([long_text])
        assert e._model.tokenizer is tok
        assert tok.truncation is None and tok.padding is None  # embedding changed no setting the chunker sees
        assert np.allclose(vec, e.embed(["word " * embedder.max_tokens]), atol=1e-6)  # cut to max_seq_length
