"""Language of a text (py3langid) and language-aware BM25 terms (Snowball stemmers via PyStemmer,
stop words from bm25s).

A chunk's terms are its words, stop words of its language left out, stemmed by its language's
Snowball stemmer, then accent-folded; codes like "XK-99/B" also give one joined, unstemmed term.
A language Snowball lacks (or "und", unknown) keeps plain folded words, as before. A query is
analysed in each language it is likely to be in, among the languages the index holds, and the
terms are united: a short English query that langid half-reads as Dutch still finds English stems.
"""
from __future__ import annotations

import functools
import re
import sys
import threading
import unicodedata
from typing import Iterable

UNKNOWN = "und"
DETECT_CHARS = 256  # langid reads the first this many characters of a chunk: its tokenizer is a Python loop per byte
SECOND_LANGUAGE_SHARE = 0.2  # a query is also analysed in another index language this likely

# ISO 639-1 code -> Snowball algorithm name (PyStemmer's)
SNOWBALL = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech", "da": "danish", "nl": "dutch",
    "en": "english", "eo": "esperanto", "et": "estonian", "fi": "finnish", "fr": "french", "de": "german",
    "el": "greek", "hi": "hindi", "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian",
    "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "nb": "norwegian", "fa": "persian", "pl": "polish",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "es": "spanish", "sv": "swedish",
    "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}
_UNSTEMMED = ("zh", "ja", "ko", "he", "th", "vi", "uk", "bg", "hr", "sk", "sl", "lv", "is", "af", "ms", "sw", "bn", "ur", "pa")
_STOPWORD_LISTS = {
    "en": "STOPWORDS_EN", "nl": "STOPWORDS_DUTCH", "de": "STOPWORDS_GERMAN", "fr": "STOPWORDS_FRENCH",
    "es": "STOPWORDS_SPANISH", "it": "STOPWORDS_ITALIAN", "pt": "STOPWORDS_PORTUGUESE", "da": "STOPWORDS_DANISH",
    "no": "STOPWORDS_NORWEGIAN", "nb": "STOPWORDS_NORWEGIAN", "sv": "STOPWORDS_SWEDISH", "ru": "STOPWORDS_RUSSIAN",
    "tr": "STOPWORDS_TURKISH",
}
_COMPOUND = re.compile(r"(?<!\w)\w+(?:[-_./:]\w+)+", re.UNICODE)
_JOINED = re.compile(r"\w[-_./:]\w", re.UNICODE)
_WORD = re.compile(r"\w+", re.UNICODE)
_lock = threading.Lock()


@functools.cache
def _identifier():
    """py3langid's model (~0.5 s to load, once); classify/rank do not change it, so threads share it."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    # the languages Snowball stems plus common ones it does not: fewer near-misses such as Occitan for code-heavy English
    ident.set_languages([lang for lang in {*SNOWBALL, *_UNSTEMMED} if lang in ident.nb_classes])
    return ident


def detect(text: str) -> str:
    """The ISO 639-1 code of text's language, or "und" for text with no letters."""
    sample = text[:DETECT_CHARS]
    if not any(ch.isalpha() for ch in sample):
        return UNKNOWN
    return str(_identifier().classify(sample)[0])


def likely(text: str, among: Iterable[str]) -> list[str]:
    """The languages of `among` text is likely in, most likely first: the best one, plus any other whose
    share of their probabilities is at least SECOND_LANGUAGE_SHARE (empty when `among` is)."""
    among = {a for a in among if a != UNKNOWN}
    if not among:
        return []
    if len(among) == 1 or not any(ch.isalpha() for ch in text):
        return sorted(among)[:1] if len(among) == 1 else []
    ranked = [(lang, p) for lang, p in _identifier().rank(text[:DETECT_CHARS]) if lang in among]
    total = sum(p for _, p in ranked) or 1.0
    best = [ranked[0][0]]
    best += [lang for lang, p in ranked[1:] if p / total >= SECOND_LANGUAGE_SHARE]
    return best


def stemmer(lang: str):
    """A PyStemmer Stemmer for lang, or None where Snowball has none. One per thread: they are not thread-safe."""
    local = _local()
    if lang not in local:
        with _lock:
            local[lang] = _new_stemmer(lang)
    return local[lang]


def _new_stemmer(lang: str):
    import Stemmer

    name = SNOWBALL.get(lang)
    return Stemmer.Stemmer(name, 100_000) if name else None


_thread = threading.local()


def _local() -> dict:
    d = getattr(_thread, "stemmers", None)
    if d is None:
        d = _thread.stemmers = {}
    return d


@functools.cache
def stop_words(lang: str) -> frozenset[str]:
    """Stop words of lang (bm25s's lists), folded the way terms are; empty where there is no list."""
    name = _STOPWORD_LISTS.get(lang)
    if not name:
        return frozenset()
    import bm25s.stopwords as sw

    return frozenset(getattr(sw, name))


def has_stemmer(lang: str) -> bool:
    return lang in SNOWBALL


@functools.cache
def _mark_tables() -> tuple[dict[int, None], re.Pattern[str]]:
    """From one pass over the code points: every combining mark -> None (for str.translate), and
    \\w+ continued over Mn/Mc/Me, which \\w leaves out (vowel signs of Devanagari, Tamil, ...)."""
    combining: dict[int, None] = {}
    spans: list[list[int]] = []
    for c in range(sys.maxunicode + 1):
        ch = chr(c)
        if unicodedata.combining(ch):
            combining[c] = None
        if unicodedata.category(ch) in ("Mn", "Mc", "Me"):
            if spans and spans[-1][1] == c - 1:
                spans[-1][1] = c
            else:
                spans.append([c, c])
    cls = "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in spans)
    return combining, re.compile(rf"\w+(?:[{cls}]+\w*)*")


