"""Sentences of retrieved passages: splitting a chunk into sentences, and how far a sentence holds a question's terms
(stemmed in the question's language; a Dutch or German compound counts in part where its parts are separate words;
in a passage of another language, the words both languages share: cross_credits).
services/answers.py ranks them against a question and checks answers on them.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from difflib import SequenceMatcher

from edge_agent.rag import language

# a sentence ends at . ! ? (and closing quotes or brackets) before whitespace; a paragraph at a blank line,
# a list item at a line that starts with a bullet or a number: single line breaks inside a paragraph are wrapping,
# except after a heading line or around a "Key: value" header line (_segments). A contract's clause number ("4.2 Opzegtermijn
# ...", "12.3.1 The Supplier ...": figures joined by dots, then a capital) marks an item too, so that each clause stands
# alone and the article's heading above it heads it (a figure such as "1.5" at a wrapped line's start goes on in lower case)
SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=\S)")
_LIST_MARK = r"(?:[•·*\-–]\s|\d{1,2}[.)]\s|\d{1,2}(?:\.\d{1,2}){1,3}\.?[ \t]+(?=[A-ZÀ-ÖØ-Þ]))"
_BREAK = re.compile(rf"\n[ \t]*\n\s*|\n(?=[ \t]*{_LIST_MARK})")
LIST_ITEM = re.compile(rf"[ \t]*{_LIST_MARK}")
_NUMBER_MARK = re.compile(r"\d{1,2}[.)]")
# a table row as the CSV and sheet loaders write it (loaders.row_line): "Header: value; Header: value."
_RECORD = re.compile(r"[^:;\n]{1,60}: [^;\n]*(?:; [^:;\n]{1,60}: [^;\n]*)+")
# a table row as the HTML and .docx loaders write it: its cells joined by " | " on one line ("Voicemail PIN-code* | Geef de
# vier cijferige PIN-code op"), not a line of code or a grammar rule ("::=", a line that starts with "|" or blank space)
_ROW = re.compile(r"[^\s|][^\n]*? \| \S")
HEAD_WORDS = 12  # a paragraph this short without a closing mark heads the next sentence
# ... except a letter's greeting line ("Dear Pieter,", "Geachte heer Jansen,", "Beste Anna,"): the name it holds is not what
# the first sentence is about, and matched with it ("By when should Pieter confirm ...?") it drew the quote to that sentence
_GREETING = re.compile(r"(?:dear|beste|geachte|hi|hallo|hello|hey|lieve|liebe|sehr geehrte[rn]?|bonjour|cher|chère|hola|"
                       r"estimad[oa]s?)\b[^,.!?]{0,60},", re.IGNORECASE)
_TITLE = re.compile(r"[^\n]{1,120}\n[ \t]*([*=~^#+-])\1{2,}[ \t]*\Z|#{1,6}[ \t]+[^\n]{1,120}\Z")
CLOSED = re.compile(r"[.!?:;][\"'”’)\]]*$")
MAX_SENTENCE_CHARS = 400  # a longer "sentence" (a grammar listing, a table) is cut at its clauses, then its words
COMPOUND_PART = 4  # least letters of a word that counts as part of a question's compound word
COMPOUND_MIN = 5  # shorter question words are not looked for inside compounds
INFLECTION = 2  # letters a text's word may add to the part of a compound it matches ("prompts" for "prompt-lengte")
# ... and a word of the text this short that is the whole first part of a question's compound ("uur" of "uurtarief", "dag" of
# "dagtarief", "web" of "webserver"), followed in it by a word of COMPOUND_PART letters or more: units and other short
# words start many Dutch compounds, and without them "Wat is het uurtarief?" found nothing of "95 euro per uur"
SHORT_HEAD = 3
# a heading line inside a paragraph (a .docx heading, a .txt title over its text): this short, no closing mark, the next
# line starting with a capital or a figure, the line before it (if any) closed, and not full (_heading_line); a line
# with code's marks or an indented one (pydoc's wrapped text, code and grammar listings: _CODE_LINE) is none
HEADING_CHARS = 60
_CODE_LINE = re.compile(r"[()\[\]{}=<>|\\*\"`@]|>>>|::|\w\.\w|^\s")
# a "Key: value" header line (mail headers, a document's metadata): a key of one to three words starting with a capital
_HEADER = re.compile(r"([A-Z][\w-]{0,24}(?: [\w-]{1,24}){0,2}):[ \t]+(\S.{0,200})")
TITLE_KEYS = frozenset("subject onderwerp title titel".split())  # what a header block is about: matched with each of its lines
MAIL_KEYS = frozenset("from to cc bcc subject date sent reply-to van aan onderwerp datum verzonden afzender".split())
# a head with any of these, or one in lower case, is a code signature ("str.partition(sep)", "ll | longlist", "Changed in
# version 3.2"): the subject of the sentence it heads, quoted with it; any other head is a heading, left out of the quote
# (Unit.quote)
_SIGNATURE = re.compile(r"[()\[\]_=<>*@/\\.|]|^[^\w]*[a-z]")


@dataclass(frozen=True)
class Unit:
    """One piece of a chunk (split_units): text, what is matched and shown to the model; quote, what of it may be quoted
    ("": all of it); header, for a header line, its key casefolded ("from", "datum"), "" for a sentence.

    A sentence under a heading: text is the heading and the sentence, quote the sentence. A header line: text is the
    subject or title line of its block (TITLE_KEYS: what "From:" sent) and the line, quote the line."""

    text: str
    quote: str = ""
    header: str = ""
    block: int = 0  # the chunk's paragraph (blank-line block, _BREAK) it was read from: an entry of a manual, a definition


@dataclass(frozen=True)
class Sentence:
    """One sentence of a retrieved chunk: the chunk's retrieval rank (0-based), its place in the chunk, its score."""

    chunk: int
    index: int
    text: str
    score: float
    match: float = 0.0  # the share of the question's weight it holds (the score before rank, kind and code terms)
    after: str = ""  # the chunk's next sentence ("" for its last, or where a heading or header follows): quoted with it where both fit (extractive)
    quote: str = ""  # what of text may be quoted ("": all; Unit.quote): a heading or the rest of a header block never is
    header: str = ""  # the key of a header line ("from", "datum"), casefolded; "" for a sentence (Unit.header)
    language: str = ""  # its passage's language (text_language; "" where nobody asked)
    lane: bool = False  # of a passage in another language than the question's, among the nearest by cosine (rank_sentences)


