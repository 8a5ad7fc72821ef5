"""Weights kept out of resident memory: onnxruntime's prepacked CPU weights in a file, and weight pages given back.

onnxruntime reads a graph's external weights through private file mappings and copies each into its
own prepacked layout in anonymous memory, so every weight is resident whether or not a step reads it
(Gemma 3 270M with both output heads: the int8 head's 161 MB even when only one-row steps run, which
take the int4 head). An optimised copy of the graph whose prepacked weights are saved in its own
data file (`session.save_external_prepacked_constant_initializers`) is loaded by mapping that file:
the weights become page-cache pages, resident only while mapped and touched. ensure() makes that copy
once (in a child process, so the daemon's peak memory never holds two sessions) per graph,
onnxruntime version and CPU (the packed layouts depend on the instruction set), next to the bundle
(cache_folder); it takes about twice the bundle's model.onnx.data on disk (the original weights and their packed form).

While a session loads, onnxruntime touches every page of those files; PageOut gives them back as it
goes (MADV_PAGEOUT, which never discards data: a page read again comes back from the file), and
drop_clean_pages gives back, once the session is made, the pages of those mappings that no step has
read yet (MADV_DONTNEED on mappings never written to: they read the file's bytes again). As with
llama.cpp's mapped weights, clean weight pages are the kernel's to reclaim under memory pressure.
Gemma 3 270M, the daemon (scripts/bench_daemon_memory.py, 512 + 128 tokens a stream, load 6-9):
one stream: peak RSS 698 -> 516 MB (idle 637 -> 238); sixteen: 1158 -> 1140 (every weight read);
sixteen with int4_head_max_rows = 16 (the int8 head never read): 940.
A dual-head graph's two output heads are given back one at a time (branch_ranges, FilePages): before a step takes
one head the runner gives the other's pages back (runner.HEAD_DROP_EVERY; the int4 head's 120 MB under sixteen rows).
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

GRAPH = "model.onnx"
DATA = "model.data"
MADV_DONTNEED = 4
MADV_PAGEOUT = 21
PAGEOUT_PERIOD_S = 0.02
BUILD_TIMEOUT_S = 600
FREE_MARGIN = 256 << 20  # disk left free after the copy


def _libc():
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


def _cpu_flags() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("flags"):
                return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return ""


def cache_key(model_file: Path) -> str:
    """What the saved layout depends on: the graph and its data files (size, mtime), onnxruntime's version, the CPU's flags."""
    import onnxruntime as ort

    h = hashlib.sha256(f"{ort.__version__}\n{_cpu_flags()}\n".encode())
    folder = model_file.parent
    for p in sorted([model_file] + [q for q in folder.iterdir() if q.name.startswith(model_file.name) and q != model_file]):
        st = p.stat()
        h.update(f"{p.name} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def save_prepacked(model_file: Path, out_dir: Path) -> None:
    """Write the optimised graph of model_file with its prepacked weights into out_dir (GRAPH + DATA).

    Raises onnxruntime's errors.
    """
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # as runner.make_session
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    so.optimized_model_filepath = str(out_dir / GRAPH)
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", DATA)
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    so.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
    ort.InferenceSession(str(model_file), so, providers=["CPUExecutionProvider"])


def ensure(model_file: Path, cache_dir: Path) -> Path | None:
    """The prepacked copy of model_file under cache_dir (made on first use); None when it cannot be made.

    Copies made for other keys of the same graph folder are removed. Never raises: the caller loads
    model_file itself instead (the reason is logged).
    """
    try:
        key = cache_key(model_file)
        prefix = hashlib.sha256(str(model_file.parent.resolve()).encode()).hexdigest()[:8]
        target = cache_dir / f"{prefix}-{key}"
        if (target / GRAPH).is_file() and (target / DATA).is_file():
            return target / GRAPH
        cache_dir.mkdir(parents=True, exist_ok=True)
        need = 2 * sum(p.stat().st_size for p in model_file.parent.iterdir() if p.name.startswith(model_file.name)) + FREE_MARGIN
        if shutil.disk_usage(cache_dir).free < need:  # the copy holds the original weights and their packed form
            raise OSError(f"{need >> 20} MB of free disk needed")
        tmp = cache_dir / f".{target.name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            done = subprocess.run([sys.executable, "-m", "edge_agent.engine.prepacked", str(model_file), str(tmp)],
                                  capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            if done.returncode != 0 or not (tmp / GRAPH).is_file():
                raise RuntimeError((done.stderr.strip().splitlines() or ["no output"])[-1][:300])
            for old in cache_dir.glob(f"{prefix}-*"):
                if old != target:
                    shutil.rmtree(old, ignore_errors=True)
            try:
                os.replace(tmp, target)
            except OSError:
                if not (target / DATA).is_file():  # not a copy another process finished first
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        log.info("saved onnxruntime's prepacked weights of %s in %s", model_file, target)
        return target / GRAPH
    except Exception as e:  # a read-only or full disk, a child that failed: the original graph still serves
        log.warning("could not save prepacked weights under %s (%s: %s); loading %s as it is", cache_dir, type(e).__name__, e, model_file)
        return None


def cache_folder(bundle_path: Path) -> Path:
    """Where ensure() keeps the copies of a bundle's graph: bundle_path/.prepacked when the bundle folder is writable,
    else $XDG_CACHE_HOME/edge-agent/prepacked (one copy per graph, shared by every data_dir and command)."""
    if os.access(bundle_path, os.W_OK):
        return bundle_path / ".prepacked"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "edge-agent" / "prepacked"


def weight_files(model_file: Path) -> set[str]:
    """The real paths of model_file's external data files (those in its folder whose names end in .data)."""
    return {os.path.realpath(p) for p in model_file.parent.iterdir() if p.name.endswith(".data")}


