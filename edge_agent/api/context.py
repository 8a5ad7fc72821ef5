"""The wiring a request reaches: the Runtime that create_app(runtime) stored on the app (never a module global)."""
from __future__ import annotations

from flask import current_app


def runtime():
    """The Runtime of the app serving this request (call only inside a request or app context)."""
    return current_app.extensions["edge_agent"]
