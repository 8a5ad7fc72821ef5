"""Token text and bytes for logprobs on a SentencePiece-style vocabulary (byte fallback, "▁" for spaces), as Gemma's."""
from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

from edge_agent.services.logprobs import TextOffsets, TokenTexts


def _sentencepiece_like() -> Tokenizer:
    vocab = {"<unk>": 0, "a": 1, "▁Paris": 2, "▁": 3, "P": 4, **{f"<0x{b:02X}>": 5 + b for b in range(256)}}
    tok = Tokenizer(models.BPE(vocab, [], unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken("<bos>", special=True)])
    return tok


def test_byte_fallback_pieces_give_their_byte_and_leading_spaces_stay():
    tok = _sentencepiece_like()
    t = TokenTexts(tok)
    assert t.info(2) == (" Paris", list(b" Paris"))  # a first-token decode would strip nothing here, but the anchor keeps it anyway
    euro = tok.encode("€", add_special_tokens=False).ids
    assert [t.info(i) for i in euro] == [("\ufffd", [0xE2]), ("\ufffd", [0x82]), ("\ufffd", [0xAC])]
    bos = tok.token_to_id("<bos>")
    assert t.info(bos) == ("<bos>", list(b"<bos>")) and bos in t.special
    off = TextOffsets(t)  # the text " Paris€": the euro sign's three tokens start where it starts, BOS takes no room
    assert [off.add(i) for i in [bos, 2, *euro]] == [0, 0, 6, 6, 6] and off.chars == 7
