"""Jobs API: define jobs (kind, params, cron schedule, limits), start and cancel runs, read runs and results.

Thin routes over runtime.jobs (JobsService). A bad definition (unknown kind, bad cron or time
zone, a folder outside ingest_roots, ...) is a 400 in OpenAI's error shape; an unknown job or
run a 404; a duplicate name or a second active run of a job a 409.
"""
from __future__ import annotations

import re
import time
from typing import Annotated, Any, Literal

from flask import Blueprint, Response, request
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema, models_json_schema

from edge_agent.api.context import runtime
from edge_agent.api.errors import ApiError, error_response, read_json, scrub_paths
from edge_agent.jobs.kinds import InvalidJobError
from edge_agent.jobs.schedule import iso, iso_in
from edge_agent.services.errors import UnavailableError
from edge_agent.services.paths import shown_path

bp = Blueprint("jobs", __name__)

MAX_LIMIT = 1000
RESULT_FIELDS = ("document_id", "custom_id", "summary", "label", "score", "response", "action", "reason", "path")
ITEM_STATUSES = ("pending", "succeeded", "failed", "skipped", "cancelled")  # = store.jobs.ITEM_STATUSES (api does not import store)
PATH_PARAMS = ("folders", "csv_path", "path_prefix")  # job params a kind stores resolved (absolute) on this server


# --- protocol ---------------------------------------------------------------
class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class Schedule(_Body):
    """A cron expression (minute hour day month weekday) in an IANA time zone (default: jobs_timezone)."""

    cron: str = Field(min_length=1, max_length=200, examples=["0 2 * * *"])
    timezone: str | None = Field(None, max_length=100, examples=["Europe/Amsterdam"])


# a schedule given as its cron text alone, as the config file's [[jobs]] and `jobs add --schedule` take it: an operator
# moving a job from the config to the API got "Input should be a valid dictionary or instance of Schedule"
CronText = Annotated[str, Field(min_length=1, max_length=200, description="the cron expression alone: the zone is "
                                "the job's own, else jobs_timezone", examples=["0 2 * * *"])]


def _schedule_of(value: Any) -> Any:
    return Schedule(cron=value) if isinstance(value, str) else value


class Limits(_Body):
    """Per-run limits: items in flight, items per run, a wall-clock deadline ('HH:MM' in the job's schedule zone or
    jobs_timezone, or with its own: '06:00 Europe/Amsterdam', '06:00+01:00'; an ISO date-time; epoch s), a duration."""

    concurrency: int | None = Field(None, ge=1, le=256)
    max_items: int | None = Field(None, ge=1)
    deadline: str | float | None = Field(None, examples=["06:00", "06:00 Europe/Amsterdam", "06:00+01:00"])
    max_duration_s: int | None = Field(None, ge=1, le=366 * 86400)


class CreateJobRequest(_Body):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    kind: str = Field(min_length=1, max_length=50, examples=["summarize", "reindex", "classify", "batch"])
    params: dict[str, Any] = Field(default_factory=dict)
    schedule: Schedule | CronText | None = None
    enabled: bool = True
    limits: Limits | None = None

    _cron_text = field_validator("schedule")(_schedule_of)


class UpdateJobRequest(_Body):
    """Fields to change; `schedule: null` removes the schedule."""

    # absent = unchanged; only schedule and limits may be null (removed), so the others' schemas leave null out
    name: str = Field(None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # type: ignore[assignment]
    params: dict[str, Any] = Field(None, description="The kind's params, replaced whole (checked as at creation)")  # type: ignore[assignment]
    schedule: Schedule | CronText | None = None
    enabled: bool = Field(None)  # type: ignore[assignment]
    limits: Limits | None = None
    # not a field one can change (so not in the schema): named here so the 400 says what to do instead of "unknown field"
    kind: SkipJsonSchema[Any] = None

    _cron_text = field_validator("schedule")(_schedule_of)

    @field_validator("kind", mode="before")
    @classmethod
    def _kind_is_fixed(cls, value: Any) -> Any:
        raise ValueError("the kind of a job cannot be changed (its params, runs and results belong to that kind): "
                         "create a new job with POST /v1/jobs, and delete this one if it is no longer needed")


class Job(BaseModel):
    object: Literal["job"] = "job"
    id: str
    name: str
    kind: str
    params: dict[str, Any]
    schedule: Schedule | None = None
    enabled: bool
    limits: dict[str, Any]
    source: str
    next_run_at: str | None = None
    last_success_at: str | None = None
    created_at: int
    updated_at: int


class JobList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Job]
    total: int
    offset: int
    limit: int


