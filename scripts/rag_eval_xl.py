"""Cross-language question sets xl1 (dev) and xl2 (held out) for scripts/bench_rag.py (issue 13: answers across languages).

A mixed box: CPython's English pydoc topics, the three Dutch articles of ../shared/corpus-nl and blind9's 17 Dutch Debian
documents (rag_eval_blind9.corpus_files) in one index. English questions about the Dutch documents, Dutch questions about
the English topics; absent questions in both directions, next to a covered subject (a figure or a name the documents give
for something else, or not at all).

Written 2026-12-01 18:45-19:05 UTC from the documents' own text, paraphrased (not the phrase's words, and in the other
language), before any measurement on either set and without reading any earlier set's failures. xl1 is the dev set of the
cross-language round; xl2 was written at the same time, the same way, and is measured once, at the end of that round.

XL?_EN_FACTS: English questions about Dutch documents; XL?_NL_FACTS: Dutch questions about English documents; each
(question, exact phrase of the answer passage, short fact the answer must state). XL?_ABSENT: (question, language) that no
document answers.

    .venv/bin/python scripts/rag_eval_xl.py     checks every phrase against the loaded texts and every fact against its phrase

Measured 2026-12-01 on 2 shared cores (counts, not timings), `bench_rag.py --only quality|answers --sets xl1` (xl2), before
(1c2534d) and after the cross-language matching of grounded answers (372155b; retrieval unchanged):
  passage Recall@3, hybrid (dense, BM25), nl = Dutch questions on English topics, en = English on Dutch documents:
    xl1 MiniLM: nl 0.083 (0.0, 0.083), en 0.714 (0.714, 0.357); e5: nl 0.167 (0.25, 0.083), en 0.786 (0.857, 0.429)
    xl2 MiniLM: nl 0.167 (0.167, 0.167), en 0.714 (0.571, 0.571); e5: nl 0.583 (0.417, 0.167), en 0.786 (0.857, 0.5)
  answers (default model, MiniLM), before -> after: facts, declined although answerable, absent declined:
    xl1: nl 0/12 -> 0/12, en 5/14 -> 5/14; nl 6/12 -> 6/12, en 6/14 -> 6/14; 5/8 -> 5/8
    xl2 (held out, measured once each way, at the end): nl 3/12 -> 2/12, en 8/14 -> 9/14; nl 6/12 -> 6/12, en 4/14 -> 4/14;
    7/8 -> 7/8
"""
from __future__ import annotations

from pathlib import Path

CORPUS_NL = Path(__file__).resolve().parents[2] / "shared" / "corpus-nl"

XL1_EN_FACTS = [
    # ../shared/corpus-nl
    ("In agent workloads, what share of the total latency comes from tool handling on the CPU side?",
     "verantwoordelijk is voor 50–90% van de totale end-to-end latentie", "50–90%"),
    ("How many CPU cores per gigawatt does Arm's chief expect once AI agents take over?", "120 miljoen CPU-cores per GW", "120"),
    ("What can one GPU cost?", "Een enkele GPU kan meer dan $45.000 kosten", "$45.000"),
    ("How many tokens per second does an H200 generate when serving Llama 3.1 8B for chat?",
     "ongeveer 7.464 generatie tokens/sec", "7.464"),
    ("What is AMD's counterpart to CUDA called?", "ROCm (AMD’s antwoord op CUDA)", "ROCm"),
    ("Which model file format is the de facto standard for running models on a CPU?",
     "vormt het GGUF-formaat, ontwikkeld binnen het open source llama.cpp-ecosysteem, de onbetwiste standaard", "GGUF"),
    ("What is the theoretical upper limit in tokens per second for a 4-bit 8B model on dual-channel DDR5?",
     "ligt het absolute theoretische plafond rond de 13,6 tokens per seconde", "13,6"),
    # Debian's Dutch documentation (debian-faq-nl, debian-edu-doc-nl)
    ("What umask does a plain Debian system use out of the box?", "In Debian is de umask standaard 022", "022"),
    ("What are the bare minimum CPU speed and memory for a Debian Edu workstation?", "1500 MHz en 1024 MiB RAM", "1024 MiB"),
    ("How much disk space does installing a minimal network machine take?", "installatie van een minimale netwerkmachine: 4 GiB",
     "4 GiB"),
    ("Which package gets installed on workstations so that a locally attached printer can be shared?",
     "wordt standaard het pakket p910nd geïnstalleerd", "p910nd"),
    ("Which Perl script picks the system-wide default among programs that do the same job?", "Het Perl-script update-alternatives",
     "update-alternatives"),
    ("What package should I install to set a single paper size for every program?", "Installeer het pakket libpaper1", "libpaper1"),
    ("Besides the first user, who may manage the printers?", "door gebruikers toe te voegen aan de GOsa²-groep printer-admins",
     "printer-admins"),
]

