"""`edge-agent doctor` (the operator's view) and `edge-agent config show`.

doctor prints what this installation is and whether it can serve: version and the
onnxruntime wheel, the config file, every setting with where its value came from,
the model bundles and their checks, the device that would be chosen and why,
threads, the document index (a read-only view, safe while the daemon runs), job
schedules, the listen address and auth, free disk. Every problem is printed with
its fix, and the exit status is 1 when there is one (0 otherwise; 2 for a config
that cannot be read at all, as for every command).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from edge_agent.cli.common import settings_from
from edge_agent.cli.jobs import local_time

LOW_DISK_BYTES = 1 << 30


def register(sub) -> None:
    d = sub.add_parser("doctor", help="check this installation: settings and their sources, model, device, index, jobs, disk")
    d.add_argument("--json", action="store_true", help="one JSON object instead of text")
    d.add_argument("--no-index", action="store_true", help="skip opening the document index (it loads the embedding model)")
    d.add_argument("--load", action="store_true",
                   help="also load the model as the daemon would (on a GPU: build the fp16 graph, create the session, run the smoke step)")
    d.set_defaults(func=cmd_doctor)
    c = sub.add_parser("config", help="show the settings in force")
    csub = c.add_subparsers(dest="config_cmd", required=True)
    show = csub.add_parser("show", help="every setting with its value, where it came from and its help")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_config_show)


@dataclass
class Report:
    sections: dict[str, Any] = field(default_factory=dict)
    problems: list[dict[str, str]] = field(default_factory=list)

    def problem(self, what: str, fix: str) -> None:
        self.problems.append({"problem": what, "fix": fix})


def _onnxruntime_wheels() -> dict[str, str]:
    out = {}
    for dist in ("onnxruntime", "onnxruntime-gpu"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def check_versions(r: Report) -> None:
    from edge_agent import __version__

    wheels = _onnxruntime_wheels()
    r.sections["version"] = {"edge_agent": __version__, "python": sys.version.split()[0], "onnxruntime_wheels": wheels}
    if len(wheels) > 1:
        r.problem("both onnxruntime and onnxruntime-gpu are installed; they share one module and break each other",
                  "run `make gpu` (it removes the CPU wheel and reinstalls the GPU one), or `pip uninstall -y onnxruntime onnxruntime-gpu` and reinstall one")
    elif not wheels:
        r.problem("onnxruntime is not installed", "run `make venv` (or `pip install -e .`)")


def check_config(r: Report, s) -> None:
    from edge_agent.config import config_files, unknown_env

    r.sections["config_files"] = config_files()
    r.sections["settings"] = s.describe()
    for warning in unknown_env():
        r.problem(warning, "remove the variable or correct its name (EDGE_AGENT_<SETTING>)")


def check_models(r: Report, s) -> Any:
    """Lists the bundles and verifies the configured one; returns it (None when it is unusable)."""
    from edge_agent.config import EMBEDDINGS_DIR
    from edge_agent.engine.bundle import BundleError, list_bundles, load_bundle
    from edge_agent.engine.gpu_graph import cached_record

    r.sections["bundles"] = list_bundles(s.models_dir, skip=(EMBEDDINGS_DIR,))
    try:
        b = load_bundle(s.bundle_path(), verify=True)
    except BundleError as e:
        r.sections["model"] = {"name": s.model, "ok": False, "error": str(e)}
        r.problem(f"model bundle {s.model!r}: {e}", str(e).rsplit(": ", 1)[-1])
        return None
    gpu = cached_record(b)
    r.sections["model"] = {
        "name": b.name, "ok": True, "path": str(b.path), "architecture": b.architecture.get("arch"),
        # what the daemon serves (the engine takes the smaller of the two), and the bundle's own maximum beside it
        "context_length": served_context(b, s), "bundle_context_length": b.context_length, "checked": "every file matches its sha256 in the manifest",
        "gpu_graph": {"built": True, "sha256": gpu["sha256"], "bytes": gpu["bytes"]} if gpu else {"built": False},
    }
    return b


def served_context(bundle, s) -> int:
    """The context the daemon serves: the setting, capped by the bundle's own limit (as OnnxEngine does)."""
    return min(bundle.context_length, s.context_length)