def fold(text: str) -> str:
    """Accents and other combining marks removed (after NFKD)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKD", text).translate(_mark_tables()[0])


def words(text: str) -> list[str]:
    """Unicode words of text (marks of scripts with vowel signs kept inside the word)."""
    return _WORD.findall(text) if text.isascii() else _mark_tables()[1].findall(text)


def terms(text: str, lang: str, drop_stop_words: bool = True) -> list[str]:
    """BM25 terms of text in language lang (see the module docstring)."""
    low = text.casefold()
    if not low.isascii():
        low = unicodedata.normalize("NFC", low)
    ws = words(low)
    stops = stop_words(lang) if drop_stop_words else frozenset()
    if stops:
        ws = [w for w in ws if w not in stops]
    stem = stemmer(lang)
    if stem is not None and ws:
        ws = stem.stemWords(ws)
    joined = " ".join(ws)
    out = fold(joined).split() if not joined.isascii() else ws
    if _JOINED.search(low):  # most prose has no word joined to the next by - _ . / :
        out.extend(fold(c) for c in _COMPOUND.findall(low))
    return out


# languages that write compounds as one word ("prestatieschakelaar"): their long words also give
# character n-grams (a BM25 field of their own), so a compound's parts match it and it matches its parts
COMPOUNDING = frozenset({"nl", "de", "sv", "da", "no", "nb", "fi", "et", "hu", "is", "af"})
GRAM = 4  # n of the character n-grams
GRAM_MIN_WORD = 6  # words shorter than this give no n-grams (prefix and suffix markers make a word of n chars give 2)
GRAM_MARK, HEADER_MARK = "~", "^"  # first character of n-gram and title/heading terms (word terms start with \w)


def subword_terms(text: str, lang: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """Character n-grams ("~" + GRAM chars, "<" and ">" marking the word's start and end) of text's folded
    words of at least GRAM_MIN_WORD characters that are not stop words (or in skip); none outside COMPOUNDING."""
    if lang not in COMPOUNDING:
        return []
    low = text.casefold()
    if not low.isascii():
        low = fold(unicodedata.normalize("NFC", low))
    stops = stop_words(lang)
    out = []
    for w in words(low):
        if len(w) < GRAM_MIN_WORD or w in stops or w in skip or w.isdigit():
            continue
        w = f"<{w}>"
        out.extend(GRAM_MARK + w[i : i + GRAM] for i in range(len(w) - GRAM + 1))
    return out


def header_terms(header: str, lang: str) -> list[str]:
    """Terms of a chunk's document title and section heading, marked as a field of their own."""
    return [HEADER_MARK + t for t in terms(header, lang)] if header else []


def field_of(term: str) -> int:
    """0 for a word term, 1 for a character n-gram, 2 for a title/heading term."""
    c = term[:1]
    return 1 if c == GRAM_MARK else 2 if c == HEADER_MARK else 0


def query_terms(text: str, langs: list[str]) -> list[str]:
    """Distinct terms of a query analysed in each of langs (no language: plain folded words); stop
    words are kept when nothing else is left ("what is it?")."""
    out: dict[str, None] = {}
    for lang in langs or [UNKNOWN]:
        ts = terms(text, lang) or terms(text, lang, drop_stop_words=False)
        out.update(dict.fromkeys(ts))
    return list(out)


def query_field_terms(text: str, langs: list[str]) -> list[str]:
    """query_terms plus, per language, the query's title/heading terms and (compounding languages) its
    character n-grams; question words ("hoeveel") give no n-grams."""
    out = dict.fromkeys(query_terms(text, langs))
    for lang in langs or [UNKNOWN]:
        out.update(dict.fromkeys(HEADER_MARK + t for t in (terms(text, lang) or terms(text, lang, drop_stop_words=False))))
        out.update(dict.fromkeys(subword_terms(text, lang, QUESTION_WORDS.get(lang, frozenset()))))
    return list(out)


# question words that say what is asked, not about what (left out of a question's content terms)
QUESTION_WORDS = {
    "en": frozenset("what which who whom whose when where why how does do did can could is are was were much many".split()),
    "nl": frozenset("wat welke welk wie wanneer waar waarom hoe hoeveel hoelang heeft hebben kan kun".split()),
    "de": frozenset("was welche welcher welches wer wann wo warum wie wieviel".split()),
    "fr": frozenset("quoi quel quelle quels quelles qui quand où pourquoi comment combien".split()),
    "es": frozenset("qué cuál cuáles quién cuándo dónde por cómo cuánto cuántos".split()),
}


def content_terms(text: str, lang: str) -> set[str]:
    """A question's terms in lang without stop words and question words (for how much of it a passage covers)."""
    low = text.casefold()
    kept = " ".join(w for w in words(low) if w not in QUESTION_WORDS.get(lang, ()))
    return set(terms(kept, lang))


def coverage(question: str, passage: str, lang: str) -> float:
    """The share of the question's content terms found in passage, both analysed in lang (1.0 for no terms)."""
    q = content_terms(question, lang)
    if not q:
        return 1.0
    return len(q & set(terms(passage, lang))) / len(q)
