"""A Dutch labelled text set no one on the team wrote: paragraphs of the Debian FAQ in Dutch, labelled by chapter.

Source: the debian-faq-nl Debian package (`apt-get install debian-faq-nl`), one HTML page per chapter under
/usr/share/doc/debian/FAQ/nl. Every paragraph of at least MIN_WORDS words of a chapter's page is one item,
labelled with the chapter's title without its number ("Hoofdstuk 5. ..."). The FAQ's paragraphs are shorter
than the Library Reference's, hence 15 words, not 25. The 8 chapters were chosen before any measurement:
the 10 with at least 28 such paragraphs (20 to evaluate, 8 examples), less two whose subject another
one covers (8 "De gereedschappen voor het pakketbeheer" next to 7 "Grondbeginselen van het
pakketbeheersysteem", and 9 "Uw Debian-systeem up-to-date houden", which is about those same tools).
The subjects still overlap more than set a's (every chapter is about Debian): a harder, honest set.
Its name in the benches is "nlfaq" (pydoc_labels.load("nlfaq"), --set nlfaq).
"""
from __future__ import annotations

from pathlib import Path

from pydoc_labels import kept_paragraphs

DOCS = Path("/usr/share/doc/debian/FAQ/nl")
CHAPTERS = {  # chapter page -> label (the chapter's own title, without "Hoofdstuk N.")
    "basic-defs.nl.html": "Definities en overzicht",
    "choosing.nl.html": "Een Debian-distributie kiezen",
    "compatibility.nl.html": "Compatibiliteitskwesties",
    "software.nl.html": "In het Debian-systeem aanwezige software",
    "ftparchives.nl.html": "De archieven van Debian",
    "pkg-basics.nl.html": "Grondbeginselen van het pakketbeheersysteem van Debian",
    "customizing.nl.html": "Uw Debian GNU/Linux-systeem aanpassen",
    "support.nl.html": "Ondersteuning krijgen voor Debian GNU/Linux",
}
MIN_WORDS = 15
MAX_WORDS = 150


def paragraphs(docs: Path = DOCS, chapters: dict[str, str] | None = None) -> dict[str, list[str]]:
    """label -> its chapter's paragraphs (deduplicated). Raises FileNotFoundError without the package."""
    if not (docs / "index.nl.html").is_file():
        raise FileNotFoundError(f"{docs} not found: apt-get install debian-faq-nl")
    out: dict[str, list[str]] = {}
    for page, label in (chapters or CHAPTERS).items():
        out[label] = kept_paragraphs([(docs / page).read_text(encoding="utf-8")], MIN_WORDS, MAX_WORDS)
    return out

