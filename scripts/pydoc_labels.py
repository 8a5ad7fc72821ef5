"""A labelled text set no one on the team wrote: paragraphs of CPython's Library Reference, labelled by its chapter.

Source: the python3.11-doc Debian package (`apt-get install python3.11-doc`), HTML under
/usr/share/doc/python3.11/html/library. The chapter pages (text.html, crypto.html, ...) list their
module pages; every paragraph of at least MIN_WORDS words of a module page is one item, labelled
with the chapter's title. The 8 chapters were chosen for distinct subjects before any measurement.
"""
from __future__ import annotations

import html
import random
import re
from pathlib import Path

DOCS = Path("/usr/share/doc/python3.11/html/library")
CHAPTERS = {  # chapter page -> label (the chapter's own title)
    "text.html": "Text Processing Services",
    "numeric.html": "Numeric and Mathematical Modules",
    "filesys.html": "File and Directory Access",
    "archiving.html": "Data Compression and Archiving",
    "crypto.html": "Cryptographic Services",
    "concurrency.html": "Concurrent Execution",
    "internet.html": "Internet Protocols and Support",
    "debug.html": "Debugging and Profiling",
}
# A second, disjoint set (chosen the same way, by distinct subjects, before any measurement), to check
# that what helps on CHAPTERS is not tuned to it: `split(..., chapters=CHAPTERS_B)`.
CHAPTERS_B = {
    "persistence.html": "Data Persistence",
    "fileformats.html": "File Formats",
    "netdata.html": "Internet Data Handling",
    "markup.html": "Structured Markup Processing Tools",
    "i18n.html": "Internationalization",
    "tk.html": "Graphical User Interfaces with Tk",
    "development.html": "Development Tools",
    "unix.html": "Unix Specific Services",
}
# A third set, the check never tuned on: 8 of the remaining chapters, chosen (distinct subjects, at least
# 25 paragraphs each; "Multimedia Services" has 9 in 3.11, so "Importing Modules" took its place) before
# any method was measured on it.
CHAPTERS_C = {
    "binary.html": "Binary Data Services",
    "datatypes.html": "Data Types",
    "functional.html": "Functional Programming Modules",
    "ipc.html": "Networking and Interprocess Communication",
    "modules.html": "Importing Modules",
    "distribution.html": "Software Packaging and Distribution",
    "language.html": "Python Language Services",
    "windows.html": "MS Windows Specific Services",
}
SETS = {"a": CHAPTERS, "b": CHAPTERS_B, "c": CHAPTERS_C}
MIN_WORDS = 25
MAX_WORDS = 150


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def paragraphs(docs: Path = DOCS, chapters: dict[str, str] | None = None) -> dict[str, list[str]]:
    """label -> paragraphs of its chapter's module pages (deduplicated). Raises FileNotFoundError without the docs."""
    if not (docs / "index.html").is_file():
        raise FileNotFoundError(f"{docs} not found: apt-get install python3.11-doc")
    out: dict[str, list[str]] = {}
    for page, label in (chapters or CHAPTERS).items():
        chapter = (docs / page).read_text(encoding="utf-8")
        mods = dict.fromkeys(re.findall(r'<li class="toctree-l1"><a class="reference internal" href="([^"#]+)">', chapter))
        bodies = [(docs / m).read_text(encoding="utf-8").split('<div class="body" role="main">', 1)[-1]
                  .split('<div class="sphinxsidebar"', 1)[0] for m in mods]
        out[label] = kept_paragraphs(bodies, MIN_WORDS, MAX_WORDS)
    return out


def kept_paragraphs(bodies: list[str], min_words: int, max_words: int) -> list[str]:
    """The <p> texts of the HTML bodies with at least min_words words, each once, cut to max_words words."""
    seen: set[str] = set()
    paras: list[str] = []
    for body in bodies:
        for p in re.findall(r"<p>(.*?)</p>", body, flags=re.S):
            t = _text(p)
            words = t.split()
            if len(words) < min_words or t in seen:
                continue
            seen.add(t)
            paras.append(" ".join(words[:max_words]))
    return paras


ALL_SETS = (*SETS, "nlfaq")  # nlfaq: the Debian FAQ in Dutch by chapter (scripts/nlfaq_labels.py)


def load(name: str) -> dict[str, list[str]]:
    """label -> paragraphs of a named set (a, b, c, nlfaq). Raises FileNotFoundError without its package, KeyError."""
    if name == "nlfaq":
        import nlfaq_labels

        return nlfaq_labels.paragraphs()
    return paragraphs(chapters=SETS[name])


def split(per_class: int, shots: int, seed: int = 0, chapters: dict[str, str] | None = None,
          paras: dict[str, list[str]] | None = None) -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
    """(text, label) evaluation items, per_class of each label, and up to `shots` examples per label from the rest
    (of `paras`, a set's paragraphs by label, or of these chapters)."""
    rng = random.Random(seed)
    evals, pool = [], {}
    for label, got in (paras if paras is not None else paragraphs(chapters=chapters)).items():
        got = list(got)
        rng.shuffle(got)
        evals += [(t, label) for t in got[:per_class]]
        pool[label] = got[per_class: per_class + shots]
    rng.shuffle(evals)
    return evals, pool
