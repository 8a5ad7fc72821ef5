"""Blind 7 question sets for scripts/bench_rag.py and scripts/bench_answers.py (data, and a check of the data).

Written 2026-12-01 10:05-10:30 UTC from the documents' own text only (the three articles in ../shared/corpus-nl and
CPython 3.11's `pydoc_data.topics`), before the sixth round of answer work changed anything; committed before its
first measurement and never used to choose a setting. Facts no earlier set (rag_eval_sets.py, rag_eval_blind6.py,
questions-dev.jsonl) asks about; English ones from the topics the earlier sets use least (subscriptions, dict displays,
membership tests, numeric literals, methods, reserved identifiers, dynamic features, attribute references, list
displays, augmented assignment, slicings, operator precedence). Phrased as users type them: short, informal, some
long and polite ones, Dutch words where the articles use an English loanword.

NL_FACTS_BLIND7, EN_FACTS_BLIND7: (question, exact phrase of the answer passage, short fact the answer must state).
ABSENT_BLIND7: (question, language) that no document answers; most sit next to a covered topic.
NL_RETRIEVAL_BLIND7: the Dutch facts' (question, phrase) for passage Recall@3; each phrase occurs once in the texts.

    .venv/bin/python scripts/rag_eval_blind7.py     checks every phrase against the texts and every fact against its phrase

Measured once on main's code (3aa5c08), default model, rag k=4, 2026-12-01 10:01-10:05 UTC (load 1.5-5.3 on 2 cores; the
figures are counts, not timings): facts 0.457 (nl 0.389, en 0.529), absent declined 0.583 (7 of 12). Once after the sixth
round (5a7ce10, 11:22-11:25, load 4.4): facts 0.486 (nl 0.444, en 0.529), absent declined 0.583; its 18 failed facts:
retrieval 6, wrong sentence quoted 9, declined 2, fact not among the sentences shown 1; 5 absent questions answered with a
quote (scripts/answer_failures.py). Dutch passage Recall@3 (`bench_rag.py --only quality --sets blind6,blind7`, load 3.4):
hybrid 0.722, BM25 0.722, dense 0.444. Its failures were read after the second measurement: the next round needs a fresh set.
"""
from __future__ import annotations

NL_FACTS_BLIND7 = [
    ("uit hoeveel kernen bestaat een moderne gpu volgens het stuk over de terugkeer van de cpu",
     "Een moderne GPU bevat tienduizenden cores", "tienduizenden"),
    ("Hoeveel rekenkernen heeft een hedendaagse processor, volgens het artikel over de CPU-GPU splitsing?",
     "hebben tussen de één en honderden cores", "één en honderden"),
    ("In welke eenheid wordt het werk van een videokaart gemeten?",
     "GPU's draaien op floating-point operations per second (FLOPS)", "FLOPS"),
    ("Wat neemt lokaal rekenen weg bij toepassingen als spraakbesturing of industriële bewaking?",
     "Lokale computing elimineert de netwerkvertraging", "netwerkvertraging"),
    ("Welke soort berekeningen gebruikt de PyTorch-uitbreiding van Intel vanzelf?",
     "automatisch gebruik van Advanced Matrix Extensions (AMX)-backed BF16 operaties", "BF16"),
    ("Waarvoor is de processor volgens de baas van Intel een veel betere keuze?",
     "voor reinforcement learning, orchestratie en agents is de CPU een veel betere match", "reinforcement learning"),
    ("wat valt er onder het agentische inner-loop werk waarbij vera sneller is dan x86",
     "(code compilatie, Python tool chains, software code analyse)", "code compilatie"),
    ("Met welke programma's kun je een deel van de modellagen op de grafische kaart zetten?",
     "Frameworks zoals llama.cpp en Ollama maken het mogelijk", "Ollama"),
    ("Wat voorkomt hybride inferentie, behalve dat het sneller is dan alleen de processor?",
     "voorkomt dat een proces crasht door geheugentekort", "crasht"),
    ("Wat houdt een goede meetopzet strikt uit elkaar?",
     "Een betrouwbare meetopzet scheidt de prefill-latentie scherp van de decodeersnelheid", "decodeersnelheid"),
    ("Goedendag, ik wil zelf benchmarks draaien. Waarom moet de grootte van de KV-cache bij elke testrun gelijk blijven?",
     "omdat een groeiende context extra geheugenverkeer genereert", "geheugenverkeer"),
    ("Wat kun je doen als de KV-cache bij een heel lange prompt niet meer in het videogeheugen past?",
     "uitgeweken naar CPU-geheugen of geavanceerde KV-cache kwantisatie", "kwantisatie"),
    ("Welke onderdelen van een Apple-chip kunnen rechtstreeks bij hetzelfde geheugen?",
     "Doordat de CPU, GPU en Neural Engine direct toegang hebben tot dezelfde brede geheugenpool", "Neural Engine"),
    ("Voor hoeveel gebruikers tegelijk is inferentie op de processor geschikt volgens de beslisregels?",
     "er uitsluitend sprake is van één actieve gebruiker tegelijk", "één actieve gebruiker"),
    ("waarvoor is een cpu eigenlijk bedoeld volgens corsair",
     "Een CPU is ontworpen om overal goed in te zijn", "overal goed in"),
    ("Wat doet een taalmodel met je invoer voordat het gaat rekenen?",
     "Het model neemt je invoer, zet deze om in getallen", "getallen"),
    ("Noem eens een achtergrondtaak waarvoor een bestaande CPU-server goedkoper kan uitvallen.",
     "zoals het 's nachts indexeren van interne documenten", "indexeren"),
    ("Voor wat voor modellen en contexten is de geheugenrijke configuratie van het Corsair-werkstation bedoeld?",
     "Configuratie met veel geheugen, geschikt voor grotere modellen en grotere contextvensters", "contextvensters"),
]