# a full stop that ends no sentence (_abbreviation_joins): a title before a name ("mr. P.A. Koster", "drs. H.J. Wiersma",
# "Dr. Su"), initials before a surname ("R. Smit", "L. de Bruijn"), or an abbreviation before text that goes on in lower
# case or with a figure ("Catharijne B.V. verhuurt", "bijv. een", "nr. 5", "e.g. the"); legal and business texts write
# these in most sentences, and a split there cut a name from its role and a party from what it does
_TITLE_ABBREVIATIONS = frozenset("mr mrs ms dr drs ir ing prof dhr mevr mw jhr".split())
_ABBREVIATIONS = frozenset("bijv bv nr nrs art ca incl excl resp vs cf approx fig no vol zgn evt ong tel jl vgl pag blz".split())
_NEVER_LAST = frozenset("bijv vgl cf vs e.g i.e o.a t.a.v i.v.m m.b.t z.s.m".split())  # end no sentence, whatever follows
INITIALS = re.compile(r"(?:[A-Z]\.){1,4}")  # "R.", "H.J.": initials (persons.names_person reads them too)
_DOTTED = re.compile(r"(?:\w{1,3}\.){2,}")  # "B.V.", "e.g.", "o.a.", "t.a.v."
_PARTICLE_WORDS = frozenset("van de der den het ter ten te von zu da di del la le du".split())
_PERSON_WORDS = frozenset("mevrouw meneer heer mevr dhr".split())


