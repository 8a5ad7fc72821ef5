"""The daemon's lean parts give the same answers as the heavy ones they replace (and stay lean).

The grammar tokenizer is built over the tokenizer we already hold, not from a second parse of
its JSON; the embedder runs its ONNX graph without torch. Each is compared with the path it
replaces on real tokenizers and the real embedding model.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tokenizers import Tokenizer

from edge_agent.services.constrained import OutputConstraint, _Wrapper, compile_matcher, grammar_tokenizer, token_bytes

ROOT = Path(__file__).resolve().parents[2]


def _assert_same_view(tok: Tokenizer, vocab: int, eos: list[int]) -> None:
    import llguidance as llg

    ref = llg.LLTokenizer(tok.to_str(), n_vocab=vocab, eos_token=eos)  # what llguidance reads from the JSON
    tokens = token_bytes(tok)
    assert tokens is not None
    lean = llg.LLTokenizer(_Wrapper(tok, tokens, tuple(eos)), n_vocab=vocab, eos_token=eos)
    n = tok.get_vocab_size(with_added_tokens=True)
    diff = [i for i in range(n) if ref.decode_bytes([i]) != lean.decode_bytes([i]) or ref.is_special_token(i) != lean.is_special_token(i)]
    assert diff == [], f"{len(diff)} tokens differ, e.g. {[(i, tok.id_to_token(i)) for i in diff[:5]]}"
    for text in ["Hello world", ' {"a": [1, 2.5, "x y"]}', "naïve café 日本語 🙂 \n\n\t  end", "<bos> typed by a user"]:
        assert lean.tokenize_str(text) == ref.tokenize_str(text)
    # the same masks step by step along a JSON answer
    schema = OutputConstraint.json_schema({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}})
    ids = tok.encode(' {"name": "Ann Lee", "n": 42}', add_special_tokens=False).ids
    m_ref, m_lean = compile_matcher(ref, schema), compile_matcher(lean, schema)
    for t in ids:
        assert m_ref.compute_bitmask() == m_lean.compute_bitmask()
        assert m_ref.consume_token(t) == m_lean.consume_token(t)


def test_grammar_tokenizer_matches_llguidance_json_on_byte_level_bpe(tmp_path):
    from tiny_models import make_tokenizer_dir

    make_tokenizer_dir(tmp_path)
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    n = tok.get_vocab_size(with_added_tokens=True)
    _assert_same_view(tok, n, [tok.token_to_id("</s>")])
    lt = grammar_tokenizer(tok, n, [tok.token_to_id("</s>")])
    assert grammar_tokenizer(tok, n, [tok.token_to_id("</s>")]) is lt  # built once
    # it holds no copy of the token list, and still reads every token and masks a JSON answer as llguidance's own does
    import gc

    gc.collect()
    held = [o for o in gc.get_objects() if isinstance(o, _Wrapper) and o._tok is tok]
    assert held and all(len(o.tokens) == 0 for o in held)
    import llguidance as llg

    ref = llg.LLTokenizer(tok.to_str(), n_vocab=n, eos_token=[tok.token_to_id("</s>")])
    assert all(ref.decode_bytes([i]) == lt.decode_bytes([i]) for i in range(n))
    schema = OutputConstraint.json_schema({"type": "object", "properties": {"n": {"type": "integer"}}})
    m_ref, m_lt = compile_matcher(ref, schema), compile_matcher(lt, schema)
    for t in tok.encode(' {"n": 42}', add_special_tokens=False).ids:
        assert m_ref.compute_bitmask() == m_lt.compute_bitmask()
        assert m_ref.consume_token(t) == m_lt.consume_token(t)


def test_grammar_tokenizer_matches_llguidance_json_on_gemma(default_bundle):
    tok = Tokenizer.from_file(str(default_bundle / "tokenizer.json"))
    _assert_same_view(tok, 262144, [1, 106])


def test_unknown_tokenizer_kind_falls_back_to_the_json(tmp_path):
    from tokenizers import decoders
    from tiny_models import make_tokenizer_dir

    make_tokenizer_dir(tmp_path)
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])  # llguidance reads it; token_bytes does not
    assert token_bytes(tok) is None
    lt = grammar_tokenizer(tok, tok.get_vocab_size(with_added_tokens=True), [0])
    assert lt.vocab_size == tok.get_vocab_size(with_added_tokens=True)


_CHILD = """
import json, sys
def rss():
    return int([l for l in open('/proc/self/status') if l.startswith('VmRSS:')][0].split()[1]) // 1024
from tokenizers import Tokenizer
import llguidance, ctypes
tok = Tokenizer.from_file(sys.argv[1]); ctypes.CDLL('libc.so.6').malloc_trim(0)
before = rss()
from edge_agent.services.constrained import grammar_tokenizer
grammar_tokenizer(tok, 262144, [1, 106]); ctypes.CDLL('libc.so.6').malloc_trim(0)
print(json.dumps({"mb": rss() - before, "torch": "torch" in sys.modules}))
"""


def test_grammar_tokenizer_of_gemma_costs_well_under_a_second_json_parse(default_bundle):
    """llguidance's own JSON parse of Gemma's tokenizer added 217 MB; over our tokenizer it adds ~120 MB."""
    import json

    out = subprocess.run([sys.executable, "-c", _CHILD, str(default_bundle / "tokenizer.json")], capture_output=True, text=True,
                         timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["mb"] < 160, got
