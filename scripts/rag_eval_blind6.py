"""Blind 6 question sets for scripts/bench_rag.py and scripts/bench_answers.py (data, and a check of the data).

Written 2026-12-01 05:15-05:40 UTC from the documents' own text only (the three articles in ../shared/corpus-nl and
CPython 3.11's `pydoc_data.topics`), before anyone ran the system on them and without reading the answer code or any
failure analysis; committed before the first measurement and never used to choose a setting. Facts no earlier set
(rag_eval_sets.py, questions-dev.jsonl) asks about, phrased as users type them: short, informal, a few typos, some
polite long ones, Dutch words where the articles use an English loanword; figures, names, yes/no with a reason.

NL_FACTS_BLIND6, EN_FACTS_BLIND6: (question, exact phrase of the answer passage, short fact the answer must state).
ABSENT_BLIND6: (question, language) that no document answers; half of them sit next to a covered topic.
NL_RETRIEVAL_BLIND6: (question, exact phrase of the answer passage) for Dutch passage Recall@3; each phrase occurs
in exactly one place of the articles.

    .venv/bin/python scripts/rag_eval_blind6.py     checks every phrase against the texts and every fact against its phrase

Measured once on main's code (1e1e6c9), default model, rag k=4, 2026-12-01 05:13-05:20 (load 6.3-12.1 on 2 cores; the
figures are counts, not timings): facts 0.50 (nl 0.538, en 0.45), absent declined 0.688 (nl 4/8, en 7/8); Dutch
passage Recall@3 hybrid 0.545, BM25 0.545, dense 0.273 (on the same run: dev 0.90, own 0.958, heldout 0.794).
Raw JSON: /work/notes/blind6-main.json. Its answers were read after that measurement, so the round after the next
needs a fresh set again.
"""
from __future__ import annotations

