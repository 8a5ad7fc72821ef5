"""Token chunking: limits, overlap, boundaries and offsets."""
from __future__ import annotations

from edge_agent.rag.chunking import TokenChunker, joined_text
from edge_agent.rag.loaders import Section


def test_chunks_respect_limit_offsets_and_locations(embedder):
    sentences = [f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(60)]
    sections = [
        Section(" ".join(sentences[:30]) + "\n\n" + " ".join(sentences[30:]), page=1, heading="Intro"),
        Section("A short second page.", page=2),
        Section("word " * 500, page=3),  # one over-long "sentence": split by tokens
    ]
    chunker = TokenChunker(embedder.tokenizer, chunk_tokens=64, overlap=16)
    chunks = chunker.chunk(sections)
    full = joined_text(sections)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert full[c.char_start : c.char_end] == c.text
        assert 0 < c.token_count <= 64
    assert {c.page for c in chunks} == {1, 2, 3}
    assert all(c.heading == "Intro" for c in chunks if c.page == 1)
    page1 = [c for c in chunks if c.page == 1]
    # neighbours overlap, and on sentence boundaries
    assert any(a.char_end > b.char_start for a, b in zip(page1, page1[1:]))
    assert all(c.text.endswith(".") for c in page1)
    assert len([c for c in chunks if c.page == 3]) >= 8


def test_long_sentences_are_cut_between_words_with_overlap(embedder):
    """Issue 14.4: a sentence longer than a chunk is cut at word boundaries, neighbours overlap, and
    every word of the document is whole in at least one chunk (only a single over-long word is cut)."""
    import random

    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 14))) for _ in range(900)]
    text = " ".join(words[:400]) + ". Short one. " + ", ".join(words[400:]) + " the codeword is bcowajfmtxdqiy."
    giant = "x" * 3000  # one token run longer than a chunk: the only place a cut inside a word is allowed
    sections = [Section(text), Section(f"before {giant} after")]
    chunker = TokenChunker(embedder.tokenizer, chunk_tokens=64, overlap=16)
    chunks = chunker.chunk(sections)
    full = joined_text(sections)
    for c in chunks:
        assert full[c.char_start : c.char_end] == c.text
        assert 0 < c.token_count <= 64
    first = [c for c in chunks if c.char_end <= len(text)]
    tokens_of = [set(c.text.replace(",", " ").replace(".", " ").split()) for c in first]
    missing = [w for w in set(words) | {"bcowajfmtxdqiy"} if not any(w in t for t in tokens_of)]
    assert missing == []
    # no chunk starts or ends inside a word
    for c in first:
        assert c.char_start == 0 or full[c.char_start - 1].isspace()
        assert c.char_end == len(text) or not full[c.char_end].isalnum()
    # consecutive chunks of the long sentences share text (the overlap survives the cut)
    assert all(a.char_end > b.char_start for a, b in zip(first, first[1:]))
    # the giant word: windows that overlap, covering it whole
    second = [c for c in chunks if c.char_start > len(text)]
    assert "before" in second[0].text and "after" in second[-1].text
    assert all(a.char_end > b.char_start for a, b in zip(second, second[1:]))
