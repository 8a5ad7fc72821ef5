"""The fp16 graph that the CUDA provider runs, derived from a bundle's int8 graph and cached beside it.

onnxruntime's CUDA GroupQueryAttention takes only fp16/bf16 (its kernel is registered for
MLFloat16 and BFloat16), and DynamicQuantizeMatMul, which carries the bundle's int8 linear
layers, has no CUDA kernel. So the GPU graph is built from the bundle's own graph:

1. every int8 matmul becomes MatMul(x, qweight * scale): the same int8 weights the CPU uses,
   de-quantized, so no new quantization error; the per-row normalisation around it stays
   (x / amax @ W * amax = x @ W). Builder 2's QuantizeLinear + MatMulIntegerToFloat(xq, qweight,
   a_scale, scale, a_zero) lose the QuantizeLinear (an Identity of its float input); builder 1's
   DynamicQuantizeMatMul(x, qweight int8 [k, n], scale [n]) keeps its guard row, so the engine
   reads the logits the same way; a MatMulNBits becomes a MatMul of its
   de-quantized weights the same way (4-bit blocks: onnx_builder's lm_head "int4"; 8-bit
   blocks: the int8-block32 attention output); of a graph with both output heads only the int8
   one is kept (_inline_int8_head);
2. every float tensor becomes fp16 with onnxruntime's own converter
   (onnxruntime.transformers.float16), keeping `inputs_embeds` and `logits` fp32 at the
   graph's edges (casts inside); the key/value cache inputs and outputs become fp16, so the
   engine keeps the cache on the device in fp16 (a bundle's quantized cache, int8 or int4, is
   made a float one first: float_cache).

It is written once to `<bundle>/gpu/` (through a temporary folder and os.replace) and
recorded in the manifest under "derived" (its sha256, size, the source graph's sha256 and
this converter's version), never under "files": `model verify` keeps checking only what
the import wrote. A cache whose record does not match is rebuilt. When the bundle folder
is read-only the graph goes to a per-user cache folder instead.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from edge_agent.engine.bundle import MANIFEST, Bundle, sha256_file

log = logging.getLogger(__name__)

CONVERTER_VERSION = 3
KEY = "gpu_fp16"
FOLDER = "gpu"
GRAPH = "model.onnx"
DATA = "model.onnx.data"
# Gemma 3's residual stream passes 100,000 (prefill of a 12-token prompt, 270M) where fp16 ends at
# 65,504: the residual adds and the norms stay fp32, everything else (weights, cache, attention) fp16
FP32_OPS: tuple[str, ...] = ("SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization")


class GpuGraphError(Exception):
    """The fp16 graph could not be built or written (message says why)."""


def _source_record(bundle: Bundle) -> str:
    """The sha256 of the int8 graph's weights (from the manifest: no re-hashing at every start)."""
    files = bundle.manifest.get("files", {})
    data = files.get(DATA) or files.get(bundle.manifest.get("model_file", GRAPH)) or {}
    return str(data.get("sha256", ""))


def _float_tensors(model) -> set[str]:
    """Names of the float32 tensors of one of our graphs: each op's outputs take its first input's type
    (true of every operator onnx_builder writes), Shape gives int64, Cast its `to`."""
    from onnx import TensorProto

    floats = {v.name for v in model.graph.input if v.type.tensor_type.elem_type == TensorProto.FLOAT}
    floats |= {t.name for t in model.graph.initializer if t.data_type == TensorProto.FLOAT}
    for node in model.graph.node:
        if node.op_type == "Shape":
            continue
        if node.op_type == "Cast":
            is_float = next(a.i for a in node.attribute if a.name == "to") == TensorProto.FLOAT
        elif node.op_type in ("DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulNBits"):
            is_float = True
        else:
            is_float = bool(node.input) and node.input[0] in floats
        if is_float:
            floats.update(o for o in node.output if o)
    return floats


# GroupQueryAttention's attributes and inputs of a quantized cache (models.onnx_builder's kv_cache)
_KV_QUANT_ATTRS = ("k_quant_type", "v_quant_type", "kv_cache_bit_width")
_KV_SCALE_INPUTS = (12, 13)


def _inputs_of(nodes) -> set[str]:
    """Every tensor name the nodes read, in their subgraphs too (the dual head's branches read outer initializers)."""
    names = set()
    for n in nodes:
        names.update(n.input)
        for a in n.attribute:
            if a.g is not None and a.g.node:
                names |= _inputs_of(a.g.node)
    return names


