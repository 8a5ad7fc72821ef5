"""Model bundles: a folder with model.onnx, its weights, tokenizer.json and manifest.json."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Collection
from typing import Any

MANIFEST = "manifest.json"
# 2: the graph may take inputs a format-1 engine does not bind (the dual head's lm_head_int4); the importer
# writes 2 only for such bundles, so a bundle an older engine can run keeps 1, and one it cannot is refused
# by its own format check ("re-import it") instead of failing inside onnxruntime.
# 3: the key/value cache is quantized (manifest kv_cache; the graph's cache inputs are int8 or packed int4).
# 4: an int8 cache whose graph takes runner.PROMPT_STEP (models.kv_prompt: prompt steps attend in fp32).
FORMAT_VERSION = 4
FORMATS = (1, 2, 3, 4)


class BundleError(Exception):
    """A bundle is missing, incomplete or does not match its manifest (message says what to do)."""


def sha256_file(path: Path, chunk: int = 4 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


@dataclass
class Bundle:
    """A loaded (and verified) bundle's manifest, with paths resolved."""

    path: Path
    manifest: dict[str, Any]
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.manifest.get("name", self.path.name)

    @property
    def model_file(self) -> Path:
        return self.path / self.manifest.get("model_file", "model.onnx")

    @property
    def tokenizer_file(self) -> Path:
        return self.path / self.manifest.get("tokenizer_file", "tokenizer.json")

    @property
    def architecture(self) -> dict[str, Any]:
        return self.manifest["architecture"]

    @property
    def context_length(self) -> int:
        return int(self.manifest["context_length"])

    @property
    def stop_token_ids(self) -> list[int]:
        return [int(t) for t in self.manifest.get("stop_token_ids", [])]

    @property
    def bos_token_id(self) -> int | None:
        return self.manifest.get("special_tokens", {}).get("bos")

    @property
    def add_bos(self) -> bool:
        return bool(self.manifest.get("add_bos", True))

    @property
    def prompt_format(self) -> dict[str, Any]:
        return self.manifest.get("prompt_format", {"type": "completion"})

    @property
    def lm_head(self) -> str:
        """The output projection's weights: "int4", "int8" (also every bundle from before the field), "dual" (both) or "fp32"."""
        q = self.manifest.get("quantization", {})
        if q.get("scheme") == "fp32":
            return "fp32"
        return str(q.get("lm_head", {}).get("format", "int8"))

    @property
    def kv_cache(self) -> str:
        """The key/value cache's format: "fp32" (also every bundle from before the field), "int8" or "int4"."""
        return str((self.manifest.get("kv_cache") or {}).get("format", "fp32"))

    @property
    def generation_defaults(self) -> dict[str, Any]:
        return self.manifest.get("generation", {})


def not_found_message(path: Path) -> str:
    if path.name == "default":
        return f"model bundle not found at {path}: run `edge-agent model install-default`"
    return f"model bundle not found at {path}: run `edge-agent model import SOURCE --name {path.name}` or `edge-agent model list`"


def load_bundle(path: Path, verify: bool = True) -> Bundle:
    """Read a bundle's manifest and (by default) check every file's size and sha256.

    Raises BundleError when the folder, the manifest or a file is missing or differs.
    """
    path = Path(path)
    mf = path / MANIFEST
    if not mf.is_file():
        raise BundleError(not_found_message(path))
    try:
        manifest = json.loads(mf.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BundleError(f"manifest of bundle {path.name!r} is unreadable ({e}): re-import the model") from None
    if manifest.get("format_version") not in FORMATS:
        raise BundleError(f"bundle {path.name!r} has format {manifest.get('format_version')!r}, expected one of {FORMATS}: "
                          "re-import it (or upgrade edge-agent if the bundle is newer)")
    files: dict[str, Path] = {}
    for rel, meta in manifest.get("files", {}).items():
        p = path / rel
        if not p.is_file():
            raise BundleError(f"bundle {path.name!r} is incomplete: {rel} is missing; re-import the model")
        if p.stat().st_size != meta["bytes"]:
            raise BundleError(f"bundle {path.name!r}: {rel} has the wrong size (damaged or truncated); re-import the model")
        if verify and sha256_file(p) != meta["sha256"]:
            raise BundleError(f"bundle {path.name!r}: {rel} does not match its manifest checksum; re-import the model")
        files[rel] = p
    return Bundle(path=path, manifest=manifest, files=files)


def list_bundles(models_dir: Path, skip: Collection[str] = ()) -> list[dict[str, Any]]:
    """One summary per bundle folder under models_dir (unverified; `ok` False with the reason if broken), less the
    folders named in skip (models_dir/embeddings holds embedding models, not bundles)."""
    out = []
    if not Path(models_dir).is_dir():
        return out
    for d in sorted(Path(models_dir).iterdir()):
        if not d.is_dir() or d.name.startswith(".") or d.name in skip:
            continue
        try:
            b = load_bundle(d, verify=False)
            arch = b.architecture
            size = sum(m["bytes"] for m in b.manifest.get("files", {}).values())
            out.append({
                "name": d.name, "ok": True, "architecture": arch.get("arch"), "context_length": b.context_length,
                "quantization": b.manifest.get("quantization", {}).get("scheme"), "lm_head": b.lm_head, "bytes": size,
                "created": b.manifest.get("created"), "source": b.manifest.get("source", {}).get("name"),
            })
        except BundleError as e:
            out.append({"name": d.name, "ok": False, "error": str(e)})
    return out
