"""Blind 14 question sets for scripts/bench_rag.py and scripts/bench_answers.py (data, and a check of the data): paraphrased
factual questions in Dutch and English, some across languages, over contract and licence text no earlier set indexes.

The corpus (installed, not downloaded; `apt-get install --no-install-recommends debian-edu-doc-legacy-nl
installation-guide-amd64`, and the licence texts base-files installs in /usr/share/common-licenses): the legal and policy
text our users keep, contracts and terms with durations, amounts, caps and parties -
- Dutch: Debian Edu's ITIL manual in Dutch (debian-edu-doc-legacy-nl, one HTML file of 377 KB: service desk, SLA contents,
  financial management, availability, and in its Bijlage A a full sample service contract with term, notice period, rates,
  payment terms, penalties, a liability cap, force majeure and arbitration); the Dutch translation of the GNU GPL version 2
  (Bijlage F of the Dutch Debian installation guide, installation-guide-amd64) and that guide's "Over dit document" (E.1);
- English: six licences from /usr/share/common-licenses - GPL-3, Apache-2.0, MPL-2.0, LGPL-2.1, CC0-1.0 and Artistic
  (termination and cure periods, written offers, patent clauses, litigation venue, stewards), copied to .txt as a user would
  save them (prepare(); tempdir/edge-agent-blind14), the HTML read in place.
9 documents, read by the project's own loaders into an index of their own.

Written 2026-12-02 16:02-16:05 UTC from the documents' own text (as loaded), before anyone ran the system on them and
without reading any earlier set's failure analysis; committed at 16:05 UTC, before its first measurement, and never
used to choose a setting. The questions paraphrase the documents' words as a user asks about a contract or a licence:
terms, notice periods, rates, caps, who and which law; some informal, a typo or two. NL_FACTS_BLIND14's last four ask in
Dutch about the English licences, EN_FACTS_BLIND14's last five in English about the Dutch contract and guide (facts that
read the same in both languages: figures, names). A fact is never a word of its question (an echo cannot pass). Several
facts sit next to a look-alike: 30 and 60 days in both GPL-3's and MPL-2.0's termination clauses, "50%" control in
Apache-2.0 and "more than fifty percent" in MPL-2.0, 1996 for the WIPO treaty (GPL-3) and the database directive (CC0),
three years for GPL-2's (Dutch) and GPL-3's written offers, 60 workstations and 60 days of penalty, NOK 800 and NOK 400,
1 minute and 30 minutes of response time, 90% and 95% availability. The absent ones sit next to a covered topic (a rate,
a discount, an address or a law the contract gives for something else; a steward, a venue or an offer period one licence
gives and another does not).

First measurement, on main's code (8d2bf7f plus this set, 1dafb74), 2026-12-02 16:05-16:10 UTC, `nice -n 19
.venv/bin/python scripts/bench_rag.py --only answers --sets blind14 --memo /tmp/blind14-memo.json --embedding-model
/work/main/models/embeddings/multilingual-e5-small --answer-tokens 48` (default int8 bundle, rag k=4, greedy; load 5.7 ->
6.3; 9 documents, 678 chunks of e5, ingest 68 s): facts 22/49 (0.449): nl 14/28 (Dutch about the English licences 1/4:
three declined), en 8/21 (English about the Dutch contract and guide 1/5: three declined, one wrong quote); absent declined
6/10. Retrieval, `bench_rag.py --only quality --sets blind14 --embedding-model ...multilingual-e5-small` (16:12-16:14,
load 7.0 -> 7.0): passage Recall@3 hybrid nl 0.679, en 0.762; dense nl 0.643, en 0.571; BM25 nl 0.571, en 0.619.
Failures (`answer_failures.py --embedding-model ...multilingual-e5-small /tmp/blind14-base.json`, this set's own index):
retrieval 11, declined 6, quote_wrong 6, sentence 4; absent answered with a quote 4. Nothing was tuned on it.

NL_FACTS_BLIND14, EN_FACTS_BLIND14: (question, exact phrase of the answer passage, short fact the answer must state).
ABSENT_BLIND14: (question, language) that no document answers.

    .venv/bin/python scripts/rag_eval_blind14.py     checks every phrase against the loaded texts and every fact against its phrase
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

ITIL_HTML = Path("/usr/share/doc/debian-edu-doc-legacy-nl/debian-edu-itil-manual.html")
GUIDE_DIR = Path("/usr/share/doc/installation-guide-amd64/nl")
GUIDE_PAGES = ("apf.html", "apes01.html")  # Bijlage F (the GPL v2 in Dutch), E.1 (Over dit document)
LICENSE_DIR = Path("/usr/share/common-licenses")
LICENSES = ("GPL-3", "Apache-2.0", "MPL-2.0", "LGPL-2.1", "CC0-1.0", "Artistic")
CACHE_DIR = Path(tempfile.gettempdir()) / "edge-agent-blind14"


def _sources() -> list[tuple[Path, Path | None, str]]:
    """(file the corpus reads, installed source it is copied from or None when read in place, package), in a fixed order."""
    return ([(ITIL_HTML, None, "debian-edu-doc-legacy-nl")]
            + [(GUIDE_DIR / page, None, "installation-guide-amd64") for page in GUIDE_PAGES]
            + [(CACHE_DIR / f"{name}.txt", LICENSE_DIR / name, "base-files") for name in LICENSES])


def corpus_files() -> list[Path]:
    """The corpus's 9 files, in a fixed order (whether or not they exist yet; prepare() writes the copied ones)."""
    return [f for f, _, _ in _sources()]


