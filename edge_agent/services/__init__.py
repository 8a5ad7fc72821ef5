"""Use cases that combine engine, rag and store; no Flask here."""