def _abbreviation_joins(pieces: list[str]) -> list[str]:
    """pieces (split at SENTENCE_END) joined again where the full stop between two ends an abbreviation, not a sentence."""
    if len(pieces) < 2:
        return pieces
    out = [pieces[0]]
    for piece in pieces[1:]:
        before = out[-1].split()
        token = before[-1].lstrip("(\"'“‘") if before else ""
        first = piece.split()[0]
        word = first.strip("\"'“‘(").rstrip(".,;:")
        bare = token[:-1].casefold()
        join = False
        if token.endswith(".") and word:
            if word[0].islower() or word[0].isdigit():
                join = (bare in _TITLE_ABBREVIATIONS or bare in _ABBREVIATIONS or bool(_DOTTED.fullmatch(token))
                        or bool(INITIALS.fullmatch(token)))
                join = join and not (word[0].isdigit() and bool(INITIALS.fullmatch(token)))  # "plan B. 2 ..." is two
            elif word[0].isupper():
                name_next = word.casefold() not in _sentence_openers() or (word.casefold() in _PARTICLE_WORDS and len(piece.split()) > 1)
                title = bare in _TITLE_ABBREVIATIONS and not (len(before) > 1 and before[-2][:1].isdigit())  # "5 ms."
                join = bare in _NEVER_LAST or (title and name_next) or (bool(INITIALS.fullmatch(token)) and name_next
                                                 and (len(token) > 2 or _title_before(before[:-1])))
        if join:
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


@functools.cache
def _sentence_openers() -> frozenset[str]:
    """Words that start a sentence rather than a surname ("The", "De", "Dit"): Dutch and English stop words."""
    return language.stop_words("nl") | language.stop_words("en")


def _title_before(words: list[str]) -> bool:
    """Whether the words before a single initial are a title, a label or a first name that a surname follows ("mevrouw",
    "mr.", "Budgethouder:", "Anna"), not a word in lower case ("bijlage A." ends a sentence)."""
    if not words:
        return True
    last = words[-1].strip("\"'“‘(")
    return (last.rstrip(".").casefold() in _TITLE_ABBREVIATIONS or last.casefold() in _PERSON_WORDS
            or last.endswith((":", ",")) or (last[:1].isupper() and last[1:].isalpha()))


def is_greeting(text: str) -> bool:
    """Whether a unit is a letter's greeting line ("Dear Pieter,", "Geachte heer Jansen,"): never quoted, nor with what follows."""
    return bool(_GREETING.fullmatch(text))


def is_item(text: str) -> bool:
    """Whether a unit is one item of several: a list item (LIST_ITEM: a bullet, "3.", a clause "4.2") or a table row
    ("Budget: 48.500,00; Budgethouder: J. Visser.", loaders.row_line; "Shell | De Unix shell ...": _ROW)."""
    return bool(LIST_ITEM.match(text) or _RECORD.fullmatch(text) or is_row(text))


def is_row(line: str) -> bool:
    """Whether a line is a table row of cells joined by " | " (_ROW), not code (">>>", a grammar rule's "::=")."""
    return bool(_ROW.match(line.strip())) and ">>>" not in line and "::=" not in line


def _rows_apart(para: str) -> list[str]:
    """A paragraph with its table rows (is_row) each a paragraph of their own: a form's or manual's two-column table
    ("Veld | Omschrijving", one field a row) was read as one wrapped sentence of all its rows, cut at MAX_SENTENCE_CHARS,
    and with three or more "|" in it never quoted (answers._table); a row is one record, as a CSV row is."""
    lines = para.split("\n")
    if not any(is_row(line) for line in lines):
        return [para]
    out: list[str] = []
    prose: list[str] = []
    for line in lines:
        if is_row(line):
            if prose:
                out.append("\n".join(prose))
                prose = []
            out.append(line)
        else:
            prose.append(line)
    if prose:
        out.append("\n".join(prose))
    return out