NL_FACTS_BLIND6 = [
    ("Waarom loopt een videokaart vast als je er een rommelige Python-omgeving op laat draaien?",
     "verstikt door constant taak-switchen", "taak-switchen"),
    ("Met welk doel kochten teams in de tijd van het trainen processors bij hun videokaarten?",
     "Teams provisioneerden net genoeg CPU's om de GPU's gevoed te houden", "gevoed"),
    ("in wat voor assistenten worden agentische systemen populairder", "populairder worden in code-assistenten", "code-assistenten"),
    ("voor wat voor apparaten is smollm2 ontworpen?", "maximale efficiëntie op resource-beperkte apparaten", "resource-beperkte"),
    ("Goedemorgen, ik las het stuk over de terugkeer van de processor. Kunt u mij vertellen tot hoeveel processors OpenAI "
     "kan uitbreiden binnen het contract met AWS?", "uit te breiden naar tientallen miljoenen CPU's", "tientallen miljoenen"),
    ("Hoe omschrijft NVIDIA de Vera-processor zelf?", "de eerste processor ter wereld specifiek gebouwd voor agentic AI",
     "eerste processor ter wereld"),
    ("Kan een virtuele machine zonder videokaart een H200 bijhouden bij chatwerk? Waarom niet?",
     "een CPU virtuele machine (VM) blijft hier significant achter", "significant achter"),
    ("wat test GuideLLM allemaal, samen met het raamwerk van red hat",
     "basishandigheid, realistische verkeersvariantie en productie-optimalisaties", "verkeersvariantie"),
    ("Wanneer blijft de GPU volgens het stuk 'De CPU is terug' de juiste keuze?",
     "Voor high-concurrency productie-serving van grote modellen blijft de GPU het juiste antwoord", "high-concurrency"),
    ("Noem de werklasten waarvoor processors volgens de conclusie het juiste gereedschap zijn.",
     "orchestratie, tool-executie, code sandboxing en multi-agent coördinatie", "tool-executie"),
    ("Wat moet je naast de grafische kaart zelf vaak nog meer aanschaffen?",
     "gespecialiseerde PCIe-kaarten, extra koelcapaciteit en zware voedingen", "koelcapaciteit"),
    ("Is de prefill-fase vooral rekenwerk of vooral wachten op het geheugen?", "is zwaar rekenintensief (compute-bound)", "rekenintensief"),
    ("wat doen de rekenkerns het grootste deel van de tijd tijdens het decoderen?",
     "De rekenkernen staan het merendeel van de tijd te wachten", "wachten"),
    ("Welke twee voordelen levert kwantiseren op?", "het model past in een aanzienlijk kleinere geheugenruimte", "kleinere geheugenruimte"),
    ("wat wordt er bij het verdelen van lagen over gpu en cpu steeds heen en weer gestuurd over de pcie-bus?",
     "worden de activatietensors tussen de transformatorlagen heen en weer gestuurd", "activatietensors"),
    ("Waarom kun je niet gewoon de tijd opnemen van een chatvraag om de snelheid te vergelijken?",
     "vertekend beeld door wisselende caching en variabele antwoordlengtes", "caching"),
    ("Welke nadelen hebben dure videokaarten behalve dat ze een zware voeding nodig hebben?",
     "genereren ze aanzienlijke warmte en lawaai", "lawaai"),
    ("waar staat TCO voor?", "Total Cost of Ownership (TCO)", "Total Cost of Ownership"),
    ("Hoe stel je lokale modellen betrouwbaar beschikbaar aan interne bedrijfssystemen?",
     "een eigen gateway met load balancing en routering", "gateway"),
    ("Waar zorgt een processor allemaal voor behalve AI-modellen draaien?",
     "je besturingssysteem, je browsertabbladen, je bestandssysteem", "besturingssysteem"),
    ("Welk advies krijg je vaak als je AI op je eigen computer wil draaien?", "Zorg voor een goede GPU", "goede GPU"),
    ("Kan het gedeeltelijk uitbesteden van lagen aan de videokaart zelfs trager zijn dan alleen de processor? Wanneer dan?",
     "als er uiteindelijk maar een handvol lagen op de GPU terechtkomen", "handvol"),
    ("wat is cuda eigenlijk", "Dit is hun eigen rekenframework", "rekenframework"),
    ("Tegen wat voor problemen kun je aanlopen met een AMD-videokaart?", "kun je te maken krijgen met compatibiliteitsproblemen",
     "compatibiliteitsproblemen"),
    ("Wat voor machine is de AI300 eigenlijk?", "De AI300 is een compact werkstation", "compact werkstation"),
    ("Welke twee zorgen over de grafische kaart van een laptop noemt het artikel als reden om de CPU te gebruiken?",
     "het stroomverbruik of de warmteontwikkeling van de grafische kaart", "warmteontwikkeling"),
]

EN_FACTS_BLIND6 = [
    ("since which python version can i merge two dicts with the | operator?",
     "*other* take priority when *d* and *other* share keys. New in version 3.9", "3.9"),
    ("What do I get from d.values() == d.values()?",
     'An equality comparison between one "dict.values()" view and another will always return "False"', "False"),
    ("How can I make a read-only view of a dict?", '"types.MappingProxyType" can be used to create a read-only view of a "dict"',
     "MappingProxyType"),
    ("Hi! Quick question: is it safe to delete keys from a dictionary while I'm looping over one of its views?",
     'Iterating views while adding or deleting entries in the dictionary may raise a "RuntimeError"', "RuntimeError"),
    ("Which function do I call to check whether a string is a reserved word such as def or class?",
     'Call "keyword.iskeyword()" to test whether string "s" is a reserved identifier', "iskeyword"),
    ("What changed in str.capitalize in Python 3.8?", "The first character is now put into titlecase rather than uppercase", "titlecase"),
    ("what does removeprefix return if the string doesnt start with that prefix", "Otherwise, return a copy of the original string",
     "original string"),
    ("When I give str.split a maxsplit, how many elements can the resulting list have at most?",
     'the list will have at most "maxsplit+1" elements', "maxsplit+1"),
    ("Can str.endswith check for several different suffixes in one call?", "*suffix* can also be a tuple of suffixes to look for", "tuple"),
    ("In the output of pdb's where command, is the most recent frame at the top or at the bottom?",
     "Print a stack trace, with the most recent frame at the bottom", "bottom"),
    ("How many lines does the pdb list command show around the current line?", "list 11 lines around the current line", "11"),
    ("Which module does the pp command of pdb use for pretty-printing?", 'printed using the "pprint" module', "pprint"),
    ("Can I use jump in pdb to move into the middle of a for loop?", 'it is not possible to jump into the middle of a "for" loop',
     "not possible"),
    ("whats the difference between disabling a breakpoint and clearing it in pdb",
     "it remains in the list of breakpoints and can be (re-)enabled", "remains in the list"),
    ("What does the z option do in a format spec?", "coerces negative zero floating-point values to positive zero", "positive zero"),
    ("how often does the _ option insert underscores when formatting as hex?", "underscores will be inserted every 4 digits",
     "every 4 digits"),
    ("Until which version was continue not allowed in a finally clause?",
     'Prior to Python 3.8, a "continue" statement was illegal in the "finally" clause', "3.8"),
    ("How many hex digits does a \\x escape need in a string literal?", "exactly two hex digits are required", "two"),
    ("Hello, I mistyped an escape sequence in a string and Python did not complain. Could you tell me what happens to the "
     "backslash of an unrecognized escape?", "*the backslash is left in the result*", "left in the result"),
    ("Which value should a numeric method return when it does not support the operands it got?",
     '"NotImplemented". Numeric methods and rich comparison methods should return this value', "NotImplemented"),
]

