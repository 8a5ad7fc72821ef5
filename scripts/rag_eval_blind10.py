"""Blind 10 question sets for scripts/bench_rag.py and scripts/bench_answers.py (data, and a check of the data): paraphrased
factual questions in Dutch and English, some across languages, over documents no earlier set asked about.

The corpus (installed, not downloaded; `apt-get install debian-faq-nl python3.11-doc`): four chapters of the Dutch Debian
FAQ that no earlier set asked about, or once (getting-debian, contributing, nextrelease, support; blind9 indexes them
too, but its questions are about the other chapters and the Debian Edu manual), and three English HOWTOs of the Python 3.11
documentation (sorting, ipaddress, sockets; the pydoc topics of the older sets are the language reference, not these).
7 documents, read through the project's own loaders into a temporary index of their own.

Written 2026-12-01 21:55-22:15 UTC from the documents' own text (as loaded), before anyone ran the system on them and
without reading any earlier set's failures; committed before its first measurement (the semantic sentence signal of
issue 13, branch semrank) and never used to choose a setting. The questions paraphrase the documents' words (few copied
phrases); NL_FACTS_BLIND10's last four ask in Dutch about the English HOWTOs, EN_FACTS_BLIND10's last four in English about
the Dutch FAQ; the absent ones sit next to a covered topic (a date, a price, a figure the documents do not give).

NL_FACTS_BLIND10, EN_FACTS_BLIND10: (question, exact phrase of the answer passage, short fact the answer must state).
ABSENT_BLIND10: (question, language) that no document answers.

    .venv/bin/python scripts/rag_eval_blind10.py     checks every phrase against the loaded texts and every fact against its phrase

Measured once on main's code (063f4c4 plus this set, 952cfac), 2026-12-01 22:14-22:20 UTC, `bench_rag.py --only answers --sets
xl1,xl2,blind10,blind9 --memo FILE --embedding-model models/embeddings/multilingual-e5-small` (default bundle, rag k=4, greedy:
load, 3.3 -> 5.0, does not move it; 131 chunks of e5): facts 15/43: nl 8/23 (of them Dutch about the English HOWTOs 0/4),
en 7/20 (English about the Dutch FAQ 3/4); absent declined 7/10. Its failures were not read before the measurement below.
With the embedding model's question-sentence cosine added to the likelihood rerank (branch semrank-signal,
rag_semantic_sentences 0.2; 22:42-22:47): nl 8/23, en 8/20 (one more: "99%"), cross-language 3/8 both, absent 7/10; with the
cosine instead of the likelihood (0.4, rag_rerank_sentences 0): nl 8/23, en 7/20, cross-language 2/8, absent 6/10.
Retrieval, `bench_rag.py --only quality --sets blind10 --embedding-model ...multilingual-e5-small` (23:16, load 3.0 -> 3.3):
passage Recall@3 hybrid nl 0.783, en 0.85; dense nl 0.87, en 0.90; BM25 nl 0.739, en 0.85 (the hybrid below dense alone).
"""
from __future__ import annotations

from pathlib import Path

FAQ_DIR = Path("/usr/share/doc/debian/FAQ/nl")
FAQ_CHAPTERS = ("getting-debian", "contributing", "nextrelease", "support")
HOWTO_DIR = Path("/usr/share/doc/python3.11/html/howto")
HOWTOS = ("sorting", "ipaddress", "sockets")


def corpus_files() -> list[Path]:
    """The corpus's 7 HTML files, in a fixed order (whether or not they exist)."""
    return [FAQ_DIR / f"{name}.nl.html" for name in FAQ_CHAPTERS] + [HOWTO_DIR / f"{name}.html" for name in HOWTOS]


def missing_corpus() -> str | None:
    """What to install when corpus files are missing (a sentence), else None."""
    missing = [p for p in corpus_files() if not p.is_file()]
    if not missing:
        return None
    packages = sorted({"debian-faq-nl" if p.parent == FAQ_DIR else "python3.11-doc" for p in missing})
    return (f"blind10 reads documentation from Debian packages, and {len(missing)} of its {len(corpus_files())} files "
            f"are missing (first: {missing[0]}): run `apt-get install --no-install-recommends {' '.join(packages)}`")