def split_sentences(text: str) -> list[str]:
    """text's sentences and header lines (split_units), the text of each."""
    return [u.text for u in split_units(text)]


def split_units(text: str) -> list[Unit]:
    """text's sentences, whitespace collapsed, wrapped lines joined; pieces of 3 characters or fewer left out.

    A short paragraph or heading line without a closing . ! ? : ; (a heading, a signature such as
    "object.__len__(self)", a bullet without a full stop) is not a sentence of its own: it heads the sentence that
    follows it (a heading: matched, never quoted, Unit.quote; a signature: part of the sentence). A list item stands
    alone. A document's
    section title (a line underlined with *** or ===, or a Markdown "# " line) is left out: it names a subject
    and answers nothing, and its words would make the first sentence under it seem to. A "Key: value" header line
    (_header_lines: mail headers, a block of metadata lines) is a unit of its own, never glued to prose.
    """
    out: list[Unit] = []
    head = ""

    def flush_head() -> None:
        nonlocal head
        if len(head) > 3:  # only the nearest one heads the next sentence; an earlier one stands alone
            out.extend(Unit(c) for c in _cap(head))
        head = ""

    for number, para in enumerate(p for block in _BREAK.split(text) for p in _rows_apart(block)):
        start = len(out)
        for kind, seg in _segments(para):
            if kind == "title":
                flush_head()
                continue
            if kind == "header":
                flush_head()
                out.append(seg)
                continue
            seg = " ".join(seg.split())
            if not seg:
                continue
            if is_greeting(seg):  # "Dear Pieter,": a unit of its own, no heading of the mail's first sentence
                flush_head()
                out.append(Unit(seg))
                continue
            if len(seg.split()) <= HEAD_WORDS and not CLOSED.search(seg) and ">>>" not in seg:
                flush_head()
                head = seg
                if LIST_ITEM.match(seg) or is_row(seg):  # a list item or a table row stands alone: it heads nothing
                    flush_head()
                continue
            pieces = _abbreviation_joins([s.strip() for s in SENTENCE_END.split(seg) if s.strip()])
            if len(pieces) > 1 and _NUMBER_MARK.fullmatch(pieces[0]):  # "2. if not, ...": the item's number, not a sentence
                pieces[:2] = [f"{pieces[0]} {pieces[1]}"]
            for i, piece in enumerate(pieces):
                if i == 0 and head:
                    signature = bool(_SIGNATURE.search(head))
                    caps = _cap(f"{head} {piece}")
                    heading = not signature and caps[0].startswith(f"{head} ")
                    out.append(Unit(caps[0], quote=caps[0][len(head) + 1:] if heading else ""))
                    out.extend(Unit(c) for c in caps[1:] if len(c) > 3)
                    head = ""
                elif len(piece) > 3:
                    out.extend(Unit(c) for c in _cap(piece))
        out[start:] = [replace(u, block=number) for u in out[start:]]
    flush_head()
    return out


# a short sentence that gives the default of what its paragraph describes ("Defaults to 6.", "The default is 600 (10
# minutes).", "Staat standaard ingesteld op .gz.", "Standaard is dit 60 seconden."): a manual's entry names its setting
# and what it does first and its default last, in words of its own that share nothing with a question about the setting
_STATES_DEFAULT = re.compile(r"(?:(?:this|the) (?:setting|option|value) )?defaults? to\b|(?:the )?default(?: [\w-]+){0,2} (?:is|are)\b"
                             r"|(?:staat |dit staat )?standaard\b|de standaard\w* (?:is|zijn|wordt)\b", re.IGNORECASE)
DEFAULT_WORDS = 14  # a longer sentence that starts so says more than the default: it is matched on its own words


