"""Faster ONNX files of a sentence-transformers model: transformer fusions (O2) and dynamic int8.

Each candidate is written once into the model's cache folder. The O2 file (optimum's ORTOptimizer:
fused Attention, SkipLayerNorm, BiasGelu) is quantized after fusion, so the fused attention
survives; quantizing first leaves MatMulInteger nodes that onnxruntime can no longer fuse.
Candidates go from fastest (every MatMul and Attention in int8) to safest; the first whose
vectors stay within cosine 0.99 of torch wins. Where quantizing everything drifts too far, the
FFN down-projections (the MatMul after GELU, whose inputs have outliers) of the early layers are
what it costs most (all-MiniLM-L6-v2: int8 everywhere 0.987; those three kept in fp32, 0.993).
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FP32_FILE = "onnx/model.onnx"
O2_FILE = "onnx/model_O2.onnx"


@dataclass(frozen=True)
class Variant:
    """One int8 file: written from `base` by quantizing `ops`, except the nodes that `keep` names stay fp32.

    keep: "" (none), "early_ffn_out" (FFN down-projections of the first half of the layers),
    "ffn_out" (every FFN down-projection) or "outer_layers" (the first and the last layer).
    """

    file_name: str
    base: str
    ops: tuple[str, ...]
    keep: str = ""

    @property
    def name(self) -> str:
        return Path(self.file_name).stem.removeprefix("model_")


_OPS = ("MatMul", "Attention")
CANDIDATES = (
    Variant("onnx/model_O2_qint8.onnx", O2_FILE, _OPS),
    Variant("onnx/model_O2_qint8_early_ffn_fp32.onnx", O2_FILE, _OPS, "early_ffn_out"),
    Variant("onnx/model_O2_qint8_ffn_fp32.onnx", O2_FILE, _OPS, "ffn_out"),
    Variant("onnx/model_O2_qint8_inner_layers.onnx", O2_FILE, _OPS, "outer_layers"),
    Variant("onnx/model_qint8_inner_layers.onnx", FP32_FILE, ("MatMul",), "outer_layers"),  # when optimum cannot fuse
)


def _layer(node: Any) -> int | None:
    """The transformer layer of a node: '/encoder/layer.3/...' or a fused 'Attention_3'."""
    m = re.search(r"layer\.(\d+)/", node.name) or re.fullmatch(r"Attention_(\d+)", node.name)
    return int(m.group(1)) if m else None


def _is_ffn_out(node: Any) -> bool:
    return node.name.endswith("/output/dense/MatMul") and "/attention/" not in node.name


def kept_in_fp32(nodes: list[Any], keep: str) -> list[str] | None:
    """Names of the nodes a rule keeps in fp32; None when the graph has no layers to apply it to."""
    if not keep:
        return []
    layers = sorted({_layer(n) for n in nodes} - {None})  # type: ignore[type-var]
    if len(layers) < 3:
        return None
    if keep == "outer_layers":
        chosen = [n for n in nodes if _layer(n) in (layers[0], layers[-1])]
    elif keep == "ffn_out":
        chosen = [n for n in nodes if _is_ffn_out(n)]
    elif keep == "early_ffn_out":
        early = set(layers[: len(layers) // 2])
        chosen = [n for n in nodes if _is_ffn_out(n) and _layer(n) in early]
    else:
        raise ValueError(f"unknown rule {keep!r}")
    return [n.name for n in chosen] or None


def write_optimized(fp32_model: Any, folder: Path) -> bool:
    """Write onnx/model_O2.onnx (transformer fusions for CPU) next to the fp32 file; False if optimum cannot."""
    try:
        from sentence_transformers import export_optimized_onnx_model

        export_optimized_onnx_model(fp32_model, "O2", str(folder))
    except Exception as exc:  # optimum missing or this architecture unknown to its optimizer
        log.info("no O2-optimized embedding model (%s: %s)", type(exc).__name__, exc)
        return False
    return (folder / O2_FILE).is_file()


def write_variant(fp32_model: Any, folder: Path, v: Variant) -> bool:
    """Write v into folder (first the O2 base it needs); False when this model cannot have it."""
    if v.base == O2_FILE and not (folder / O2_FILE).is_file() and not write_optimized(fp32_model, folder):
        return False
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(folder / v.base), load_external_data=False).graph
    exclude = kept_in_fp32([n for n in graph.node if n.op_type in v.ops], v.keep)
    if exclude is None:
        return False
    tmp = folder / (v.file_name + ".tmp")
    quantize_dynamic(
        str(folder / v.base), str(tmp), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=list(v.ops),
        nodes_to_exclude=exclude, extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    os.replace(tmp, folder / v.file_name)
    return True


def remove_stale(folder: Path) -> list[str]:
    """Delete ONNX files in folder/onnx that no candidate uses any more (left by older versions); returns their names."""
    keep = {FP32_FILE, O2_FILE, *(v.file_name for v in CANDIDATES)}
    removed = []
    for f in sorted((folder / "onnx").glob("model_*.onnx*")):
        if f"onnx/{f.name}" not in keep:
            f.unlink(missing_ok=True)
            removed.append(f.name)
    return removed