def prepare() -> None:
    """Copy the installed licence texts into the cache folder as .txt (the loaders read a file by its suffix)."""
    CACHE_DIR.mkdir(exist_ok=True)
    for target, source, _ in _sources():
        if source is None or target.is_file() or not source.is_file():
            continue
        tmp = target.with_suffix(".tmp")
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)


def missing_corpus() -> str | None:
    """What to install when corpus sources are missing (a sentence), else None; writes the copied texts first."""
    missing = [(src or f, pkg) for f, src, pkg in _sources() if not (src or f).is_file()]
    if not missing:
        prepare()
        return None
    packages = sorted({pkg for _, pkg in missing})
    return (f"blind14 reads contract and licence texts from Debian packages, and {len(missing)} of its {len(corpus_files())} "
            f"sources are missing (first: {missing[0][0]}): run `apt-get install --no-install-recommends {' '.join(packages)}`")


def load_sections() -> list[str]:
    """Every section's text of the corpus as the project's loaders read it (whitespace collapsed)."""
    from edge_agent.rag.loaders import load_path

    return [" ".join(s.text.split()) for p in corpus_files() for s in load_path(p).sections]


NL_FACTS_BLIND14 = [
    # the sample service contract (Bijlage A of the ITIL manual)
    ("hoe lang loopt het onderhoudscontract voor Skolelinux op z'n minst na de levering?",
     "minimaal 12 maanden vanaf de datum van levering", "12 maanden"),
    ("hoeveel tijd van tevoren moet ik het contract schriftelijk opzeggen?",
     "drie maanden voor het verstrijken van een contractperiode", "drie maanden"),
    ("wat rekent de leverancier per uur voor de reistijd van zijn mensen?", "aan een uurtarief van NOK 400", "400"),
    ("hoe vaak krijgen we een rekening voor de geleverde diensten en wanneer?", "wordt per kwartaal vooraf gefactureerd",
     "kwartaal"),
    ("wat is de betaaltermijn van de facturen in de overeenkomst?", "Alle facturering gebeurt binnen een termijn van 30 dagen.",
     "30 dagen"),
    ("waarop is de jaarlijkse prijsverhoging van het contract gebaseerd?",
     "op basis van de nationale index voor consumentenprijzen", "consumentenprijzen"),
    ("hoe hoog is de boete per dag als de levering te laat is?",
     "Het bedrag van deze boete bedraagt 0,1% van de overeengekomen jaarlijkse vergoeding", "0,1%"),
    ("hoelang kan die vertragingsboete maximaal doorlopen?",
     "berekend per kalenderdag van de vertraging en met een maximum van 60 dagen", "60 dagen"),
    ("tot welk bedrag zijn de partijen maximaal aansprakelijk?", "of een maximum van 1 miljoen NOK", "1 miljoen"),
    ("welk lands recht is van toepassing op de overeenkomst?", "vallen volledig onder de Noorse wetgeving", "Noorse"),
    ("hoe lang moeten we eerst onderhandelen over een geschil voor we naar arbitrage kunnen?",
     "binnen een termijn van twee weken niet in slagen via onderhandelingen", "twee weken"),
    ("wat is de uiterste leverdatum nadat de klant gemeld heeft dat alles klaar is?",
     "dan 4 weken nadat deze kennisgeving door de leverancier ontvangen werd", "4 weken"),
    ("wat kost het als de leverancier de gebruikers voor ons aanmaakt?",
     "De leverancier kan deze dienst leveren voor 50 NOK per gebruiker", "50 NOK"),
    ("met welke opzegtermijn mag je eruit stappen bij overmacht?",
     "mits een schriftelijke kennisgeving van een maand op voorhand", "een maand"),
    ("hoeveel werkdagen krijgt de leverancier nog na de aankondiging dat we willen opzeggen wegens een gebrek?",
     "binnen 14 werkdagen niet verholpen heeft", "14 werkdagen"),
    # the ITIL manual's own text (SLA, financial management, availability, testing, credits)
    ("binnen welke tijd hoort een mail van een gebruiker beantwoord te worden in een sla?",
     "e-mail (bijvoorbeeld 30 minuten)", "30 minuten"),
    ("hoeveel noorse gemeenten hadden volgens het onderzoek uit 2001 een ict-budget?",
     "slechts 1 op de 8 gemeenten over een ICT-begroting beschikte", "1 op de 8"),
    ("hoeveel procent van de kosten kan personeel uitmaken bij het invoeren van ict?",
     "wel tot 60 - 70 % oplopende personeelskosten", "70"),
    ("hoeveel kost de bekabeling en stroom ongeveer per client-pc als je die vergeet?",
     "Dan zie je een kost van ongeveer 2000 NOK", "2000 NOK"),
    ("als een systeem op een werkdag een uur plat ligt, hoeveel procent was het dan beschikbaar?",
     "dan is het systeem beschikbaar voor 90% van de overeengekomen tijd", "90%"),
    ("vanaf welke versie mag je openoffice 4 pas gebruiken volgens de handleiding?",
     "wanneer versie 4.0.2 of later uitgebracht is", "4.0.2"),
    ("wie hebben de itil-handleiding voornamelijk geschreven?",
     "Ze werd hoofdzakelijk door Knut Yrvin en Andreas Johansen geschreven", "Knut Yrvin"),
    # the GPL version 2 in Dutch (installation guide, Bijlage F)
    ("hoe lang moet een schrifelijk aanbod voor de broncode minstens gelden onder de gpl?",
     "dat minstens drie jaar geldig blijft", "drie jaar"),
    ("uit welk jaar is versie 2 van de Algemene Publieke Licentie?", "Versie 2, juni 1991", "1991"),
    # the English licences, asked in Dutch
    ("binnen hoeveel dagen na een eerste waarschuwing moet je een schending van de GPLv3 rechtzetten?",
     "you cure the violation prior to 30 days after your receipt of the notice", "30 days"),
    ("welk aandeelhoudersbelang telt in de Apache-licentie als zeggenschap over een entiteit?",
     "ownership of fifty percent (50%) or more of the outstanding shares", "50%"),
    ("van welke maand en jaar is de Apache License 2.0?", "Version 2.0, January 2004", "2004"),
    ("welk nummer heeft de europese databankrichtlijn die CC0 noemt?", "Directive 96/9/EC", "96/9/EC"),
]

