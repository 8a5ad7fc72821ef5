"""Blind 9 question sets for scripts/bench_rag.py and scripts/bench_answers.py (data, and a check of the data), over a
corpus nobody on the team wrote: Dutch documentation that Debian ships.

The corpus: the 16 chapters of the Debian FAQ in Dutch (package debian-faq-nl, HTML, /usr/share/doc/debian/FAQ/nl; the
table of contents index.nl.html left out) and the Debian Edu 12 "Bookworm" manual in Dutch (package debian-edu-doc-nl,
one HTML file of 296 KB). 17 documents, 608,050 bytes of HTML, 0.37 MB of text (976 chunks of 200/40 MiniLM tokens, 761
of e5's); some passages of both are still in English
(untranslated paragraphs, the GPL appendix). The bench reads them through the project's own loaders
(edge_agent/rag/loaders.py) into a temporary index of their own (not mixed with pydoc or corpus-nl) and installs nothing:
without the packages it says which `apt-get install` is needed.

Written 2026-12-01 15:50-16:30 UTC from the documents' own text only (as loaded), by someone who had not seen these
documents before, before anyone ran the system on them and without reading any earlier set's failures; committed
before its first measurement and never used to choose a setting. Dutch questions phrased as users type them:
paraphrases and synonyms of the documents' words, informal, some typos, some bare keyword queries; English questions
about the Dutch documents (a user of a mixed-language box asks in either); absent questions sit next to a covered
topic (a date, a price, a figure the documents give for something else).

NL_FACTS_BLIND9, EN_FACTS_BLIND9: (question, exact phrase of the answer passage, short fact the answer must state).
ABSENT_BLIND9: (question, language) that no document answers.
NL_RETRIEVAL_BLIND9, EN_RETRIEVAL_BLIND9: the facts' (question, phrase) for passage Recall@3; each phrase occurs in
exactly one section of the loaded texts (so in one place, and inside one section as the chunker sees them).

    .venv/bin/python scripts/rag_eval_blind9.py     checks every phrase against the loaded texts and every fact against its phrase

Measured once on main's code (5e0c485 plus this set and its bench wiring, 4d8f3d7), 2026-12-01, on 2 shared cores (the
figures are counts, not timings); every one of the 58 phrases lies inside one chunk with either embedder. Its failures
were not read.
  `bench_rag.py --only quality --sets blind9` (all-MiniLM-L6-v2, the default; 15:52-15:53 UTC, load 3.78 -> 5.76):
    passage Recall@3 hybrid nl 0.729 (35/48), en 0.4 (4/10); BM25 nl 0.708 (34/48), en 0.5; dense nl 0.417 (20/48), en 0.3.
  the same with --embedding-model /work/e5/models/embeddings/e5 (multilingual-e5-small; 16:04-16:07, load 3.41 -> 5.92):
    hybrid nl 0.792 (38/48), en 0.6 (6/10); BM25 nl 0.667 (32/48), en 0.5; dense nl 0.792 (38/48), en 0.7 (7/10).
  `bench_rag.py --only answers --sets blind9` (default model, rag k=4, MiniLM; 15:53-16:02, load 5.62 -> 6.19):
    facts 0.362 (21/58): nl 0.417 (20/48), en 0.1 (1/10); declined although answerable nl 4/48, en 7/10; absent
    declined 0.9 (9/10); 48 extractive answers, 20 declines, none in the model's own words.
Once more after the HTML white-space fix of the loaders (2ca8656, the same commands; a loader change, nothing tuned):
  MiniLM (977 chunks; 16:07-16:08, load 5.85 -> 5.93): hybrid nl 0.729 (35/48), en 0.6; BM25 nl 0.708, en 0.5; dense nl
  0.396 (19/48), en 0.4. e5 (724 chunks; 16:08-16:10, load 5.93 -> 5.27): hybrid nl 0.812 (39/48), en 0.6; BM25 nl 0.688
  (33/48), en 0.5; dense nl 0.792, en 0.7. Answers (16:10-16:17, load 5.17 -> 6.53): facts 0.379 (22/58): nl 0.417
  (20/48), en 0.2 (2/10); declined although answerable nl 4/48, en 6/10; absent declined 0.9 (9/10).
"""
from __future__ import annotations

from pathlib import Path

