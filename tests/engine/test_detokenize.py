"""The engine's streaming detokenizer (tokenizers' DecodeStream): whole characters only, the same text as one decode."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from edge_agent.engine.detokenize import IncrementalDecoder

TEXTS = [c["text"] for c in json.loads((Path(__file__).parents[1] / "fixtures" / "gemma3_tokenizer_parity.json").read_text())["cases"]]


def _stream(tok: Tokenizer, ids: list[int]) -> list[str]:
    d = IncrementalDecoder(tok)
    return [d.add(i) for i in ids] + [d.flush()]


def _check(tok: Tokenizer, cases: list[list[int]]) -> None:
    for ids in cases:
        parts = _stream(tok, ids)
        full = tok.decode(ids, skip_special_tokens=True)
        assert "".join(parts) == full, ids
        # nothing but the final flush may show a replacement character the full text does not have there
        assert all("\ufffd" not in p for p in parts[:-1]) or "\ufffd" in full, (ids, parts)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_tiny_tokenizers_stream_whole_characters(tiny_bundles, arch):
    tok = Tokenizer.from_file(str(tiny_bundles[arch] / "tokenizer.json"))
    rng = random.Random(1)
    cases = [tok.encode(t).ids for t in TEXTS]
    vocab = tok.get_vocab_size()  # once: on Gemma's 262k vocabulary each call takes ~70 ms
    cases += [[rng.randrange(vocab) for _ in range(rng.randint(1, 25))] for _ in range(200)]
    _check(tok, cases)
    emoji = tok.encode("🙂🚀 äöü 日本語", add_special_tokens=False).ids
    assert len(emoji) > 3  # byte-level pieces: characters are split over tokens
    parts = _stream(tok, emoji)
    assert all(p == "" or p.encode("utf-8") for p in parts) and "".join(parts) == "🙂🚀 äöü 日本語"


def test_unfinished_character_is_flushed_as_replacement(tiny_bundles):
    tok = Tokenizer.from_file(str(tiny_bundles["llama"] / "tokenizer.json"))
    ids = tok.encode("🙂", add_special_tokens=False).ids
    d = IncrementalDecoder(tok)
    assert [d.add(i) for i in ids[:-1]] == [""] * (len(ids) - 1)  # held back: not a whole character yet
    assert d.flush() == tok.decode(ids[:-1])


@pytest.mark.slow
def test_default_bundle_stream_equals_decode(default_bundle):
    tok = Tokenizer.from_file(str(default_bundle / "tokenizer.json"))
    rng = random.Random(2)
    cases = [tok.encode(t).ids for t in TEXTS]
    vocab = tok.get_vocab_size()  # once: on Gemma's 262k vocabulary each call takes ~70 ms
    cases += [[rng.randrange(vocab) for _ in range(rng.randint(1, 25))] for _ in range(200)]
    _check(tok, cases)
