"""Blind 13 question sets for scripts/bench_rag.py and scripts/bench_answers.py (data, and a check of the data): paraphrased
factual questions in Dutch and English, some across languages, over documents no earlier set indexes.

The corpus (installed, not downloaded; `apt-get install --no-install-recommends manpages-nl`, and the manual pages that
apt, dpkg, adduser, libpam-modules and systemd install themselves): an operator's reference text -
- Dutch command manuals (manpages-nl, from manpages-l10n): ping(8), timeout(1), shred(1), split(1);
- Dutch manuals that dpkg, apt and adduser install: start-stop-daemon(8), sources.list(5), deluser.conf(5);
- English configuration manuals with defaults and durations: faillock.conf(5) (libpam-modules), logind.conf(5) and
  journald.conf(5) (systemd).
All ten are rendered to plain text as a user would save them (`man -l` at 100 columns, `col -bx`: hard-wrapped) into a
cache folder (prepare(); tempdir/edge-agent-blind13) and read from there by the project's own loaders: 10 documents in an
index of their own.

Written 2026-12-02 12:55-13:00 UTC from the documents' own text (as loaded), before anyone ran the system on them and
without reading blind12's failures; committed before its first measurement and never used to choose a setting. The
questions paraphrase the documents' words and ask what an operator asks of a manual: defaults, durations, figures, exit
codes, option names, authors. NL_FACTS_BLIND13's last four ask in Dutch about the English pages, EN_FACTS_BLIND13's last
four in English about the Dutch ones. A fact is never a word of its question (an echo cannot pass). Several facts sit next
to a look-alike: TERM as timeout's and start-stop-daemon's default signal, 10% for journald's disk use and logind's runtime
folder, 8192 for inhibitors and sessions, 6 for NAutoVTs= and ReserveVT=, two "The default is" lines in faillock.conf, and
"15%" only told as "the second" of two pairs. The absent ones sit next to a covered topic (an option whose default the page
does not give: IdleActionSec=, --kill-after, --retry's wait; a figure or a name the pages do not give).

First measurement, on main's code (8818b9d plus this set, 265b868), 2026-12-02 12:58-13:06 UTC, `nice -n 19
.venv/bin/python scripts/bench_rag.py --only answers --sets blind13 --embedding-model
/work/main/models/embeddings/multilingual-e5-small --answer-tokens 48 --memo /tmp/blind13.memo` (default int8 bundle, rag
k=4, greedy; load 9.1 -> 12.9; 10 documents, 257 chunks of e5, ingest 74 s): facts 11/46 (0.239): nl 5/26 (Dutch about the
English pages 0/4: three declined, one not retrieved), en 6/20 (English about the Dutch pages 1/4); absent declined 3/10.
Retrieval, `bench_rag.py --only quality --sets blind13 --embedding-model ...multilingual-e5-small` (load 12.6 -> 15.0):
passage Recall@3 hybrid nl 0.538, en 0.65; dense nl 0.50, en 0.70; BM25 nl 0.577, en 0.65.
Failures (answer_failures.py over this set's index): retrieval 13, declined 10, sentence 6, quote_wrong 6, answered_quote
7. Its failures were read after that measurement (a dev set from then on); after branch blind13's two fixes (a manual's
"Defaults to 6." read with its entry; a figure the model points at obeys the default rule; 5ccb128, load 18.4 -> 16.6, nine
sets in one run): facts 15/46 (nl 7/26, en 8/20), absent declined 5/10 - the figure above is the blind one, this one is not.

NL_FACTS_BLIND13, EN_FACTS_BLIND13: (question, exact phrase of the answer passage, short fact the answer must state).
ABSENT_BLIND13: (question, language) that no document answers.

    .venv/bin/python scripts/rag_eval_blind13.py     checks every phrase against the loaded texts and every fact against its phrase
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

MAN_ROOT = Path("/usr/share/man")
PAGES = (  # (section folder under /usr/share/man, page, the package that installs it)
    ("nl/man8", "ping.8", "manpages-nl"),
    ("nl/man1", "timeout.1", "manpages-nl"),
    ("nl/man1", "shred.1", "manpages-nl"),
    ("nl/man1", "split.1", "manpages-nl"),
    ("nl/man8", "start-stop-daemon.8", "dpkg"),
    ("nl/man5", "sources.list.5", "apt"),
    ("nl/man5", "deluser.conf.5", "adduser"),
    ("man5", "faillock.conf.5", "libpam-modules"),
    ("man5", "logind.conf.5", "systemd"),
    ("man5", "journald.conf.5", "systemd"),
)
CACHE_DIR = Path(tempfile.gettempdir()) / "edge-agent-blind13"


def _sources() -> list[tuple[Path, Path, str]]:
    """(file the corpus reads, installed page it is rendered from, package), in a fixed order."""
    return [(CACHE_DIR / f"{page}.{'nl' if folder.startswith('nl/') else 'en'}.txt", MAN_ROOT / folder / f"{page}.gz", package)
            for folder, page, package in PAGES]


def corpus_files() -> list[Path]:
    """The corpus's 10 files, in a fixed order (whether or not they exist yet; prepare() writes them)."""
    return [f for f, _, _ in _sources()]


