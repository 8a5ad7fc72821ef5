"""Liveness, readiness, Prometheus metrics and the OpenAPI document."""
from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from edge_agent.api import protocol as p
from edge_agent.api.openapi import build_openapi

bp = Blueprint("health", __name__)


def _runtime():
    return current_app.extensions["edge_agent"]


@bp.get("/health")
def health():
    return Response(p.Health().model_dump_json(), mimetype="application/json")


@bp.get("/ready")
def ready():
    rt = _runtime()
    chat = rt.chat
    draining = current_app.extensions.get("edge_agent.inflight")
    ok = chat is not None and chat.ready and not (draining is not None and draining.draining)
    body = p.Readiness(
        status="ready" if ok else "not_ready", model=chat.model_name if chat is not None else None,
        queue_depth=chat.queue_depth if chat is not None else 0, active=chat.active if chat is not None else 0,
    )
    return Response(body.model_dump_json(), status=200 if ok else 503, mimetype="application/json")


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