def states_default(text: str) -> bool:
    """Whether a sentence only gives a default (_STATES_DEFAULT at its start, DEFAULT_WORDS words or fewer)."""
    return bool(_STATES_DEFAULT.match(text)) and len(text.split()) <= DEFAULT_WORDS


def _segments(para: str) -> list[tuple[str, object]]:
    """A paragraph's pieces in order: ("prose", text) with its wrapped lines, ("heading", line) for a heading line
    (HEADING_CHARS), ("header", Unit) for each header line (_header_lines), ("title", "") for a section title."""
    if _TITLE.match(para.strip()):
        return [("title", "")]
    lines = para.split("\n")
    headers = _header_lines(lines)
    width = max(len(line.strip()) for line in lines)
    out: list[tuple[str, object]] = []
    prose: list[str] = []
    for i, line in enumerate(lines):
        if i in headers:
            if prose:
                out.append(("prose", "\n".join(prose)))
                prose = []
            out.append(("header", headers[i]))
            continue
        prose.append(line)
        if i + 1 < len(lines) and i + 1 not in headers and _heading_line(line, lines[i - 1] if prose[:-1] else None, lines[i + 1], width):
            out.append(("title", "") if _TITLE.match(line.strip()) else ("heading", line))
            prose = []
    # a Markdown heading (_TITLE) that ends the chunk, under a closed sentence (not a shell comment under a command)
    last = prose.pop() if len(prose) > 1 and _TITLE.match(prose[-1].rstrip()) and CLOSED.search(prose[-2].strip()) else None
    if prose:
        out.append(("prose", "\n".join(prose)))
    if last is not None:
        out.append(("title", ""))
    return out


def _heading_line(line: str, before: str | None, nxt: str, width: int) -> bool:
    """Whether a line inside a paragraph (before: the prose line above it, None at the paragraph's start; width: the
    paragraph's longest line) is a heading of what follows (HEADING_CHARS), not a hard-wrapped line of a sentence: a
    wrapped line is full, the next line's first word would not have fit on it."""
    t = line.strip()
    n = nxt.strip()
    # a Markdown heading ("## Vakantiedagen", _TITLE; not indented) over a line that starts with a capital or a figure is
    # one whatever that line holds (a chunk of a .md file starts with one: a "(" under it, a code mark, glued it to the
    # quote); not a shell comment over a command
    if _TITLE.match(line.rstrip()) and n and (n[0].isupper() or n[0].isdigit()):
        return True
    return (bool(t) and bool(n) and len(t) <= HEADING_CHARS and len(t.split()) <= HEAD_WORDS and not CLOSED.search(t)
            and len(t) + 1 + len(n.split()[0]) <= width
            and (n[0].isupper() or n[0].isdigit()) and not _CODE_LINE.search(line) and not _CODE_LINE.search(nxt)
            and (before is None or bool(CLOSED.search(before.strip()))))


def _header_lines(lines: list[str]) -> dict[int, Unit]:
    """The paragraph's header lines by line number: a "Key: value" line (_HEADER) whose key is a mail header's
    (MAIL_KEYS), or one of two or more such lines in a row (a block of metadata); a line ending in . or ! or followed
    by a line that goes on in lower case is prose ("Note: If the object is ... the attribute reference")."""
    found = {}
    for i, line in enumerate(lines):
        m = _HEADER.fullmatch(line.strip())
        if not m or line.strip()[-1] in ".!" or ">>>" in line:
            continue
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if nxt and nxt[0].islower():
            continue
        found[i] = m.group(1)
    keep = {i for i in found if found[i].casefold() in MAIL_KEYS or i - 1 in found or i + 1 in found}
    out = {}
    for i in sorted(keep):
        j, k = i, i
        while j - 1 in keep:
            j -= 1
        while k + 1 in keep:
            k += 1
        line = " ".join(lines[i].split())
        titles = [" ".join(lines[x].split()) for x in range(j, k + 1) if x != i and found[x].casefold() in TITLE_KEYS]
        out[i] = Unit(" ".join([*titles, line]), quote=line if titles else "", header=found[i].casefold())
    return out