def prepare() -> None:
    """Render the installed manual pages into the cache folder; raises subprocess.CalledProcessError when `man` fails."""
    CACHE_DIR.mkdir(exist_ok=True)
    env = {**os.environ, "MANWIDTH": "100", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "MAN_KEEP_FORMATTING": ""}
    for target, source, _ in _sources():
        if target.is_file() or not source.is_file():
            continue
        page = subprocess.run(["man", "--nj", "--nh", "-E", "UTF-8", "-l", str(source)], env=env, check=True,
                              capture_output=True).stdout
        text = subprocess.run(["col", "-bx"], input=page, check=True, capture_output=True).stdout
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(text)
        os.replace(tmp, target)


def missing_corpus() -> str | None:
    """What to install when corpus sources are missing (a sentence), else None; writes the rendered texts first."""
    missing = [(src, pkg) for _, src, pkg in _sources() if not src.is_file()]
    if not missing and shutil.which("man") and shutil.which("col"):
        prepare()
        return None
    packages = sorted({pkg for _, pkg in missing} or {"man-db", "bsdextrautils"})
    return (f"blind13 reads manual pages from Debian packages, and {len(missing)} of its {len(PAGES)} sources are missing "
            f"(first: {missing[0][0] if missing else 'man or col'}): run `apt-get install --no-install-recommends "
            f"{' '.join(packages)}`")


def load_sections() -> list[str]:
    """Every section's text of the corpus as the project's loaders read it (whitespace collapsed)."""
    from edge_agent.rag.loaders import load_path

    return [" ".join(s.text.split()) for p in corpus_files() for s in load_path(p).sections]


