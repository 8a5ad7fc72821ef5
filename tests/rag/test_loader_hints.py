"""Office formats the loaders do not read say which supported format to save them as."""
from __future__ import annotations

import pytest

from edge_agent.rag.loaders import UnsupportedTypeError, load_bytes


@pytest.mark.parametrize("name,hint", [("brief.doc", ".docx"), ("Brief.DOC", ".docx"), ("mail.msg", ".eml"), ("tabel.xls", ".xlsx"),
                                       ("dia's.ppt", ".pptx")])
def test_office_formats_say_what_to_save_them_as(name, hint):
    with pytest.raises(UnsupportedTypeError) as e:
        load_bytes(b"not read", name)
    msg = str(e.value)
    assert f"save it as {hint}" in msg or f"as {hint}" in msg, msg
    assert "supported are" in msg and ".docx" in msg


def test_other_unknown_types_keep_the_plain_message():
    with pytest.raises(UnsupportedTypeError) as e:
        load_bytes(b"x", "foto.png")
    assert "'.png': supported are" in str(e.value)