def _cap(s: str) -> list[str]:
    if len(s) <= MAX_SENTENCE_CHARS:
        return [s]
    parts, cur = [], ""
    for piece in re.split(r"(?<=[;:,])\s+|\s+", s):
        if cur and len(cur) + 1 + len(piece) > MAX_SENTENCE_CHARS:
            parts.append(cur)
            cur = piece
        else:
            cur = f"{cur} {piece}" if cur else piece
    if cur:
        parts.append(cur)
    return [p for p in parts if len(p) > 3]


# header lines (split_units: "From: jan@example.nl", "Datum: 3 maart") are no answer to a question about what a
# mail or document says, and would put an address in a quote: one is offered only to a question about its header,
# by the key's own word ("onderwerp", "versie") or by what it holds: a sender, recipient or date
_SENDER_KEYS = frozenset("from van afzender sender reply-to".split())
_RECIPIENT_KEYS = frozenset("to aan cc bcc ontvanger recipient".split())
_DATE_KEYS = frozenset("date datum sent verzonden".split())
_SENDER_ASKS = re.compile(r"\b(?:afzender|sender|sent|send|stuurde|stuurt|gestuurd|verstuurde|verstuurd|mailde|schreef|wrote|from whom|van wie)\b")
_RECIPIENT_ASKS = re.compile(r"\b(?:ontvanger|ontvangers|recipients?|geadresseerde|aan wie|to whom|addressed|sent to|gestuurd aan|gericht aan)\b")
_DATE_ASKS = re.compile(r"\b(?:wanneer|when|datum|date|dag|day)\b")


def asks_header(question: str, key: str, lang: str, kind: str | None) -> bool:
    """Whether a question (kind: what it asks for, asks.answer_kind) asks what a header line of this key (casefolded:
    "from", "onderwerp") holds: it names the key ("Wat is het onderwerp van de mail?"), or asks who sent it (a
    who-question or a sender's word, for From and Van), to whom (To, Aan, Cc), or when (Date, Datum, Verzonden)."""
    low = question.casefold()
    if set(language.terms(key, lang)) & language.content_terms(question, lang):
        return True
    if key in _RECIPIENT_KEYS:
        return bool(_RECIPIENT_ASKS.search(low))
    if key in _SENDER_KEYS:
        return not _RECIPIENT_ASKS.search(low) and (bool(_SENDER_ASKS.search(low)) or kind == "name")
    if key in _DATE_KEYS:
        return bool(_DATE_ASKS.search(low)) or kind in ("date", "year")
    return False


def question_words(question: str, lang: str) -> dict[str, str]:
    """The question's content terms -> the folded word each comes from (for compound matching)."""
    out: dict[str, str] = {}
    skip = language.QUESTION_WORDS.get(lang, frozenset())
    for w in language.words(question.casefold()):
        if w in skip:
            continue
        ts = language.terms(w, lang)
        if ts:
            out.setdefault(ts[0], language.fold(w))
    return out