XL1_NL_FACTS = [
    # CPython's pydoc topics
    ("Wat krijg je van str.find als de gezochte tekst er niet in staat?", 'Return "-1" if *sub* is not found.', "-1"),
    ("Welke fout krijg je als je een getal door nul deelt?", 'Division by zero raises the "ZeroDivisionError" exception.',
     "ZeroDivisionError"),
    ("Kan dict.get een KeyError geven als de sleutel ontbreekt?", 'so that this method never raises a "KeyError"', "never raises"),
    ("Hoe lang mag een naam van een variabele in Python zijn?", "Identifiers are unlimited in length.", "unlimited"),
    ("In welke volgorde haalt popitem de paren uit een woordenboek?", "Pairs are returned in LIFO (last-in, first-out) order.", "LIFO"),
    ("Welk commando van de debugger laat het programma doorlopen tot het volgende breekpunt?",
     "c(ont(inue)) Continue execution, only stop when a breakpoint is encountered.", "c(ont(inue))"),
    ("Welke methode van de ouderklasse roept Python aan zodra er een subklasse van wordt gemaakt?",
     '"__init_subclass__()" is called on the parent class', "__init_subclass__"),
    ("Welke speciale methode voert Python uit bij de vergelijking x==y?", '"x==y" calls "x.__eq__(y)"', "__eq__"),
    ("In welke tekenset leest pdb het bestand .pdbrc in?", "it is read with \"'utf-8'\" encoding", "utf-8"),
    ("Hoe noem je de methode __del__ ook wel?", "This is also called a finalizer", "finalizer"),
    ("Kun je een tuple na het maken nog aanpassen?", "Tuples are immutable sequences", "immutable"),
    ("Met welke methode sorteer je een lijst zonder een nieuwe lijst te maken?",
     "sort(*, key=None, reverse=False) This method sorts the list in place", "sort"),
]

XL1_ABSENT = [
    ("How much memory does the CORSAIR AI300 ship with?", "en"),
    ("What is the clock speed of NVIDIA's Vera CPU?", "en"),
    ("How many schools in Norway run Skolelinux?", "en"),
    ("What is the yearly budget of the Debian project?", "en"),
    ("Welke Python-versie is de laatste die nog op Windows 7 draait?", "nl"),
    ("Hoeveel bytes geheugen neemt een leeg woordenboek in Python in beslag?", "nl"),
    ("Wie heeft de Python-debugger pdb oorspronkelijk geschreven?", "nl"),
    ("Op welke poort luistert de module http.server standaard?", "nl"),
]

XL2_EN_FACTS = [
    # ../shared/corpus-nl
    ("How large was the infrastructure agreement that OpenAI signed with AWS?", "een infrastructuurpartnerschap van $38 miljard",
     "$38"),
    ("How fast is a PCIe 5.0 slot when layers are offloaded?", "63 GB/s voor PCIe 5.0", "63"),
    ("What memory bandwidth can Apple's unified memory reach?", "bandbreedtes tot 800 GB/s", "800"),
    ("What power supplies do high-end GPUs usually need?", "vaak 850W tot 1500W", "850W"),
    ("Beyond how many tokens does a prompt make the KV cache grow sharply?", "Bij prompts van meer dan 16.000 tokens", "16.000"),
    ("Up to which model size is the CPU-GPU speed gap barely noticeable?", "met maximaal 3 miljard parameters", "3 miljard"),
    ("What memory bandwidth does an RTX 5090 deliver?", "een RTX 5090 biedt daarentegen meer dan 1.000 GB/s", "1.000 GB/s"),
    ("When did NVIDIA launch its Vera processor?", "Lanceerde in maart 2026 de Vera CPU", "maart 2026"),
    # Debian's Dutch documentation
    ("How much RAM is advised for running a current web browser and LibreOffice on Debian Edu?",
     "wordt minstens 2048 MiB RAM aanbevolen", "2048 MiB"),
    ("In which directory do X11 programs keep their default resource settings?", "/etc/X11/app-defaults/", "/etc/X11/app-defaults/"),
    ("What processor speed is enough for a thin client?", "een processorsnelheid van 400 MHz", "400 MHz"),
    ("Which two departments exist in a freshly installed Debian Edu LDAP tree?", "twee 'departementen': Leerkrachten en Studenten",
     "Leerkrachten"),
    ("Does apt-get pull in recommended packages by default these days?",
     "Merk op dat apt-get nu ook standaard aanbevolen pakketten installeert", "aanbevolen pakketten"),
    ("How much disk space does a combined main server, LTSP server and workstation need?",
     "werkstation (als er een GUI op de server gewenst wordt): 60 GiB", "60 GiB"),
]

