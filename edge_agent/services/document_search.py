"""Search over the documents (a mixin of DocumentService): the k best chunks or documents for a query, filtered,
diversified (MMR) and widened by their neighbours, each with its location and a snippet."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from edge_agent.rag.retrieval import MODES
from edge_agent.services.document_results import DocumentError, Filters, ScoredChunk, location_label, make_snippet

GROUPS = ("chunk", "document")
DOCUMENT_POOL = 8  # group="document" ranks documents among this many times k chunks


class DocumentSearch:
    """DocumentService's retrieval; it uses the service's store, index, embedder and _prefix_path."""

    def retrieve(
        self, query: str, k: int = 5, filters: Filters | dict | None = None, mode: str = "hybrid",
        diversity: float | None = None, neighbors: int = 0, group: str = "chunk",
    ) -> list[ScoredChunk]:
        """The k best chunks for a query (hybrid: dense + BM25 fused, see rag.retrieval).

        diversity (0..1): MMR, each next hit unlike those before it (near-duplicates are always left out);
        neighbors: each hit's text widened by that many chunks on either side of it in its document;
        group="document": the k best documents, each by its best chunk. Raises DocumentError."""
        if not query or not query.strip():
            raise DocumentError("query is empty", param="query")
        if not 1 <= k <= 100:
            raise DocumentError("k must be between 1 and 100", param="k")
        if mode not in MODES:
            raise DocumentError(f"mode must be one of {', '.join(MODES)}", param="mode")
        if diversity is not None and not 0.0 <= diversity <= 1.0:
            raise DocumentError("diversity must be between 0 and 1", param="diversity")
        if not 0 <= neighbors <= 3:
            raise DocumentError("neighbors must be between 0 and 3", param="neighbors")
        if group not in GROUPS:
            raise DocumentError(f"group must be one of {', '.join(GROUPS)}", param="group")
        f = Filters.from_any(filters)
        allowed = None
        if f is not None and not f.empty():
            prefix = self._prefix_path(f.path_prefix) if f.path_prefix else None
            allowed = self.store.filter_chunk_ids(f.document_ids, prefix, f.types)
        qvec = self.embedder.embed_query(query) if mode != "bm25" else None
        pool = DOCUMENT_POOL * k if group == "document" else None
        hits = self.index.search(qvec, query, k, allowed, mode, diversity=diversity, pool=pool, doc_of=self.store.document_ids_of)
        rows = self.store.chunks_by_ids([h.chunk_id for h in hits])
        if group == "document":  # a document ranks by its best chunk (hits are best first)
            seen: set[int] = set()
            hits = [h for h in hits if h.chunk_id in rows and not (rows[h.chunk_id][1].id in seen or seen.add(rows[h.chunk_id][1].id))]
        out = []
        for h in hits[:k]:
            if h.chunk_id not in rows:
                continue
            c, d = rows[h.chunk_id]
            if neighbors:
                c = self._widen(c, neighbors)
            out.append(
                ScoredChunk(
                    d.id, h.chunk_id, d.title, d.path, d.kind,
                    {"page": c.page, "heading": c.heading, "ordinal": c.ordinal, "char_start": c.char_start,
                     "char_end": c.char_end, "label": location_label(c.page, c.heading)},
                    round(h.score, 6), c.text, make_snippet(c.text, query), h.dense_rank, h.bm25_rank, h.dense_score,
                )
            )
        return out

    def _widen(self, c: Any, n: int) -> Any:
        """Chunk c with the text of up to n chunks before and after it in its document joined on (overlaps
        counted once, by character offsets), its offsets widened to match."""
        run = self.store.chunks_in_range(c.document_id, c.ordinal - n, c.ordinal + n)
        if len(run) <= 1:
            return c
        text, end = run[0].text, run[0].char_end
        for nxt in run[1:]:
            if nxt.char_start >= end:  # a gap (section break) or touching: keep them apart
                text += "\n\n" + nxt.text
            elif nxt.char_end > end:  # overlapping: only the part past what we have
                text += nxt.text[end - nxt.char_start :]
            end = max(end, nxt.char_end)
        return replace(c, text=text, char_start=run[0].char_start, char_end=end)
