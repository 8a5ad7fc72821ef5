"""schemathesis against /openapi.json: no 5xx, no response outside the schema, every schema-invalid request refused.

positive_data_acceptance is left out: a prompt longer than the model's context is valid by the
schema (its token count cannot be written there) and is refused with 400 by design.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from api_helpers import KEY, REPO, api_settings, start_server


@pytest.fixture(scope="module")
def fuzz_server(tiny_bundles, tmp_path_factory):
    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.services.documents import DocumentService

    tmp = tmp_path_factory.mktemp("fuzz")
    (tmp / "docs").mkdir()
    (tmp / "docs" / "note.md").write_text("# Boiler\nThe boiler is serviced every spring.")
    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    settings = api_settings(tiny_bundles["llama"], tmp, max_tokens_limit=16, max_messages=16, max_queue=256, ingest_roots=[tmp / "docs"])
    documents = DocumentService.from_settings(settings, embedder=embedder)
    documents.add_path(tmp / "docs")
    documents.add_text("Parking", "Visitors park on level minus one.")
    server = start_server(settings, documents=documents)
    yield server
    server.close()


def test_schemathesis_finds_nothing(fuzz_server, tmp_path):
    st = Path(sys.executable).with_name("st")
    cmd = [
        str(st), "run", fuzz_server.url + "/openapi.json", "-H", f"Authorization: Bearer {KEY}",
        "--checks", "all", "--exclude-checks", "positive_data_acceptance", "--phases", "coverage,fuzzing",
        # one worker: schemathesis's threads hit CPython 3.11.7's AST race (gh-106905, fixed in 3.11.8),
        # "SystemError: AST constructor recursion depth mismatch" inside the tool, 3 runs of about 10 this session
        "-n", "40", "--seed", "1", "--workers", "1", "--no-shrink", "--output-sanitize", "false",
        # every warning but missing_test_data (ids of files, batches, jobs and runs are random: a fuzzed id is a 404 by
        # design) and low_valid_rate (POST /v1/jobs: a job's params are checked by its kind against state the schema
        # cannot name, e.g. folders under ingest_roots, uploaded file ids, so random params are mostly refused)
        "--warnings", "missing_auth,base_url_mismatch,validation_mismatch,missing_deserializer,unused_openapi_auth,unsupported_regex,"
        "method_not_allowed,unmatched_filter,unresolvable_reference,rate_limited,dictionary_mismatch,timeout_units",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "No issues found" in out.stdout, out.stdout[-3000:]
    # and the server is still fine
    assert fuzz_server.request("GET", "/health", key=None)[0] == 200
