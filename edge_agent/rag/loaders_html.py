"""The HTML loader: a page's text without its chrome, in sections at its headings (loaders.load_bytes reads .html with it;
an e-mail's HTML body too).

Page chrome is dropped before the text is read (navigation, tables of contents, the page's own header and footer,
blocks that are mostly links; _drop_page_chrome); a table row stays one line, its cells joined by " | "; a field
list's value is read on its field's line ("Author: Gordon McMillan"); source line breaks are spaces outside <pre>; a block's
end is a break as its start is (the text after a paragraph starts one of its own: _block_ends).
Imported on first use by loaders.py (it imports Section from there).
"""
from __future__ import annotations

import re
from typing import Any

from edge_agent.rag.loaders import LoaderLimits, Section

_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_PARAGRAPHS = {"p", "div", "pre", "blockquote", "section", "article", "table", "ul", "ol", "dl"}  # start a paragraph
_LINES = {"li", "tr", "br", "td", "th", "dd", "dt"}  # start a line
_SKIP_TYPES = ("Comment", "Doctype", "Declaration", "ProcessingInstruction", "CData")
# Page chrome, dropped before the text is read (the idea of readability and jusText, kept conservative for
# documents, where cross-references are content): what the page itself calls navigation (<nav>, an ARIA role, a
# class or id word: DocBook's navheader/toc, Sphinx's toctree, Word's MsoToc1, MediaWiki's toc), the page's own
# <header>/<footer> (not an article's; a header's heading stays), and a block of several links that is mostly
# link text, where a link counts when it leads to another page or to a place on this one (a menu, a table of
# contents, a prev/next bar). A link to a definition (#os.stat) or into another page, or one that prints its URL,
# is content; so is any block that holds most of the page's words outside links, whatever its class says. The
# density bars were set on the HTML docs Debian installs (Python, Node, Valgrind, libffi, libxslt, texinfo
# manuals): their menus and tables of contents lie at 0.7-1.0, their link-rich prose, parameter lists and data
# tables at 0.5-0.6, one of Node's sentences at 0.77. Python's contents.html, one table of contents, keeps its title.
_CHROME_ROLES = {"navigation", "banner", "contentinfo", "search", "menubar", "doc-toc"}
_CHROME_WORDS = {"nav", "navbar", "navbox", "navheader", "navfooter", "navigation", "navpath", "toc", "toctree",
                 "breadcrumb", "breadcrumbs", "pagination", "pager", "editsection", "skiplink"}
_INLINE = {"a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "dfn", "em", "font", "i", "img", "kbd", "label",
           "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u", "var",
           *_HEADINGS}
_SECTIONING = {"article", "aside", "main", "nav", "section"}  # a <header>/<footer> inside one of these is content
_LINK_BLOCKS = {"div", "section", "aside", "ul", "ol", "dl", "table", "menu", "form", "center", "p"}
_LINK_DENSITY = 0.7  # share of a block's text in navigating links that makes it navigation (with 3 links or more)
_LINK_DENSITY_PROSE = 0.9  # the same for a <p>: prose unless nearly all of it is links
_URL_TEXT = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|www\.|mailto:)\S*$|^\S+@\S+\.\w+$", re.I)
_TEXT, _LINK_TEXT, _LINKS, _HEADS, _ANY_LINK_TEXT = range(5)


def _words(value: Any) -> list[str]:
    """The words of a class or id ("toc-macro", "MsoToc1", "topNav"), lower-case."""
    value = " ".join(value) if isinstance(value, list) else str(value or "")
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", value)]


def _anchors(body: Any) -> set[str]:
    """The ids (and old-style names) on this page that a link may lead to, less those of a term's definition
    (Sphinx's <dt id="os.stat">): a link there is a cross-reference, not navigation."""
    terms = {id(el) for dt in body.find_all("dt") for el in (dt, *dt.find_all(True))}
    return {str(v) for el in body.find_all(True) if id(el) not in terms for v in (el.get("id"), el.get("name")) if v}


def _navigates(a: Any, anchors: set[str]) -> bool:
    """Whether a link leads somewhere to read rather than to a definition: another page, or a place on this one
    (DocBook names its own file: toc.html#part). A printed URL, an address or a link into another page is content."""
    href = str(a.get("href") or "").strip()
    if not href or _URL_TEXT.match(a.get_text().strip()) or href.lower().startswith(("mailto:", "tel:")):
        return False
    fragment = href.partition("#")[2]
    return not fragment or fragment == "top" or fragment in anchors


