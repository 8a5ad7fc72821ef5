"""Uploaded file names: a name no file system allows is refused, nothing stored."""
from __future__ import annotations

import pytest

from edge_agent.services.documents import DocumentError


def test_an_upload_name_over_255_characters_is_refused(service):
    with pytest.raises(DocumentError, match="longer than 255"):  # was stored, its 5000-character title in every chunk header
        service.add_upload("a" * 5000 + ".txt", b"The canteen serves soup on Mondays.")
    assert service.stats()["documents"] == 0
    assert service.add_upload("a" * 251 + ".txt", b"The canteen serves soup on Mondays.").status == "added"
