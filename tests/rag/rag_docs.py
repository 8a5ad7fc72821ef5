"""Small real documents built in tests: a hand-written PDF, a DOCX, an e-mail."""
from __future__ import annotations

import contextlib
import io
import os
from email.message import EmailMessage
from pathlib import Path

# The exported ONNX model is cached under the repo's .cache (git-ignored), keyed by the model's files.
EMBED_CACHE = Path(
    os.environ.get("EDGE_AGENT_TEST_EMBED_CACHE", Path(__file__).resolve().parents[2] / ".cache" / "test-embedding-cache")
)


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF with one line of Helvetica text per page (written by hand, xref included)."""
    objs: list[bytes] = []
    n = len(pages)
    font_id = 3 + 2 * n
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    for i, text in enumerate(pages):
        esc = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({esc}) Tj ET".encode("latin-1")
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R"
            f" /Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objs.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref))
    return out.getvalue()


def encrypt_pdf(data: bytes, password: str = "secret") -> bytes:
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(data))
    writer = pypdf.PdfWriter()
    for page in reader.pages:
        writer.add_page(page)
    writer.encrypt(user_password=password, owner_password=password)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(blocks: list[tuple[str, str]], title: str | None = None) -> bytes:
    """A DOCX from (style, text) pairs: style 'h1'/'h2' for headings, 'p' for paragraphs."""
    import docx

    d = docx.Document()
    if title:
        d.core_properties.title = title
    for style, text in blocks:
        if style.startswith("h"):
            d.add_heading(text, level=int(style[1:]))
        else:
            d.add_paragraph(text)
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def make_eml(subject: str, body: str, attachments: list[tuple[str, bytes, str]] = ()) -> bytes:
    """An e-mail with a plain body and (filename, bytes, mime type) attachments."""
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = "Anna de Vries <anna@example.nl>"
    msg["To"] = "team@example.nl"
    msg["Date"] = "Tue, 03 Mar 2026 10:00:00 +0100"
    msg.set_content(body)
    for name, data, mime in attachments:
        maintype, subtype = mime.split("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return msg.as_bytes()


@contextlib.contextmanager
def grounded_chat_over(bundle: Path, tmp: Path, docs: dict[str, str]):
    """A ChatService over the tiny real model `bundle` whose documents are docs (title -> text), embedded by the
    packaged model from the shared export; stopped and closed on exit."""
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.runtime import build_engine
    from edge_agent.services.chat import ChatService
    from edge_agent.services.documents import DocumentService

    settings = Settings(models_dir=bundle.parent, model=bundle.name, threads=1, context_length=512, max_batch=4,
                        data_dir=tmp / "var", index_dir=tmp / "index")
    svc = DocumentService.from_settings(settings, embedder=OnnxEmbedder(cache_dir=EMBED_CACHE))
    for title, text in docs.items():
        svc.add_text(title, text)
    scheduler = build_engine(settings)
    chat = ChatService(scheduler)
    chat.attach_documents(lambda: svc)
    try:
        yield chat
    finally:
        scheduler.stop()
        svc.close()