NL_FACTS_BLIND13 = [
    # ping(8), Dutch (manpages-nl)
    ("hoe lang zit er normaal tussen twee echo-verzoeken van ping?",
     "De standaard is om één seconde te wacjhten tussen elke pakket", "één seconde"),
    ("hoeveel bytes aan gegevens zit er in een ping-pakket als je de grootte niet opgeeft?",
     "De standaard is 56, wat vertaald in 64 ICMP gegevens bytes", "56"),
    ("hoeveel bytes mag ik maximaal als vulpatroon meegeven aan ping?", "U mag tot 16 “opvullings” bytes opgeven", "16"),
    ("onder welke waarde mag alleen root het wachtinterval van ping zetten?",
     "Alleen de systeembeheerder mag een interval korter dan 2 ms instellen", "2 ms"),
    ("wat gebeurt er als ik bij ping -W de waarde nul geef?", "0 betekent een oneindige time-out", "oneindige"),
    # timeout(1)
    ("welk signaal krijgt het commando als de tijd van timeout verstreken is en ik niets anders heb gekozen?",
     "stuur dan het TERM signaal naar COMMANDO", "TERM"),
    ("met welke exitcode stopt timeout wanneer het commando over de tijd ging?",
     "124 als COMMANDO verstrijkt, en --preserve-status werd niet gespecificeerd", "124"),
    ("in welke eenheid wordt een duur zonder achtervoegsel bij timeout gelezen?", "'s' voor seconden (standaard)", "seconden"),
    ("door wie is het hulpprogramma timeout gemaakt?", "Geschreven door Padraig Brady.", "Padraig Brady"),
    # shred(1)
    ("hoe vaak schrijft shred een bestand over als je geen aantal kiest?",
     "dit aantal malen overschijven (i.p.v. de standaard 3)", "3"),
    ("op welke manier verwijdert shred de naam van een bestand als je bij --remove niets kiest?",
     "De standaardmodus is 'wipesync'", "wipesync"),
    ("welke optie van shred schrijft op het eind nog een laag nullen om het versnipperen te verbergen?",
     "-z, --zero tot slot met nullen overschrijven", "--zero"),
    # split(1)
    ("in stukken van hoeveel regels knipt split een bestand standaard?", "de standaardgrootte is 1000 regels", "1000"),
    ("met welke optie krijgen de delen van split genummerde namen in plaats van letters?",
     "-d gebruik cijfers i.p.v. letters als achtervoegsels", "-d"),
    # start-stop-daemon(8)
    ("hoeveel tijd krijgt een dienst van start-stop-daemon om te melden dat hij klaar is?", "Standaard is dit 60 seconden.",
     "60 seconden"),
    ("met welk signaal stopt start-stop-daemon processen als je --signal weglaat?", "(standaard is dat TERM)", "TERM"),
    ("welke io-prioriteit heeft een proces altijd in de klasse idle?", "In dat geval zal prioriteit steeds 7 zijn.", "7"),
    # sources.list(5)
    ("welke bestandsextensie hoort bij de deb822-indeling van pakketbronnen?",
     "Bestanden met deze indeling hebben de extensie .sources.", ".sources"),
    ("hoe schakel ik een bron in deb822-stijl uit zonder de regels uit te commentariëren?",
     "door er het veld \"Enabled: no\" aan toe te voegen", "Enabled: no"),
    ("vanaf welke versie kan apt zelf overweg met de deb822-indeling?", "door apt zelf ondersteund wordt sinds versie 1.1",
     "1.1"),
    # deluser.conf(5)
    ("welk achtervoegsel krijgt de back-up van een thuismap bij het verwijderen van een gebruiker standaard?",
     "Staat standaard ingesteld op .gz.", ".gz"),
    ("in welke map zet deluser de back-up als BACKUP_TO leeg blijft?", "Standaard wordt de huidige map gebruikt.", "huidige map"),
    # the English manual pages, asked in Dutch
    ("na hoeveel foute inlogpogingen op rij sluit faillock een gebruiker standaard buiten?", "The default is 3.", "3"),
    ("hoe lang blijft een account standaard op slot na te veel mislukte aanmeldingen?", "The default is 600 (10 minutes).",
     "600"),
    ("hoeveel meldingen mag een dienst standaard kwijt per limietperiode van journald?", "Defaults to 10000 messages in 30s.",
     "10000"),
    ("hoe lang negeert logind na het opstarten standaard het dichtklappen van een laptop?",
     "the system was off. Defaults to 30s.", "30"),
]

