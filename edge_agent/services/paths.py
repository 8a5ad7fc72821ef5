"""Path safety for documents named by path: they must resolve under a configured ingest root."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath, PureWindowsPath
from collections.abc import Callable, Iterator
from typing import BinaryIO, Sequence


class PathNotAllowedError(ValueError):
    """A path was refused (outside the ingest roots, a URL, `..`, a symlink escape); the message says why."""


class NotRegularFileError(OSError):
    """A path names a named pipe (FIFO), socket or device, not a file; the message says so (without the path)."""


NOT_REGULAR = "not a regular file (a named pipe, socket or device): only files are read"


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """Open a file for reading in binary mode, refusing anything but a regular file (symlinks followed).

    A named pipe in a watched folder blocked its reader forever (open() waits for a writer), and with it a
    nightly reindex that no cancel could stop; a device (/dev/zero behind a symlink) never ends. The file is
    opened without blocking and checked on its descriptor, so it cannot be swapped between a check and the read.
    Raises NotRegularFileError, or the OSError of the open.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ENXIO:  # a socket, or a device without its driver
            raise NotRegularFileError(NOT_REGULAR) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(NOT_REGULAR)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def resolve_confined(raw: str | os.PathLike, roots: Sequence[Path]) -> Path:
    """The real path of `raw` if it lies under one of `roots` (after following every symlink).

    Relative paths are taken relative to each root in turn. Raises PathNotAllowedError
    (a URL, `..`, NUL, outside every root, no roots configured) or FileNotFoundError.
    """
    text = os.fspath(raw)
    if not isinstance(text, str) or not text.strip():
        raise PathNotAllowedError("path is empty")
    if "\x00" in text:
        raise PathNotAllowedError("path contains a NUL byte")
    if "://" in text or text.lower().startswith("file:"):
        raise PathNotAllowedError("URLs are not accepted: give a plain file path under an ingest root")
    if ".." in PurePosixPath(text).parts or ".." in PureWindowsPath(text).parts:
        raise PathNotAllowedError("'..' is not allowed in document paths")
    if not roots:
        raise PathNotAllowedError(
            "no ingest_roots are configured: set EDGE_AGENT_INGEST_ROOTS (or ingest_roots in the config) or upload the file"
        )
    real_roots = [Path(r).expanduser().resolve() for r in roots]
    path = Path(text).expanduser()
    if path.is_absolute():
        lexical_roots = real_roots + [Path(os.path.abspath(Path(r).expanduser())) for r in roots]
        if not any(path == r or path.is_relative_to(r) for r in lexical_roots):
            # refused before looking, so callers learn nothing about files outside the roots
            raise PathNotAllowedError("path is outside the configured ingest roots")
    candidates = [path] if path.is_absolute() else [root / path for root in real_roots]
    found = None
    for cand in candidates:
        if cand.exists() or cand.is_symlink():
            found = cand
            break
    if found is None:
        raise FileNotFoundError(f"no such file under the ingest roots: {text}")
    real = found.resolve(strict=True)  # follows symlinks; raises on a dangling one
    for root in real_roots:
        if real == root or real.is_relative_to(root):
            return real
    raise PathNotAllowedError("path is outside the configured ingest roots (symlinks are followed before checking)")


def prefix_under_roots(raw: str, roots: Sequence[Path]) -> str:
    """A path prefix (a folder or file documents are stored under) as stored paths are: an absolute one as given
    (normalised: a document added from the CLI may lie outside the roots), a relative one, as responses show paths,
    under the first ingest root that has it (symlinks followed), else under the first root.

    Raises PathNotAllowedError for a URL, NUL, `..`, a relative prefix without ingest roots, or one whose symlinks
    lead outside them.
    """
    if "\x00" in raw:
        raise PathNotAllowedError("path contains a NUL byte")
    if os.path.isabs(raw):
        return os.path.normpath(raw)
    if "://" in raw or raw.lower().startswith("file:"):
        raise PathNotAllowedError("URLs are not accepted: give a folder under an ingest root")
    if ".." in PurePosixPath(raw).parts or ".." in PureWindowsPath(raw).parts:
        raise PathNotAllowedError("'..' is not allowed in document paths")
    if not roots:
        raise PathNotAllowedError("a relative path is taken under the ingest roots, and none are configured: "
                                  "give an absolute path, or set EDGE_AGENT_INGEST_ROOTS")
    try:
        return str(resolve_confined(raw, roots))
    except FileNotFoundError:  # gone from disk, its documents maybe not: the path as it was under the first root
        return os.path.normpath(Path(roots[0]).expanduser().resolve() / raw)


def walk_files(path: Path, roots: Sequence[Path] | None = None) -> list[Path]:
    """Files under a folder, recursively and sorted (hidden ones skipped); a file gives itself.

    With `roots`, each file is checked again (a symlink inside may point outside): refused ones
    are returned too, so callers can report them; the check happens when they are added.
    """
    if path.is_file():
        return [path]
    return [Path(dirpath) / name for dirpath, names in walk_folders(str(path)) for name in names]


def walk_folders(top: str, tick: Callable[[], None] | None = None) -> Iterator[tuple[str, list[str]]]:
    """(folder, its file names sorted) under top, depth first in name order: hidden names skipped, a symlinked folder
    neither descended nor listed as a file, a folder that cannot be read listing nothing (as os.walk). tick() is called
    for each entry read (a caller watching a slow share sees progress, not a share that does not answer)."""
    stack = [top]
    while stack:
        current = stack.pop()
        dirs, files = [], []
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    if tick is not None:
                        tick()
                    if entry.name.startswith("."):
                        continue
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    if is_dir:
                        if not entry.is_symlink():
                            dirs.append(entry.name)
                    else:
                        files.append(entry.name)
        except OSError:
            continue
        yield current, sorted(files)
        stack.extend(os.path.join(current, d) for d in sorted(dirs, reverse=True))


def shown_path(path: str | os.PathLike | None, roots: Sequence[Path]) -> str | None:
    """A server path as a client may see it: relative to the first ingest root it lies under (POSIX
    separators; "." for a root itself), else only its file name. No absolute server path leaves."""
    if path is None:
        return None
    p = Path(os.fspath(path))
    for root in roots:
        for r in {Path(root).expanduser().resolve(), Path(os.path.abspath(Path(root).expanduser()))}:
            if p == r or p.is_relative_to(r):
                return p.relative_to(r).as_posix()
    return p.name
