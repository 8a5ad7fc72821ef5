"""Config errors are one clear line naming the key and where it came from; every setting knows its source."""
from __future__ import annotations

import pytest

from edge_agent.cli import main
from edge_agent.config import ConfigError, Settings, load_settings, unknown_env


@pytest.fixture
def config_file(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(path))
    for k in list(__import__("os").environ):
        if k.startswith("EDGE_AGENT_") and k not in ("EDGE_AGENT_CONFIG", "EDGE_AGENT_TEST_BUNDLE"):
            monkeypatch.delenv(k)
    return path


def test_unknown_key_in_file_names_key_and_file(config_file):
    config_file.write_text('host = "127.0.0.1"\nthraeds = 2\n')
    with pytest.raises(ConfigError) as e:
        load_settings()
    msg = str(e.value)
    assert "'thraeds'" in msg and str(config_file) in msg and "did you mean 'threads'" in msg


def test_bad_value_names_key_and_source(config_file, monkeypatch):
    config_file.write_text("port = 99999\n")
    with pytest.raises(ConfigError, match=r"'port' from file .*config.toml.*65535.*99999"):
        load_settings()
    config_file.write_text("")
    monkeypatch.setenv("EDGE_AGENT_DEVICE", "gpu")
    with pytest.raises(ConfigError, match=r"'device' from environment EDGE_AGENT_DEVICE.*'auto', 'cpu' or 'cuda'"):
        load_settings()
    monkeypatch.delenv("EDGE_AGENT_DEVICE")
    with pytest.raises(ConfigError, match=r"'threads' from flag"):
        load_settings(threads=-1)


