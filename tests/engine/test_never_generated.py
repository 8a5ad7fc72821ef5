"""Tokens a text model should never write (image markers, unused slots) are neither sampled nor rendered.

Gemma 3's GGUF marks <start_of_image> user-defined, not control, and the default model wrote it as literal text
after an empty prompt. The tiny model here has the same kind of vocabulary: a user-defined image marker and a
special unused slot; the engine marks them at load time, so existing bundles are covered too.
"""
from __future__ import annotations

import pytest

from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.tokens import encode_plain
from edge_agent.engine.types import SamplingParams

MARKER, UNUSED, TAG = "<start_of_image>", "<unused0>", "<table>"


@pytest.fixture(scope="module")
def marker_engine(tmp_path_factory):
    from tiny_models import make_checkpoint

    from edge_agent.models.importer import import_model

    root = tmp_path_factory.mktemp("never")
    ck = make_checkpoint(root / "ck", "llama", extra_tokens={UNUSED: True, MARKER: False, TAG: False})
    bundle = import_model(ck, "marked", root / "models", echo=lambda s: None)
    return OnnxEngine(load_bundle(bundle), threads=1, max_batch=2, context_length=128)


def _boost(ids):
    def processor(_tokens, logits):
        logits[ids] = 1e4  # the model "wants" these above everything else
        return logits
    return processor


def test_image_marker_and_unused_slot_are_not_rendered(marker_engine):
    tok = marker_engine.tokenizer
    marker, unused, tag = (tok.token_to_id(t) for t in (MARKER, UNUSED, TAG))
    assert marker_engine.decode([marker, unused]) == ""
    assert marker_engine.decode([marker], skip_special_tokens=False) == MARKER  # still there when asked
    assert marker_engine.decode([tag]) == TAG  # a user-defined token that is text stays text
    # convention 11: a user who types the marker gets text, not the image token
    assert marker not in encode_plain(tok, f"see {MARKER} here")


def test_image_marker_and_unused_slot_are_never_sampled(marker_engine):
    tok = marker_engine.tokenizer
    marker, unused, tag = (tok.token_to_id(t) for t in (MARKER, UNUSED, TAG))
    banned = {marker, unused, tok.token_to_id("<s>"), tok.token_to_id("<pad>")}
    s = BatchScheduler(marker_engine).start()
    try:
        forced = s.generate("The quick", SamplingParams(max_tokens=6, temperature=0, ignore_eos=True,
                                                         logits_processor=_boost([marker, unused])))
        sampled = s.generate("The quick", SamplingParams(max_tokens=6, temperature=1.0, seed=3, ignore_eos=True,
                                                          logits_processor=_boost([marker])))
        text = s.generate("The quick", SamplingParams(max_tokens=3, temperature=0, ignore_eos=True,
                                                       logits_processor=_boost([tag])))
    finally:
        s.stop()
    for r in (forced, sampled):
        assert not banned & set(r.token_ids), r.token_ids
        assert MARKER not in r.text and UNUSED not in r.text
    assert text.token_ids == [tag] * 3 and text.text == TAG * 3  # only the never-written ones are held back
    assert banned <= set(marker_engine.never_generated_ids.tolist())
    assert not set(marker_engine.never_generated_ids.tolist()) & marker_engine.stop_token_ids


@pytest.mark.slow
def test_default_bundle_never_writes_image_markers(default_bundle):
    """Gemma 3 270M wrote "<start_of_image>" as the first token after an empty prompt (seed 1, bundle defaults)."""
    eng = OnnxEngine(load_bundle(default_bundle), max_batch=1, context_length=128)
    s = BatchScheduler(eng).start()
    try:
        params = dict(eng.bundle.generation_defaults, max_tokens=4)
        outs = [s.generate("", SamplingParams(**params, seed=seed)) for seed in range(4)]
    finally:
        s.stop()
    for r in outs:
        assert not {255999, 256000} & set(r.token_ids) and "<start_of_image>" not in r.text, r.text
    never = set(eng.never_generated_ids.tolist())
    assert {255999, 256000, 5, 6, 0, 2, 3} <= never  # <start_of_image>, <end_of_image>, [multimodal], <unused0>, pad, bos, unk
    assert not never & {1, 106}  # <eos>, <end_of_turn> still end a reply
    assert len(never) < 6300  # the HTML tags and whitespace runs Gemma marks user-defined stay writable
    assert eng.decode([2, 255999, 6]) == ""
