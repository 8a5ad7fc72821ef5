"""Errors the services raise for callers (HTTP or CLI) to show: each knows its status and OpenAI error type."""
from __future__ import annotations


class ServiceError(Exception):
    """Base: a message safe to show a user, an HTTP status, an OpenAI error type, the offending parameter and a code."""

    status = 400
    type = "invalid_request_error"
    code: str | None = None

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code


class InvalidRequestError(ServiceError):
    """The request cannot be served as given (400)."""


class ContextLengthExceededError(InvalidRequestError):
    """The prompt plus max_tokens exceed the model's context (400, message states the counts)."""

    code = "context_length_exceeded"

    def __init__(self, message: str, prompt_tokens: int, max_tokens: int, context_length: int):
        super().__init__(message, param="messages")
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.context_length = context_length


class ModelNotFoundError(ServiceError):
    """The request names a model this server does not serve (404)."""

    status = 404
    code = "model_not_found"

    def __init__(self, model: str, served: list[str], message: str = ""):
        super().__init__(
            message or f"the model {model!r} does not exist on this server; available: {', '.join(served) or 'none'} (see GET /v1/models)",
            param="model",
        )


class BusyError(ServiceError):
    """The generation queue is full (429); retry after `retry_after` seconds."""

    status = 429
    type = "rate_limit_error"
    code = "queue_full"

    def __init__(self, message: str, retry_after: float = 1.0):
        super().__init__(message)
        self.retry_after = retry_after


class UnavailableError(ServiceError):
    """A needed part is not loaded or the server is shutting down (503)."""

    status = 503
    type = "server_error"
    code = "unavailable"


class GenerationTimeoutError(ServiceError):
    """The generation ran past the per-request wall-clock limit (504)."""

    status = 504
    type = "timeout_error"
    code = "timeout"


class GenerationFailedError(ServiceError):
    """The engine failed while generating (500); the message holds no internals."""

    status = 500
    type = "server_error"
    code = "generation_failed"