def check_device(r: Report, s, bundle) -> None:
    from edge_agent.engine.engine import gpu_need
    from edge_agent.hardware import CUDA, DeviceError, detect, physical_cores, query_gpus

    threads = s.threads or physical_cores()
    r.sections["threads"] = {"onnxruntime_threads": threads, "physical_cores": physical_cores(), "setting": s.threads}
    try:
        need = gpu_need(bundle, s.max_batch, served_context(bundle, s)) if bundle is not None and s.device != "cpu" else None
        hw = detect(s.device, need)
    except DeviceError as e:
        r.sections["device"] = {"device": None, "error": str(e)}
        r.problem(str(e).split(":", 1)[0] + " (device = cuda)", str(e).split(": ", 1)[-1])
        return
    dev: dict[str, Any] = {"device": hw.device, "reason": hw.reason, "providers": list(hw.providers)}
    if hw.gpu is not None:
        dev["gpu"] = {"name": hw.gpu.name, "free_mib": hw.gpu.free_bytes >> 20, "total_mib": hw.gpu.total_bytes >> 20, "driver": hw.gpu.driver}
    if hw.slots is not None:
        dev["slots"] = hw.slots
    if hw.device == "cuda":
        dev["note"] = "the GPU session is created and tested when the daemon loads; a failure falls back to the CPU (see /ready and the log)"
    elif s.device == "auto" and CUDA not in hw.providers and not isinstance(gpus := query_gpus(), str):
        dev["note"] = f"an NVIDIA GPU is present ({gpus[0].name}) but this onnxruntime is the CPU wheel: `make gpu` installs the GPU one"
    r.sections["device"] = dev


def check_load(r: Report, s, bundle) -> None:
    """Load the engine as the daemon does and report where it landed (a GPU fallback is a problem)."""
    from edge_agent.engine.engine import OnnxEngine
    from edge_agent.hardware import DeviceError

    if bundle is None:
        return
    try:
        engine = OnnxEngine(bundle, threads=s.threads, max_batch=s.max_batch, context_length=s.context_length, device=s.device)
    except DeviceError as e:
        r.sections["load"] = {"ok": False, "error": str(e)}
        return  # the device check above already names the fix
    except Exception as e:
        r.sections["load"] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        r.problem(f"the model does not load ({type(e).__name__}: {e})", "re-import the model (`edge-agent model verify` names the damaged file)")
        return
    r.sections["load"] = {"ok": True, **engine.device_status(), "slots": engine.max_batch}
    if engine.fallback_reason:
        r.problem(f"the GPU was chosen but failed, the CPU serves: {engine.fallback_reason}",
                  "fix the GPU set-up (README, 'GPU'; `scripts/gpu-check` shows the details), or set device = cpu")


def check_index(r: Report, s) -> None:
    """The document index as it is, opened read-only (safe while the daemon runs): a check creates nothing, so a
    missing database or index is reported ("no database yet", "no index yet"), not made."""
    from contextlib import closing

    from edge_agent.config import INDEX_FILE
    from edge_agent.services.documents import DocumentService, default_db_path
    from edge_agent.store import SqliteDatabase

    db_path = default_db_path(s)
    index_file = Path(s.index_dir) / INDEX_FILE
    if not db_path.is_file():
        r.sections["index"] = {"ok": True, "database": False, "index_file": index_file.is_file(),
                               "note": f"no database yet ({db_path}); the daemon or `edge-agent index add` creates it"}
        view = check_config_jobs(r, s, None)
        if view:
            r.sections["jobs"] = view
        return
    db = svc = None
    try:
        db = SqliteDatabase(db_path, read_only=True)
        svc = DocumentService.from_settings(s, db=db, read_only=True)  # closes db when it closes
        with closing(svc):
            stats = svc.stats()
            jobs = check_config_jobs(r, s, svc.store.db)
            if jobs is None:
                jobs = _jobs(svc)
    except Exception as e:
        if svc is None and db is not None:
            db.close()
        r.sections["index"] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        r.problem(f"the document index cannot be opened ({type(e).__name__}: {e})", "run `edge-agent index check`, or `edge-agent index rebuild`")
        return
    last = stats.get("last_check") or {}
    r.sections["index"] = {"ok": True, "database": True, "index_file": index_file.is_file(),
                           **{k: v for k, v in stats.items() if k != "last_check"}, "last_check": last}
    if not index_file.is_file():
        r.sections["index"]["note"] = (f"no index yet ({index_file}); the daemon or the next `edge-agent index` command "
                                       "builds it from the database")
    if last and last.get("ok") is False:
        r.problem("the index check found a mismatch between SQLite and the index", "run `edge-agent index check` (repairs) or `edge-agent index rebuild`")
    if jobs is not None:
        r.sections["jobs"] = jobs


