"""classify on small real text (CPython's own module docstrings) with the real embedder and the tiny real Llama:
both methods, labels stored with documents, CSV rows, bad label sets; label likelihoods equal a direct computation."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from edge_agent.jobs.classify import EmbeddingClassifier, Label, LikelihoodClassifier, parse_labels
from edge_agent.jobs.kinds import InvalidJobError

# Real text no one on the team wrote: the first paragraph of stdlib modules' docstrings, by subject.
SUBJECTS = {
    "cryptography and secure hashing": ["hashlib", "hmac", "secrets"],
    "data compression and archive files": ["gzip", "bz2", "lzma", "zipfile", "tarfile"],
    "network protocol clients (HTTP, FTP, e-mail)": ["ftplib", "smtplib", "poplib", "imaplib", "http.client"],
}


def docstring(mod: str) -> str:
    doc = importlib.import_module(mod).__doc__ or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def corpus() -> list[tuple[str, str]]:
    return [(docstring(m), label) for label, mods in SUBJECTS.items() for m in mods]


def test_bad_label_sets_are_refused():
    for bad, words in (([], "at least 2"), (["spam"], "at least 2"), (["spam", " "], "empty name"), (["Spam", "spam"], "twice"),
                       ([{"name": "a", "colour": 1}, "b"], "must be a name"), ("spam,ham", "at least 2")):
        with pytest.raises(InvalidJobError) as e:
            parse_labels(bad)
        assert words in str(e.value)
    assert [lb.name for lb in parse_labels(["  a  b ", {"name": "c", "examples": ["x"]}])] == ["a b", "c"]


def test_embedding_method_on_real_docstrings(embedder):
    from edge_agent.services.embeddings import EmbeddingService

    svc = EmbeddingService(lambda: embedder)
    items = corpus()
    labels = [Label(name) for name in SUBJECTS]
    clf = EmbeddingClassifier(svc, labels)
    got = clf.classify_many([t for t, _ in items])
    accuracy = np.mean([g[0] == want for g, (_, want) in zip(got, items)])
    assert accuracy >= 0.8, [(g[0], want) for g, (_, want) in zip(got, items)]
    for label, score, probs in got:
        assert label in SUBJECTS and 0 < score <= 1 and abs(sum(probs.values()) - 1) < 1e-3 and probs[label] == max(probs.values())
    # one example per label (left out of the evaluation) moves each prototype to the mean of the name and the example
    with_examples = [Label(name, examples=[docstring(SUBJECTS[name][0])]) for name in SUBJECTS]
    clf2 = EmbeddingClassifier(svc, with_examples)
    both = svc.embed([next(iter(SUBJECTS)), docstring(SUBJECTS[next(iter(SUBJECTS))][0])])[0]
    want = both.mean(axis=0) / np.linalg.norm(both.mean(axis=0))
    assert float(clf2.protos[0] @ want) == pytest.approx(1.0, abs=1e-5)
    rest = [(t, want) for t, want in items if t not in {docstring(m[0]) for m in SUBJECTS.values()}]
    got2 = clf2.classify_many([t for t, _ in rest])
    assert np.mean([g[0] == want for g, (_, want) in zip(got2, rest)]) >= 0.8


def test_likelihood_scores_are_the_models_log_probs(tiny_bundles):
    """The batched, teacher-forced label scores equal log-softmax sums from a separate engine's own prefill."""
    from edge_agent.engine.bundle import load_bundle
    from edge_agent.engine.engine import OnnxEngine
    from edge_agent.engine.scheduler import BatchScheduler
    from edge_agent.services.chat import ChatService
    from edge_agent.services.scoring import ContinuationScorer

    bundle = load_bundle(tiny_bundles["llama"])
    scheduler = BatchScheduler(OnnxEngine(bundle, threads=1, max_batch=8, context_length=256)).start()
    ref = OnnxEngine(bundle, threads=1, max_batch=1, context_length=256)
    try:
        chat = ChatService(scheduler)
        scorer = ContinuationScorer(chat)
        prompt = scorer.encode("The quick brown fox")
        conts = [scorer.encode(" jumps", False), scorer.encode(" is the capital of France", False), scorer.encode(" 100", False)]
        got = scorer.score(prompt, conts)

        def direct(cont: list[int]) -> float:
            total = 0.0
            for i in range(len(cont)):
                lg = ref.model.prefill(0, np.asarray(prompt + cont[:i], np.int64), 0).astype(np.float64)
                total += lg[cont[i]] - lg.max() - np.log(np.exp(lg - lg.max()).sum())
            return total

        for (s, n), c in zip(got, conts):
            assert n == len(c) and s == pytest.approx(direct(c), abs=1e-4)
        # the classifier answers with one of the labels, its score the calibrated softmax over all of them
        labels = [Label("river"), Label("harbour engine"), Label("bridge")]
        clf = LikelihoodClassifier(chat, labels)
        label, score, probs = clf.classify("The river near the harbour was built for the bridge.")
        assert label in {"river", "harbour engine", "bridge"} and score == pytest.approx(max(probs.values()), abs=1e-3)
        raw = np.array([s for s, _ in scorer.score(scorer.encode(clf.prompt("The river near the harbour was built for the bridge.")),
                                                   clf.continuations)]) - clf.calibration()
        assert label == [lb.name for lb in labels][int(np.argmax(raw))]
    finally:
        scheduler.stop()


