"""An answer with rag on the real default model (Gemma 3 270M, a base model) cites the document that holds the fact."""
from __future__ import annotations

import logging
import re

import openai
import pytest

from api_helpers import KEY, QUESTION, api_settings, make_documents, start_server

pytestmark = pytest.mark.slow
log = logging.getLogger(__name__)


def test_answer_cites_the_document_with_the_fact(default_bundle, tmp_path):
    svc, ids = make_documents(tmp_path)
    server = start_server(api_settings(default_bundle, tmp_path, max_batch=2, context_length=1024), documents=svc)
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120)
        r = client.chat.completions.create(model="default", messages=[{"role": "user", "content": QUESTION}], max_tokens=16,
                                           temperature=0, extra_body={"rag": {"k": 3}})
        sources = r.model_extra["sources"]
        assert sources[0]["document_id"] == ids["archive"] and sources[0]["title"] == "Zeeland archive"
        assert "QX-7731-B" in sources[0]["snippet"]
        answer = r.choices[0].message.content
        how = r.model_extra["grounding"]["choices"][0]
        log.info("default model with rag answered %r (%s)", answer, how)
        # the model's own words when they rest on the passage, else the passage's sentence quoted: the code either way
        assert "QX-7731-B" in answer and how["answer"] in ("model", "extractive")
        assert {int(n) for n in re.findall(r"\[(\d+)\]", answer)} == {s["number"] for s in sources if s["used"]} == {1}

        stream = list(client.completions.create(model="default", prompt=f"Question: {QUESTION}\nAnswer:", max_tokens=8,
                                                temperature=0, stream=True, extra_body={"rag": {"k": 3}}))
        assert stream[0].model_extra["sources"][0]["document_id"] == ids["archive"]
        assert "".join(c.choices[0].text for c in stream if c.choices)  # it answered
    finally:
        server.close()  # closes the document service too