ABSENT_BLIND6 = [
    ("Hoeveel tokens per seconde haalt een H200 met een 70B-model?", "nl"),
    ("Hoeveel L3-cache heeft de AGI CPU van Arm?", "nl"),
    ("welke versie van llama.cpp is gebruikt bij de metingen?", "nl"),
    ("Wat kost een kilowattuur stroom in het rekenvoorbeeld over de TCO?", "nl"),
    ("Hoeveel lagen heeft een 70B-model?", "nl"),
    ("Wanneer kwam de CORSAIR AI300 op de markt?", "nl"),
    ("Wie is de minister-president van Nederland?", "nl"),
    ("Hoe lang moet je een ei koken voor een zachtgekookt ei?", "nl"),
    ("How many spaces should I indent with according to PEP 8?", "en"),
    ("Which pdb command shows how much memory a variable uses?", "en"),
    ("How much slower is a try/except block than an if statement?", "en"),
    ("In which year was the with statement added to Python?", "en"),
    ("Who designed the format specification mini-language?", "en"),
    ("How many entries can a dict hold before it has to resize?", "en"),
    ("What is the capital of Kenya?", "en"),
    ("How do I reset the password of my wifi router?", "en"),
]

NL_RETRIEVAL_BLIND6 = [
    ("Waarom verandert de verhouding tussen processors en videokaarten nu langzaam?",
     "naarmate verbeteringen in CPU-inferentie de wereldwijde efficiëntie verhogen"),
    ("wat doet de videokaart precies bij elke stap in een gewone chatbot opstelling",
     "De GPU voert attention uit, voedt forward layers en samplet het volgende token"),
    ("Waar is de processor in een agentsysteem verantwoordelijk voor?", "Bepalen welke tool moet worden aangeroepen"),
    ("Waarom is een rekencluster in de cloud te traag voor spraakinterfaces?",
     "Een round-trip naar een GPU-cluster in een cloud-datacenter kost tijd"),
    ("Is maximale doorvoer bij veel gelijktijdige verzoeken de beste maatstaf voor inferentie op een processor?",
     "piekthroughput bij hoge concurrency is niet de belangrijkste benchmark"),
    ("Wat meet instructielatentie eigenlijk?", "hoe snel een enkele core een onvoorspelbare keten van diverse commando's kan uitvoeren"),
    ("Op welk moment gedraagt een chatassistent zich als een agent?", "Tijdens dit redeneren wordt de chatbot een volledig agentisch systeem"),
    ("Hoe zien de losse modelaanroepen van één taak eruit?", "die elk kort zijn, contextafhankelijk zijn en conditioneel vertakken"),
    ("Wat maakt de afweging over waar je rekenkracht neerzet anders dan vroeger?", "tool-calls, meerstaps redenering en orchestratie"),
    ("Kan een processor rechtstreeks bij het werkgeheugen van het systeem?", "directe toegang tot het hoofdgeheugen van het systeem"),
    ("Wat is de belangrijkste beslissing als je open source taalmodellen zelf wil draaien?",
     "vormt de hardwarekeuze de belangrijkste technische en financiële beslissing"),
    ("Waarom reken je vooraf uit hoeveel videogeheugen een model nodig heeft?",
     "zodat er geen geheugentekorten optreden tijdens piekbelastingen"),
    ("Waarvoor zijn de rekenkernels van GGUF gemaakt?",
     "GGUF-kernels zijn specifiek ontworpen om optimaal gebruik te maken van CPU-vectorinstructies"),
    ("wanneer is het verdelen van lagen tussen videokaart en processor handig?", "net te omvangrijk is voor het beschikbare videogeheugen"),
    ("Is een hybride opstelling sneller dan alleen de processor?",
     "levert wel een substantiële versnelling ten opzichte van zuivere CPU-uitvoering"),
    ("Welke bewerking wordt het decoderen als er veel gebruikers tegelijk zijn?",
     "verschuift de bewerking van matrix-vector (GEMV) naar matrix-matrix (GEMM)"),
    ("Waarom is een Mac interessant als werkstation voor grote modellen?",
     "aantrekkelijk platform voor workstations waar grote modellen lokaal getest worden"),
    ("Is een processor dan nutteloos voor AI op je eigen pc?", "zijn CPU’s niet ongeschikt voor lokale AI"),
    ("Waarom maakt meer geheugenbandbreedte het sneller?", "Meer bandbreedte betekent minder wachttijd en meer rekenkracht"),
    ("Wat moet er bij elk nieuw token opnieuw uit het geheugen gehaald worden?",
     "de modelgewichten voor elk gegenereerd token uit het geheugen worden opgehaald"),
    ("Wat als het hele model in het vram past, is de gpu dan altijd sneller?",
     "zal de inferentie alleen al om die reden bijna altijd sneller verlopen op de GPU"),
    ("waarom is de ai300 beter dan een gewone pc voor lokale ai", "daadwerkelijk zijn afgestemd op die specifieke taak"),
]