EN_FACTS_BLIND7 = [
    ("how does x[-1] give me the last item of a list?",
     "interprets negative indices by adding the length of the sequence to the index", "adding the length"),
    ("Is a single character its own data type in Python?",
     "A character is not a separate data type but a string of exactly one character", "string of exactly one character"),
    ("If I write the same key twice in a dict literal, which value do I end up with?",
     "the final dictionary’s value for that key will be the last one given", "last one"),
    ("In a dict comprehension, which is evaluated first since Python 3.8, the key or the value?",
     "Starting with 3.8, the key is evaluated before the value", "key is evaluated before the value"),
    ("Is the empty string contained in every other string?",
     "Empty strings are always considered to be a substring of any other string", "substring of any other string"),
    ("Which call using find is equivalent to x in y for strings?", 'An equivalent test is "y.find(x) != -1"', "find(x) != -1"),
    ("Does Python have complex number literals?", "There are no complex literals", "no complex literals"),
    ("Hello, I was wondering whether -1 counts as one numeric literal in Python, or is the minus sign something separate?",
     "Note that numeric literals do not include a sign", "do not include a sign"),
    ("What happens if I try to set an attribute on a bound method?",
     'Attempting to set an attribute on a method results in an "AttributeError" being raised', "AttributeError"),
    ("what is m.__self__ on a bound method", '"m.__self__" is the object on which the method operates', "object on which the method operates"),
    ("In which module is the interactive interpreter's _ variable stored?", 'It is stored in the "builtins" module', "builtins"),
    ("Where does eval() look up free variables?",
     "Free variables are not resolved in the nearest enclosing namespace, but in the global namespace", "global namespace"),
    ("Which is called first when I access an attribute, __getattribute__ or __getattr__?",
     'The "__getattribute__()" method is called first', "__getattribute__"),
    ("In what order are the items of a list display evaluated?",
     "its elements are evaluated from left to right and placed into the list object in that order", "left to right"),
    ("how many times is x evaluated in x += 1", 'In the augmented version, "x" is only evaluated once', "once"),
    ("What value goes into the slice object for a bound I leave out, like a[:5]?",
     'substituting "None" for missing expressions', "None"),
    ("Which operators group from right to left?",
     "except for exponentiation and conditional expressions, which group from right to left", "exponentiation"),
]

ABSENT_BLIND7 = [
    ("Hoeveel kost een RTX 5090?", "nl"),
    ("Hoeveel geheugen zit er precies in de CORSAIR AI300?", "nl"),
    ("Welke versie van vLLM heeft de CPU-backend?", "nl"),
    ("Hoeveel watt verbruikt een Vera CPU?", "nl"),
    ("Wie is de topman van AMD?", "nl"),
    ("Wat is het recept voor erwtensoep?", "nl"),
    ("What is the average time complexity of looking up a key in a dict?", "en"),
    ("How do I install a package with pip?", "en"),
    ("Who wrote the pdb module?", "en"),
    ("How many bits does the mantissa of a Python float have?", "en"),
    ("Which Python version added the walrus operator to lambda bodies?", "en"),
    ("What is the tallest mountain in Africa?", "en"),
]

NL_RETRIEVAL_BLIND7 = [(q, p) for q, p, _ in NL_FACTS_BLIND7]


def check(corpus_nl) -> list[str]:
    """Problems with the sets (rag_eval_blind6.check's rules); an empty list when all hold."""
    from rag_eval_blind6 import check as check_set

    return check_set(corpus_nl, NL_FACTS_BLIND7, EN_FACTS_BLIND7, NL_RETRIEVAL_BLIND7, ABSENT_BLIND7)


if __name__ == "__main__":
    import sys
    from pathlib import Path

    found = check(Path(__file__).resolve().parents[2] / "shared" / "corpus-nl")
    print("\n".join(found) or (f"ok: {len(NL_FACTS_BLIND7)} nl facts, {len(EN_FACTS_BLIND7)} en facts, {len(ABSENT_BLIND7)} absent, "
                               f"{len(NL_RETRIEVAL_BLIND7)} nl retrieval; every phrase in its texts, every fact in its phrase"))
    sys.exit(1 if found else 0)