class JobDeleted(BaseModel):
    id: str
    object: Literal["job"] = "job"
    deleted: Literal[True] = True


class RunCounts(BaseModel):
    """Items by status; they add up to total. A cancelled (or failed) run's items not done are cancelled, not pending."""

    total: int
    pending: int
    succeeded: int
    failed: int
    skipped: int
    cancelled: int = 0


class Run(BaseModel):
    object: Literal["job.run"] = "job.run"
    id: str
    job_id: str
    kind: str
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    stop_reason: str | None = Field(None, description="Why it ended early: deadline, max_items (the rest carries over to the "
                                                      "job's next run), cancelled, or error.")
    trigger: str
    counts: RunCounts
    progress: float = Field(description="Done (succeeded + failed) / total, 0..1.")
    concurrency: int
    max_items: int | None = None
    deadline_at: str | None = Field(None, description="When the run stops (UTC).")
    deadline_timezone: str | None = Field(None, description="The zone its deadline was read in: the one written with it "
                                          "('06:00 Europe/Amsterdam', '06:00+01:00'), else the job's schedule zone, else "
                                          "jobs_timezone.", examples=["Europe/Amsterdam"])
    deadline_local: str | None = Field(None, description="deadline_at in deadline_timezone.", examples=["2026-12-02T06:00:00+01:00"])
    cancel_requested: bool
    carried_from: str | None = None
    resumes: int = Field(description="Times the run was resumed after its process stopped.")
    error: str | None = None
    bundle_id: str | None = None
    prompt_version: str | None = None
    generated_tokens: int
    created_at: int
    started_at: float | None = None
    finished_at: float | None = None
    elapsed_s: float | None = None


class RunList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Run]
    total: int
    offset: int
    limit: int


class RunResult(BaseModel):
    model_config = ConfigDict(extra="allow")

    object: Literal["job.result"] = "job.result"
    key: str
    status: Literal["pending", "succeeded", "failed", "skipped", "cancelled"]
    error: str | None = None
    result: dict[str, Any] | None = None
    bundle_id: str | None = None
    prompt_version: str | None = None
    started_at: float | None = None
    finished_at: float | None = None


class RunResultList(BaseModel):
    object: Literal["list"] = "list"
    data: list[RunResult]
    total: int
    offset: int
    limit: int
    has_more: bool


# --- mapping ----------------------------------------------------------------
def _shown_params(params: dict[str, Any], roots: list | None) -> dict[str, Any]:
    """Params with the server paths in them shown as /v1/documents shows paths (relative to their ingest root)."""
    if roots is None or not isinstance(params, dict):
        return params
    out = dict(params)
    for name in PATH_PARAMS:
        value = out.get(name)
        if isinstance(value, str):
            out[name] = shown_path(value, roots)
        elif isinstance(value, list):
            out[name] = [shown_path(v, roots) if isinstance(v, str) else v for v in value]
    return out


def job_object(job, roots: list | None = None) -> Job:
    """The API's job; with `roots` (the ingest roots) its paths are shown relative to them, else as stored (the CLI)."""
    sched = Schedule(cron=job.schedule_cron, timezone=job.schedule_tz) if job.schedule_cron else None
    return Job(id=job.id, name=job.name, kind=job.kind, params=_shown_params(job.params, roots), schedule=sched, enabled=job.enabled, limits=job.limits,
               source=job.source, next_run_at=iso(job.next_run_at), last_success_at=iso(job.last_success_at),
               created_at=int(job.created_at), updated_at=int(job.updated_at))