def test_classify_job_labels_documents_and_csv_rows(make_runtime, tmp_path):
    rt = make_runtime()
    items = corpus()
    ids = {rt.documents.add_text(f"doc {i}", text).document_id: want for i, (text, want) in enumerate(items)}
    names = list(SUBJECTS)
    rt.jobs.create_job("topics", "classify", {"labels": names, "method": "embedding", "label_set": "subject"})
    run = rt.jobs.run_foreground("topics")
    assert run.status == "succeeded" and run.counts["succeeded"] == len(items)
    results, total = rt.jobs.results(run.id)
    assert total == len(items)
    right = 0
    for it in results:
        r = it.result
        assert r["label"] in names and r["method"] == "embedding" and 0 < r["score"] <= 1
        shown = rt.documents.get(r["document_id"])["labels"]
        assert shown == [{"label_set": "subject", "label": r["label"], "score": r["score"], "method": "embedding", "run_id": run.id,
                          "bundle_id": rt.jobs.ctx.bundle_id, "prompt_version": "classify-1", "created_at": shown[0]["created_at"]}]
        right += r["label"] == ids[r["document_id"]]
    assert right / len(items) >= 0.8
    # CSV rows under an ingest root, with the likelihood method (answers are always one of the labels)
    csv_path = tmp_path / "docs" / "mail.csv"
    csv_path.write_text("id,subject\nm1,Your parcel is on its way\nm2,Invoice 2231 is due\nm3,\n", encoding="utf-8")
    rt.jobs.create_job("mail", "classify", {"labels": ["delivery", "invoice"], "method": "likelihood", "source": "csv",
                                            "csv_path": str(csv_path), "text_column": "subject", "id_column": "id"})
    run = rt.jobs.run_foreground("mail")
    results = {i.key: i for i in rt.jobs.results(run.id)[0]}
    assert set(results) == {"row:1", "row:2", "row:3"}
    assert results["row:1"].result["label"] in ("delivery", "invoice") and results["row:1"].result["id"] == "m1"
    assert results["row:3"].status == "failed" and "empty" in results["row:3"].error  # one bad row, the run goes on
    assert run.status == "succeeded"


def test_classify_job_definitions_are_checked(make_runtime, tmp_path):
    rt = make_runtime()
    for params, words in (({"labels": ["a", "A"]}, "twice"), ({"labels": []}, "at least 2"),
                          ({"labels": ["a", "b"], "method": "vote"}, "method"),
                          ({"labels": ["a", "b"], "source": "csv", "csv_path": "/etc/passwd"}, "ingest_roots")):
        with pytest.raises(InvalidJobError) as e:
            rt.jobs.create_job("bad", "classify", params)
        assert words in str(e.value)


