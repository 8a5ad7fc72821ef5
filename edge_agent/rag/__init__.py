"""Documents: loaders, chunking, embedder, FAISS + BM25 index, hybrid retrieval."""
