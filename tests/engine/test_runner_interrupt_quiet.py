"""A user's interrupt of a batch step is routine (engine/step_gate.py): onnxruntime must not log it as an ERROR.

Stopped inside an If node's branch (the dual head's lm_head_select), onnxruntime's executor logged
"[E:onnxruntime ...] Non-zero status code returned while running If node ... Exiting due to terminate flag being
set to true." to stderr (the journal) each time a user arrived while a 16-row batch decode ran. The runner's
RunOptions carry the per-run log level; the interrupt itself is reported as StepInterrupted.
"""
from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

SIDE = 192


def _slow_if_graph(chain: int = 600) -> bytes:
    """Y = If(cond, X @ W @ W ... (chain matmuls), X): nearly all of a run is spent inside the branch."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [SIDE, SIDE], np.eye(SIDE, dtype=np.float32).ravel().tolist())
    nodes, prev = [], "X"
    for i in range(chain):
        nodes.append(helper.make_node("MatMul", [prev, "W"], [f"m{i}"]))
        prev = f"m{i}"
    nodes.append(helper.make_node("Identity", [prev], ["then_out"]))
    out_info = helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [SIDE, SIDE])
    then_g = helper.make_graph(nodes, "slow", [], [out_info])
    else_g = helper.make_graph([helper.make_node("Identity", ["X"], ["else_out"])], "fast", [],
                               [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [SIDE, SIDE])])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["Y"], name="lm_head_select", then_branch=then_g, else_branch=else_g)],
        "g",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("X", TensorProto.FLOAT, [SIDE, SIDE])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [SIDE, SIDE])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def test_a_step_interrupted_inside_an_if_branch_writes_no_error_line(llama_engine, capfd):
    m = llama_engine.model
    so = ort.SessionOptions()
    so.log_severity_level = 3  # as the runner's sessions: errors shown
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep the chain as it is
    session = ort.InferenceSession(_slow_if_graph(), so, providers=["CPUExecutionProvider"])
    feeds = {"cond": np.array(True), "X": np.ones((SIDE, SIDE), np.float32)}
    session.run(None, feeds, m.run_options)  # warm: the first run allocates
    interrupted = 0
    for _ in range(5):  # the interrupt must land inside the branch; a run takes far longer than the 20 ms wait
        started = threading.Event()
        timer = threading.Thread(target=lambda: (started.wait(), threading.Event().wait(0.02), m.interrupt()))
        timer.start()
        try:
            started.set()
            session.run(None, feeds, m.run_options)
        except Exception as e:  # onnxruntime's Fail: "Exiting due to terminate flag being set to true."
            assert "terminate" in str(e)
            interrupted += 1
        finally:
            timer.join()
            m.clear_interrupt()
        if interrupted >= 2:
            break
    assert interrupted >= 2, "the runs ended before the interrupt: make the chain longer"
    err = capfd.readouterr().err
    assert "terminate flag" not in err, err[-500:]
    assert "[E:onnxruntime" not in err, err[-500:]