def _mappings(files: set[str], smaps: bool = True) -> list[tuple[int, int, int, str, int]]:
    """(start, end, anonymous kB, real path, file offset) of this process's mappings of files (from /proc/self/smaps;
    maps, anonymous 0, when not smaps)."""
    out: list[list] = []
    current = False
    try:
        with open("/proc/self/smaps" if smaps else "/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                if not parts[0].endswith(":") and "-" in parts[0]:
                    name = " ".join(parts[5:]) if len(parts) > 5 else ""
                    current = name in files
                    if current:
                        a, b = (int(x, 16) for x in parts[0].split("-"))
                        out.append([a, b, 0, name, int(parts[2], 16)])
                elif current and parts[0] == "Anonymous:":
                    out[-1][2] = int(parts[1])
    except OSError:
        return []
    return [tuple(m) for m in out]


def drop_clean_pages(files: set[str]) -> int:
    """Give back the resident pages of this process's mappings of files that were never written to; returns the mappings dropped.

    Their pages read the file again when touched (a minor fault from the page cache). A mapping holding
    written (copy-on-write) pages is left alone, as is everything on a system without /proc or madvise.
    Call it while no step runs.
    """
    try:
        libc = _libc()
    except OSError:
        return 0
    n = 0
    for start, end, anon, _, _ in _mappings(files):
        if anon == 0 and libc.madvise(start, end - start, MADV_DONTNEED) == 0:
            n += 1
    return n


def branch_ranges(graph: Path, select: str) -> dict[bool, list[tuple[str, int, int]]] | None:
    """The weights that only one branch of graph's If node on input `select` reads: {True: the then branch's,
    False: the else branch's}, each as (real path of the data file, offset, length) ranges of the initializers'
    external data, the saved prepacked forms included. None when graph has no such node.

    Raises onnx's errors for an unreadable graph.
    """
    import onnx

    model = onnx.load(str(graph), load_external_data=False)
    inits = {t.name: t for t in model.graph.initializer}

    def reads(nodes) -> set[str]:
        out: set[str] = set()
        for node in nodes:
            out.update(i for i in node.input if i in inits)
            for attr in node.attribute:
                out |= reads(attr.g.node) if attr.HasField("g") else set()
        return out

    node = next((n for n in model.graph.node if n.op_type == "If" and list(n.input[:1]) == [select]), None)
    if node is None:
        return None
    branches = {a.name: reads(a.g.node) for a in node.attribute if a.name in ("then_branch", "else_branch")}
    elsewhere = reads([n for n in model.graph.node if n is not node])
    out: dict[bool, list[tuple[str, int, int]]] = {}
    for flag, name, other in ((True, "then_branch", "else_branch"), (False, "else_branch", "then_branch")):
        ranges = []
        for init in sorted(branches.get(name, set()) - branches.get(other, set()) - elsewhere):
            ext = {e.key: e.value for e in inits[init].external_data}
            if "location" not in ext:
                continue
            path = os.path.realpath(graph.parent / ext["location"])
            ranges.append((path, int(ext.get("offset", 0)), int(ext.get("length", 0))))
            for key, value in ext.items():  # prepacked_N: "<kernel>|offset;length;..."
                if key.startswith("prepacked_") and "|" in value:
                    offset, length = value.split("|", 1)[1].split(";")[:2]
                    ranges.append((path, int(offset), int(length)))
        out[flag] = ranges
    return out


class FilePages:
    """This process's pages of some byte ranges of mapped weight files, given back on drop() (they read the file again
    when touched: a minor fault from the page cache). Mappings holding written (copy-on-write) pages are left out."""

    def __init__(self, ranges: list[tuple[str, int, int]]):
        self.spans: list[tuple[int, int]] = []  # (address, length), whole pages
        page = os.sysconf("SC_PAGE_SIZE")
        for start, end, anon, path, offset in _mappings({p for p, _, _ in ranges}) if ranges else ():
            if anon:
                continue
            for p, lo, length in ranges:
                if p != path:
                    continue
                a = max(start, start + lo - offset)
                b = min(end, start + lo + length - offset)
                a, b = -(-a // page) * page, b // page * page  # pages another weight may share are kept
                if a < b:
                    self.spans.append((a, b - a))
        self.nbytes = sum(n for _, n in self.spans)

    def drop(self) -> None:
        """Give the pages back (a no-op without madvise)."""
        try:
            libc = _libc()
        except OSError:
            return
        for addr, n in self.spans:
            libc.madvise(addr, n, MADV_DONTNEED)


def load_session(model_file: Path, cache_dir: Path | None, open_session: Callable[[Path], Any]) -> tuple[Any, Path]:
    """open_session(path) on the prepacked copy of model_file under cache_dir (made on first use), or on model_file
    itself without a cache dir, without a copy, or when the copy does not load (it is then removed); the weight
    pages are paged out while it loads and the unread ones given back after. Returns the session and the graph it loaded.

    Raises what open_session raises for model_file itself.
    """
    packed = ensure(model_file, cache_dir) if cache_dir is not None else None
    if packed is not None:
        try:
            return _open(packed, open_session), packed
        except Exception as e:  # a damaged copy: the bundle's own graph still serves, the next start makes it again
            log.warning("the saved prepacked weights in %s did not load (%s: %s); loading %s and removing them",
                        packed.parent, type(e).__name__, str(e)[:300], model_file)
            shutil.rmtree(packed.parent, ignore_errors=True)
    return _open(model_file, open_session), model_file


def _open(path: Path, open_session: Callable[[Path], Any]) -> Any:
    files = weight_files(path)
    with PageOut(files):  # onnxruntime touches every weight page while it loads
        session = open_session(path)
    drop_clean_pages(files)
    return session


class PageOut:
    """While entered, pages out (MADV_PAGEOUT, never discarding data) this process's mappings of files every PAGEOUT_PERIOD_S."""

    def __init__(self, files: set[str]):
        self.files = files
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="weights-pageout", daemon=True)

    def _loop(self) -> None:
        try:
            libc = _libc()
        except OSError:
            return
        while not self._stop.wait(PAGEOUT_PERIOD_S):
            for start, end, *_ in _mappings(self.files, smaps=False):
                libc.madvise(start, end - start, MADV_PAGEOUT)  # EINVAL on kernels before 5.4: nothing happens

    def __enter__(self) -> "PageOut":
        if self.files:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


if __name__ == "__main__":  # the child process of ensure()
    save_prepacked(Path(sys.argv[1]), Path(sys.argv[2]))