def _decode_attention_only(g) -> None:
    """A graph whose int8-cache attention sits behind Ifs on PROMPT_STEP (models.kv_prompt): each If replaced by
    its decode branch (the int8 GroupQueryAttention, with the If's outputs), the input and the nodes only the
    prompt branches read dropped. An fp32 or fp16 cache attends a prompt at full speed without them."""
    from edge_agent.engine.runner import PROMPT_STEP

    if not any(i.name == PROMPT_STEP for i in g.input):
        return
    nodes = []
    for n in g.node:
        if n.op_type == "If" and list(n.input) == [PROMPT_STEP]:
            inner = next(a.g for a in n.attribute if a.name == "else_branch").node[0]
            inner.output[:] = list(n.output)
            n = inner
        nodes.append(n)
    # the shared nodes the prompt branches read (where the new positions go) now have no reader
    while True:
        used = _inputs_of(nodes) | {o.name for o in g.output}
        kept = [n for n in nodes if any(o in used for o in n.output)]
        if len(kept) == len(nodes):
            break
        nodes = kept
    del g.node[:]
    g.node.extend(nodes)
    keep = [i for i in g.input if i.name != PROMPT_STEP]
    del g.input[:]
    g.input.extend(keep)


def float_cache(model) -> bool:
    """Make a graph with a quantized key/value cache (int8, or int4 packed two a byte) take an fp32 cache, in place:
    GroupQueryAttention loses its scales and quantization attributes, the cache inputs and outputs become float
    with head_dim channels, the scales' initializers go. Returns whether anything changed."""
    from onnx import TensorProto, helper

    g = model.graph
    _decode_attention_only(g)
    changed, per_byte = False, 1
    for node in g.node:
        if node.op_type != "GroupQueryAttention":
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if not any(a in attrs for a in _KV_QUANT_ATTRS):
            continue
        changed = True
        per_byte = 2 if attrs.get("kv_cache_bit_width") == 4 else per_byte
        kept = [a for a in node.attribute if a.name not in _KV_QUANT_ATTRS]
        del node.attribute[:]
        node.attribute.extend(kept)
        for k in _KV_SCALE_INPUTS:
            if k < len(node.input):
                node.input[k] = ""
        while node.input and not node.input[-1]:
            del node.input[-1]
    if not changed:
        return False
    for v in list(g.input) + list(g.output):
        if v.name.startswith(("past_", "present_")):
            t = v.type.tensor_type
            t.elem_type = TensorProto.FLOAT
            last = t.shape.dim[-1]
            if last.HasField("dim_value"):
                last.dim_value *= per_byte
    used = _inputs_of(g.node)
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    for prop in model.metadata_props:
        if prop.key == "edge_agent.kv_cache":
            prop.value = "fp32"
    return True


