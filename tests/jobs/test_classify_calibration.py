"""classify's likelihood method calibrated by the run's own items (each label's mean score over them taken away), with the
tiny real Llama, the real run loop and SQLite; a run too small for that keeps the content-free calibration."""
from __future__ import annotations

import numpy as np
import pytest

from edge_agent.jobs.classify import SELF_TRAIN_MIN_PER_LABEL, Label, LikelihoodClassifier

LABELS = ["delivery", "invoice", "meeting"]
TEXTS = ["Your parcel left our depot this morning and arrives tomorrow.", "Invoice 2231 for March is due on Friday.",
         "The team meets on Thursday at three in room 4.", "The courier could not deliver the package; pick it up at the shop.",
         "Please pay the attached bill within 14 days.", "Can we move the project review to Monday afternoon?",
         "Tracking number 3SABC1234 shows the box in transit.", "A reminder: the amount of 120 euro is still open.",
         "Agenda for the board meeting: budget, hiring, the new office.", "The shipment was split over two deliveries."]


def test_a_likelihood_run_takes_away_its_own_items_mean_label_scores(make_runtime):
    rt = make_runtime()
    assert len(TEXTS) >= SELF_TRAIN_MIN_PER_LABEL * len(LABELS)
    rt.jobs.create_job("mail", "classify", {"labels": LABELS, "method": "likelihood", "source": "texts", "texts": TEXTS})
    run = rt.jobs.run_foreground("mail")
    assert run.status == "succeeded" and run.counts["succeeded"] == len(TEXTS)
    got = {int(r.result["id"]): r.result for r in rt.jobs.results(run.id)[0]}
    # the same label scores, computed directly: each text's, less the labels' mean over the run (10 texts: all sampled)
    clf = LikelihoodClassifier(rt.chat, [Label(n) for n in LABELS])
    raw = np.array([[s for s, _ in clf.start_raw(t).result()] for t in TEXTS])
    calibrated = raw - raw.mean(axis=0)
    for i, row in enumerate(calibrated):
        r = got[i]
        assert r["method"] == "likelihood" and r["calibration"] == "run"
        best = np.sort(row)[-2:]
        assert r["label"] == LABELS[int(np.argmax(row))] or best[1] - best[0] < 1e-3, (i, r, row)
        probs = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
        assert r["score"] == pytest.approx(float(probs.max()), abs=2e-3)
    # against the content-free calibration, the labels' shares move toward the run's: no label is above its mean everywhere
    assert all((calibrated[:, j] > 0).any() and (calibrated[:, j] < 0).any() for j in range(len(LABELS)))


def test_a_small_likelihood_run_keeps_the_content_free_calibration(make_runtime):
    rt = make_runtime()
    rt.jobs.create_job("two", "classify", {"labels": LABELS, "method": "likelihood", "source": "texts", "texts": TEXTS[:2]})
    results, _ = rt.jobs.results(rt.jobs.run_foreground("two").id)
    assert [r.result["calibration"] for r in results] == ["content-free", "content-free"]
    clf = LikelihoodClassifier(rt.chat, [Label(n) for n in LABELS])
    for r, text in zip(results, TEXTS[:2]):
        row = np.array([s for s, _ in clf.start_raw(text).result()]) - clf.calibration()
        best = np.sort(row)[-2:]
        assert r.result["label"] == LABELS[int(np.argmax(row))] or best[1] - best[0] < 1e-3


def test_a_calibration_needs_one_score_per_label(make_runtime):
    rt = make_runtime()
    with pytest.raises(ValueError):
        LikelihoodClassifier(rt.chat, [Label(n) for n in LABELS], calibration=[0.0, 1.0])
