"""engine.tokens.fewest_tokens: a floor of a text's token count read from its UTF-8 length, never above the real count.

The server refuses a prompt whose floor alone overflows the context without tokenizing it (a 2 MB prompt took
3.7 s to encode before its 400), so a floor above the real count would refuse a prompt that fits.
"""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from edge_agent.engine.tokens import encode_plain, fewest_tokens

PIECES = ["the", " fox", "  ", "\n\n", "\t", "é", "e\u0301", "\u1100\u1161\u11a8", "ＡＢＣ", "𝐀𝐁", "漢字", "🙂", "👩‍👩‍👧",
          "<s>", "</s>", "<bos>", "<start_of_turn>", "\u2581", "\x00", "\ufffd", "KΩ", "ﷺ", "0123456789", "http://x.example/a?b=c"]


def _texts(seed: int, n: int = 150) -> list[str]:
    rng = random.Random(seed)
    out = ["", " ", " " * 5000, "a" * 5000, "🙂" * 800, "\u0301" * 900, "𝐀" * 700]
    for _ in range(n):
        out.append("".join(rng.choice(PIECES) if rng.random() < 0.7 else chr(rng.randrange(32, 0x2FFF))
                           for _ in range(rng.randrange(1, 300))))
    return out


def _trained(folder: Path, normalizer=None) -> Tokenizer:
    """A small byte-level BPE (as the tiny test models have), optionally behind a normalizer that shortens text."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if normalizer is not None:
        tok.normalizer = normalizer
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(_texts(7, 400)) * 3)
    tok.train([str(corpus)], trainers.BpeTrainer(vocab_size=600, special_tokens=["<s>", "</s>"],
                                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return tok


def _tokenizers(tiny_bundles, tmp_path) -> dict[str, Tokenizer]:
    toks = {arch: Tokenizer.from_file(str(path / "tokenizer.json")) for arch, path in tiny_bundles.items()}
    toks["nfkc"] = _trained(tmp_path, normalizers.NFKC())
    prebuilt = os.environ.get("EDGE_AGENT_TEST_BUNDLE")  # the real Gemma 3 vocabulary: SentencePiece BPE with byte fallback
    if prebuilt:
        toks["default"] = Tokenizer.from_file(str(Path(prebuilt) / "tokenizer.json"))
    return toks


def test_the_floor_is_never_above_the_real_count(tiny_bundles, tmp_path):
    for name, tok in _tokenizers(tiny_bundles, tmp_path).items():
        floors = 0
        for text in _texts(hash(name) & 0xFFFF):
            least = fewest_tokens(tok, text)
            for ids in (tok.encode(text).ids, tok.encode(text, add_special_tokens=False).ids, encode_plain(tok, text)):
                assert least <= len(ids), (name, text[:80], least, len(ids))
            floors += least > 0
        assert floors > 100, name  # a floor, not 0 for everything


def _utf8(b: bytes) -> bool:
    try:
        b.decode()
        return True
    except UnicodeDecodeError:
        return False


def test_the_floor_is_tight_for_the_longest_piece_repeated(tiny_bundles):
    from edge_agent.engine.tokens import byte_level_table

    tok = Tokenizer.from_file(str(tiny_bundles["llama"] / "tokenizer.json"))
    to_byte = byte_level_table()
    longest = max(len(s) for s in tok.get_vocab(with_added_tokens=False))
    pieces = [bytes(to_byte[c] for c in s) for s in tok.get_vocab(with_added_tokens=False) if len(s) == longest]
    text = next(b.decode() for b in pieces if _utf8(b)) * 50
    assert fewest_tokens(tok, text) == 50 and len(encode_plain(tok, text)) >= 50  # at most ~one token more than the floor


def test_no_floor_where_one_token_can_stand_for_any_run_of_text(tmp_path):
    wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()  # blanks dropped; an unknown word of any length is one [UNK]
    assert fewest_tokens(wordpiece, "x" * 100000) == 0 and len(wordpiece.encode("x" * 100000).ids) == 1
    bpe = Tokenizer(models.BPE({"a": 0, "<unk>": 1}, [], unk_token="<unk>", fuse_unk=True))
    assert fewest_tokens(bpe, "z" * 100000) == 0 and len(bpe.encode("z" * 100000).ids) == 1
    stripping = _trained(tmp_path, normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents()]))
    assert len(stripping.encode("a" + "\u0301" * 5000).ids) == 1
    assert fewest_tokens(stripping, "a" + "\u0301" * 5000) <= 1  # counted after the normalizer, which drops the accents