PACKAGES = ("debian-faq-nl", "debian-edu-doc-nl")
FAQ_DIR = Path("/usr/share/doc/debian/FAQ/nl")
FAQ_CHAPTERS = ("basic-defs", "getting-debian", "choosing", "compatibility", "software", "ftparchives", "pkg-basics",
                "pkgtools", "uptodate", "kernel", "customizing", "support", "contributing", "redistributing",
                "nextrelease", "faqinfo")
EDU_MANUAL = Path("/usr/share/doc/debian-edu-doc-nl/debian-edu-bookworm-manual.html")


def corpus_files() -> list[Path]:
    """The corpus's 17 HTML files, in a fixed order (whether or not they exist)."""
    return [FAQ_DIR / f"{name}.nl.html" for name in FAQ_CHAPTERS] + [EDU_MANUAL]


def missing_corpus() -> str | None:
    """What to install when corpus files are missing (a sentence), else None."""
    missing = [p for p in corpus_files() if not p.is_file()]
    if not missing:
        return None
    packages = sorted({"debian-edu-doc-nl" if p == EDU_MANUAL else "debian-faq-nl" for p in missing})
    return (f"blind9 reads Dutch documentation from Debian packages, and {len(missing)} of its {len(corpus_files())} files "
            f"are missing (first: {missing[0]}): run `apt-get install --no-install-recommends {' '.join(packages)}`")


def load_sections() -> list[str]:
    """Every section's text of the corpus as the project's loaders read it (whitespace collapsed)."""
    from edge_agent.rag.loaders import load_path

    return [" ".join(s.text.split()) for p in corpus_files() for s in load_path(p).sections]


