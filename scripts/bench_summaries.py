#!/usr/bin/env python
"""Does a summary of a long document say what the document is about? A measure that needs no reference summaries.

Each summary and each document's own synopsis are embedded (multilingual-e5-small, "query: " before both:
Dutch and English compared alike); a summary identifies its document when the nearest synopsis among all the
set's documents (of its language) is its own. Reported per language: accuracy (own synopsis first) and mean
reciprocal rank of the own synopsis; a document without a summary (the item failed) counts as last.
Copying the title cannot game it: the summarizer never sees the synopsis (it is cut from the text, the first
section's heading and the title, which is a neutral "doc-NN").

Documents (chosen before anything was measured, by the rules below, listed in EN_PAGES / NL_FAQ / NL_EDU):
- English: the Python 3.11 Library Reference pages of python3.11-doc (/usr/share/doc/python3.11/html/library)
  whose title has a synopsis ("zipfile — Work with ZIP archives — ...") and whose text has 3,000-5,200 words
  (30 pages: 2-3 sections each at the default 4,096-token context). Synopsis: the title's middle part.
- Dutch: the Debian FAQ's chapters in Dutch (debian-faq-nl) of 1,000 words or more (10) and the Debian Edu 12
  manual's chapters in Dutch (debian-edu-doc-nl) of 1,000 words or more, less the GPL appendix (7).
  Synopsis: the chapter's heading without its number.

Stages: the real job (`summarize`, the real engine, a job run through JobsService) summarizes every document;
the section summaries of each multi-section document are kept (in --cache, JSON), so the reduce variants
(--variants) run on the same section summaries without the map stage. Variants:
  job       the job's own summary, by the code under test (summarize-3: map, then "Article: <section summaries>\\n\\nOne-sentence summary:"; summarize-4: the beginning first)
  first     the first section's summary
  central   the section summary nearest the document (cosine to the mean of its chunks' passage vectors)
  centraljob  the nearest the document of the section summaries and the job's own (reduced) summary
  centrallead  the nearest the document of the section summaries, the job's and lead's
  leadfb    lead, or job where lead wrote nothing usable
  list      the section summaries as a list, asked again ("Summaries of the parts of an article: - ... One-sentence summary of the article:")
  leadplus  "Article:" over the first section's first 1,000 tokens, then the other sections' summaries
  lead      a summary of the document's first 512 tokens only
  fallback  job, unless it fails a check (fewer than 5 words, or no content word shared with the document): then first

Usage: PYTHONPATH=$PWD .venv/bin/python scripts/bench_summaries.py [--langs en,nl] [--cache /tmp/sum-cache.json]
       [--variants job,first,central,list,leadplus,lead,fallback] [--limit N] [--show]
Prints `cat /proc/loadavg` before and after, the job's seconds per document and each variant's added seconds.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PYDOC = Path("/usr/share/doc/python3.11/html/library")
FAQ = Path("/usr/share/doc/debian/FAQ/nl")
EDU = Path("/usr/share/doc/debian-edu-doc-nl/debian-edu-bookworm-manual.html")
EN_PAGES = [  # 3,000-5,200 words, sorted by words (loader text)
    "winreg.html", "random.html", "venv.html", "smtplib.html", "functools.html", "gettext.html", "http.cookiejar.html",
    "enum.html", "json.html", "signal.html", "hashlib.html", "cgi.html", "pyexpat.html", "tarfile.html",
    "urllib.parse.html", "difflib.html", "shutil.html", "zipfile.html", "ipaddress.html", "dataclasses.html", "time.html",
    "contextlib.html", "xml.dom.html", "pathlib.html", "wsgiref.html", "statistics.html", "string.html",
    "logging.config.html", "dis.html", "itertools.html",
]
NL_FAQ = ["basic-defs.nl.html", "choosing.nl.html", "compatibility.nl.html", "customizing.nl.html", "ftparchives.nl.html",
          "pkg-basics.nl.html", "pkgtools.nl.html", "software.nl.html", "support.nl.html", "uptodate.nl.html"]
NL_EDU = ["3. Architectuur", "6. Installatie- en downloadopties", "7. Aan de slag", "11. Onderhoud",
          "14. HowTo's voor algemeen systeembeheer", "15. Howto over systeembeheer voor gevorderden",
          "17. HowTo's voor netwerkclients"]
EMBEDDER = "/work/main/models/embeddings/multilingual-e5-small"
VARIANTS = ["job", "first", "central", "centraljob", "list", "leadplus", "lead", "fallback"]


def _strip_heading(sections, heading: str):
    """The sections without the line `heading` (first section's heading line, and anywhere else it stands alone)."""
    from edge_agent.rag.loaders import Section

    out = []
    for s in sections:
        text = "\n".join(line for line in s.text.split("\n") if line.strip() != heading.strip())
        out.append(Section(text.strip(), s.page, None if (s.heading or "").strip() == heading.strip() else s.heading))
    return [s for s in out if s.text]


def load_docs(langs: list[str]) -> list[dict]:
    """[{name, lang, synopsis, sections}] with the synopsis cut from the text. Raises SystemExit without the packages."""
    from edge_agent.rag.loaders import load_bytes, load_path

    docs = []
    if "en" in langs:
        for page in EN_PAGES:
            d = load_path(PYDOC / page)
            full = d.title.rsplit(" — ", 1)[0]  # "zipfile — Work with ZIP archives"
            synopsis = full.split(" — ", 1)[1]
            docs.append({"name": page, "lang": "en", "synopsis": synopsis, "sections": _strip_heading(d.sections, full)})
    if "nl" in langs:
        for page in NL_FAQ:
            d = load_path(FAQ / page)
            head = d.sections[0].text.split("\n", 1)[0]  # "Hoofdstuk 3. Een Debian-distributie kiezen"
            synopsis = re.sub(r"^Hoofdstuk \d+\.\s*", "", head)
            docs.append({"name": page, "lang": "nl", "synopsis": synopsis, "sections": _strip_heading(d.sections, head)})
        import bs4

        soup = bs4.BeautifulSoup(EDU.read_text(encoding="utf-8"), "html.parser")
        heads = soup.find_all("h2")
        for want in NL_EDU:
            h = next(h for h in heads if h.get_text(" ", strip=True) == want)
            i = heads.index(h)
            # the chapter's HTML: the h2's chapter container, or the siblings up to the next h2
            start = str(soup).find(str(h))
            end = str(soup).find(str(heads[i + 1])) if i + 1 < len(heads) else len(str(soup))
            fragment = "<html><body>" + str(soup)[start:end] + "</body></html>"
            d = load_bytes(fragment.encode(), "chapter.html")
            synopsis = re.sub(r"^\d+\.\s*", "", want)
            sections = _strip_heading(d.sections, d.sections[0].text.split("\n", 1)[0])
            docs.append({"name": want, "lang": "nl", "synopsis": synopsis, "sections": sections})
    return docs


def store_docs(db, docs: list[dict], embedder, settings) -> None:
    """The documents chunked as the daemon does (its chunker, the embedder's tokenizer), titled doc-NN."""
    from edge_agent.rag.chunking import TokenChunker, joined_text
    from edge_agent.store import DocumentStore
    from edge_agent.store.documents import ChunkRecord, DocumentMeta

    chunker = TokenChunker(embedder.tokenizer, min(settings.chunk_tokens, embedder.max_tokens - 2), settings.chunk_overlap)
    store = DocumentStore(db)
    for n, doc in enumerate(docs):
        chunks = chunker.chunk(doc["sections"])
        text = joined_text(doc["sections"])
        doc["title"] = f"doc-{n:02d}"
        doc["chunks"] = [c.text for c in chunks]
        meta = DocumentMeta(f"text:{doc['title']}", doc["title"], "html", hashlib.sha256(text.encode()).hexdigest(), len(text))
        store.replace(meta, [ChunkRecord(0, c.ordinal, c.text, c.char_start, c.char_end, c.token_count, c.page, c.heading,
                                         vector=np.zeros(4, np.float32)) for c in chunks])


def run_job(args, docs: list[dict]) -> dict:
    """The real summarize job over the documents: {title: {summary, sections, section_summaries}}, seconds."""
    from edge_agent.jobs import summarize
    from edge_agent.jobs.service import JobsService

    captured: dict[int, dict] = {}
    group = summarize.SummaryPending._group

    def capturing_group(self, pieces):  # the reduce stage's input is the map stage's answers
        if getattr(self, "reduce", False) and self.levels == 2:
            captured[self.document_id] = {"section_texts": list(self.sections), "section_summaries": [p.strip() for p in pieces]}
        return group(self, pieces)

    summarize.SummaryPending._group = capturing_group
    try:
        jobs = JobsService(args.settings, args.db, args.chat, None, lambda: None)
        jobs.create_job("bench-summaries", "summarize", {"force": True})
        t0 = time.perf_counter()
        run = jobs.run_foreground("bench-summaries")
        seconds = time.perf_counter() - t0
    finally:
        summarize.SummaryPending._group = group
    out = {}
    for item in jobs.results(run.id, 0, 100000)[0]:
        r = item.result or {}
        doc_id = int(item.key.split(":")[1])
        title = args.db_titles[doc_id]
        out[title] = {"summary": r.get("summary"), "error": item.error, "sections": r.get("sections", 1),
                      **captured.get(doc_id, {})}
    return {"items": out, "seconds": round(seconds, 1)}


def generate(chat, prompt: str, max_tokens: int = 96) -> str:
    """One greedy completion as the job asks it (data ids, newline stop, min_tokens), cleaned; a junk answer is ''."""
    from edge_agent.jobs.kinds import GenerationPoll
    from edge_agent.jobs.prompts import COMPLETION_STOP, MIN_TOKENS
    from edge_agent.jobs.summarize import clean_summary, data_ids, degenerate_reason
    from edge_agent.services.chat import SamplingOptions

    options = SamplingOptions(max_tokens=max_tokens, temperature=0.0, min_tokens=MIN_TOKENS, stop=list(COMPLETION_STOP))
    poll = GenerationPoll(chat.complete([data_ids(chat, prompt)], options))
    while not poll.poll():
        time.sleep(0.02)
    text = clean_summary(poll.texts[0])
    return "" if not text or degenerate_reason(text) else text


LIST_FRAMES = {"en": ("Summaries of the parts of an article:\n{items}\n\nOne-sentence summary of the article:"),
               "nl": ("Samenvattingen van de delen van een artikel:\n{items}\n\nSamenvatting van het artikel in één zin:")}
_CONTENT = re.compile(r"\w{5,}")


def shares_content(summary: str, text: str) -> bool:
    return bool(set(_CONTENT.findall(summary.casefold())) & set(_CONTENT.findall(text.casefold())))


def variant(name: str, doc: dict, item: dict, chat, embedder) -> str:
    """The summary variant `name` gives for one document (its job item and cached section summaries)."""
    from edge_agent.jobs.prompts import summary_prompt

    job = item.get("summary") or ""
    sums = item.get("section_summaries")
    if name == "job":
        return job
    if name == "lead":
        if "lead" not in doc:  # asked once per document (other variants reuse it)
            doc["lead"] = generate(chat, summary_prompt("completion", chat.cut_tokens("\n\n".join(doc["chunks"]), 512), lang=doc["lang"]))
        return doc["lead"]
    if name == "leadfb":
        return variant("lead", doc, item, chat, embedder) or job
    if not sums:  # one section: every reduce variant is the job's summary
        return job
    usable = [s for s in sums if s] or [""]
    if name == "first":
        return usable[0]
    if name in ("central", "centraljob", "centrallead"):
        if "centre" not in doc:
            doc["centre"] = embedder.embed(doc["chunks"]).mean(axis=0)
        centre = doc["centre"]
        pool = usable + ([job] if name != "central" and job else [])
        if name == "centrallead":
            pool += [s for s in [variant("lead", doc, item, chat, embedder)] if s]
        vecs = embedder.embed(pool)
        return pool[int(np.argmax(vecs @ centre))]
    if name == "list":
        frame = LIST_FRAMES.get(doc["lang"], LIST_FRAMES["en"])
        return generate(chat, frame.format(items="\n".join(f"- {s}" for s in usable)))
    if name == "leadplus":
        head = chat.cut_tokens(item["section_texts"][0], 1000)
        return generate(chat, summary_prompt("completion", head + "\n\n" + "\n".join(usable[1:]), lang=doc["lang"]))
    if name == "fallback":
        text = "\n".join(doc["chunks"])
        ok = len(job.split()) >= 5 and shares_content(job, text)
        return job if ok else usable[0]
    raise SystemExit(f"unknown variant {name}")


def identify(summaries: list[str], synopses: list[str], embedder) -> tuple[float, float, list[int]]:
    """(accuracy, MRR, ranks) of each summary's own synopsis among all synopses (an empty summary ranks last)."""
    from edge_agent.rag.embedder import QUERY_PROMPTS

    syn = embedder._encode(synopses, QUERY_PROMPTS)
    ranks = []
    for i, s in enumerate(summaries):
        if not s:
            ranks.append(len(synopses))
            continue
        sims = syn @ embedder._encode([s], QUERY_PROMPTS)[0]
        ranks.append(int((sims > sims[i]).sum()) + 1)
    return (round(sum(r == 1 for r in ranks) / len(ranks), 3), round(float(np.mean([1 / r for r in ranks])), 3), ranks)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default="/work/main/models")
    ap.add_argument("--model", default="default")
    ap.add_argument("--embedding-model", default=EMBEDDER)
    ap.add_argument("--embedding-cache", default="/tmp/longsum-emb", help="a writable folder for the embedder's prepared copy")
    ap.add_argument("--langs", default="en,nl")
    ap.add_argument("--limit", type=int, default=0, help="first N documents of each language (a smoke run)")
    ap.add_argument("--cache", default="", help="JSON of the job's results and section summaries: read if it exists, else written")
    ap.add_argument("--variants", default="job")
    ap.add_argument("--show", action="store_true", help="print each document's synopsis and summaries")
    args = ap.parse_args()

    os.environ.setdefault("EDGE_AGENT_CONFIG", "/nonexistent/edge-agent-bench.toml")
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.runtime import build_engine
    from edge_agent.services.chat import ChatService
    from edge_agent.store import SqliteDatabase

    load_before = Path("/proc/loadavg").read_text().split()[:3]
    langs = args.langs.split(",")
    docs = load_docs(langs)
    if args.limit:
        docs = [d for lang in langs for d in [x for x in docs if x["lang"] == lang][: args.limit]]
    embedder = OnnxEmbedder(args.embedding_model, cache_dir=args.embedding_cache)
    tmp = Path(tempfile.mkdtemp(prefix="bench-summaries-"))
    settings = Settings(models_dir=Path(args.models_dir), model=args.model, data_dir=tmp, index_dir=tmp / "index", max_queue=256)
    db = SqliteDatabase(tmp / "edge-agent.db")
    store_docs(db, docs, embedder, settings)
    with db.read() as conn:
        args.db_titles = {r[0]: r[1] for r in conn.execute("SELECT id, title FROM documents")}
    scheduler = build_engine(settings)
    chat = ChatService(scheduler, request_timeout_s=3600, default_max_tokens=96)
    args.settings, args.db, args.chat = settings, db, chat
    report: dict = {"loadavg_before": load_before, "context_length": settings.context_length,
                    "docs": {lang: sum(d["lang"] == lang for d in docs) for lang in langs}}
    cache = Path(args.cache) if args.cache else None
    if cache and cache.exists():
        job = json.loads(cache.read_text())
        report["job_cached"] = str(cache)
    else:
        job = run_job(args, docs)
        if cache:
            cache.write_text(json.dumps(job, ensure_ascii=False))
    report["job_seconds_per_doc"] = round(job["seconds"] / len(docs), 1)
    report["multi_section"] = {lang: sum(job["items"][d["title"]]["sections"] > 1 for d in docs if d["lang"] == lang)
                               for lang in langs}
    shown: dict[str, dict] = {d["title"]: {"name": d["name"], "synopsis": d["synopsis"]} for d in docs}
    for name in args.variants.split(","):
        t0 = time.perf_counter()
        summaries = {d["title"]: variant(name, d, job["items"][d["title"]], chat, embedder) for d in docs}
        added = time.perf_counter() - t0
        row = {"seconds_per_doc_added": round(added / len(docs), 2)}
        for lang in langs:
            mine = [d for d in docs if d["lang"] == lang]
            acc, mrr, ranks = identify([summaries[d["title"]] for d in mine], [d["synopsis"] for d in mine], embedder)
            row[lang] = {"accuracy": acc, "mrr": mrr, "empty": sum(not summaries[d["title"]] for d in mine)}
            for d, r in zip(mine, ranks):
                shown[d["title"]][name] = f"[{r}] {summaries[d['title']]}"
        report[name] = row
        print(f"{name}: {row}", file=sys.stderr)
    report["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    scheduler.stop()
    if args.show:
        for t, s in shown.items():
            print(json.dumps(s, ensure_ascii=False))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
