"""Faster ONNX files of a sentence-transformers model: transformer fusions (O2) and dynamic int8.

Each candidate is written once into the model's cache folder. The O2 file (optimum's ORTOptimizer:
fused Attention, SkipLayerNorm, BiasGelu) is quantized after fusion, so the fused attention
survives; quantizing first leaves MatMulInteger nodes that onnxruntime can no longer fuse.
Candidates go from fastest (every MatMul and Attention in int8) to safest; the first whose
vectors stay within cosine 0.99 of torch wins. Where quantizing everything drifts too far, the
FFN down-projections (the MatMul after GELU, whose inputs have outliers) are what it costs most
(all-MiniLM-L6-v2: int8 everywhere 0.987-0.989; those six with per-token scales 0.991-0.994 and
1.46-1.75x torch; the early three kept in fp32 0.993 and 1.42-1.51x; scripts/bench_rag.py).

quantize_dynamic leaves the word-embedding table (the Gather on input_ids) in fp32: for a multilingual
model that table is most of the file and of the resident memory (multilingual-e5-small: 250k x 384,
384 MB of a 407 MB int8 file). The candidate that passes then gets a twin whose table is int8 with one
scale per row (quantize_table); the same cosine check keeps the twin or the fp32 table.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from edge_agent.fsutil import publish

log = logging.getLogger(__name__)

FP32_FILE = "onnx/model.onnx"
O2_FILE = "onnx/model_O2.onnx"


@dataclass(frozen=True)
class Variant:
    """One int8 file: written from `base` by quantizing `ops`; the nodes that `keep` names stay fp32,
    those that `rowwise` names get int8 with per-token activation scales (quantize_rows).

    A rule is "" (none), "early_ffn_out" (FFN down-projections of the first half of the layers),
    "ffn_out" (every FFN down-projection) or "outer_layers" (the first and the last layer).
    """

    file_name: str
    base: str
    ops: tuple[str, ...]
    keep: str = ""
    rowwise: str = ""
    # saved after onnxruntime's own fusions with SkipLayerNormalization split into Add + LayerNormalization,
    # to be loaded at the basic optimisation level (see is_preoptimized)
    ort_optimized: bool = False
    # the word-embedding table int8 with one scale per row (see quantize_table)
    int8_table: bool = False

    @property
    def name(self) -> str:
        return Path(self.file_name).stem.removeprefix("model_")


_OPS = ("MatMul", "Attention")
CANDIDATES = (
    Variant("onnx/model_O2_qint8.onnx", O2_FILE, _OPS),
    Variant("onnx/model_O2_qint8_rowwise_ffn_ort.onnx", O2_FILE, _OPS, rowwise="ffn_out", ort_optimized=True),
    Variant("onnx/model_O2_qint8_rowwise_ffn.onnx", O2_FILE, _OPS, rowwise="ffn_out"),
    Variant("onnx/model_O2_qint8_early_ffn_fp32.onnx", O2_FILE, _OPS, "early_ffn_out"),
    Variant("onnx/model_O2_qint8_ffn_fp32.onnx", O2_FILE, _OPS, "ffn_out"),
    Variant("onnx/model_O2_qint8_inner_layers.onnx", O2_FILE, _OPS, "outer_layers"),
    Variant("onnx/model_qint8_inner_layers.onnx", FP32_FILE, ("MatMul",), "outer_layers"),  # when optimum cannot fuse
)


def with_int8_table(v: Variant) -> Variant:
    """v's twin whose word-embedding table is int8 too ("onnx/model_O2_qint8.onnx" -> "onnx/model_O2_qint8_table8.onnx")."""
    return replace(v, file_name=v.file_name.removesuffix(".onnx") + "_table8.onnx", int8_table=True)


VARIANTS = CANDIDATES + tuple(with_int8_table(v) for v in CANDIDATES)