NL_FACTS_BLIND9 = [
    # Debian FAQ (debian-faq-nl)
    ("waar komt de naam debian eigenlijk vandaan?", "samentrekking van de namen van Debra en Ian Murdock", "Debra"),
    ("debian uitspraak klemtoon", "met de klemtoon op de eerste lettergreep", "eerste lettergreep"),
    ("op hoeveel soorten processors (architecturen) draait debian?", "functioneert op 9 architecturen", "9 architecturen"),
    ("Als ik eenmaal unstable heb, kan ik dan later gewoon weer terug naar stable?",
     "Jazeker, maar dit werkt maar in één richting", "één richting"),
    ("na hoeveel dagen komt een pakket uit unstable in testing terecht", "de drempelwaarde 5 dagen is", "5 dagen"),
    ("ik gebruik nu ubuntu en wil naar debian, kan ik gewoon upgraden met apt?",
     "U moet een reservekopie maken van al uw gegevens en het besturingssysteem helemaal opnieuw herinstalleren",
     "opnieuw herinstalleren"),
    ("met welk commando zie ik welke distributie mijn pc volgt", "U kunt ook het commando lsb_release (te vinden in het pakket lsb-release)",
     "lsb_release"),
    ("waar moet ik de broncode neerzetten van een programma dat ik zelf compileer (niet van debian)?",
     "om de broncode van uw programma te plaatsen in /usr/local/src/", "/usr/local/src/"),
    ("welk pakket moet ik installeren om zelf pakketten te kunnen bouwen, compiler enzo",
     "het pakket build-essential te installeren", "build-essential"),
    ("foutmelding ld: cannot find -lfoo bij compileren, welk pakket mis ik?", "Deze pakketten heten gewoonlijk libfoo-dev",
     "libfoo-dev"),
    ("hoe krijg ik de man-paginas in het nederlands?", "moet LC_MESSAGES ingesteld worden op 'Nederlands'", "LC_MESSAGES"),
    ("mijn wifi kaartje werkt niet onder linux, kan ik de windows driver gebruiken?",
     "kunt u ndiswrapper gebruiken om een stuurprogramma voor Windows", "ndiswrapper"),
    ("uit welke film komen de codenamen van de debian versies", 'figuurtjes geweest uit de "Toy Story"-filmen van Pixar',
     "Toy Story"),
    ("woody was welke versie van debian?", "woody voor release 3.0", "3.0"),
    ("pakket vastzetten zodat apt het niet meer bijwerkt", "apt-mark hold pakket_naam", "apt-mark hold"),
    ("wat is het verschil tussen remove en purge bij de pakketstatus?",
     "de gebruiker wil dat het pakket volledig verwijderd wordt", "volledig verwijderd"),
    ("hoe heet het virtuele pakket waar exim4 en sendmail allebei in voorzien?",
     'in het virtueel pakket "mail-transport-agent"', "mail-transport-agent"),
    ("hoe kom ik erachter bij welk pakket een bestand op mijn systeem hoort",
     "geeft u ofwel de volgende opdracht: dpkg --search foo", "dpkg --search"),
    ("lijst tonen van paketten waar een nieuwere versie van is", "apt list --upgradable", "--upgradable"),
    ("kan debian zichzelf automatisch updaten?", "U kunt cron-apt gebruiken", "cron-apt"),
    ("ik heb meerdere computers, hoe download ik de updates maar één keer?",
     "apt-cacher te gebruiken om al uw Debian-systemen up-to-date te houden", "apt-cacher"),
    ("in welk bestand zet je modules die bij het opstarten geladen moeten worden",
     "Er wordt in het bestand /etc/modules een configuratie bijgehouden", "/etc/modules"),
    ("papierformaat (A4) instellen voor alle programma's tegelijk", "Deze instelling wordt opgeslagen in het bestand /etc/papersize",
     "/etc/papersize"),
    ("hoe zorg ik dat een dienst niet meer automatisch start bij het booten, zonder het pakket weg te halen?",
     "systemctl disable dienst.service", "systemctl disable"),
    ("hoe meld ik me aan voor een mailinglijst van debian", 'met het woord "subscribe" in het kopveld Onderwerp:', "subscribe"),
    ("Moet ik Debian iets betalen als ik zelf cd's met Debian verkoop?", "U hoeft ons niet te betalen", "niet te betalen"),
    # Debian Edu 12 manual (debian-edu-doc-nl)
    ("hoe heet de hoofdserver bij skolelinux", "met 'tjener' als computernaam, wat Noors is voor 'server'", "tjener"),
    ("wanneer is het skolelinux project begonnen?", "Op 2 juli 2001 ging in Noorwegen het Skolelinux project van start", "2001"),
    ("waarom mag er maar één hoofdserver in het schoolnetwerk zijn?", "ligt in het feit dat de hoofdserver DHCP aanbiedt", "DHCP"),
    ("hoeveel geheugen heeft een thin client minimaal nodig", "Een thin-client kan al functioneren met slechts 256 MiB RAM",
     "256 MiB"),
    ("schijfruimte ltsp server", "LTSP-server: 40 GiB", "40 GiB"),
    ("welke umask gebruikt debian edu standaard?", "Debian Edu daarentegen gebruikt een umask van 002", "002"),
    ("welk ip-adres moet de router aan de binnenkant krijgen", "het IP-adres 10.0.0.1 met netmask 255.0.0.0", "10.0.0.1"),
    ("welk programma levert de imap mail op de hoofdserver?", "IMAP (Dovecot)", "Dovecot"),
    ("welke bureaubladomgeving is het lichtst voor oude pc's?", "LXDE heeft de kleinste voetafdruk", "LXDE"),
    ("hoe groot is de BD iso van debian edu", "Deze ISO-images zijn ongeveer 7.5 GB groot", "7.5 GB"),
    ("hoe lang moet het wachtwoord van de eerste gebruiker minimaal zijn?",
     "Het wachtwoord van deze gebruiker moet minstens 5 tekens lang zijn", "5 tekens"),
    ("welk profiel kies ik voor de laptop van een docent", "het profiel 'Mobiel werkstation' kiest", "Mobiel werkstation"),
    ("een hele klas leerlingen in één keer toevoegen vanuit een spreadsheet, kan dat?",
     "door middel van een CSV-bestand", "CSV-bestand"),
    ("mag er een rij met kolomnamen bovenaan het csv bestand staan", "Het CSV-bestand mag geen kopregel bevatten",
     "geen kopregel"),
    ("kan een leraar het wachtwoord van een leerling veranderen", "kunnen het wachtwoord van alle studenten wijzigen",
     "alle studenten"),
    ("op welk adres beheer ik de printers via de browser", "gaat u met uw webbrowser naar het adres https://www:631",
     "https://www:631"),
    ("tijdsync met internet uitzetten, welk bestand?", "moet u op de hoofdserver het bestand /etc/ntp.conf aanpassen",
     "/etc/ntp.conf"),
    ("waar worden de reservekopieen standaard opgeslagen", "LDAP opgeslagen in de map /skole/backup", "/skole/backup"),
    ("beschermen de standaard backups me tegen een kapotte harde schijf?",
     "geen bescherming biedt tegen gegevensverlies ten gevolge van een kapotte harde schijf", "geen bescherming"),
    ("vanaf hoe laat probeert shutdown-at-night de computers uit te zetten", "Vanaf 16.00 uur in de namiddag", "16.00"),
    ("wijzigingen in /etc bijhouden met git, welk programma", "Met etckeeper worden de wijzigingen", "etckeeper"),
    ("dvd's afspelen lukt niet, welk pakket heb ik nodig?", "bouwen met behulp van het Debian pakket libdvd-pkg", "libdvd-pkg"),
]