def match_credits(qterms: set[str], qwords: dict[str, str], text: str, lang: str, text_lang: str | None = None) -> dict[str, float]:
    """How far text holds each of the question's terms: 1 for the term itself; in a language that writes compounds
    as one word ("promptlengte", "toolverwerking"), a question word that is not there counts by the share of its
    letters found as words of the text at its start and end ("prompts", "tool-verwerking": COMPOUND_PART letters
    at least; at its start a whole word of SHORT_HEAD letters of a text in lang too: "uur" of "uurtarief"), and fully
    when it is the start or end of a longer word of the text ("geheugen" in "systeemgeheugen").
    text_lang: the text's language (text_language); where it is another than lang, a term the text shares across the
    two languages counts too (cross_credits)."""
    held = set(language.terms(text, lang))
    out = {t: 1.0 for t in qterms if t in held}
    if text_lang is not None and text_lang != lang and len(out) < len(qterms):
        out.update(cross_credits(qterms - out.keys(), qwords, text, text_lang))
    if lang not in language.COMPOUNDING or len(out) == len(qterms):
        return out
    stops = language.stop_words(lang)
    words = {language.fold(w) for w in language.words(text.casefold()) if w not in stops}
    parts = {w for w in words if len(w) >= COMPOUND_PART}
    # (not in a text of another language: "bug" of "bugrapport" drew a Dutch question to an English bug report's heading)
    short = {w for w in words if len(w) == SHORT_HEAD and w.isalpha()} if text_lang in (None, lang) else set()
    forms = set().union(*(verb_keys(p) for p in parts)) if lang == "nl" else set()
    for t in qterms - out.keys():
        w = qwords.get(t)
        if not w or len(w) < COMPOUND_MIN or w.isdigit():
            continue
        if forms and verb_keys(w) & forms:  # "installeert" in the question, "installeren" in the text
            out[t] = 1.0
            continue
        if any(len(p) > len(w) and (p.endswith(w) or (p.startswith(w) and _starts_a_word(p[len(w):]))) for p in parts):
            out[t] = 1.0
            continue
        head = max((n for p in parts if (n := _common_prefix(w, p)) >= COMPOUND_PART and len(p) - n <= INFLECTION < len(w) - n), default=0)
        if not head and w[:SHORT_HEAD] in short and len(w) - SHORT_HEAD >= COMPOUND_PART and _starts_a_word(w[SHORT_HEAD:]):
            head = SHORT_HEAD  # "uur" of "uurtarief" in "95 euro per uur"
        tail = max((len(p) for p in parts if len(p) < len(w) and w.endswith(p)), default=0)
        got = min(1.0, (head + tail) / len(w))
        if got > 0:
            out[t] = got
    return out


_VOWELS = "aeiouyáéíóúàèëïöü"
VERB_STRIP_MIN = 6  # a Dutch word this long ending in -t or -d after a consonant is also read without it (verb_keys)
_DOUBLE_VOWEL = re.compile(r"([aeou])\1([^aeiouy]+)$")


@functools.lru_cache(maxsize=65536)
def verb_keys(word: str) -> frozenset[str]:
    """Keys under which a folded Dutch word meets the other forms of its verb where Snowball stems them apart:
    "verwijdert", "verwijderd" and "verwijderen" (stems "verwijdert", "verwijderd", "verwijder"), "installeert",
    "geinstalleerd" and "installeren" ("installeert", "installeer", "installer"). The keys: the word's stem; for a word
    Snowball leaves as it is, of VERB_STRIP_MIN letters or more, ending in -t or -d after a consonant (a verb's present
    tense or participle), also the stem of the word without it; for a verb in -eren ("-eert", "-eerd", "-eer"), each
    with its doubled "ee" made single, as the infinitive spells it ("installeer" / "installer"). A noun keeps its one
    key: "pakket" (a vowel before its -t), "levering" (no verb ending)."""
    stems = set(language.terms(word, "nl", drop_stop_words=False)[:1])
    if stems == {word} and len(word) >= VERB_STRIP_MIN and word[-1] in "td" and word[-2] not in _VOWELS:
        stems |= set(language.terms(word[:-1], "nl", drop_stop_words=False)[:1])
    if word.endswith(("eert", "eerd", "eer")):
        stems |= {_DOUBLE_VOWEL.sub(r"\1\2", s) for s in stems}
    return frozenset(stems)