def run_object(run, roots: list | None = None) -> Run:
    """The API's run; with `roots` the paths in its error are shown relative to them (scrub_paths), else as stored (the CLI)."""
    c = run.counts
    total = run.total_items
    done = c.get("succeeded", 0) + c.get("failed", 0)
    end = run.finished_at or (time.time() if run.status == "running" else None)
    return Run(
        id=run.id, job_id=run.job_id, kind=run.kind, status=run.status, stop_reason=run.stop_reason, trigger=run.trigger,
        counts=RunCounts(total=total, pending=c.get("pending", 0), succeeded=c.get("succeeded", 0), failed=c.get("failed", 0),
                         skipped=c.get("skipped", 0), cancelled=c.get("cancelled", 0)),
        progress=round(done / total, 4) if total else (1.0 if run.status == "succeeded" else 0.0),
        concurrency=run.concurrency, max_items=run.max_items, deadline_at=iso(run.deadline_at),
        deadline_timezone=run.deadline_tz, deadline_local=iso_in(run.deadline_at, run.deadline_tz) if run.deadline_tz else None,
        cancel_requested=run.cancel_requested,
        carried_from=run.carried_from, resumes=run.resumes,
        error=scrub_paths(run.error, roots) if run.error and roots is not None else run.error, bundle_id=run.bundle_id, prompt_version=run.prompt_version,
        generated_tokens=run.generated_tokens, created_at=int(run.created_at), started_at=run.started_at, finished_at=run.finished_at,
        elapsed_s=round(end - run.started_at, 3) if run.started_at and end else None,
    )


def result_object(item, roots: list | None = None) -> RunResult:
    """The API's run result; with `roots` its key (file:<path>), result path and error's paths are shown relative to them."""
    key, result, error = item.key, item.result, item.error
    if roots is not None:
        error = scrub_paths(error, roots) if error else error
        kind, sep, rest = key.partition(":")
        key = f"file:{shown_path(rest, roots)}" if sep and kind == "file" else key
        if isinstance(result, dict) and isinstance(result.get("path"), str):
            result = {**result, "path": shown_path(result["path"], roots)}
    lifted = {k: result[k] for k in RESULT_FIELDS if isinstance(result, dict) and k in result}
    return RunResult(key=key, status=item.status, error=error, result=result, bundle_id=item.bundle_id,
                     prompt_version=item.prompt_version, started_at=item.started_at, finished_at=item.finished_at, **lifted)


# --- helpers ----------------------------------------------------------------
def _service():
    jobs = getattr(runtime(), "jobs", None)
    if jobs is None:
        raise UnavailableError("jobs are not available in this process (the database could not be opened; see the daemon's log)")
    return jobs


def _roots() -> list:
    """The ingest roots job replies show paths relative to (as DocumentService.shown_path does)."""
    return list(getattr(runtime().settings, "ingest_roots", None) or [])


def _max_body() -> int:
    return int(getattr(runtime().settings, "max_body_bytes", 8 * 1024 * 1024))


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status=status, mimetype="application/json")


def _query_int(name: str, default: int, lo: int, hi: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"[0-9]{1,19}", raw) or not lo <= int(raw) <= hi:
        raise ApiError(400, f"{name} must be an integer from {lo} to {hi}", param=name, code="invalid_value")
    return int(raw)


@bp.errorhandler(InvalidJobError)
def _on_invalid(exc: InvalidJobError):
    return error_response(400, str(exc), "invalid_request_error", exc.param, "invalid_job")


# --- routes -----------------------------------------------------------------
@bp.post("/v1/jobs")
def create_job():
    body = read_json(CreateJobRequest, _max_body())
    job = _service().create_job(
        body.name, body.kind, body.params, body.schedule.model_dump() if body.schedule else None, body.enabled,
        body.limits.model_dump(exclude_none=True) if body.limits else None,
    )
    return _json(job_object(job, _roots()))


@bp.get("/v1/jobs")
def list_jobs():
    offset = _query_int("offset", 0, 0, 1 << 62)
    limit = _query_int("limit", MAX_LIMIT, 1, MAX_LIMIT)  # the default keeps this list whole for clients that never paged it
    (jobs, total), roots = _service().page_jobs(offset, limit), _roots()
    return _json(JobList(data=[job_object(j, roots) for j in jobs], total=total, offset=offset, limit=limit))