def _text_stats(body: Any) -> dict[int, list[int]]:
    """Per element id: [text chars, navigating-link text chars, navigating links, headings, any link's text chars],
    in one pass over the tree (in reverse document order an element's children come before it)."""
    anchors = _anchors(body)
    stats: dict[int, list[int]] = {}
    for el in reversed(list(body.descendants)):
        up = stats.setdefault(id(el.parent), [0, 0, 0, 0, 0])
        if el.name is None:
            if type(el).__name__ not in _SKIP_TYPES:
                up[_TEXT] += len("".join(str(el).split()))
            continue
        own = stats.setdefault(id(el), [0, 0, 0, 0, 0])
        if el.name == "a" and el.get("href"):
            own[_ANY_LINK_TEXT] = own[_TEXT]
            if own[_TEXT] and _navigates(el, anchors):
                own[_LINK_TEXT], own[_LINKS] = own[_TEXT], 1
        elif el.name in _HEADINGS:
            own[_HEADS] = 1
        for i, n in enumerate(own):
            up[i] += n
    return stats


def _is_chrome(el: Any, stats: dict[int, list[int]], page_words: int) -> bool:
    text, link_text, links, headings, any_link_text = stats.get(id(el), (0, 0, 0, 0, 0))
    if text - any_link_text > page_words / 2:  # most of the page's words outside links: content, whatever its class
        return False
    name = el.name
    if name == "nav" or str(el.get("role") or "").strip().lower() in _CHROME_ROLES:
        return True
    if (name in ("header", "footer") or name == "div" and "footer" in _words(el.get("class")) + _words(el.get("id"))) \
            and not any(p.name in _SECTIONING for p in el.parents):  # (Sphinx's <div class="footer">: the copyright)
        return not (name == "header" and headings)  # a page header with the page's title: its parts are judged
    if name not in _INLINE and _CHROME_WORDS.intersection(_words(el.get("class")) + _words(el.get("id"))):
        return True  # (not a link or a heading: docutils' headings are links classed toc-backref)
    # a block of links; one with a heading of its own is a section: its parts are judged one by one
    density = _LINK_DENSITY_PROSE if name == "p" else _LINK_DENSITY
    return name in _LINK_BLOCKS and not headings and links >= 3 and link_text >= density * text


def _drop_page_chrome(body: Any) -> None:
    """Remove navigation, the page's header and footer, tables of contents and link blocks from `body` (see
    _CHROME_WORDS); a page that is nothing but links (a link list, a site map) keeps them all."""
    stats = _text_stats(body)
    total = stats.get(id(body), [0, 0, 0, 0, 0])
    chrome, todo = [], [body]
    while todo:
        for child in (c for c in todo.pop().children if c.name):
            (chrome if _is_chrome(child, stats, total[_TEXT] - total[_ANY_LINK_TEXT]) else todo).append(child)
    if sum(stats.get(id(el), [0])[_TEXT] for el in chrome) < total[_TEXT]:
        for el in chrome:
            el.decompose()


_CELL_PARAGRAPHS = {"p", "li", "dt", "dd", "blockquote"}
_CELL_LAYOUT = {"pre", "table", *_HEADINGS}


def _is_data_row(tr: Any) -> bool:
    """Whether a table row reads as one line of cells: no cell holds a heading, a table, preformatted text or more
    than one paragraph (a layout table's row, a DocBook Q and A, is read as blocks instead)."""
    for cell in tr.children:
        if cell.name in ("td", "th"):
            blocks = [el.name for el in cell.descendants if el.name in _CELL_PARAGRAPHS or el.name in _CELL_LAYOUT]
            if len(blocks) > 1 or _CELL_LAYOUT.intersection(blocks):
                return False
    return True


def _last_descendant(el: Any) -> Any:
    while getattr(el, "contents", None):
        el = el.contents[-1]
    return el


def _block_ends(body: Any) -> dict[int, str]:
    """id of each block's last node -> the break its end owes the text after it: a blank line after a paragraph's block
    (_PARAGRAPHS), a line break after a line's (a list item, a definition's term or text). A block's start writes its own
    break, its end wrote none: the name in "<dd><p>Luk Claes</p></dd><dt>Finse vertaling</dt>" ran on into the next term as
    one wrapped line, and "<div><p>Intro</p>Tekst</div>" read "IntroTekst"."""
    ends: dict[int, str] = {}
    for el in body.find_all(True):
        brk = "\n\n" if el.name in _PARAGRAPHS else "\n" if el.name in ("li", "dd", "dt") else ""
        if brk:
            last = id(_last_descendant(el))
            if ends.get(last) != "\n\n":
                ends[last] = brk
    return ends


def _owed(buf: list[str], brk: str) -> str:
    """What of the break brk the text read so far (buf) still lacks: its line breaks at the end count (a blank line owed
    after one already written is none)."""
    tail = "".join(buf[-4:]).rstrip(" \t")
    if brk == " ":
        return "" if not tail or tail[-1].isspace() else " "
    have = len(tail) - len(tail.rstrip("\n"))
    return "\n" * max(0, len(brk) - have)


FIELD_VALUE_CHARS = 200  # a <dd> this short, of one paragraph, under a <dt> ending in ":" is that field's value