EN_FACTS_BLIND14 = [
    # GPL-3
    ("when was version 3 of the GNU GPL released?", "Version 3, 29 June 2007", "29 June 2007"),
    ("shipping a device with GPLv3 object code, how long must my written offer for the source hold?",
     "valid for at least three years and valid for as long as you offer spare parts", "three years"),
    ("if the copyright holder never tells me about the violation, when is my GPLv3 license back for good?",
     "prior to 60 days after the cessation", "60 days"),
    ("can I sublicense code I got under GPLv3?", "Sublicensing is not allowed; section 10 makes it unnecessary",
     "not allowed"),
    ("which article of which treaty does GPLv3 mention for anti-circumvention?",
     "article 11 of the WIPO copyright treaty", "article 11"),
    ("with works under which other licence does GPLv3 explicitly allow combining?",
     "licensed under version 3 of the GNU Affero General Public License into a single combined work", "Affero"),
    # Apache-2.0
    ("under apache 2.0, when do my patent licences end if I sue over a patent in the work?",
     "shall terminate as of the date such litigation is filed", "litigation is filed"),
    ("which text file's attribution lines must I carry over into a derivative of an Apache-licensed work?",
     "If the Work includes a \"NOTICE\" text file as part of its distribution", "NOTICE"),
    # MPL-2.0
    ("how long do I have to become compliant after my first notice from an MPL contributor?",
     "You become compliant prior to 30 days after Your receipt of the notice", "30 days"),
    ("who is allowed to publish new versions of the Mozilla Public License?", "Mozilla Foundation is the license steward",
     "Mozilla Foundation"),
    ("in which courts can a dispute about the MPL be brought?",
     "may be brought only in the courts of a jurisdiction where the defendant maintains its principal place of business",
     "defendant"),
    ("what does the MPL call covered software combined with other files?",
     "\"Larger Work\" means a work that combines Covered Software with other material", "Larger Work"),
    # LGPL-2.1, CC0, Artistic
    ("which earlier licence does the LGPL 2.1 replace?", "It also counts as the successor of the GNU Library Public License",
     "Library Public License"),
    ("how short must inline functions be for an object file's use to stay unrestricted under the LGPL?",
     "small inline functions (ten lines or less in length)", "ten lines"),
    ("what does CC0 call the person who puts a work under it?", "the person associating CC0 with a Work (the \"Affirmer\")",
     "Affirmer"),
    ("what may I ask money for when I hand out copies of an Artistic-licensed package?",
     "You may charge a reasonable copying fee for any distribution of this Package", "reasonable copying fee"),
    # the Dutch contract and guide, asked in English
    ("what's the minimum number of workstations the Skolelinux support contract covers?",
     "De overeenkomst behelst een minimum van 60 werkstations.", "60"),
    ("what is the hourly consultancy rate in the Debian Edu service contract?",
     "Het tarief op uurbasis voor consultancy bedraagt NOK 800", "800"),
    ("who signs for the supplier as CEO in the sample contract?", "De verkoper Petter Smart", "Petter Smart"),
    ("what's the yearly fee per workstation in the operations agreement?", "per jaar per werkstation £78", "78"),
    ("which mailing list handles the Dutch translation of the installation guide?",
     "<debian-l10n-dutch@lists.debian.org>", "debian-l10n-dutch"),
]