EN_FACTS_BLIND9 = [
    ("In which year was the Debian project started?", "Het Debian-project werd in 1993 door Ian Murdock opgestart", "1993"),
    ("Which file holds the version number of the Debian release?", "U kunt ook nagaan of het bestand /etc/debian_version bestaat",
     "/etc/debian_version"),
    ("Which tool converts between package formats such as rpm and deb?",
     "Het pakket Alien wordt gebruikt voor het converteren van verschillende pakketindelingen", "Alien"),
    ("What is the default IP address of the Debian Edu main server?", "die standaard het IP-adres 10.0.2.2 heeft", "10.0.2.2"),
    ("Which desktop environment does Debian Edu install by default?",
     "heeft Debian Edu ervoor gekozen Xfce te gebruiken als standaard grafische werkomgeving", "Xfce"),
    ("Which Linux kernel version comes with Debian Edu 12 bookworm?", "Linux kernel versie 6.1", "6.1"),
    ("Which Debian release was the first to use systemd as its default init?",
     'In april 2015 was Debian 8 "jessie" de eerste release met systemd als standaard init', "jessie"),
    ("Who translated the Debian FAQ into Dutch?", "De Nederlandse vertaling van deze FAQ is van de hand van Frans Spiesschaert",
     "Spiesschaert"),
    ("where are the log files of unattended-upgrades", "De logbestanden zijn te vinden in /var/log/unattended-upgrades/",
     "/var/log/unattended-upgrades/"),
    ("How do I build a custom kernel as a Debian package?", "moet u gewoon de volgende opdracht geven: make deb-pkg",
     "make deb-pkg"),
]

ABSENT_BLIND9 = [
    ("Wanneer komt Debian 13 trixie uit?", "nl"),
    ("Hoeveel GB schijfruimte heeft een volledige Debian-spiegelserver nodig?", "nl"),
    ("Wat kost professionele ondersteuning voor Debian Edu per jaar?", "nl"),
    ("Wat is het standaard root-wachtwoord van de Skolelinux hoofdserver?", "nl"),
    ("Welke versie van Scratch zit er in Debian Edu 12?", "nl"),
    ("Hoeveel werkgeheugen heeft de hoofdserver van Debian Edu minimaal nodig?", "nl"),
    ("Hoeveel vrijwilligers werken er vanuit Nederland aan Debian?", "nl"),
    ("Which Java version does Debian 11 ship by default?", "en"),
    ("What is the minimum amount for a donation to SPI?", "en"),
    ("What is the capital of Norway?", "en"),
]

NL_RETRIEVAL_BLIND9 = [(q, p) for q, p, _ in NL_FACTS_BLIND9]
EN_RETRIEVAL_BLIND9 = [(q, p) for q, p, _ in EN_FACTS_BLIND9]


def check(sections: list[str] | None = None) -> list[str]:
    """Problems with the sets (rag_eval_check.check_phrases); an empty list when all hold."""
    from rag_eval_check import check_phrases

    return check_phrases(load_sections() if sections is None else sections, NL_FACTS_BLIND9 + EN_FACTS_BLIND9, ABSENT_BLIND9)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from rag_eval_check import run

    run(check, missing_corpus, f"{len(NL_FACTS_BLIND9)} nl facts, {len(EN_FACTS_BLIND9)} en facts, {len(ABSENT_BLIND9)} absent "
                               f"over {len(corpus_files())} documents")