def _layer(node: Any) -> int | None:
    """The transformer layer of a node: '/encoder/layer.3/...' or a fused 'Attention_3'."""
    m = re.search(r"layer\.(\d+)/", node.name) or re.fullmatch(r"Attention_(\d+)", node.name)
    return int(m.group(1)) if m else None


def _is_ffn_out(node: Any) -> bool:
    return node.name.endswith("/output/dense/MatMul") and "/attention/" not in node.name


def nodes_by_rule(nodes: list[Any], rule: str) -> list[str] | None:
    """Names of the nodes a rule (see Variant) picks; None when the graph has no layers to apply it to."""
    if not rule:
        return []
    layers = sorted({_layer(n) for n in nodes} - {None})  # type: ignore[type-var]
    if len(layers) < 3:
        return None
    if rule == "outer_layers":
        chosen = [n for n in nodes if _layer(n) in (layers[0], layers[-1])]
    elif rule == "ffn_out":
        chosen = [n for n in nodes if _is_ffn_out(n)]
    elif rule == "early_ffn_out":
        early = set(layers[: len(layers) // 2])
        chosen = [n for n in nodes if _is_ffn_out(n) and _layer(n) in early]
    else:
        raise ValueError(f"unknown rule {rule!r}")
    return [n.name for n in chosen] or None


def quantize_rows(model: Any, names: list[str]) -> int:
    """Rewrite the named MatMul nodes (constant 2-D weight) of model in place to int8 with
    per-token activation scales; returns how many were rewritten.

    quantize_dynamic's int8 MatMul quantizes a whole batch of activations with one scale, so one
    outlier token coarsens every other token's numbers; these inputs (the FFN down-projections,
    after GELU) have such outliers. Each row is divided by its own max |x| before the int8 matmul
    (a DynamicQuantizeMatMul over values in [-1, 1], weights int8 per output column) and the
    result multiplied back, which costs two passes over the input and keeps the int8 kernel.
    """
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    wanted = set(names)
    done = 0
    eps = numpy_helper.from_array(np.array(1e-12, np.float32), "rowq.eps")
    axes = numpy_helper.from_array(np.array([-1], np.int64), "rowq.axes")  # an input from opset 18 on
    for i, node in enumerate(list(graph.node)):
        if node.name not in wanted or node.op_type != "MatMul" or node.input[1] not in inits:
            continue
        w = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
        if w.ndim != 2:
            continue
        scale = np.maximum(np.abs(w).max(axis=0), 1e-12) / 127.0
        q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        base, x = node.name, node.input[0]
        graph.initializer.extend([numpy_helper.from_array(q, base + ".qweight"), numpy_helper.from_array(scale.astype(np.float32), base + ".scale")])
        new = [
            helper.make_node("Abs", [x], [base + ".abs"], name=base + ".rowq_abs"),
            helper.make_node("ReduceMax", [base + ".abs", axes.name], [base + ".rmax"], name=base + ".rowq_max", keepdims=1),
            helper.make_node("Max", [base + ".rmax", eps.name], [base + ".amax"], name=base + ".rowq_eps"),
            helper.make_node("Div", [x, base + ".amax"], [base + ".xn"], name=base + ".rowq_div"),
            helper.make_node("DynamicQuantizeMatMul", [base + ".xn", base + ".qweight", base + ".scale"], [base + ".y"],
                             name=base + ".rowq_matmul", domain="com.microsoft"),
            helper.make_node("Mul", [base + ".y", base + ".amax"], list(node.output), name=base + ".rowq_mul"),
        ]
        pos = list(graph.node).index(node)
        graph.node.remove(node)
        for j, n in enumerate(new):
            graph.node.insert(pos + j, n)
        done += 1
    if done and eps.name not in inits:
        graph.initializer.extend([eps, axes])
    return done


# A word-embedding table smaller than this (elements) stays fp32: the int8 table is for large multilingual
# vocabularies (multilingual-e5-small: 250k x 384, 388 -> 114 MB file, 749 -> 475 MB loaded), where it saves hundreds
# of MB. The packaged all-MiniLM-L6-v2 (30k x 384, 47 MB) would save 34 MB, and its vectors, though within the cosine
# bar, moved retrieval by a question either way on several sets (bench_rag --only quality: dense +3, hybrid -2 of 240):
# not worth changing the default's answers for.
TABLE_INT8_MIN_ELEMENTS = 16 << 20  # 64 MiB of float32


def quantize_table(model: Any, min_elements: int | None = None) -> int:
    """Rewrite, in place, each Gather of a 2-D float initializer by the graph input input_ids (the word-embedding
    table) of at least min_elements (default TABLE_INT8_MIN_ELEMENTS) to an int8 table with one scale per row:
    Gather(int8) -> Cast -> Mul by Gather(scales [rows, 1]); returns the number of elements made int8 (0 when the
    graph has no such table).

    Only the rows a batch looks up are turned back to float, so the fp32 table is never materialised (a
    DequantizeLinear before the Gather would run over the whole table on every call).
    """
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    done = 0
    for node in list(graph.node):
        if node.op_type != "Gather" or len(node.input) < 2 or node.input[1] != "input_ids" or node.input[0] not in inits:
            continue
        if next((a.i for a in node.attribute if a.name == "axis"), 0) != 0:
            continue
        table = inits[node.input[0]]
        if table.data_type != TensorProto.FLOAT or len(table.dims) != 2:
            continue
        if table.dims[0] * table.dims[1] < (TABLE_INT8_MIN_ELEMENTS if min_elements is None else min_elements):
            continue
        w = numpy_helper.to_array(table).copy()  # a writable copy, divided and rounded in place (one table, not three)
        base = node.name or node.output[0]
        graph.initializer.remove(table)
        del inits[node.input[0]], table
        scale = (np.maximum(np.abs(w).max(axis=1, keepdims=True), 1e-12) / 127.0).astype(np.float32)
        w /= scale
        q = np.clip(np.round(w, out=w), -127, 127, out=w).astype(np.int8)
        graph.initializer.extend([numpy_helper.from_array(q, base + ".qtable"), numpy_helper.from_array(scale, base + ".row_scale")])
        new = [
            helper.make_node("Gather", [base + ".qtable", node.input[1]], [base + ".qrows"], name=base + ".table_gather", axis=0),
            helper.make_node("Cast", [base + ".qrows"], [base + ".rows"], name=base + ".table_cast", to=TensorProto.FLOAT),
            helper.make_node("Gather", [base + ".row_scale", node.input[1]], [base + ".scales"], name=base + ".scale_gather", axis=0),
            helper.make_node("Mul", [base + ".rows", base + ".scales"], list(node.output), name=base + ".table_mul"),
        ]
        pos = list(graph.node).index(node)
        graph.node.remove(node)
        for j, n in enumerate(new):
            graph.node.insert(pos + j, n)
        done += int(q.size)
        del w, q
    return done


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the system (glibc's malloc_trim; nothing elsewhere): after
    a large model is dropped its pages otherwise stay resident, fragmented among small live objects, and add to the
    next step's peak."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _word_table_index(model: Any) -> int | None:
    """Index among the initializers of the table the Gather on input_ids reads (the word embeddings), or None."""
    index = {t.name: i for i, t in enumerate(model.graph.initializer)}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) >= 2 and node.input[1] == "input_ids" and node.input[0] in index:
            return index[node.input[0]]
    return None


@dataclass
class WordTable:
    """A word-embedding table set aside (set_aside_word_table): its initializer's name, shape and bytes."""

    name: str
    dims: list[int]
    raw: bytes | None


def set_aside_word_table(model: Any) -> WordTable | None:
    """Take the word-embedding table's data out of model, in place, leaving a few rows of zeros under the same name and type
    where it was; returns what was taken, or None when the model has no such table.

    Optimizing and quantizing never change that table (a Gather's input, neither MatMul nor Attention), but they load,
    copy and serialise the whole graph several times: multilingual-e5-small's table is 384 MB of its 470 MB, so each
    step runs on a ~90 MB model, and put_back_word_table then writes the file the step would have written with it."""
    import numpy as np
    from onnx import helper

    i = _word_table_index(model)
    if i is None:
        return None
    t = model.graph.initializer[i]
    if len(t.dims) != 2 or t.data_location or not t.HasField("raw_data"):
        return None
    aside = WordTable(t.name, list(t.dims), t.raw_data)
    # rows enough for 4 KiB: onnx's external-data round trips (quantize_dynamic's) mark tensors of 1 KiB or more with
    # data_location, and the stand-in must be marked as the table would have been
    row = len(aside.raw or b"") // max(t.dims[0], 1)
    rows = min(t.dims[0], -(-4096 // max(row, 1)))
    t.raw_data = np.zeros((rows, t.dims[1]), helper.tensor_dtype_to_np_dtype(t.data_type)).tobytes()
    t.dims[0] = rows
    return aside


def put_back_word_table(path: Path, table: WordTable) -> None:
    """Rewrite the ONNX file at path with table's data in its stand-in (whatever else a tool set on that
    initializer stays); table's bytes are released."""
    import onnx

    model = onnx.load(str(path))
    t = next((t for t in model.graph.initializer if t.name == table.name), None)
    if t is None:
        raise ValueError(f"{path.name} has no initializer {table.name} to put the word-embedding table back into")
    t.raw_data, table.raw = table.raw or b"", None
    t.dims[0] = table.dims[0]
    onnx.save(model, str(path))


def is_preoptimized(file_name: str) -> bool:
    """Whether a variant file already holds onnxruntime's fusions (load it at the basic level, which does
    not fuse Add + LayerNormalization back into SkipLayerNormalization)."""
    return any(v.ort_optimized and v.file_name == file_name for v in VARIANTS)


def unfuse_skip_layernorm(model: Any) -> int:
    """Replace every SkipLayerNormalization by Add (+ bias) and LayerNormalization, in place; returns how many.

    onnxruntime's CPU SkipLayerNormalization was the slower form here: all-MiniLM-L6-v2 int8, 16 texts of
    196 tokens, 0.247 s fused against 0.207 s split (best of 8, same process, pooled cosine 0.998).
    """
    from onnx import helper

    graph = model.graph
    out, done = [], 0
    for n in graph.node:
        if n.op_type != "SkipLayerNormalization":
            out.append(n)
            continue
        eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-12)
        x, skip, gamma = n.input[0], n.input[1], n.input[2]
        beta = n.input[3] if len(n.input) > 3 and n.input[3] else None
        bias = n.input[4] if len(n.input) > 4 and n.input[4] else None
        if bias:
            out.append(helper.make_node("Add", [x, bias], [n.name + ".biased"], name=n.name + ".bias"))
            x = n.name + ".biased"
        total = n.output[3] if len(n.output) > 3 and n.output[3] else n.name + ".sum"
        out.append(helper.make_node("Add", [x, skip], [total], name=n.name + ".add"))
        out.append(helper.make_node("LayerNormalization", [total, gamma] + ([beta] if beta else []), [n.output[0]],
                                    name=n.name + ".ln", axis=-1, epsilon=eps))
        done += 1
    del graph.node[:]
    graph.node.extend(out)
    return done


def save_ort_optimized(model_path: Path, dest: Path) -> None:
    """Apply onnxruntime's fusions to model_path (SkipLayerNormFusion off) and save the result as dest.

    The extended level: it has the transformer and int8 fusions; the "all" level adds layout
    transforms for this CPU that make a saved file hardware-specific.
    """
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(dest)
    ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"], disabled_optimizers=["SkipLayerNormFusion"])


def write_optimized(folder: Path) -> bool:
    """Write onnx/model_O2.onnx (optimum's O2: transformer fusions for CPU) from the fp32 file next to it; False if
    optimum cannot. As sentence-transformers' export_optimized_onnx_model does, without a session of the fp32 file
    open, and with the word-embedding table set aside (set_aside_word_table) while optimum works."""
    import shutil
    import tempfile

    import onnx

    try:
        from optimum.onnxruntime import ORTOptimizer
        from optimum.onnxruntime.configuration import AutoOptimizationConfig

        with tempfile.TemporaryDirectory(dir=folder, prefix=".O2-") as tmp:
            light = Path(tmp) / "in"  # the configuration (all optimum reads besides the graph) and the graph without its table
            (light / "onnx").mkdir(parents=True)
            shutil.copy(folder / "config.json", light / "config.json")
            model = onnx.load(str(folder / FP32_FILE))
            table = set_aside_word_table(model)
            onnx.save(model, str(light / FP32_FILE))
            del model
            release_memory()
            out = ORTOptimizer.from_pretrained(light, file_names=[FP32_FILE]).optimize(AutoOptimizationConfig.O2(), Path(tmp) / "out",
                                                                                      file_suffix="O2")
            release_memory()
            if table is not None:
                put_back_word_table(out / Path(O2_FILE).name, table)
            publish(out / Path(O2_FILE).name, folder / O2_FILE)
    except Exception as exc:  # optimum missing or this architecture unknown to its optimizer
        log.info("no O2-optimized embedding model (%s: %s)", type(exc).__name__, exc)
        return False
    finally:
        release_memory()
    return True


def write_variant(folder: Path, v: Variant) -> bool:
    """Write v into folder (first the O2 base it needs); False when this model cannot have it (v.int8_table: it has
    no word-embedding table of TABLE_INT8_MIN_ELEMENTS or more)."""
    if v.base == O2_FILE and not (folder / O2_FILE).is_file() and not write_optimized(folder):
        return False
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(folder / v.base))
    nodes = [n for n in model.graph.node if n.op_type in v.ops]
    exclude, rowwise = nodes_by_rule(nodes, v.keep), nodes_by_rule(nodes, v.rowwise)
    if exclude is None or rowwise is None or (v.int8_table and not quantize_table(model)):
        return False
    tmp = folder / (v.file_name + ".tmp")
    light, unfused_tmp = folder / (v.file_name + ".light.tmp"), folder / (v.file_name + ".unfused.tmp")
    try:
        if rowwise:
            quantize_rows(model, rowwise)
        table = set_aside_word_table(model)
        onnx.save(model, str(light))
        del model
        release_memory()
        quantize_dynamic(
            str(light), str(tmp), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=list(v.ops),
            nodes_to_exclude=exclude, extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        release_memory()
        if table is not None:
            put_back_word_table(tmp, table)
        if v.ort_optimized:
            quantized = onnx.load(str(tmp))
            unfuse_skip_layernorm(quantized)
            onnx.save(quantized, str(unfused_tmp))
            save_ort_optimized(unfused_tmp, tmp)
        publish(tmp, folder / v.file_name)
        release_memory()
    finally:  # a failure (a full disk) leaves no partial file behind
        light.unlink(missing_ok=True)
        unfused_tmp.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
    return True


def remove_stale(folder: Path) -> list[str]:
    """Delete ONNX files in folder/onnx that no candidate uses any more (left by older versions); returns their names."""
    keep = {FP32_FILE, O2_FILE, *(v.file_name for v in VARIANTS)}
    removed = []
    for f in sorted((folder / "onnx").glob("model_*.onnx*")):
        if f"onnx/{f.name}" not in keep:
            f.unlink(missing_ok=True)
            removed.append(f.name)
    return removed