def _int4_weight(node, inits) -> np.ndarray:
    """The fp16 W [K, N] of a MatMulNBits(x, B, scales[, zero_points]) node with bits 4 (layout: models/int4.py).

    Raises GpuGraphError for another bit width or a node whose weights are not initializers.
    """
    from onnx import numpy_helper

    attrs = {a.name: a.i for a in node.attribute}
    if attrs.get("bits") != 4 or len(node.input) < 3 or any(n not in inits for n in node.input[1:4] if n):
        raise GpuGraphError(f"node {node.name}: expected MatMulNBits(x, 4-bit weight, scale[, zero point])")
    k, n, block = attrs["K"], attrs["N"], attrs["block_size"]
    packed = numpy_helper.to_array(inits[node.input[1]]).reshape(n, -1, block // 2)
    scales = numpy_helper.to_array(inits[node.input[2]]).astype(np.float32).reshape(n, -1)
    zp = numpy_helper.to_array(inits[node.input[3]]).reshape(n, -1) if len(node.input) > 3 and node.input[3] else None
    w = np.empty((k, n), np.float16)
    for c in range(0, n, 8192):  # in column blocks, as _int8_weight does
        p = packed[c : c + 8192]
        q = np.empty(p.shape[:2] + (block,), np.float32)
        q[..., 0::2], q[..., 1::2] = p & 0x0F, p >> 4
        if zp is None:
            z = np.float32(8)
        else:
            zb = zp[c : c + 8192]
            z = np.stack([zb & 0x0F, zb >> 4], axis=-1).reshape(zb.shape[0], -1)[:, : p.shape[1], None].astype(np.float32)
        w[:, c : c + 8192] = ((q - z) * scales[c : c + 8192, :, None]).reshape(p.shape[0], -1)[:, :k].T
    return w


def _to_fp16(arr: np.ndarray) -> np.ndarray:
    """fp16 with tiny magnitudes kept at fp16's smallest subnormal (an epsilon of 1e-12 must not become 0)."""
    tiny = (arr != 0) & (np.abs(arr) < 5.96e-08)
    out = np.clip(arr, -65504.0, 65504.0).astype(np.float16)
    out[tiny] = (np.sign(arr[tiny]) * 5.96e-08).astype(np.float16)
    return out


def to_fp16(model, fp32_ops: tuple[str, ...]) -> None:
    """Make every float tensor fp16 except the inputs and outputs of fp32_ops nodes, `inputs_embeds`, `logits` and `hidden`.

    Casts go where an fp16 tensor meets an fp32 node or the reverse (one per tensor and direction).
    """
    from onnx import TensorProto, helper, numpy_helper

    g = model.graph
    floats = _float_tensors(model)
    inits = {t.name: t for t in g.initializer}
    wide = {"inputs_embeds"}  # float tensors that stay fp32
    for node in g.node:
        if node.op_type in fp32_ops:
            wide.update(o for o in node.output if o in floats)
    casts: dict[tuple[str, int], str] = {}
    fp16_inits: dict[str, str] = {}
    nodes = []

    def cast(name: str, to: int) -> str:
        key = (name, to)
        if key not in casts:
            casts[key] = f"{name}/{'fp32' if to == TensorProto.FLOAT else 'fp16'}"
            nodes.append(helper.make_node("Cast", [name], [casts[key]], name=casts[key] + "_cast", to=to))
        return casts[key]

    for node in g.node:
        blocked = node.op_type in fp32_ops
        for k, name in enumerate(node.input):
            if name not in floats:
                continue
            if name in inits:
                if not blocked:
                    if name not in fp16_inits:
                        fp16_inits[name] = name + ".fp16"
                        g.initializer.append(numpy_helper.from_array(_to_fp16(numpy_helper.to_array(inits[name])), fp16_inits[name]))
                    node.input[k] = fp16_inits[name]
            elif blocked and name not in wide:
                node.input[k] = cast(name, TensorProto.FLOAT)
            elif not blocked and name in wide:
                node.input[k] = cast(name, TensorProto.FLOAT16)
        if node.op_type == "Identity" and node.output[0] in ("logits", "hidden"):  # graph outputs stay fp32
            node.op_type = "Cast"
            node.attribute.append(helper.make_attribute("to", TensorProto.FLOAT))
        nodes.append(node)
    used = {i for n in nodes for i in n.input}
    graph_outputs = {v.name for v in g.output}
    for node in nodes:  # the CUDA kernel never writes SkipSimplifiedLayerNormalization's mean / inv_std: drop them
        if node.op_type == "SkipSimplifiedLayerNormalization":
            for k in (1, 2):
                if k < len(node.output) and node.output[k] not in used and node.output[k] not in graph_outputs:
                    node.output[k] = ""
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    del g.node[:]
    g.node.extend(nodes)
    del g.value_info[:]
    for v in list(g.input) + list(g.output):
        if v.name.startswith(("past_", "present_")):
            v.type.tensor_type.elem_type = TensorProto.FLOAT16


def _block8_weight(node, inits: dict) -> np.ndarray:
    """The fp16 W [K, N] of a MatMulNBits(x, 8-bit blocks, scales) node (the int8-block32 attention output).

    Raises GpuGraphError for other bit widths or an explicit zero point.
    """
    from onnx import numpy_helper

    attrs = {a.name: a.i for a in node.attribute}
    if attrs.get("bits") != 8 or len(node.input) != 3 or node.input[1] not in inits or node.input[2] not in inits:
        raise GpuGraphError(f"node {node.name}: expected MatMulNBits(x, 8-bit weight, scale) without zero points")
    k, n = attrs["K"], attrs["N"]
    q = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32) - 128.0  # [n, blocks, block]
    scale = numpy_helper.to_array(inits[node.input[2]]).astype(np.float32).reshape(q.shape[0], q.shape[1], 1)
    return np.ascontiguousarray((q * scale).reshape(n, -1)[:, :k].T.astype(np.float16))


