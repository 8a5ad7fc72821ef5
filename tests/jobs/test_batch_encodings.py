"""Batch files as Windows tools write them: UTF-8 with a BOM and CRLF, UTF-16 with a BOM (PowerShell 5's `>`)."""
from __future__ import annotations

import json

import pytest

from edge_agent.jobs.batch import parse_batch
from edge_agent.jobs.kinds import InvalidJobError

LINES = [json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
                     "body": {"model": "default", "messages": [{"role": "user", "content": f"Vraag {i}: wat kost één café?"}]}}, ensure_ascii=False)
         for i in range(3)]


@pytest.mark.parametrize("encoding,bom", [("utf-8", "\ufeff"), ("utf-16-le", "\ufeff"), ("utf-16-be", "\ufeff"), ("utf-8", "")])
def test_windows_encodings_give_the_same_requests(encoding, bom):
    data = (bom + "\r\n".join(LINES) + "\r\n").encode(encoding)
    items = parse_batch(data, "/v1/chat/completions")
    assert [i.payload["custom_id"] for i in items] == ["r0", "r1", "r2"]
    assert all("error" not in i.payload for i in items)
    assert items[1].payload["body"]["messages"][0]["content"] == "Vraag 1: wat kost één café?"


def test_other_encodings_say_how_to_save_it():
    with pytest.raises(InvalidJobError) as e:
        parse_batch("\r\n".join(LINES).encode("cp1252"), "/v1/chat/completions")  # Notepad's old "ANSI"
    assert "UTF-8" in str(e.value) and "Out-File -Encoding utf8" in str(e.value)