@bp.get("/v1/jobs/<job_id>")
def get_job(job_id: str):
    return _json(job_object(_service().get_job(job_id), _roots()))


@bp.patch("/v1/jobs/<job_id>")
def update_job(job_id: str):
    body = read_json(UpdateJobRequest, _max_body())
    changes: dict[str, Any] = {}
    for name in body.model_fields_set:
        value = getattr(body, name)
        if isinstance(value, BaseModel):
            value = value.model_dump(exclude_none=True)
        if value is None and name not in ("schedule", "limits"):
            raise ApiError(400, f"{name} cannot be null", param=name, code="invalid_value")
        changes[name] = value
    return _json(job_object(_service().update_job(job_id, changes), _roots()))


@bp.delete("/v1/jobs/<job_id>")
def delete_job(job_id: str):
    job = _service().delete_job(job_id)
    return _json(JobDeleted(id=job.id))


@bp.post("/v1/jobs/<job_id>/run")
def run_job(job_id: str):
    overrides = None
    if request.content_length or "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        overrides = read_json(Limits, _max_body()).model_dump(exclude_none=True)
    svc = _service()
    if not getattr(svc, "started", True):  # a queued run here waited for good, and refused the timer's `jobs run` (409)
        raise UnavailableError("job runs are off in this daemon (jobs_enabled = false): run the job with `edge-agent jobs "
                               "run NAME` (as a systemd timer or cron does), or set jobs_enabled = true and restart")
    return _json(run_object(svc.start_run(job_id, "manual", overrides), _roots()))


@bp.get("/v1/jobs/<job_id>/runs")
def job_runs(job_id: str):
    offset = _query_int("offset", 0, 0, 1 << 62)
    limit = _query_int("limit", 20, 1, MAX_LIMIT)
    runs, total = _service().list_runs(job_id, offset, limit)
    roots = _roots()
    return _json(RunList(data=[run_object(r, roots) for r in runs], total=total, offset=offset, limit=limit))


@bp.get("/v1/runs/<run_id>")
def get_run(run_id: str):
    return _json(run_object(_service().get_run(run_id), _roots()))


@bp.get("/v1/runs/<run_id>/results")
def run_results(run_id: str):
    offset = _query_int("offset", 0, 0, 1 << 62)
    limit = _query_int("limit", 100, 1, MAX_LIMIT)
    status = request.args.get("status")
    if status is not None and status not in ITEM_STATUSES:
        raise ApiError(400, f"status must be one of {', '.join(ITEM_STATUSES)}", param="status", code="invalid_value")
    items, total = _service().results(run_id, offset, limit, status)
    roots = _roots()
    return _json(RunResultList(data=[result_object(i, roots) for i in items], total=total, offset=offset, limit=limit,
                               has_more=offset + len(items) < total))


@bp.post("/v1/runs/<run_id>/cancel")
def cancel_run(run_id: str):
    return _json(run_object(_service().cancel_run(run_id), _roots()))


# --- OpenAPI ----------------------------------------------------------------
_MODELS = [
    (CreateJobRequest, "validation"), (UpdateJobRequest, "validation"), (Limits, "validation"),
    (Job, "serialization"), (JobList, "serialization"), (JobDeleted, "serialization"), (Run, "serialization"),
    (RunList, "serialization"), (RunResultList, "serialization"),
]
_REF = "#/components/schemas/{model}"
_ERRORS = {
    400: "Invalid job definition or query (unknown kind, bad cron or time zone, folder outside ingest_roots, ...).",
    401: "Missing or wrong API key.", 403: "Host or CORS origin not allowed.", 404: "No such job or run.",
    409: "A job with this name exists, or the job already has an active run.", 413: "Request body too large.",
    415: "Body is not JSON.", 500: "Internal error.", 503: "Jobs are not available in this process.",
}


