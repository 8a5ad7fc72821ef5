"""Grounded answers over a manual's entries whose default is a short sentence of its own at the entry's end ("Defaults to
6.", "Staat standaard ingesteld op .gz."): read with the entry's sentence that matches the question, it is quoted for a
question about the value; the default of the next entry is not.

The defect blind13's manual pages (logind.conf(5), deluser.conf(5), rendered with `man`) showed: "Defaults to 6." shares
no word with "how many virtual terminals ... by default?", so it ranked below MIN_MATCH and the answer declined, while the
entry's sentence that matched held no figure. Sentence splitting and choice only: no model, no index.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from edge_agent.services import answers as A
from edge_agent.services import sentences as S

DECLINE = "The documents do not cover this."

# two entries of logind.conf(5) as `man` renders them (hard-wrapped, a blank line between entries), shortened
LOGIND = """       NAutoVTs=
           Takes a positive integer. Configures how many virtual terminals (VTs) to allocate by
           default that, when switched to and are previously unused, "autovt" services are
           automatically spawned on. These services are instantiated from the template unit
           autovt@.service for the respective VT TTY name, for example, autovt@tty4.service.
           Defaults to 6. When set to 0, automatic spawning of "autovt" services is disabled.

       IdleActionSec=
           Configures the delay after which the action configured in IdleAction= (see above) is
           taken after the system is idle.

       InhibitDelayMaxSec=
           Specifies the maximum time a system shutdown or sleep request is delayed due to an
           inhibitor lock of type "delay" being active before the inhibitor is ignored and the
           operation executes anyway. Defaults to 5.
"""

DELUSER = """       BACKUP_SUFFIX
              Het compressie-algoritme selecteren voor een back-up van de persoonlijke map. Kan
              worden ingesteld op elk achtervoegsel dat wordt herkend door tar --auto-compress.
              Staat standaard ingesteld op .gz.

       ONLY_IF_EMPTY
              Een groep alleen verwijderen als er geen gebruikers tot deze groep behoren. Staat
              standaard ingesteld op 0.