def _starts_a_word(rest: str) -> bool:
    """Whether what follows a question word at the start of a longer word can start the compound's next word: a
    consonant (a linking "s" too), or after a linking "en" or "e" one that starts COMPOUND_PART letters or more ("prompt" is
    part of "promptlengte", "recept" of "receptenboek"; "recept" is no part of "receptionist", "kamer" none of "kameraden")."""
    rest = rest.lstrip("-")
    if rest and rest[0] not in _VOWELS:
        return True
    link = next((rest[len(x):] for x in ("en", "e") if rest.startswith(x)), "")
    return len(link) >= COMPOUND_PART and link[0] not in _VOWELS


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def coverage(question: str, passage: str, lang: str, passage_lang: str | None = None) -> float:
    """The share of the question's content terms passage holds (match_credits, across languages where passage_lang
    is another; 1.0 for a question without any)."""
    qterms = language.content_terms(question, lang)
    if not qterms:
        return 1.0
    return sum(match_credits(qterms, question_words(question, lang), passage, lang, passage_lang).values()) / len(qterms)


# the languages a passage is told apart in (those of the grounded prompts' scaffolds): a Dutch passage that langid reads as
# Afrikaans or Danish (a short one, a list) is still Dutch to the checks
PASSAGE_LANGUAGES = frozenset({"en", "nl", "de", "fr", "es"})


@functools.lru_cache(maxsize=4096)
def text_language(text: str) -> str:
    """The language of a retrieved passage among PASSAGE_LANGUAGES (language.likely of its start; "und" for one without
    letters), remembered: a passage is read by several checks."""
    found = language.likely(text, PASSAGE_LANGUAGES)
    return found[0] if found else language.UNKNOWN


# what a question shares with a passage in another language (cross_credits): the same word, folded (a name, a figure, an
# identifier: "Debian", "022", "apt-get", "umask"), a figure written with other separators ("45,000" for "45.000"), or a
# cognate of COGNATE_MIN letters or more: the question's stem starts a passage word ("instal" in "installatie"), or the two
# words share COGNATE_RATIO of their letters (difflib's ratio: "workstation"/"werkstations", "paper"/"papier",
# "architectures"/"architecturen"; not "package"/"pakket", nor "general"/"generatie" at 0.75)
COGNATE_MIN = 5
COGNATE_RATIO = 0.8
_FIGURE_MARKS = re.compile(r"(?<=\d)[.,](?=\d)")


def cross_credits(qterms: set[str], qwords: dict[str, str], text: str, text_lang: str) -> dict[str, float]:
    """1 for each of the question's terms that text, in another language (text_lang), holds as the same word, figure or
    cognate (see COGNATE_MIN); the terms it does not hold are left out."""
    low = text.casefold()
    folded = {language.fold(w) for w in language.words(low)}
    held = folded | set(language.terms(text, text_lang, drop_stop_words=False))
    figures = {_FIGURE_MARKS.sub("", f) for f in re.findall(r"\d+(?:[.,]\d+)*", low)}
    long = [w for w in held if len(w) >= COGNATE_MIN and not w.isdigit()]
    out = {}
    for t in qterms:
        w = qwords.get(t, t)
        if t in held or w in held or (w[:1].isdigit() and _FIGURE_MARKS.sub("", w) in figures):
            out[t] = 1.0
        elif len(w) >= COGNATE_MIN and not w.isdigit() and any(_cognate(t, w, p) for p in long):
            out[t] = 1.0
    return out


def _cognate(stem: str, word: str, other: str) -> bool:
    """Whether a question's word (and its stem) and a passage word of another language are one word spelled two ways
    (they start with the same letter: "werkstation", not "netwerkstation", for "workstation")."""
    if len(stem) >= COGNATE_MIN and other.startswith(stem):
        return True
    return (word[0] == other[0] and 2 * min(len(word), len(other)) >= COGNATE_RATIO * (len(word) + len(other))
            and _alike(word, other))


@functools.lru_cache(maxsize=65536)
def _alike(a: str, b: str) -> bool:
    m = SequenceMatcher(None, a, b, autojunk=False)
    return m.quick_ratio() >= COGNATE_RATIO and m.ratio() >= COGNATE_RATIO
