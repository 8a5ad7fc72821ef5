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