def load_sections() -> list[str]:
    """Every section's text of the corpus as the project's loaders read it (whitespace collapsed)."""
    from edge_agent.rag.loaders import load_path

    return [" ".join(s.text.split()) for p in corpus_files() for s in load_path(p).sections]


NL_FACTS_BLIND10 = [
    # Dutch FAQ, asked in Dutch
    ("hoe heet de huidige stabiele versie van debian (nummer 11)?", "stabiele' distributie of bullseye", "bullseye"),
    ("welke codenaam draagt testing op dit moment", "die momenteel bookworm heet", "bookworm"),
    ("via welke site komen de veiligheidsreparaties voor stable binnen?",
     "Alle beveiligingsupdates worden aangeboden via security.debian.org", "security.debian.org"),
    ("op welke plek op de schijf staat welke debian-versie er op een cd zit?", "Kijk naar het CD-label in /.disk/info", "/.disk/info"),
    ("met welk protocol kan ik de installer over het netwerk booten", "door via TFTP over het netwerk op te starten", "TFTP"),
    ("ik wil een mirror voor debian draaien, wie moet ik mailen?", "neem dan contact met <debian-admin@lists.debian.org>",
     "debian-admin@lists.debian.org"),
    ("hoeveel pakketten zijn er al met de extra veilige compileeropties gebouwd?",
     "Momenteel werden ongeveer 400 pakketten aangepast", "400"),
    ("vanaf welk jaar tellen pakketten met een veiligheidsfix mee voor het hardening-doel?",
     "sinds 2006 een opwaardering hebben gehad", "2006"),
    ("naar welke BSD-kern wordt debian overgezet?", "namelijk voor FreeBSD", "FreeBSD"),
    ("in welke tekenset moeten de changelog- en control-bestanden staan?", "Naar UTF-8 omzetten van debian/changelog", "UTF-8"),
    ("in welk pakket zit de naslaggids voor systeembeheer met shellvoorbeelden?", "U vindt ze in het pakket debian-reference",
     "debian-reference"),
    ("wie heeft het info-hypertekstsysteem bedacht", "Het werd ontworpen door Richard Stallman", "Richard Stallman"),
    ("welk pakket heb ik nodig om het commando man zelf te hebben?", "man-db, dat het man-programma zelf bevat", "man-db"),
    ("wat is het mailadres van de beheerder van de mailinglijsten?", "Het e-mailadres van de lijstbeheerder is <listmaster@lists.debian.org>",
     "listmaster@lists.debian.org"),
    ("hoe bereik ik de maintainer van pakket xyz per mail?", "moet u een e-mail sturen naar xyz@packages.debian.org",
     "xyz@packages.debian.org"),
    ("met welke tool kan ik stap voor stap een fout in een debian-pakket melden?", "U kunt het pakket reportbug gebruiken", "reportbug"),
    ("op welke lijst komt een nieuw ingediende bugmelding terecht", "doorgestuurd worden naar de mailinglijst debian-bugs-dist",
     "debian-bugs-dist"),
    ("welke afkorting gebruikt debian voor zijn systeem om fouten bij te houden?", "(Bug Tracking System - BTS)", "BTS"),
    ("welke zoekmachines noemt de faq als voorbeeld van gewone zoekrobotten?", "zoals DuckDuckGo of Google", "DuckDuckGo"),
    # English Python HOWTOs, asked in Dutch
    ("welk sorteeralgoritme gebruikt python intern?", "The Timsort algorithm used in Python", "Timsort"),
    ("welke fout krijg je als een netwerkdefinitie hostbits bevat?", "will result in ValueError being raised", "ValueError"),
    ("wie is de schrijver van de uitleg over sockets programmeren?", "Author: Gordon McMillan", "Gordon McMillan"),
    ("waar zijn sockets oorspronkelijk uitgevonden?", "They were invented in Berkeley", "Berkeley"),
]

