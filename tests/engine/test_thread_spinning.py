"""thread_spinning = false reaches onnxruntime's session and changes no number."""
from __future__ import annotations

import numpy as np

from edge_agent.config import Settings
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.runtime import build_engine

KEY = "session.intra_op.allow_spinning"


def _spin(engine: OnnxEngine) -> str:
    return engine.model.session.get_session_options().get_session_config_entry(KEY)


def test_spinning_off_reaches_the_session_and_gives_the_same_logits(tiny_bundles):
    b = load_bundle(tiny_bundles["llama"])
    on = OnnxEngine(b, threads=2, max_batch=2, context_length=64, device="cpu")
    off = OnnxEngine(b, threads=2, max_batch=2, context_length=64, device="cpu", spinning=False)
    assert _spin(on) == "1" and _spin(off) == "0"
    ids = np.array(on.encode("Paris is the capital of"))
    np.testing.assert_array_equal(on.model.prefill(0, ids, 0), off.model.prefill(0, ids, 0))


def test_the_setting_goes_through_build_engine(tiny_bundles, tmp_path):
    folder = tiny_bundles["llama"]
    s = Settings(models_dir=folder.parent, model=folder.name, thread_spinning=False, device="cpu", max_batch=2,
                 context_length=64, data_dir=tmp_path, index_dir=tmp_path / "index")
    scheduler = build_engine(s)
    try:
        assert _spin(scheduler.engine) == "0"
    finally:
        scheduler.stop()