"""


def _chunk(text: str, rank: int = 0):
    return SimpleNamespace(document_id=rank + 1, chunk_id=rank + 1, title=f"doc{rank}", location={}, score=0.1, snippet="", text=text)


def _answer(question: str, texts: list[str], lang: str, decline: str = DECLINE) -> tuple[str, dict]:
    """settle() over the three best sentences by words (the model's answer says nothing usable: the quote decides)."""
    ranked = A.rank_sentences(question, [_chunk(t, i) for i, t in enumerate(texts)], lang)
    evidence = [(s.chunk + 1, s) for s in ranked[:3]]
    return A.settle("", question, evidence, lang, decline, passages=texts)


def test_a_sentence_that_only_gives_a_default_is_told_apart():
    assert S.states_default("Defaults to 6.")
    assert S.states_default("The default is 600 (10 minutes).")
    assert S.states_default("The default timeout is 5 minutes.")
    assert S.states_default("Staat standaard ingesteld op .gz.")
    assert S.states_default("Standaard is dit 60 seconden.")
    assert S.states_default("De standaardmodus is 'wipesync', maar merk op dat dit \"duur\" kan zijn.")
    assert not S.states_default("Standaard worden bestanden niet verwijderd omdat shred vaak toegepast wordt op apparaat "
                                "bestanden (zoals /dev/hda) en meestal moet men die niet verwijderen.")  # says more
    assert not S.states_default("If enabled (the default), data objects are compressed.")
    assert not S.states_default("Configures how many virtual terminals (VTs) to allocate by default.")


def test_units_know_their_paragraph():
    units = S.split_units(LOGIND)
    six = next(u for u in units if u.text == "Defaults to 6.")
    assert next(u for u in units if u.text.startswith("NAutoVTs=")).block == six.block
    five = next(u for u in units if u.text == "Defaults to 5.")
    idle = next(u for u in units if u.text.startswith("IdleActionSec="))
    assert len({six.block, idle.block, five.block}) == 3


def test_the_default_at_an_entrys_end_is_quoted_with_the_entry():
    answer, how = _answer("How many virtual terminals get a login prompt spawned automatically by default?", [LOGIND], "en")
    assert how["answer"] == "extractive"
    assert "Defaults to 6" in answer and "virtual terminals" in answer  # the value and what it is the default of
    assert "Defaults to 5" not in answer


def test_the_default_of_the_next_entry_is_not_borrowed():
    """IdleActionSec= gives no default; the next entry's "Defaults to 5." is not its answer."""
    answer, how = _answer("How long is the idle action delayed by default?", [LOGIND], "en")
    assert how["answer"] == "declined" and answer == DECLINE


def test_a_dutch_default_is_quoted_with_its_entry():
    answer, how = _answer("Welk achtervoegsel krijgt de back-up van een persoonlijke map standaard?", [DELUSER], "nl",
                          "De documenten gaan hier niet over.")
    assert how["answer"] == "extractive"
    assert ".gz" in answer and "compressie-algoritme" in answer
    assert "ONLY_IF_EMPTY" not in answer  # the next entry is not quoted with it


# timeout(1) in Dutch (manpages-nl) as `man` renders it: its --kill-after option, and the end of its exit codes where a
# chunk of the page begins
TIMEOUT = ["""       -k, --kill-after=DUUR

              een KILL-signaal verzenden als COMMANDO nog steeds actief is

              na DUUR nadat het eerste signaal verzonden is

       Als de tijdslimiet verstreken is, stuur dan het TERM signaal naar COMMANDO, als er geen
       ander SIGNAAL werd opgegeven. Het TERM signaal beëindigt elk proces dat dat signaal niet
       blokkeert of vangt. Is het nodig zijn om het KILL signaal te gebruiken, omdat dit signaal
       niet gevangen kan worden.
""", """       137    als aan COMMANDO (of de timeout zelf) het KILL (9) signaal (128+9) werd verstuurd

       -      de beëindigings status van COMMANDO anders
"""]


def test_a_figure_the_model_points_at_is_no_default_unless_its_sentence_says_so():
    """The model's figure points at its sentence (settle's first path); for a question about a default, that sentence
    is quoted only where it speaks of a default, as every other quote where the answer can decline."""
    model = "137 als aan COMMANDO (of de timeout zelf) het KILL (9) signaal (128+9) werd verstuurd"
    decline = "De documenten gaan hier niet over."

    def settled(question: str) -> tuple[str, dict]:
        ranked = A.rank_sentences(question, [_chunk(t, i) for i, t in enumerate(TIMEOUT)], "nl")
        return A.settle(model, question, [(s.chunk + 1, s) for s in ranked[:3]], "nl", decline, passages=TIMEOUT)

    assert settled("Wat is de standaardwaarde van --kill-after bij timeout?") == (decline, {"answer": "declined", "check": "no_answer"})
    # the same figure for a question that is not about a default is still quoted from its sentence
    answer, how = settled("Welke afsluitcode geeft timeout als het KILL-signaal werd verstuurd?")
    assert how["answer"] == "extractive" and "137" in answer


@pytest.mark.parametrize("text", ["Staat standaard ingesteld op .gz.", "Bestanden met de extensie .sources worden gelezen.",
                                  "Run ./configure before make."])
def test_a_quote_keeps_the_space_before_a_token_that_starts_with_a_dot(text):
    """A citation taken out left " ." behind, so a space before punctuation went; "op .gz" came out as "op.gz"."""
    assert A.extractive(S.Sentence(0, 0, text, 0.5, 0.5), 1) == f'"{text}" [1]'
    assert A.with_citation(text, 1, {1}) == f"{text} [1]"


def test_a_removed_citation_leaves_no_space_before_the_full_stop():
    assert A.with_citation("Binnen 30 dagen [7] .", 2, {2}) == "Binnen 30 dagen. [2]"
