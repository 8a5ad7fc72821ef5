"""Memory, speed and accuracy of one embedding-model ONNX file as the daemon loads it (onnxruntime alone), for
comparing an fp32 word-embedding table with the int8 one (rag/embedding_variants.quantize_table).

    python scripts/bench_embedding_table.py --ref FOLDER OUT.npy         torch's vectors of the texts (once)
    python scripts/bench_embedding_table.py FOLDER onnx/FILE REF.npy     one JSON line: file MB, VmRSS before the
        load, VmHWM/VmRSS after embedding the texts, texts/s, cosine to torch (min, mean)

ARENA=0 turns onnxruntime's CPU memory arena off. Run each file in its own process, alternating (A B A B), and note the load average: the machine is shared.
The texts: 50 Dutch (../shared/corpus-nl, or DUTCH_DIR) and 50 English passages (this repository's README.md),
~3 sentences each, embedded with the model's passage prompt as the daemon does (batch 16).
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def texts() -> list[str]:
    """100 passages: 50 Dutch, 50 English, each ~3 sentences."""
    def passages(text: str, n: int) -> list[str]:
        sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)) if len(s.strip()) > 30]
        return [" ".join(sents[i: i + 3]) for i in range(0, 3 * n, 3)][:n]

    dutch_dir = Path(os.environ.get("DUTCH_DIR", ROOT.parent / "shared" / "corpus-nl"))
    nl = passages(" ".join(p.read_text() for p in sorted(dutch_dir.glob("*.txt"))), 50)
    en = passages(re.sub(r"[`#|*]", " ", (ROOT / "README.md").read_text()), 50)
    assert len(nl) == 50 and len(en) == 50, (len(nl), len(en))
    return nl + en


def passage_prompt(folder: Path) -> str | None:
    from edge_agent.rag.onnx_sentence import prompts

    return "passage" if "passage" in prompts(folder) else None


def status(field: str) -> float:
    """A /proc/self/status field in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def main(argv: list[str]) -> None:
    if argv[0] == "--ref":
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(argv[1], device="cpu", local_files_only=True)
        np.save(argv[2], model.encode(texts(), prompt_name=passage_prompt(Path(argv[1])), batch_size=16, normalize_embeddings=True))
        return
    folder, file_name, ref = Path(argv[0]), argv[1], np.load(argv[2])
    docs = texts()
    import onnxruntime as ort

    from edge_agent.rag.embedding_variants import is_preoptimized
    from edge_agent.rag.onnx_sentence import OrtSentenceModel

    before = status("VmRSS")
    so = ort.SessionOptions()  # as OnnxEmbedder._session_options: no spinning, a pre-optimized file at the basic level
    if is_preoptimized(file_name):
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.enable_cpu_mem_arena = os.environ.get("ARENA", "1") == "1"  # ARENA=0: onnxruntime's CPU arena off
    started = time.perf_counter()
    model = OrtSentenceModel(folder, file_name, so)
    load_s = time.perf_counter() - started
    loaded = status("VmRSS")
    started = time.perf_counter()
    got = model.encode(docs, batch_size=16, normalize_embeddings=True, prompt_name=passage_prompt(folder))
    secs = time.perf_counter() - started
    cos = (got * ref).sum(axis=1)
    print(json.dumps({
        "file": file_name, "file_mb": round((folder / file_name).stat().st_size / 2**20, 1), "rss_before_load_mb": round(before),
        "rss_loaded_mb": round(loaded), "rss_end_mb": round(status("VmRSS")), "vmhwm_mb": round(status("VmHWM")),
        "load_s": round(load_s, 2), "texts_per_s": round(len(docs) / secs, 1),
        "cos_min": round(float(cos.min()), 5), "cos_mean": round(float(cos.mean()), 5),
        "cos_min_nl": round(float(cos[:50].min()), 5), "cos_min_en": round(float(cos[50:].min()), 5),
        "arena": so.enable_cpu_mem_arena, "loadavg": os.getloadavg()[0],
    }))


if __name__ == "__main__":
    main(sys.argv[1:])