def check(corpus_nl, nl_facts=None, en_facts=None, nl_retrieval=None, absent=None) -> list[str]:
    """Problems with a blind set (this one's unless given): a phrase not in its texts (whitespace collapsed), a fact not
    in its phrase (casefolded), a retrieval phrase found in more than one place; an empty list when all hold."""
    from pathlib import Path

    from pydoc_data.topics import topics

    nl_facts = NL_FACTS_BLIND6 if nl_facts is None else nl_facts
    en_facts = EN_FACTS_BLIND6 if en_facts is None else en_facts
    nl_retrieval = NL_RETRIEVAL_BLIND6 if nl_retrieval is None else nl_retrieval
    absent = ABSENT_BLIND6 if absent is None else absent

    def norm(s: str) -> str:
        return " ".join(s.split())

    nl = [norm(f.read_text(encoding="utf-8")) for f in sorted(Path(corpus_nl).glob("0*.txt"))]
    en = [norm(t) for t in topics.values()]
    problems = []
    for texts, rows in ((nl, nl_facts), (en, en_facts)):
        for q, phrase, fact in rows:
            if not any(norm(phrase) in t for t in texts):
                problems.append(f"phrase not in the texts: {phrase!r} ({q})")
            if norm(fact).casefold() not in norm(phrase).casefold():
                problems.append(f"fact not in its phrase: {fact!r} in {phrase!r}")
    for q, phrase in nl_retrieval:
        n = sum(t.count(norm(phrase)) for t in nl + en)
        if n != 1:
            problems.append(f"retrieval phrase found {n} times: {phrase!r} ({q})")
    for q, lang in absent:
        if lang not in ("nl", "en"):
            problems.append(f"absent question without nl/en: {q!r}")
    return problems


if __name__ == "__main__":
    import sys
    from pathlib import Path

    found = check(Path(__file__).resolve().parents[2] / "shared" / "corpus-nl")
    print("\n".join(found) or (f"ok: {len(NL_FACTS_BLIND6)} nl facts, {len(EN_FACTS_BLIND6)} en facts, {len(ABSENT_BLIND6)} absent, "
                               f"{len(NL_RETRIEVAL_BLIND6)} nl retrieval; every phrase in its texts, every fact in its phrase"))
    sys.exit(1 if found else 0)