ABSENT_BLIND14 = [
    ("hoeveel procent btw komt er bovenop de vergoeding in het contract?", "nl"),
    ("wat is het uurtarief voor consultancy 's avonds of in het weekend?", "nl"),
    ("hoeveel procent korting krijgt de klant per dag dat de dienst niet werkt?", "nl"),
    ("op welk adres is de klant gevestigd in de voorbeeldovereenkomst?", "nl"),
    ("wie heeft de ITIL-handleiding naar het Engels vertaald?", "nl"),
    ("hoeveel maanden proeftijd heeft het onderhoudscontract?", "nl"),
    ("which country's law governs the Apache License 2.0?", "en"),
    ("who is the license steward of the Apache License?", "en"),
    ("how many years must a written offer for source stay valid under the Artistic License?", "en"),
    ("how many days do I get under Apache 2.0 to cure a breach before my license ends?", "en"),
]

NL_RETRIEVAL_BLIND14 = [(q, p) for q, p, _ in NL_FACTS_BLIND14]
EN_RETRIEVAL_BLIND14 = [(q, p) for q, p, _ in EN_FACTS_BLIND14]


def check(sections: list[str] | None = None) -> list[str]:
    """Problems with the sets (rag_eval_check.check_phrases); an empty list when all hold."""
    from rag_eval_check import check_phrases

    return check_phrases(load_sections() if sections is None else sections, NL_FACTS_BLIND14 + EN_FACTS_BLIND14, ABSENT_BLIND14)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from rag_eval_check import run

    run(check, missing_corpus, f"{len(NL_FACTS_BLIND14)} nl facts, {len(EN_FACTS_BLIND14)} en facts, {len(ABSENT_BLIND14)} absent "
                               f"over {len(corpus_files())} documents")