def check_config_jobs(r: Report, s, db) -> list[dict[str, Any]] | None:
    """The jobs as the daemon will run them, the config's [[jobs]] included (as `jobs list` shows them: before the
    daemon's first start doctor said "jobs: none" beside a config full of them), or None without [[jobs]]. A [[jobs]]
    entry the daemon would refuse is a problem (it was only a line in the daemon's log). Without a database (db None)
    the entries are checked against an empty one in a temporary folder, removed after."""
    from edge_agent.cli.jobs import config_error_lines

    if not s.jobs:
        return None
    try:
        from edge_agent.jobs.service import JobsService

        if db is None:
            import tempfile

            from edge_agent.store import SqliteDatabase

            with tempfile.TemporaryDirectory(prefix="edge-agent-doctor-") as tmp:
                empty = SqliteDatabase(Path(tmp) / "check.db")
                try:
                    jobs, errors = JobsService(s, empty).config_jobs_view()
                finally:
                    empty.close()
        else:
            jobs, errors = JobsService(s, db).config_jobs_view()
    except Exception as e:  # the check itself failing is no reason to stop the doctor
        r.problem(f"the config's [[jobs]] could not be checked ({type(e).__name__}: {e})", "run `edge-agent jobs list`")
        return None
    for line in config_error_lines(errors):
        r.problem(line, "fix the entry (`edge-agent jobs list` shows the jobs as loaded); until then the daemon skips it")
    return _job_rows(jobs)


def _jobs(svc) -> list[dict[str, Any]] | None:
    """Job schedules from the database (None when this version has no jobs table)."""
    try:
        from edge_agent.store.jobs import JobStore

        rows = JobStore(svc.store.db).list_jobs()
    except Exception:  # no jobs module or table yet
        return None
    return _job_rows(rows)


def _job_rows(rows) -> list[dict[str, Any]]:
    from edge_agent.jobs.batch_files import is_openai_batch_job

    return [
        {"name": j.name, "kind": j.kind, "schedule": j.schedule_cron, "timezone": j.schedule_tz, "enabled": j.enabled,
         "next_run_at": j.next_run_at, "last_success_at": j.last_success_at, "openai_batch": is_openai_batch_job(j)}
        for j in rows
    ]


def check_listen(r: Report, s) -> None:
    from edge_agent.api.app import is_loopback

    try:
        keys = len(s.accepted_keys())
    except OSError as e:
        keys = 0
        r.problem(f"api_key_file {s.api_key_file} cannot be read ({e.strerror or e})", "fix the path or its permissions")
    loopback = is_loopback(s.host)
    r.sections["listen"] = {"address": f"{s.host}:{s.port}", "loopback": loopback, "auth": keys > 0, "api_keys": keys}
    if not loopback and keys == 0:
        r.problem(f"host {s.host} is not loopback and no API key is set: `serve` refuses to start",
                  "set api_keys or api_key_file, or host = 127.0.0.1")


def check_disk(r: Report, s) -> None:
    out = {}
    for name in ("data_dir", "index_dir", "models_dir"):
        p = Path(getattr(s, name))
        probe = p
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        usage = shutil.disk_usage(probe)
        writable = os.access(probe, os.W_OK)
        out[name] = {"path": str(p), "exists": p.exists(), "free_mib": usage.free >> 20, "writable": writable}
        note = getattr(s, "index_dir_note", lambda: None)() if name == "index_dir" else None
        if note:  # not a problem: the index is found where it was; said until index_dir is set
            out[name]["note"] = note
        if usage.free < LOW_DISK_BYTES:
            r.problem(f"{name} ({p}) has {usage.free >> 20} MiB free", "free disk space (indexing and the GPU graph need room)")
        if name != "models_dir" and not writable:
            r.problem(f"{name} ({p}) is not writable by this user", f"fix its owner or permissions, or set {name}")
    r.sections["disk"] = out


def run_checks(s, index: bool = True, load: bool = False) -> Report:
    r = Report()
    check_versions(r)
    check_config(r, s)
    bundle = check_models(r, s)
    check_device(r, s, bundle)
    if load:
        check_load(r, s, bundle)
    check_listen(r, s)
    check_disk(r, s)
    if index:
        check_index(r, s)
    return r