XL2_NL_FACTS = [
    # CPython's pydoc topics
    ("Wat levert str.rpartition op als het scheidingsteken niet voorkomt?",
     "If the separator is not found, return a 3-tuple containing two empty strings, followed by the string itself.",
     "two empty strings"),
    ("Hoe schrijf je het Ellipsis-object in code?", 'It is written as "Ellipsis" or "...".', "Ellipsis"),
    ("Welk pdb-commando laat de huidige functie uitvoeren tot ze terugkeert?",
     "r(eturn) Continue execution until the current function returns.", "r(eturn)"),
    ("Welke speciale methode gebruikt reversed() om achterstevoren te itereren?",
     'object.__reversed__(self) Called (if present) by the "reversed()" built-in', "__reversed__"),
    ("Welke fout volgt als __init__ iets anders dan None teruggeeft?", 'doing so will cause a "TypeError" to be raised at runtime',
     "TypeError"),
    ("Wat is in CPython de grootste lengte die een container mag hebben?", 'the length is required to be at most "sys.maxsize"',
     "sys.maxsize"),
    ("Sinds welke versie zijn async en await gereserveerde woorden?", 'Changed in version 3.7: "await" and "async" are now keywords',
     "3.7"),
    ("Met welke vergelijking tussen elementen sorteert list.sort?", 'using only "<" comparisons between items', "<"),
    ("Welke operator deelt en rondt het resultaat naar beneden af?", '"//" (floor division)', "//"),
    ("Mag er een spatie staan tussen het voorvoegsel en de aanhalingstekens van een string?",
     "whitespace is not allowed between the", "not allowed"),
    ("Welke methode bepaalt bij een eigen klasse de uitkomst van 'x in y'?",
     'For user-defined classes which define the "__contains__()" method', "__contains__"),
    ("Welke methode wordt aangeroepen om een object af te ronden met round()?",
     'Called to implement the built-in function "round()"', "round()"),
]

XL2_ABSENT = [
    ("How much does a Vera Rubin NVL72 rack cost?", "en"),
    ("How many watts does the AI300 workstation draw under full load?", "en"),
    ("How many people work on the Debian Edu team?", "en"),
    ("Which graphics card does Intel recommend for local LLMs?", "en"),
    ("In welk jaar verscheen Python 1.0?", "nl"),
    ("Wat kost een licentie om Python in een bedrijf te gebruiken?", "nl"),
    ("Hoeveel threads gebruikt de Python-interpreter standaard?", "nl"),
    ("Welke stringmethode zet tekst om naar morsecode?", "nl"),
]

SETS = {"xl1": (XL1_NL_FACTS, XL1_EN_FACTS, XL1_ABSENT), "xl2": (XL2_NL_FACTS, XL2_EN_FACTS, XL2_ABSENT)}


def retrieval(name: str) -> dict[str, list[tuple[str, str]]]:
    """A set's (question, phrase) pairs for passage Recall@3, by the question's language."""
    nl, en, _ = SETS[name]
    return {"nl": [(q, p) for q, p, _ in nl], "en": [(q, p) for q, p, _ in en]}


def load_texts() -> list[str]:
    """Every text of the mixed corpus, whitespace collapsed: the pydoc topics, the Dutch articles, blind9's sections."""
    from pydoc_data.topics import topics
    from rag_eval_blind9 import load_sections

    return ([" ".join(t.split()) for t in topics.values()]
            + [" ".join(f.read_text(encoding="utf-8").split()) for f in sorted(CORPUS_NL.glob("0*.txt"))] + load_sections())


def check(texts: list[str] | None = None) -> list[str]:
    """Problems with the sets: a phrase not in the loaded texts, a fact not in its phrase (casefolded), an absent question
    without nl/en; an empty list when all hold."""
    texts = load_texts() if texts is None else texts

    def norm(s: str) -> str:
        return " ".join(s.split())

    problems = []
    for name, (nl, en, absent) in SETS.items():
        for q, phrase, fact in nl + en:
            if not any(norm(phrase) in t for t in texts):
                problems.append(f"{name}: phrase not in the loaded texts: {phrase!r} ({q})")
            if norm(fact).casefold() not in norm(phrase).casefold():
                problems.append(f"{name}: fact not in its phrase: {fact!r} in {phrase!r}")
        for q, lang in absent:
            if lang not in ("nl", "en"):
                problems.append(f"{name}: absent question without nl/en: {q!r}")
    return problems


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    found = check()
    print("\n".join(found) or "ok: " + ", ".join(f"{n}: {len(s[0])} nl, {len(s[1])} en, {len(s[2])} absent" for n, s in SETS.items()))
    sys.exit(1 if found else 0)