def openapi_schemas() -> dict[str, Any]:
    """Component schemas of the jobs routes' bodies."""
    _, top = models_json_schema(_MODELS, ref_template=_REF)
    return top.get("$defs", {})


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def openapi_paths(runtime) -> dict[str, Any]:
    """OpenAPI path items of the jobs routes (their schemas: openapi_schemas())."""
    secured = bool(runtime.settings.accepted_keys())

    def responses(name: str, description: str, codes: tuple[int, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {"200": {"description": description, "content": {"application/json": {"schema": _ref(name)}}}}
        for code in codes:
            if code != 401 or secured:
                out[str(code)] = {"description": _ERRORS[code], "content": {"application/json": {"schema": _ref("ErrorResponse")}}}
        return out

    def body(name: str, required: bool = True) -> dict[str, Any]:
        return {"required": required, "content": {"application/json": {"schema": _ref(name)}}}

    def param(name: str) -> dict[str, Any]:
        return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "maxLength": 200}}

    def query(name: str, default: int, hi: int) -> dict[str, Any]:
        return {"name": name, "in": "query", "required": False,
                "schema": {"type": "integer", "minimum": 0 if name == "offset" else 1, "maximum": hi, "default": default}}

    get_codes = (401, 403, 404, 500, 503)
    post_codes = (400, 401, 403, 404, 409, 413, 415, 500, 503)
    job_id, run_id = param("job_id"), param("run_id")
    return {
        "/v1/jobs": {
            "post": {"summary": "Define a job (kind, params, optional cron schedule and limits)", "operationId": "createJob",
                     "requestBody": body("CreateJobRequest"), "responses": responses("Job", "The job.", post_codes)},
            "get": {"summary": "Jobs, oldest first", "operationId": "listJobs",
                    "parameters": [query("offset", 0, 1 << 62), query("limit", MAX_LIMIT, MAX_LIMIT)],
                    "responses": responses("JobList", "One page of jobs.", (400, *get_codes))},
        },
        "/v1/jobs/{job_id}": {
            "get": {"summary": "A job (by id or name)", "operationId": "getJob", "parameters": [job_id],
                    "responses": responses("Job", "The job.", get_codes)},
            "patch": {"summary": "Change a job (schedule: null removes the schedule)", "operationId": "updateJob",
                      "parameters": [job_id], "requestBody": body("UpdateJobRequest"),
                      "responses": responses("Job", "The job as changed.", post_codes)},
            "delete": {"summary": "Delete a job with its runs and results (active runs are cancelled)", "operationId": "deleteJob",
                       "parameters": [job_id], "responses": responses("JobDeleted", "Deleted.", get_codes)},
        },
        "/v1/jobs/{job_id}/run": {
            "post": {"summary": "Start a run now (optional body: limits for this run)", "operationId": "runJob",
                     "parameters": [job_id], "requestBody": body("Limits", required=False),
                     "responses": responses("Run", "The run (queued).", post_codes)},
        },
        "/v1/jobs/{job_id}/runs": {
            "get": {"summary": "A job's runs, newest first", "operationId": "listJobRuns",
                    "parameters": [job_id, query("offset", 0, 1 << 62), query("limit", 20, MAX_LIMIT)],
                    "responses": responses("RunList", "One page of runs.", (400, *get_codes))},
        },
        "/v1/runs/{run_id}": {
            "get": {"summary": "A run: status, counts, progress, timings", "operationId": "getRun", "parameters": [run_id],
                    "responses": responses("Run", "The run.", get_codes)},
        },
        "/v1/runs/{run_id}/results": {
            "get": {"summary": "A run's items with their results, in order, one page at a time", "operationId": "listRunResults",
                    "parameters": [run_id, query("offset", 0, 1 << 62), query("limit", 100, MAX_LIMIT),
                                   {"name": "status", "in": "query", "required": False,
                                    "schema": {"type": "string", "enum": list(ITEM_STATUSES)}}],
                    "responses": responses("RunResultList", "One page of results.", (400, *get_codes))},
        },
        "/v1/runs/{run_id}/cancel": {
            "post": {"summary": "Cancel a run (it stops within a moment; items not done become cancelled)", "operationId": "cancelRun",
                     "parameters": [run_id], "responses": responses("Run", "The run as it is now.", (401, 403, 404, 500, 503))},
        },
    }
