"""GET /v1/cluster: where job items run (the local engine, or the Ray pool's nodes and actors)."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify

from edge_agent.api.context import runtime

bp = Blueprint("cluster", __name__)


@bp.get("/v1/cluster")
def cluster_status():
    rt = runtime()
    pool = getattr(rt, "cluster", None)
    if pool is not None:
        return jsonify(pool.status())
    body: dict[str, Any] = {"backend": rt.settings.jobs_backend, "nodes": {}, "actors": 0, "in_flight": 0, "items_done": 0}
    failed = getattr(rt, "parts", {}).get("cluster")
    if failed:
        body["error"] = f"the Ray pool is not running ({failed[1]}); job items run on this daemon's engine"
    return jsonify(body)


def openapi_paths(runtime) -> dict[str, Any]:
    """The route's OpenAPI path item."""
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}
    errors = {"403": {"description": "Host or origin not allowed.", **error}}
    if runtime.settings.accepted_keys():
        errors["401"] = {"description": "Missing or wrong API key.", **error}
    return {"/v1/cluster": {"get": {
        "summary": "Where job items run: backend, Ray nodes, actors, items in flight per node, throughput",
        "operationId": "clusterStatus",
        "responses": {"200": {"description": "cluster status", "content": {"application/json": {"schema": {
            "type": "object", "required": ["backend", "nodes", "actors", "in_flight", "items_done"],
            "properties": {"backend": {"type": "string"}, "nodes": {"type": "object"}, "actors": {"type": "integer"},
                           "in_flight": {"type": "integer"}, "items_done": {"type": "integer"},
                           "items_per_s": {"type": "number"}, "error": {"type": "string"}}}}}}, **errors},
    }}}
