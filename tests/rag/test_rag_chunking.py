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


# --- definition lists: a manual page's entries ------------------------------------------------------------------------
def _manual(bodies: dict[str, str]) -> str:
    """A manual page rendered as `man` renders it: section names at column 0, terms at 7, bodies at 11, hard-wrapped."""
    import textwrap

    entries = "\n\n".join(f"       {term}\n" + textwrap.fill(body, 90, initial_indent=" " * 11, subsequent_indent=" " * 11)
                          for term, body in bodies.items())
    return ("TOOL(1)                 User Commands                 TOOL(1)\n\nNAME\n       tool - does things\n\n"
            f"OPTIONS\n{entries}\n\nAUTHOR\n       Written by Someone.")


def _filler(seed: int, n: int) -> str:
    import random

    rng = random.Random(seed)
    return " ".join(" ".join(rng.choice(["the", "value", "is", "read", "when", "set", "file", "each", "run", "limit"])
                             for _ in range(rng.randint(6, 12))).capitalize() + "." for _ in range(n))


def test_manual_entries_stay_whole_with_their_term_as_heading(embedder):
    """An option entry (its term line and indented body) is one piece: it lands whole in one chunk, its default with it,
    never cut at a chunk's end nor repeated as overlap; small entries share a chunk; the chunk's heading names the
    section the entries lie in, so BM25's heading field sees it."""
    bodies = {f"--option-{i}=N": _filler(i, 2) + f" Defaults to {i}{i}K." for i in range(12)}
    text = _manual(bodies)
    chunker = TokenChunker(embedder.tokenizer, chunk_tokens=120, overlap=30)
    chunks = chunker.chunk([Section(text)])
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text
        assert 0 < c.token_count <= 120
    for i, term in enumerate(bodies):
        start = text.index(f"       {term}\n") + 7
        entry = text[start : text.index("\n\n", start)]
        assert f"Defaults to {i}{i}K." in " ".join(entry.split())
        holders = [c for c in chunks if entry in c.text]
        assert len(holders) == 1, term  # whole, in exactly one chunk
        assert holders[0].heading == "OPTIONS" or not holders[0].text.startswith("--option-")
        assert sum(term in c.text for c in chunks) == 1  # no entry carried into the next chunk as overlap
    assert sum(c.heading == "OPTIONS" for c in chunks) >= 2
    assert any(c.text.count("--option-") >= 2 for c in chunks)  # small entries share a chunk
    assert len(chunks) < len(bodies)
    assert any("AUTHOR\n       Written by Someone." in c.text for c in chunks)

    # the same entries without the layout (no indentation to read): nothing to name, no heading
    flat = "\n\n".join(f"{term}\n{body}" for term, body in bodies.items())
    assert all(c.heading is None for c in TokenChunker(embedder.tokenizer, chunk_tokens=120, overlap=30).chunk([Section(flat)]))


def test_an_entry_longer_than_a_chunk_is_cut_inside_under_its_term(embedder):
    """An entry that cannot fit is cut into sentences (a hard-wrapped body's sentence ends at its mark, not at a line's
    end), starting a chunk of its own with its term; each of its chunks is headed by section and term."""
    long_body = _filler(99, 30) + " The default timeout is 5 minutes. " + _filler(98, 10)
    bodies = {"-a": _filler(1, 1), "LineMax=": long_body, "-z, --zero": _filler(2, 1)}
    text = _manual(bodies)
    chunker = TokenChunker(embedder.tokenizer, chunk_tokens=80, overlap=20)
    chunks = chunker.chunk([Section(text)])
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text
        assert 0 < c.token_count <= 80
    inside = [c for c in chunks if c.heading == "OPTIONS > LineMax="]
    assert len(inside) >= 3
    first = next(c for c in chunks if "LineMax=" in c.text)
    assert first.text.startswith("LineMax=")  # the long entry opens a chunk, its term with its first sentence
    assert "-a\n" not in first.text
    fact = next(c for c in chunks if "The default timeout is 5 minutes." in " ".join(c.text.split()))
    assert fact.heading == "OPTIONS > LineMax="
    # sentences are whole although lines wrap inside them: every sentence of the body lies whole in some chunk
    flat = [" ".join(c.text.split()) for c in chunks]
    for sentence in long_body.split(". "):
        assert any(sentence.strip(". ") in f for f in flat)
    # neighbouring chunks of the long entry overlap (sentences carried), the small entries do not
    spans = sorted((c.char_start, c.char_end) for c in inside)
    assert any(a[1] > b[0] for a, b in zip(spans, spans[1:]))


def test_prose_and_indented_tokens():
    """Plain prose keeps the paragraph and sentence cuts and no heading of its own; a chunk's tokens are counted as the
    embedder reads the text (embedding_text: runs of spaces as one, no indentation), with a tokenizer that, like
    multilingual-e5's, gives each extra space a token."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from edge_agent.rag.embedder import embedding_text

    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = [("<unk>", 0.0), ("▁", -3.0), (".", -3.0)] + [(c, -5.0) for c in letters] + [("▁" + c, -4.0) for c in letters]
    tok = Tokenizer(models.Unigram(vocab, 0, False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    indented = "term\n" + "\n".join("           " + "ab cd ef gh." for _ in range(6))
    assert embedding_text(indented) == "term\n" + "\n".join("ab cd ef gh." for _ in range(6))
    raw = len(tok.encode(indented, add_special_tokens=False).ids)
    squeezed = len(tok.encode(embedding_text(indented), add_special_tokens=False).ids)
    assert raw >= squeezed + 60  # ten spaces of each of six lines, a token each
    [c] = TokenChunker(tok, chunk_tokens=squeezed + 2, overlap=4).chunk([Section(indented)])
    assert c.token_count == squeezed and c.text == indented

    prose = "\n\n".join(" ".join(f"Word{i} and word{j} say something plain." for j in range(5)) for i in range(6))
    prose = prose.lower().replace("0", "a").replace("1", "b").replace("2", "c").replace("3", "d").replace("4", "e").replace("5", "f")
    chunks = TokenChunker(tok, chunk_tokens=150, overlap=50).chunk([Section(prose, heading="Intro")])
    assert len(chunks) > 3
    assert all(c.heading == "Intro" and c.text.endswith(".") and c.token_count <= 150 for c in chunks)
    assert any(a.char_end > b.char_start for a, b in zip(chunks, chunks[1:]))  # prose neighbours still overlap