EN_FACTS_BLIND13 = [
    # faillock.conf(5)
    ("where does pam_faillock keep its tally files unless configured otherwise?", "The default is /var/run/faillock.",
     "/var/run/faillock"),
    ("within what time window must failed logins fall to trigger a lockout by default?", "The default is 900 (15 minutes).",
     "900"),
    ("which setting makes the root account lockable as well?",
     "even_deny_root Root account can become locked as well as regular accounts.", "even_deny_root"),
    ("who is the author of pam_faillock?", "pam_faillock was written by Tomas Mraz.", "Tomas Mraz"),
    # journald.conf(5)
    ("from what size on does journald compress the objects it stores?",
     "larger than the default threshold of 512 bytes are compressed", "512 bytes"),
    ("how long does journald wait before flushing journal files to disk?", "The default timeout is 5 minutes.", "5 minutes"),
    ("what is the default longest line journald takes from a stream before breaking it up?",
     "Defaults to 48K, which is relatively large", "48K"),
    ("after how much time does journald start a new journal file at the latest by default?",
     "it might make sense to change this value from the default of one month", "one month"),
    ("how much disk space does journald leave free for other uses by default?",
     "The first pair defaults to 10% and the second to 15%", "15%"),
    ("which terminal device gets journal messages forwarded to the console if none is set?", "Defaults to /dev/console.",
     "/dev/console"),
    # logind.conf(5)
    ("how many virtual terminals get a login prompt spawned automatically by default?",
     "the NAutoVTs= directive. Defaults to 6.", "6"),
    ("how large may each user's $XDG_RUNTIME_DIR grow by default?", "Defaults to 10%. Note that this size is a safety limit only.",
     "10%"),
    ("how many login sessions can logind handle at once?",
     "Controls the maximum number of concurrent user sessions to manage. Defaults to 8192", "8192"),
    ("what does a laptop do by default when its lid is shut?", "HandleLidSwitch= defaults to \"suspend\"", "suspend"),
    ("after how long are idle sessions stopped by default?",
     "will be stopped. Defaults to \"infinity\" (systemd-logind is not checking the idle state", "infinity"),
    ("how long is user@.service kept running after the user's last logout?", "shutdown. Defaults to 10s.", "10"),
    # the Dutch manual pages, asked in English
    ("who wrote the shred program?", "Geschreven door Colin Plumb.", "Colin Plumb"),
    ("which exit status does timeout return when the command cannot be found?", "127 als COMMANDO niet werd gevonden", "127"),
    ("which ping option floods the target with packets?", "-f Stortvloed ping.", "-f"),
    ("since which dpkg version does start-stop-daemon support --notify-await?",
     "de dienst als opgestart beschouwd wordt (sinds versie 1.19.3)", "1.19.3"),
]

ABSENT_BLIND13 = [
    ("na hoeveel seconden stopt ping standaard als je geen deadline opgeeft?", "nl"),
    ("wat is de standaardwaarde van --kill-after bij timeout?", "nl"),
    ("welk bestand gebruikt shred standaard als bron van willekeurige bytes?", "nl"),
    ("welke poort gebruikt apt standaard voor een https-pakketbron?", "nl"),
    ("hoe lang bewaart deluser de back-up van een verwijderde thuismap?", "nl"),
    ("hoeveel dagen bewaart faillock de mislukte pogingen op schijf?", "nl"),
    ("what is the default IdleActionSec= in logind.conf?", "en"),
    ("which compression algorithm does journald use for large fields?", "en"),
    ("on which port does journald forward logs to a remote server?", "en"),
    ("how many seconds does start-stop-daemon wait between retries by default?", "en"),
]

NL_RETRIEVAL_BLIND13 = [(q, p) for q, p, _ in NL_FACTS_BLIND13]
EN_RETRIEVAL_BLIND13 = [(q, p) for q, p, _ in EN_FACTS_BLIND13]


def check(sections: list[str] | None = None) -> list[str]:
    """Problems with the sets (rag_eval_check.check_phrases); an empty list when all hold."""
    from rag_eval_check import check_phrases

    return check_phrases(load_sections() if sections is None else sections, NL_FACTS_BLIND13 + EN_FACTS_BLIND13, ABSENT_BLIND13)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from rag_eval_check import run

    run(check, missing_corpus, f"{len(NL_FACTS_BLIND13)} nl facts, {len(EN_FACTS_BLIND13)} en facts, {len(ABSENT_BLIND13)} absent "
                               f"over {len(corpus_files())} documents")
