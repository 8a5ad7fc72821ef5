"""The int8 matmuls' activations: per-row scaling, then a fixed QuantizeLinear + MatMulIntegerToFloat (builder 2),
bit for bit what builder 1's guard row [-1, 1, 0, ..] + DynamicQuantizeMatMul + Slice gave, and independent of
the batch."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_agent.models import onnx_builder as ob


def _session(nodes, inits, k: int, n: int) -> ort.InferenceSession:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ob.OPSET), helper.make_opsetid(ob.MS, 1)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _builder1(w: np.ndarray, scale: np.ndarray) -> ort.InferenceSession:
    """Builder 1's int8 matmul, written out: rows to [-1, 1], the guard row, DynamicQuantizeMatMul, the guard row sliced off."""
    k, n = w.shape
    guard = np.zeros((1, k), np.float32)
    guard[0, :2] = -1.0, 1.0
    c = {name: numpy_helper.from_array(a, name) for name, a in {
        "W": w, "S": scale, "axis": np.array([-1], np.int64), "eps": np.array(1e-12, np.float32), "guard": guard,
        "flat": np.array([-1, k], np.int64), "zero": np.array([0], np.int64), "minus1": np.array([-1], np.int64),
        "out": np.array([-1, 3, n], np.int64)}.items()}  # x is [b, 3, k] below
    mk = helper.make_node
    nodes = [mk("Reshape", ["x", "flat"], ["x2"]), mk("Abs", ["x2"], ["a"]), mk("ReduceMax", ["a", "axis"], ["m"], keepdims=1),
             mk("Max", ["m", "eps"], ["amax"]), mk("Div", ["x2", "amax"], ["xn"]), mk("Concat", ["xn", "guard"], ["xg"], axis=0),
             mk("DynamicQuantizeMatMul", ["xg", "W", "S"], ["yg"], domain=ob.MS), mk("Slice", ["yg", "zero", "minus1", "zero"], ["y1"]),
             mk("Mul", ["y1", "amax"], ["y2"]), mk("Reshape", ["y2", "out"], ["y"])]
    return _session(nodes, list(c.values()), k, n)


def _builder2(w: np.ndarray, scale: np.ndarray) -> ort.InferenceSession:
    """Today's _Graph.int8_matmul on the same weights."""
    g = ob._Graph(True)
    y = g.int8_matmul("x", g.init("W", w), g.init("S", scale), *w.shape)
    g.nodes.append(helper.make_node("Identity", [y], ["y"]))
    return _session(g.nodes, g.inits, *w.shape)


@pytest.mark.parametrize("k, n", [(64, 96), (256, 48)])
def test_static_activation_quantization_equals_the_guard_row(k, n):
    rng = np.random.default_rng(k)
    w, scale = ob.quantize_columns(rng.standard_normal((k, n)).astype(np.float32))
    old, new = _builder1(w, scale), _builder2(w, scale)
    x = rng.standard_normal((16, 3, k)).astype(np.float32) * 4
    x[:, :, 5] *= 30  # an outlier channel, as the real activations have
    x[2] = 0.0  # an all-zero row: scaled by eps, quantized to the zero point
    want = old.run(None, {"x": x})[0]
    got = new.run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    assert np.abs(want).max() > 0
    # a row gives the same numbers alone as among sixteen
    np.testing.assert_array_equal(new.run(None, {"x": x[7:8]})[0], got[7:8])


def test_int8_matmul_has_no_guard_row_or_dynamic_quantization():
    g = ob._Graph(True)
    w, scale = ob.quantize_columns(np.eye(8, 4, dtype=np.float32))
    g.int8_matmul("x", g.init("W", w), g.init("S", scale), 8, 4)
    ops = [nd.op_type for nd in g.nodes]
    assert ops.count("MatMulIntegerToFloat") == 1 and ops.count("QuantizeLinear") == 1
    assert not {"DynamicQuantizeMatMul", "Concat", "Slice", "Reshape"} & set(ops)