def test_auto_picks_the_method_that_is_right_on_the_examples(tiny_bundles, embedder):
    """With examples for every label, auto measures both methods leave-one-out; the tiny random-weight LM is near chance."""
    from edge_agent.engine.bundle import load_bundle
    from edge_agent.engine.engine import OnnxEngine
    from edge_agent.engine.scheduler import BatchScheduler
    from edge_agent.jobs.classify import choose_method
    from edge_agent.services.chat import ChatService
    from edge_agent.services.embeddings import EmbeddingService

    svc = EmbeddingService(lambda: embedder)
    scheduler = BatchScheduler(OnnxEngine(load_bundle(tiny_bundles["llama"]), threads=1, max_batch=8, context_length=512)).start()
    try:
        chat = ChatService(scheduler)
        labels = [Label(name, examples=[docstring(m) for m in mods[:2]]) for name, mods in SUBJECTS.items()]
        method, acc = choose_method(chat, svc, labels)
        assert set(acc) == {"embedding", "likelihood"} and all(0 <= v <= 1 for v in acc.values())
        assert acc["embedding"] >= 0.8 and method == ("likelihood" if acc["likelihood"] > acc["embedding"] else "embedding")
        assert choose_method(chat, svc, [Label(n) for n in SUBJECTS]) == ("embedding", {})  # no examples: embedding
    finally:
        scheduler.stop()


def test_bad_labels_are_a_400_over_http(make_runtime):
    import http.client
    import json

    from edge_agent.api.app import create_app
    from edge_agent.server import HttpServer

    rt = make_runtime()
    srv = HttpServer(create_app(rt), "127.0.0.1", 0, threads=4).start()
    try:
        for labels, words in ((["spam", "Spam"], "twice"), (["spam", ""], "empty"), ([], "at least 2")):
            conn = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
            body = json.dumps({"name": "mail", "kind": "classify", "params": {"labels": labels}})
            conn.request("POST", "/v1/jobs", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            err = json.loads(resp.read())["error"]
            assert resp.status == 400 and words in err["message"] and "Traceback" not in err["message"], err
            conn.close()
    finally:
        srv.close()


def test_classify_csv_as_dutch_excel_saves_it(make_runtime, tmp_path):
    """Excel with Dutch regional settings saves CSV with ';' between fields, in Windows-1252: rows are read as the loader reads them."""
    rt = make_runtime()
    csv_path = tmp_path / "docs" / "berichten.csv"
    csv_path.write_bytes("id;onderwerp;tekst\n"
                         "f1;Factuur;Graag betaling van factuur 8812, € 1.250,00, vóór 31 december.\n"
                         "k1;Klacht;\"Ik heb drie uur gewacht; niemand heeft mij iets uitgelegd.\"\n".encode("cp1252"))
    rt.jobs.create_job("berichten", "classify", {"labels": ["factuur", "klacht"], "method": "embedding", "source": "csv",
                                                 "csv_path": str(csv_path), "text_column": "tekst", "id_column": "id"})
    run = rt.jobs.run_foreground("berichten")
    assert run.status == "succeeded", run.error
    results = {i.key: i.result for i in rt.jobs.results(run.id)[0]}
    assert [results[k]["id"] for k in ("row:1", "row:2")] == ["f1", "k1"]
    assert all(r["label"] in ("factuur", "klacht") for r in results.values())


def test_classify_labels_with_its_own_embedding_model(tiny_bundles, tmp_path):
    """classify_embedding_model (default: the packaged all-MiniLM-L6-v2, the better one from label names) labels, not
    the documents' embedding model: with documents embedded by a tiny untrained model, classification stays as
    accurate as with the packaged one; "same" hands it to the documents' model."""
    from jobs_helpers import EMBED_CACHE, job_settings
    from tiny_models import make_sentence_transformer

    from edge_agent.rag.embedder import PACKAGED_MODEL
    from edge_agent.runtime import build_runtime
    from edge_agent.services.documents import DocumentService

    tiny = make_sentence_transformer(tmp_path / "tiny")
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "embedding-cache").symlink_to(EMBED_CACHE)  # the packaged model's export, done once for the tests
    settings = job_settings(tiny_bundles, tmp_path, embedding_model=str(tiny))
    rt = build_runtime(settings, documents=DocumentService.from_settings(settings), start_jobs=False)
    try:
        assert rt.jobs.ctx.classify_embeddings is not None and rt.jobs.ctx.label_embeddings is rt.jobs.ctx.classify_embeddings
        items = corpus()
        ids = {rt.documents.add_text(f"doc {i}", text).document_id: want for i, (text, want) in enumerate(items)}
        assert rt.embeddings.model_name.startswith("tiny-multilingual")  # the documents' model
        rt.jobs.create_job("topics", "classify", {"labels": list(SUBJECTS), "method": "embedding", "self_train": False})
        run = rt.jobs.run_foreground("topics")
        assert run.status == "succeeded" and run.counts["succeeded"] == len(items)
        got = [(r.result["label"], ids[r.result["document_id"]]) for r in rt.jobs.results(run.id)[0]]
        assert rt.jobs.ctx.classify_embeddings.model_name.startswith(PACKAGED_MODEL)
        assert np.mean([g == w for g, w in got]) >= 0.8, got
    finally:
        rt.close()
    settings = job_settings(tiny_bundles, tmp_path, embedding_model=str(tiny), classify_embedding_model="same", serve_documents=False)
    same = build_runtime(settings, start_jobs=False)
    try:
        assert same.jobs.ctx.classify_embeddings is None and same.jobs.ctx.label_embeddings is same.jobs.ctx.embeddings
    finally:
        same.close()