def _print_settings(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        print(f"  {row['name']:<26} = {row['value']:<28} [{row['source']}]  # {row['help']}")


def _print(r: Report) -> None:
    sec = r.sections
    v = sec["version"]
    wheels = ", ".join(f"{k} {x}" for k, x in v["onnxruntime_wheels"].items()) or "none"
    print(f"edge-agent {v['edge_agent']} (Python {v['python']}, {wheels})")
    for f in sec["config_files"]:
        print(f"config file: {f['path']} ({'read' if f['exists'] else 'not present: defaults apply'}; path from {f['from']})")
    print("settings:")
    _print_settings(sec["settings"])
    m = sec["model"]
    if m["ok"]:
        g = m["gpu_graph"]
        ctx = f"context {m['context_length']}" + (f" of the bundle's {m['bundle_context_length']}" if m["bundle_context_length"] != m["context_length"] else "")
        print(f"model: {m['name']} OK ({m['architecture']}, {ctx}; {m['checked']}); GPU graph {'built' if g['built'] else 'not built'}")
    else:
        print(f"model: {m['name']}: {m['error']}")
    print("bundles: " + (", ".join(f"{b['name']}{'' if b['ok'] else ' (broken)'}" for b in sec["bundles"]) or "none"))
    d = sec["device"]
    print(f"device: {d['device'] or 'none'} ({d.get('reason') or d.get('error')})")
    if d.get("note"):
        print(f"  note: {d['note']}")
    if "load" in sec:
        ld = sec["load"]
        print("load: " + (f"served on {ld['device']}, {ld['slots']} slots" + (f" (GPU failed: {ld['fallback_reason']})" if ld.get("fallback_reason") else "")
                          if ld["ok"] else f"failed: {ld['error']}"))
    t = sec["threads"]
    print(f"threads: {t['onnxruntime_threads']} ({t['physical_cores']} physical cores)")
    if "index" in sec:
        from edge_agent.cli.index import stats_lines

        ix = sec["index"]
        if not ix["ok"]:
            print("index: cannot be opened")
        elif not ix["database"]:
            print(f"index: {ix['note']}")
        else:
            print("\n".join(stats_lines(ix)))
            if ix.get("note"):
                print(f"  note: {ix['note']}")
    if "jobs" in sec:
        shown = [j for j in sec["jobs"] if not j.get("openai_batch")]  # one per POST /v1/batches: counted, as `jobs list` does
        print("jobs: " + ("none" if not shown else ""))
        for j in shown:
            if not j["schedule"]:
                when = "manual"
            elif not j["enabled"]:
                when = f"{j['schedule']} {j['timezone']} (off)"
            else:  # this machine's local time, with its zone, as `jobs list` shows it
                when = f"{j['schedule']} {j['timezone']}, next run {local_time(j['next_run_at'])} ({dt.datetime.now().astimezone():%Z})"
            print(f"  {j['name']} ({j['kind']}): {when}")
        if len(shown) < len(sec["jobs"]):
            print(f"  ({len(sec['jobs']) - len(shown)} OpenAI batch jobs not shown; see `edge-agent jobs list --all`)")
    ls = sec["listen"]
    print(f"listen: {ls['address']} ({'loopback' if ls['loopback'] else 'network'}; auth {'on, ' + str(ls['api_keys']) + ' keys' if ls['auth'] else 'off'})")
    for name, dk in sec["disk"].items():
        print(f"disk {name}: {dk['path']} {dk['free_mib']} MiB free{'' if dk['writable'] else ' (not writable)'}")
        if dk.get("note"):
            print(f"  note: {dk['note']}")
    if r.problems:
        print(f"\n{len(r.problems)} problem(s):")
        for p in r.problems:
            print(f"  - {p['problem']}\n    fix: {p['fix']}")
    else:
        print("\nno problems found")


def cmd_doctor(args: argparse.Namespace) -> int:
    s = settings_from(args)
    r = run_checks(s, index=not getattr(args, "no_index", False), load=getattr(args, "load", False))
    if getattr(args, "json", False):
        print(json.dumps({**r.sections, "problems": r.problems}, indent=2, default=str))
    else:
        _print(r)
    return 1 if r.problems else 0


def cmd_config_show(args: argparse.Namespace) -> int:
    from edge_agent.config import config_files

    s = settings_from(args)
    if args.json:
        print(json.dumps({"config_files": config_files(), "settings": s.describe()}, indent=2, default=str))
        return 0
    for f in config_files():
        print(f"# config file: {f['path']} ({'read' if f['exists'] else 'not present'})")
    _print_settings(s.describe())
    return 0