EN_FACTS_BLIND10 = [
    # English Python HOWTOs, asked in English
    ("what does calling sort on a list give back?", "(and returns None to avoid confusion)", "None"),
    ("which argument of sorted makes the order go from high to low?", "accept a reverse parameter with a boolean value", "reverse"),
    ("what other name does the decorate-sort-undecorate pattern go by?", "Another name for this idiom is Schwartzian transform",
     "Schwartzian transform"),
    ("who made the DSU trick popular with Perl people?", "after Randal L. Schwartz, who popularized it", "Randal L. Schwartz"),
    ("how can I turn an old two-argument compare function into something sorted accepts?",
     "Python provides functools.cmp_to_key to wrap the comparison function", "cmp_to_key"),
    ("for sorting by the user's locale, which function gives the key?", "use locale.strxfrm() for a key function", "strxfrm"),
    ("what dunder method gives a class a natural sort order?", "by defining an __lt__() method", "__lt__"),
    ("who are the authors of the ipaddress tutorial?", "Peter Moody", "Peter Moody"),
    ("integers up to what size does ip_address treat as IPv4?", "Values that will fit within 32 bits are assumed to be IPv4",
     "32 bits"),
    ("how do I get ip_network to clear the host bits rather than raising an error?",
     "the flag strict=False can be passed to the constructor", "strict=False"),
    ("how many addresses are in the /96 IPv6 example network?", "net6.num_addresses 4294967296", "4294967296"),
    ("what are address-plus-prefix things like 192.0.2.1/24 called in ipaddress?",
     "Such definitions are referred to as interface objects", "interface objects"),
    ("what fraction of sockets in use are INET sockets, according to the HOWTO?", "they account for at least 99% of the sockets in use",
     "99%"),
    ("how many incoming connections does the example server let wait in line?", "queue up as many as 5 connect requests",
     "5 connect requests"),
    ("what does the socket howto recommend for fast communication between two local processes?",
     "you should look into pipes or shared memory", "pipes or shared memory"),
    ("which port numbers should you pick when experimenting with a server socket?", "use a nice high number (4 digits)",
     "4 digits"),
    # Dutch FAQ, asked in English
    ("what address do I mail to get instructions for using the bug tracker by e-mail?", "kunt u een e-mail sturen naar request@bugs.debian.org",
     "request@bugs.debian.org"),
    ("which file lists all the Debian mailing lists once doc-debian is installed?", "/usr/share/doc/debian/mailing-lists.txt",
     "mailing-lists.txt"),
    ("which US non-profit is the main organisation to donate to for Debian?",
     "De belangrijkste organisatie is Software in the Public Interest", "Software in the Public Interest"),
    ("where is the web version of the Debian bug database?", "Een kopie van deze informatie is te vinden op https://www.debian.org/Bugs/",
     "https://www.debian.org/Bugs/"),
]

ABSENT_BLIND10 = [
    ("wanneer is debian 11 bullseye precies uitgekomen?", "nl"),
    ("hoeveel ontwikkelaars werken er aan debian?", "nl"),
    ("hoeveel schijfruimte heb ik nodig voor een volledige debian-mirror?", "nl"),
    ("wat kost een officiële debian-dvd?", "nl"),
    ("hoeveel sneller is timsort dan quicksort?", "nl"),
    ("which port number does SNMP use?", "en"),
    ("how many usable hosts does a /16 IPv4 network have?", "en"),
    ("which Python version added the key parameter to sorted?", "en"),
    ("how long is the default timeout of a new socket in seconds?", "en"),
    ("who translated the Debian FAQ into Dutch?", "en"),
]

NL_RETRIEVAL_BLIND10 = [(q, p) for q, p, _ in NL_FACTS_BLIND10]
EN_RETRIEVAL_BLIND10 = [(q, p) for q, p, _ in EN_FACTS_BLIND10]


def check(sections: list[str] | None = None) -> list[str]:
    """Problems with the sets (rag_eval_check.check_phrases); an empty list when all hold."""
    from rag_eval_check import check_phrases

    return check_phrases(load_sections() if sections is None else sections, NL_FACTS_BLIND10 + EN_FACTS_BLIND10, ABSENT_BLIND10)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from rag_eval_check import run

    run(check, missing_corpus, f"{len(NL_FACTS_BLIND10)} nl facts, {len(EN_FACTS_BLIND10)} en facts, {len(ABSENT_BLIND10)} absent "
                               f"over {len(corpus_files())} documents")