def _int8_weight(node, inits: dict) -> np.ndarray:
    """The fp16 W [K, N] of a DynamicQuantizeMatMul(x, int8 weight, scale) or
    MatMulIntegerToFloat(xq, int8 weight, a_scale, scale, a_zero) node."""
    from onnx import numpy_helper

    at = 3 if node.op_type == "MatMulIntegerToFloat" else 2
    if len(node.input) != at + (2 if at == 3 else 1) or node.input[1] not in inits or node.input[at] not in inits:
        raise GpuGraphError(f"node {node.name}: expected DynamicQuantizeMatMul(x, int8 weight, scale) or "
                            "MatMulIntegerToFloat(xq, int8 weight, a_scale, scale, a_zero)")
    q = numpy_helper.to_array(inits[node.input[1]])
    scale = numpy_helper.to_array(inits[node.input[at]]).astype(np.float32)
    w = np.empty(q.shape, np.float16)
    for c in range(0, q.shape[1], 8192):  # in column blocks: a 640 x 262,144 head in fp32 would be 671 MB
        w[:, c : c + 8192] = q[:, c : c + 8192].astype(np.float32) * scale[c : c + 8192]
    return w


def _as_matmul(model, node, w: np.ndarray, dead: set[str]) -> None:
    """Turn a quantized matmul node into MatMul(x, w) with its fp16 weight w; its quantized inputs become dead."""
    from onnx import numpy_helper

    wname = node.input[1] + ".fp16"
    model.graph.initializer.append(numpy_helper.from_array(w, wname))
    dead.update(n for n in node.input[1:] if n)
    node.op_type, node.domain = "MatMul", ""
    del node.input[1:]
    del node.attribute[:]
    node.input.append(wname)


def _inline_int8_head(model) -> None:
    """A graph with both output heads (If "lm_head_select", onnx_builder's lm_head "dual"): its int8 head
    inline in the graph, the int4 one, the select input and the hidden state dropped. On the GPU both
    become fp16 MatMuls of the same size, so the int4 one saves nothing and would need re-scoring."""
    nodes = list(model.graph.node)
    at = next((i for i, n in enumerate(nodes) if n.op_type == "If" and n.name == "lm_head_select"), None)
    if at is None:
        return
    node = nodes[at]
    branch = next(a.g for a in node.attribute if a.name == "else_branch")
    from onnx import helper

    # as in a one-head graph: the head's last node, then Identity to the graph output
    inlined = [*branch.node, helper.make_node("Identity", [branch.output[0].name], [node.output[0]], name="logits_out")]
    kept = [n for n in nodes[:at] + inlined + nodes[at + 1:] if list(n.output) != ["hidden"]]
    del model.graph.node[:]
    model.graph.node.extend(kept)
    model.graph.initializer.extend(branch.initializer)
    used = {i for n in kept for i in n.input}  # the int4 head's weights (outer initializers) go
    inits = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inits)
    for field, drop in ((model.graph.input, node.input[0]), (model.graph.output, "hidden")):
        keep = [v for v in field if v.name != drop]
        del field[:]
        field.extend(keep)


def convert(src_model: Path, dst_folder: Path, fp32_ops: tuple[str, ...] | None = None) -> Path:
    """Write the fp16 graph of the int8 graph at src_model into dst_folder; returns the graph path.

    Raises GpuGraphError when the graph has an unexpected shape.
    """
    import onnx

    model = onnx.load(str(src_model))  # external data loaded too
    float_cache(model)
    _inline_int8_head(model)
    inits = {t.name: t for t in model.graph.initializer}
    dead: set[str] = set()
    for node in model.graph.node:
        if node.op_type == "MatMulNBits":
            bits = {a.name: a.i for a in node.attribute}.get("bits")
            _as_matmul(model, node, _block8_weight(node, inits) if bits == 8 else _int4_weight(node, inits), dead)
        elif node.op_type in ("DynamicQuantizeMatMul", "MatMulIntegerToFloat"):
            _as_matmul(model, node, _int8_weight(node, inits), dead)
        elif node.op_type == "QuantizeLinear":  # builder 2's activations: the MatMul takes them in float
            dead.update(n for n in node.input[1:] if n)
            node.op_type = "Identity"
            del node.input[1:]
            del node.attribute[:]
    keep = [t for t in model.graph.initializer if t.name not in dead]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    to_fp16(model, FP32_OPS if fp32_ops is None else fp32_ops)
    dst_folder.mkdir(parents=True, exist_ok=True)
    os.chmod(dst_folder, 0o755)
    out = dst_folder / GRAPH
    onnx.save_model(model, str(out), save_as_external_data=True, all_tensors_to_one_file=True, location=DATA, size_threshold=1024)
    for p in (out, dst_folder / DATA):
        os.chmod(p, 0o644)
    return out


