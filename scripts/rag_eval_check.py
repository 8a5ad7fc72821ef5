"""The self-check of a question set over loaded documents (rag_eval_blind9, rag_eval_blind10): every answer phrase
once in the loaded sections (whitespace collapsed), every fact inside its phrase, every absent question nl or en."""
from __future__ import annotations

import sys
from collections.abc import Callable, Sequence


def check_phrases(sections: Sequence[str], facts: Sequence[tuple[str, str, str]], absent: Sequence[tuple[str, str]]) -> list[str]:
    """Problems with the sets; an empty list when all hold."""
    def norm(s: str) -> str:
        return " ".join(s.split())

    problems = []
    for q, phrase, fact in facts:
        n = sum(s.count(norm(phrase)) for s in sections)
        if n != 1:
            problems.append(f"phrase found {n} times in the loaded sections: {phrase!r} ({q})")
        if norm(fact).casefold() not in norm(phrase).casefold():
            problems.append(f"fact not in its phrase: {fact!r} in {phrase!r}")
    for q, lang in absent:
        if lang not in ("nl", "en"):
            problems.append(f"absent question without nl/en: {q!r}")
    return problems


def run(check: Callable[[], list[str]], missing_corpus: Callable[[], str | None], counts: str) -> None:
    """A set script's __main__: exit 2 when its documents are not installed, 1 with the problems, 0 with counts."""
    why = missing_corpus()
    if why:
        print(why)
        sys.exit(2)
    found = check()
    print("\n".join(found) or f"ok: {counts}; every phrase once in the loaded sections, every fact in its phrase")
    sys.exit(1 if found else 0)