def test_unparsable_file(config_file):
    config_file.write_text("port = [\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings()


def test_a_file_not_utf8_or_a_folder_stops_the_daemon_with_one_line(config_file, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config_file.write_bytes(b"port = 9000\n# caf\xe9 (saved as Latin-1)\n")  # was a UnicodeDecodeError traceback
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {config_file} is not UTF-8") and "Traceback" not in err
    config_file.unlink()
    config_file.mkdir()  # was silently read as "no file": the daemon started on defaults
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {config_file} is a folder") and "Traceback" not in err


@pytest.mark.parametrize("argv", [["config", "show"], ["doctor", "--no-index"], ["serve"], ["index", "stats"], ["generate", "hi"], ["model", "list"]])
def test_every_command_reports_a_bad_file_without_traceback(config_file, argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config_file.write_text("max_batch = 'many'\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid setting 'max_batch'") and "Traceback" not in err


def test_unknown_env_is_warned_not_refused(config_file, monkeypatch):
    monkeypatch.setenv("EDGE_AGENT_THRAEDS", "3")
    assert load_settings().threads == 0
    assert unknown_env() == ["EDGE_AGENT_THRAEDS is not a setting (did you mean 'threads'?)"]


def test_sources_follow_precedence(config_file, monkeypatch):
    config_file.write_text("port = 9000\nthreads = 3\nmax_batch = 4\n")
    monkeypatch.setenv("EDGE_AGENT_THREADS", "2")
    s = load_settings(max_batch=8)
    assert (s.port, s.threads, s.max_batch) == (9000, 2, 8)
    assert s.source_of("port") == f"file {config_file}"
    assert s.source_of("threads") == "environment EDGE_AGENT_THREADS"
    assert s.source_of("max_batch") == "flag"
    assert s.source_of("host") == "default"
    rows = {r["name"]: r for r in s.describe()}
    assert rows["port"]["source"].startswith("file") and rows["api_keys"]["value"] == "<0 keys>"


def test_config_show_lists_values_and_sources(config_file, capsys):
    config_file.write_text("port = 9001\n")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("port "))
    assert "9001" in line and f"[file {config_file}]" in line
    assert Settings().port == 9001


def test_an_api_key_file_not_utf8_is_one_line_and_a_bom_is_not_part_of_the_key(config_file, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    keys = tmp_path / "keys"
    keys.write_bytes(b"\xff\xfesk-one\n")  # UTF-16: was a UnicodeDecodeError traceback from serve and doctor
    monkeypatch.setenv("EDGE_AGENT_API_KEY_FILE", str(keys))
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: api_key_file {keys} is not UTF-8") and "Traceback" not in err
    keys.write_bytes(b"\xef\xbb\xbfsk-one\n# comment\nsk-two\n")  # Notepad's UTF-8 with a BOM
    assert load_settings().accepted_keys() == ["sk-one", "sk-two"]


def test_a_config_file_saved_with_a_bom_is_read(config_file):
    config_file.write_bytes(b"\xef\xbb\xbfport = 9001\r\nthreads = 1\r\n")  # Notepad: BOM and CRLF (was 'Invalid statement' at 1:1)
    s = load_settings()
    assert (s.port, s.threads) == (9001, 1) and s.source_of("port") == f"file {config_file}"


def test_a_list_setting_from_the_environment_takes_json_or_commas_and_a_bad_one_is_one_line(config_file, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # the form the ingest-roots error tells a user to set: was a pydantic_settings SettingsError traceback, exit 1
    monkeypatch.setenv("EDGE_AGENT_INGEST_ROOTS", "/srv/shared")
    assert [str(p) for p in load_settings().ingest_roots] == ["/srv/shared"]
    monkeypatch.setenv("EDGE_AGENT_INGEST_ROOTS", "/srv/a, /srv/b")
    assert [str(p) for p in load_settings().ingest_roots] == ["/srv/a", "/srv/b"]
    monkeypatch.setenv("EDGE_AGENT_INGEST_ROOTS", '["/srv/a,b"]')  # JSON as before, for a path that holds a comma
    assert [str(p) for p in load_settings().ingest_roots] == ["/srv/a,b"]
    monkeypatch.setenv("EDGE_AGENT_API_KEYS", "sk-one")
    assert load_settings().accepted_keys() == ["sk-one"]
    monkeypatch.setenv("EDGE_AGENT_INGEST_ROOTS", '["/srv/a"')  # broken JSON stays an error, not two odd paths
    assert main(["config", "show"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid setting 'ingest_roots' from environment EDGE_AGENT_INGEST_ROOTS") and "JSON" in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert main(["index", "stats"]) == 2  # built its Settings() directly: the same traceback
    assert capsys.readouterr().err.startswith("error: invalid setting 'ingest_roots'")
    monkeypatch.delenv("EDGE_AGENT_INGEST_ROOTS")
    monkeypatch.setenv("EDGE_AGENT_RAG_ABSENT_ANSWERS", "Dat staat er niet in.")  # a table: JSON only
    with pytest.raises(ConfigError, match=r"'rag_absent_answers' from environment EDGE_AGENT_RAG_ABSENT_ANSWERS: .*JSON"):
        load_settings()


def test_cluster_status_with_an_unreadable_key_file_is_one_line(config_file, capsys, tmp_path, monkeypatch):
    """An operator not in the service's group runs `edge-agent cluster status` beside /etc/edge-agent/api-keys
    (0640 root:edge-agent): that was a PermissionError traceback; a folder stands in for the unreadable file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EDGE_AGENT_API_KEY_FILE", str(tmp_path))
    assert main(["cluster", "status"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot read api_key_file {tmp_path}") and "Traceback" not in err, err


def test_index_dir_follows_data_dir_unless_set(config_file, monkeypatch, tmp_path):
    """EDGE_AGENT_DATA_DIR=/x put the FAISS files in ./index of the working directory; index_dir now defaults to
    data_dir/index wherever data_dir is set (flag, environment, file, assignment) and stays as set when it is set."""
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert (s.data_dir, s.index_dir, s.source_of("index_dir")) == (Path("var"), Path("index"), "default")  # `make run`'s layout
    monkeypatch.setenv("EDGE_AGENT_DATA_DIR", str(tmp_path / "x"))
    s = load_settings()
    assert s.index_dir == tmp_path / "x" / "index" and s.source_of("index_dir") == "default: under data_dir"
    assert s.index_dir_note() is None
    monkeypatch.setenv("EDGE_AGENT_INDEX_DIR", str(tmp_path / "idx"))
    assert load_settings().index_dir == tmp_path / "idx"
    monkeypatch.delenv("EDGE_AGENT_DATA_DIR")
    monkeypatch.delenv("EDGE_AGENT_INDEX_DIR")
    config_file.write_text(f'data_dir = "{tmp_path / "y"}"\n')  # install.sh writes both; a file with only data_dir
    assert load_settings().index_dir == tmp_path / "y" / "index"
    config_file.write_text(f'data_dir = "{tmp_path / "y"}"\nindex_dir = "{tmp_path / "idx"}"\n')
    assert load_settings().index_dir == tmp_path / "idx"
    config_file.write_text("")
    s = load_settings(data_dir=tmp_path / "z")  # a flag
    assert s.index_dir == tmp_path / "z" / "index"
    s.data_dir = tmp_path / "w"
    assert s.index_dir == tmp_path / "w" / "index"
    s.index_dir = tmp_path / "mine"
    s.data_dir = tmp_path / "v"
    assert s.index_dir == tmp_path / "mine"