def test_classify_embedding_model_is_given_back_when_idle_and_loads_again(tiny_bundles, tmp_path):
    """classify's own embedder (~70 MB, built by the first classify run) is watched by the daemon's idle releaser like
    the documents' one: given back after idle_unload_s unused, and the next run loads it again and labels the same."""
    import time

    from jobs_helpers import EMBED_CACHE, job_settings
    from tiny_models import make_sentence_transformer

    from edge_agent.runtime import build_runtime
    from edge_agent.services.documents import DocumentService

    tiny = make_sentence_transformer(tmp_path / "tiny")
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "embedding-cache").symlink_to(EMBED_CACHE)
    # a long idle time: the releaser's own sweeps give nothing back during the test; the sweeps below are "later"
    settings = job_settings(tiny_bundles, tmp_path, embedding_model=str(tiny), idle_unload_s=3600)
    rt = build_runtime(settings, documents=DocumentService.from_settings(settings), start_jobs=False)
    try:
        assert "classify_embedder" not in rt.releaser.sweep(time.monotonic() + 7200)  # not built before a classify run
        ids = {rt.documents.add_text(f"doc {i}", text).document_id: i for i, (text, _) in enumerate(corpus())}
        rt.jobs.create_job("topics", "classify", {"labels": list(SUBJECTS), "method": "embedding", "self_train": False})

        def labels() -> dict[int, str]:
            run = rt.jobs.run_foreground("topics")
            assert run.status == "succeeded", run
            return {ids[r.result["document_id"]]: r.result["label"] for r in rt.jobs.results(run.id)[0]}

        first = labels()
        emb = rt.jobs.ctx.classify_embeddings._embedder()
        assert emb.loaded and len(first) == len(ids)
        assert "classify_embedder" not in rt.releaser.sweep(time.monotonic())  # just used: kept
        assert "classify_embedder" in rt.releaser.sweep(time.monotonic() + 7200)
        assert not emb.loaded and rt.releaser.released["classify_embedder"] == 1
        assert labels() == first
        assert rt.jobs.ctx.classify_embeddings._embedder() is emb and emb.loaded  # the same embedder, its weights loaded again
    finally:
        rt.close()