def _field_value(dd: Any) -> bool:
    """Whether a <dd> is the value of a field ("Author:" / "Gordon McMillan" in a Sphinx or docutils field list, "Datum:"
    / "3 maart" in a page's metadata): its <dt> ends in ":", and it is short and one paragraph. It is read on the
    field's line ("Author: Gordon McMillan"), as a header line, not as a paragraph of its own."""
    dt = dd.find_previous_sibling(True)
    if dt is None or dt.name != "dt" or not dt.get_text(" ", strip=True).endswith(":"):
        return False
    value = dd.get_text(" ", strip=True)
    blocks = [el for el in dd.find_all(True) if el.name in _PARAGRAPHS or el.name in _LINES or el.name in _HEADINGS]
    return 0 < len(value) <= FIELD_VALUE_CHARS and len(blocks) <= 1 and all(b.name == "p" for b in blocks)


def load_html(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "svg"]):
        tag.decompose()
    for a in soup.find_all("a", href=True):  # a heading's permalink (Sphinx's and MkDocs' "¶", "#"): not text
        if a["href"].startswith("#") and a.get_text(strip=True) in ("¶", "§", "#", "🔗"):
            a.decompose()
    meta = {}
    if soup.title and soup.title.get_text(strip=True):
        meta["title"] = soup.title.get_text(strip=True)
    if soup.head:
        soup.head.decompose()
    body = soup.body or soup
    _drop_page_chrome(body)
    sections: list[Section] = []
    heading: str | None = None
    buf: list[str] = []
    bare = True  # nothing under the current heading yet
    row, row_end, cells = None, None, 0  # a data row being read as one line: its last node, its cells so far
    row_done = 0  # where in buf the last row ended
    field_end = None  # the last node of a field's value being read on its field's line (_field_value)
    ends = _block_ends(body)  # what a block's end puts before the text after it (a blank line after a paragraph)
    pending = ""  # the break owed to the text after the block that just ended
    for el in body.descendants:
        name = getattr(el, "name", None)
        if pending and (row is not None or field_end is not None):
            pending = " "  # inside a row or a field's value: on its line
        if pending and (name in _HEADINGS or name in _PARAGRAPHS or (name == "tr" and _is_data_row(el))):
            pending = ""  # they start their own paragraph or line
        elif pending and name is None and str(el).strip() and not {p.name for p in el.parents} & _HEADINGS:
            # the text after a block ends ("<div><p>Intro</p>Tekst</div>", a term after a definition's paragraph): not
            # glued to it, nor wrapped into it (a line element in between, <dt>, wrote one line break of the two)
            buf.append(_owed(buf, pending))
            pending = ""
        if name in _HEADINGS:
            text = " ".join(el.get_text(" ").split())
            if text:
                if bare:  # nothing under the previous heading (a chapter title before its first section): it
                    buf.append(f"{text}\n\n")  # leads this section instead of being a chunk without content
                else:
                    sections.append(Section("".join(buf), heading=heading))
                    buf = [f"{text}\n\n"]
                heading, bare = text, True
                if name == "h1" and "title" not in meta:
                    meta["title"] = text
        elif name is None:
            outer = {p.name for p in el.parents}
            if type(el).__name__ not in _SKIP_TYPES and not outer & _HEADINGS:
                # HTML's white space: a line break in the source is a space, except inside <pre>
                buf.append(str(el) if "pre" in outer else re.sub(r"\s+", " ", str(el)))
                bare = bare and not el.strip()
        elif row is not None:  # inside a data row: cells joined by " | " (as the DOCX loader does), blocks by a space
            if name in ("td", "th") and el.parent is row and el.get_text(strip=True):
                buf.append(" | " if cells else "")
                cells += 1
            elif name in _PARAGRAPHS or name in _LINES:
                buf.append(" ")
        elif field_end is not None:  # inside a field's value: on the field's line
            if name in _PARAGRAPHS or name in _LINES:
                buf.append(" ")
        elif name == "dd" and _field_value(el):
            field_end = _last_descendant(el)
            buf.append(" ")
        elif name == "tr" and _is_data_row(el):
            row, row_end, cells = el, _last_descendant(el), 0
            buf.append("" if "".join(buf[row_done:]).isspace() else "\n")  # one row a line, no blank line between
        elif name in _PARAGRAPHS:
            buf.append("\n\n")
        elif name in _LINES:
            buf.append("\n")
        if el is row_end:
            row, row_end = None, None
            buf.append("\n")
            row_done = len(buf) - 1
        if el is field_end:
            field_end = None
            buf.append("\n")
        end = ends.get(id(el))
        if end and (end == "\n\n" or not pending):
            pending = end
    sections.append(Section("".join(buf), heading=heading))
    for s in sections:
        s.text = re.sub(r"[ \t]*\n[ \t]*", "\n", re.sub(r"[ \t\xa0]+", " ", s.text))
    return sections, meta