def _record(folder: Path, source: str) -> dict:
    data = folder / DATA
    return {
        "folder": str(folder), "file": f"{FOLDER}/{DATA}", "bytes": data.stat().st_size, "sha256": sha256_file(data),
        "source_sha256": source, "converter_version": CONVERTER_VERSION,
    }


def _matches(rec: dict | None, folder: Path, source: str, verify: bool) -> bool:
    if not rec or rec.get("converter_version") != CONVERTER_VERSION or rec.get("source_sha256") != source:
        return False
    data, graph = folder / DATA, folder / GRAPH
    if not graph.is_file() or not data.is_file() or data.stat().st_size != rec.get("bytes"):
        return False
    return not verify or sha256_file(data) == rec.get("sha256")


def _write_manifest(bundle: Bundle, rec: dict) -> None:
    """Add the record under manifest["derived"] (temp file, fsync, os.replace); the rest is kept as it is."""
    path = bundle.path / MANIFEST
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.setdefault("derived", {})[KEY] = {k: v for k, v in rec.items() if k != "folder"}
    fd, tmp = tempfile.mkstemp(dir=bundle.path, prefix=".manifest.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    bundle.manifest.setdefault("derived", {})[KEY] = manifest["derived"][KEY]


def user_cache_folder(bundle: Bundle) -> Path:
    """Where the graph goes when the bundle folder is read-only: $XDG_CACHE_HOME/edge-agent/<bundle>-<source hash>."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "edge-agent" / f"{bundle.name}-{_source_record(bundle)[:16]}"


def cached_record(bundle: Bundle, verify: bool = False) -> dict | None:
    """The manifest's record of a built fp16 graph if it is present and matches the bundle, else None."""
    source = _source_record(bundle)
    rec = bundle.manifest.get("derived", {}).get(KEY)
    if _matches(rec, bundle.path / FOLDER, source, verify):
        return {**rec, "folder": str(bundle.path / FOLDER)}
    side = user_cache_folder(bundle)
    meta = side / "record.json"
    if meta.is_file():
        try:
            rec = json.loads(meta.read_text(encoding="utf-8"))
        except ValueError:
            return None
        if _matches(rec, side, source, verify):
            return {**rec, "folder": str(side)}
    return None


def ensure_gpu_graph(bundle: Bundle) -> Path:
    """The fp16 graph of bundle (built and recorded on first use); returns the path of its model.onnx.

    Raises GpuGraphError when it cannot be built, OSError when no folder can hold it.
    """
    rec = cached_record(bundle, verify=True)
    if rec is not None:
        return Path(rec["folder"]) / GRAPH
    writable = os.access(bundle.path, os.W_OK)
    target = bundle.path / FOLDER if writable else user_cache_folder(bundle)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "a") as lock:  # one builder at a time (daemon, gpu-check)
        fcntl.flock(lock, fcntl.LOCK_EX)
        _reload_derived(bundle)
        rec = cached_record(bundle, verify=True)  # built by the process we waited for
        if rec is not None:
            return Path(rec["folder"]) / GRAPH
        return _build(bundle, target, writable)


def _reload_derived(bundle: Bundle) -> None:
    """Take the manifest's "derived" records from disk (another process may have just written one)."""
    try:
        derived = json.loads((bundle.path / MANIFEST).read_text(encoding="utf-8")).get("derived")
    except (OSError, ValueError):
        return
    if derived:
        bundle.manifest["derived"] = derived


def _build(bundle: Bundle, target: Path, writable: bool) -> Path:
    source = _source_record(bundle)
    free = shutil.disk_usage(target.parent).free
    need = 3 * bundle.model_file.with_name(DATA).stat().st_size if bundle.model_file.with_name(DATA).exists() else 0
    if free < need:
        raise GpuGraphError(f"not enough free disk for the GPU graph ({free >> 20} MiB free, ~{need >> 20} MiB needed) in {target.parent}")
    log.info("building the fp16 GPU graph of %s in %s (once)", bundle.name, target)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        convert(bundle.model_file, tmp)
        rec = _record(tmp, source)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    rec["folder"] = str(target)
    if writable:
        _write_manifest(bundle, rec)
    else:
        (target / "record.json").write_text(json.dumps(rec), encoding="utf-8")
    return target / GRAPH
