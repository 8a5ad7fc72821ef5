"""Liveness, readiness, Prometheus metrics and the OpenAPI document."""
from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from edge_agent.api import protocol as p
from edge_agent.api.context import runtime as _runtime
from edge_agent.api.openapi import build_openapi

bp = Blueprint("health", __name__)


@bp.get("/health")
def health():
    """Liveness: 503 only when the process is broken (a dead decode loop) and a restart is the fix."""
    alive, why = _runtime().liveness()
    body = p.Health() if alive else p.Health(status="failed", detail=why)
    return Response(body.model_dump_json(exclude_none=True), status=200 if alive else 503, mimetype="application/json")


@bp.get("/ready")
def ready():
    """Readiness: 200 only when every enabled part (model, embedder, document index, jobs) answers; says what each is doing."""
    rt = _runtime()
    chat = rt.chat
    ok, parts = rt.readiness()
    draining = current_app.extensions.get("edge_agent.inflight")
    if draining is not None and draining.draining:
        ok = False
        parts["model"] = dict(parts["model"], state="stopping", detail="shutting down")
    body = p.Readiness(
        status="ready" if ok else "not_ready", model=chat.model_name, queue_depth=chat.queue_depth, active=chat.active,
        parts=parts, waiting_for=[name for name, part in parts.items() if part["state"] not in ("ready", "degraded", "disabled")],
    )
    return Response(body.model_dump_json(exclude_none=True), status=200 if ok else 503, mimetype="application/json")


@bp.get("/metrics")
def metrics():
    m = _runtime().metrics
    return Response(m.render(), mimetype=m.content_type.split(";")[0], headers={"Content-Type": m.content_type})


@bp.get("/openapi.json")
def openapi():
    doc = current_app.extensions.get("edge_agent.openapi")
    if doc is None:
        ext = current_app.extensions
        doc = build_openapi(_runtime(), ext.get("edge_agent.extra_paths"), ext.get("edge_agent.extra_schemas"))
    return jsonify(doc)