DUTCH = [  # (text, label): what a Dutch office files, in the words a Dutch clerk would use
    ("Hierbij ontvangt u de factuur voor de geleverde diensten in maart. Wij verzoeken u het bedrag binnen dertig dagen over te maken.", "factuur"),
    ("De betaling van de openstaande factuur is nog niet ontvangen; wij vragen u het totaalbedrag alsnog te voldoen.", "factuur"),
    ("Ik ben zeer ontevreden over de levering: het pakket kwam twee weken te laat en de doos was beschadigd.", "klacht"),
    ("Graag dien ik een klacht in over de klantenservice, die mijn vragen niet heeft beantwoord.", "klacht"),
    ("Partijen komen overeen dat de opdrachtnemer de werkzaamheden uitvoert volgens de voorwaarden in deze overeenkomst.", "contract"),
    ("Deze overeenkomst gaat in op de datum van ondertekening en wordt aangegaan voor de duur van twee jaar.", "contract"),
]


def test_a_run_in_a_language_the_classify_model_does_not_cover_embeds_with_the_documents_model(tiny_bundles, tmp_path):
    """all-MiniLM-L6-v2 (classify's model) is English only: a run of Dutch texts embeds with the documents' model
    (here a tiny one of unknown languages, taken to cover all), and says so in each result; an English run keeps
    the classify model."""
    from jobs_helpers import EMBED_CACHE, job_settings
    from tiny_models import make_sentence_transformer

    from edge_agent.rag.embedder import PACKAGED_MODEL
    from edge_agent.runtime import build_runtime
    from edge_agent.services.documents import DocumentService

    tiny = make_sentence_transformer(tmp_path / "tiny")
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "embedding-cache").symlink_to(EMBED_CACHE)
    settings = job_settings(tiny_bundles, tmp_path, embedding_model=str(tiny))
    rt = build_runtime(settings, documents=DocumentService.from_settings(settings), start_jobs=False)
    try:
        labels = ["factuur", "klacht", "contract"]
        rt.jobs.create_job("nl", "classify", {"labels": labels, "method": "embedding", "source": "texts",
                                              "texts": [t for t, _ in DUTCH]})
        run = rt.jobs.run_foreground("nl")
        assert run.status == "succeeded" and run.counts["succeeded"] == len(DUTCH)
        used = {r.result["embedding_model"] for r in rt.jobs.results(run.id)[0]}
        assert used == {rt.embeddings.model_name} and not rt.embeddings.model_name.startswith(PACKAGED_MODEL)
        english = [t for t, _ in corpus()[:6]]
        rt.jobs.create_job("en", "classify", {"labels": list(SUBJECTS), "method": "embedding", "source": "texts", "texts": english})
        run = rt.jobs.run_foreground("en")
        assert run.status == "succeeded"
        assert {r.result["embedding_model"] for r in rt.jobs.results(run.id)[0]} == {rt.jobs.ctx.classify_embeddings.model_name}
        assert rt.jobs.ctx.classify_embeddings.model_name.startswith(PACKAGED_MODEL)
    finally:
        rt.close()


def test_main_language_counts_texts_and_leaves_ties_and_empty_undecided():
    from edge_agent.services.embeddings import main_language

    nl = [t for t, _ in DUTCH]
    en = [t for t, _ in corpus()[:4]]
    assert main_language(nl + en[:2]) == "nl"
    assert main_language(en + nl[:2]) == "en"
    assert main_language(nl[:2] + en[:2]) is None
    assert main_language(["", "1234 5678", "---"]) is None


def test_a_service_without_a_model_covers_no_language():
    """No documents' model loaded (a chat-only process): a Dutch run keeps the classify model instead of one that
    would fail every item."""
    from edge_agent.services.embeddings import EmbeddingService

    assert not EmbeddingService(lambda: None).covers("nl")
