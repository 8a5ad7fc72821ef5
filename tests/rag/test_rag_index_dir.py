"""index_dir's default follows data_dir; an index left in the old default (./index of the working directory, where a
daemon with EDGE_AGENT_DATA_DIR kept it) is kept in use and said, unless the default data_dir there owns it.

Real DocumentService, SQLite and FAISS in tmp_path (the working directory), the real embedding model."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from edge_agent.config import Settings
from edge_agent.services.documents import DocumentService


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A working directory as a checkout's, no config file, no EDGE_AGENT_* variables."""
    import os

    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(tmp_path / "absent.toml"))
    for k in list(os.environ):
        if k.startswith("EDGE_AGENT_") and k not in ("EDGE_AGENT_CONFIG", "EDGE_AGENT_TEST_BUNDLE", "EDGE_AGENT_TEST_EMBED_CACHE"):
            monkeypatch.delenv(k)
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / ".gitkeep").touch()  # a checkout's ./index: committed, empty
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _add(settings: Settings, embedder, title: str, text: str) -> None:
    svc = DocumentService.from_settings(settings, embedder=embedder)
    try:
        svc.add_text(title, text)
    finally:
        svc.close()


def _found(settings: Settings, embedder, query: str) -> tuple[str, list[str]]:
    svc = DocumentService.from_settings(settings, embedder=embedder)
    try:
        return svc.retrieve(query, k=1)[0].title, svc.last_check.problems
    finally:
        svc.close()


def test_an_index_in_the_old_default_is_kept_and_said(checkout, embedder, caplog):
    x = checkout / "x"
    assert Settings(data_dir=x).index_dir == x / "index"  # the checkout's empty ./index is no index: the new default
    _add(Settings(data_dir=x, index_dir=Path("index")), embedder, "Archive", "The Zeeland archive opens at nine.")  # as before
    s = Settings(data_dir=x)
    assert s.index_dir == Path("index") and s.source_of("index_dir").startswith("default: the old default ./index, kept")
    note = s.index_dir_note()
    assert str(checkout / "index") in note and str(x / "index") in note and "set index_dir" in note
    caplog.set_level(logging.WARNING, logger="edge_agent")
    title, problems = _found(s, embedder, "When does the archive open?")
    assert title == "Archive" and problems == []  # the index it had: nothing rebuilt
    assert note in caplog.text

    from edge_agent.cli.doctor import Report, check_disk

    r = Report()
    check_disk(r, s)
    assert r.sections["disk"]["index_dir"]["note"] == note and not r.problems

    # moved as the note says: the new default is used
    (x / "index").mkdir()
    for f in (checkout / "index").iterdir():
        if f.name != ".gitkeep":
            f.rename(x / "index" / f.name)
    s = Settings(data_dir=x)
    assert s.index_dir == x / "index" and s.index_dir_note() is None
    assert _found(s, embedder, "When does the archive open?") == ("Archive", [])


def test_the_old_folder_of_the_default_data_dir_stays_its_own(checkout, embedder):
    """`make run` (data_dir var, index ./index) and a second data_dir shared ./index before (each start repaired it to
    its own database); now the second gets data_dir/index, rebuilt from its database, and var keeps ./index."""
    x = checkout / "x"
    _add(Settings(), embedder, "Canteen", "The canteen serves tomato soup on Mondays.")  # make run's: var + ./index
    _add(Settings(data_dir=x, index_dir=Path("index")), embedder, "Archive", "The Zeeland archive opens at nine.")  # shared, as before
    s = Settings(data_dir=x)
    assert s.index_dir == x / "index" and s.index_dir_note() is None  # ./var has a database: ./index is not x's to keep
    title, problems = _found(s, embedder, "When does the archive open?")
    assert title == "Archive" and problems  # rebuilt from x's database, and said
    assert Settings(data_dir="var").index_dir == Path("index")  # var named explicitly keeps its ./index
    assert _found(Settings(data_dir="var"), embedder, "What does the canteen serve?")[0] == "Canteen"
