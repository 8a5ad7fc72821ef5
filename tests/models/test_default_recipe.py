"""`edge-agent setup` (make run) rebuilds a default bundle that an older builder made, with its own options."""
import json

from edge_agent.models import importer
from edge_agent.models.importer import DEFAULT_BUILDER, DEFAULT_PACKAGE, outdated_default


def _manifest(**source) -> dict:
    return {"source": {"kind": "gguf", **source}}


def test_only_an_embedded_default_from_an_older_builder_is_outdated():
    assert outdated_default(_manifest(package=DEFAULT_PACKAGE)) == {}  # before recipes: today's defaults
    old = {"builder": DEFAULT_BUILDER - 1, "lm_head": "int8", "attn_out": "int8", "smooth_alpha": None}
    assert outdated_default(_manifest(package=DEFAULT_PACKAGE, recipe=old)) == {"lm_head": "int8", "attn_out": "int8", "smooth_alpha": None}
    assert outdated_default(_manifest(package=DEFAULT_PACKAGE, recipe={**old, "builder": DEFAULT_BUILDER})) is None
    assert outdated_default(_manifest(package=DEFAULT_PACKAGE, recipe={"builder": "1"})) == {}  # garbage: rebuild
    # builder 2 recorded the fp32 cache that was its default: the rebuild takes today's (int8); an int8 cache was chosen
    two = {"builder": 2, "lm_head": "dual", "kv_cache": "fp32"}
    assert DEFAULT_BUILDER == 3 and outdated_default(_manifest(package=DEFAULT_PACKAGE, recipe=two)) == {"lm_head": "dual"}
    assert outdated_default(_manifest(package=DEFAULT_PACKAGE, recipe={**two, "kv_cache": "int4"})) == {"lm_head": "dual", "kv_cache": "int4"}
    assert outdated_default(_manifest(name="mine.gguf")) is None  # a model the user imported is never touched
    assert outdated_default({"source": "x"}) is None


def _default_from_tiny(checkpoints, models_dir, recipe=None):
    source_meta = {"package": DEFAULT_PACKAGE, **({"recipe": recipe} if recipe else {})}
    return importer.import_model(checkpoints["llama"], "default", models_dir, echo=lambda s: None, source_meta=source_meta, force=True)


def test_setup_rebuilds_an_outdated_default_with_the_options_it_was_built_with(checkpoints, tmp_path, monkeypatch, capsys):
    from edge_agent.cli import main

    models_dir = tmp_path / "models"
    _default_from_tiny(checkpoints, models_dir, {"builder": 0, "lm_head": "int8", "attn_out": "int8", "smooth_alpha": None})
    calls = []

    def install_default(models_dir, force=False, **options):  # the real import, of the tiny checkpoint instead of Gemma
        calls.append((force, options))
        return _default_from_tiny(checkpoints, models_dir, {"builder": DEFAULT_BUILDER, **options})

    monkeypatch.setattr(importer, "install_default", install_default)
    for key, value in dict(CONFIG="/nonexistent/edge-agent-test.toml", MODELS_DIR=models_dir, MODEL="default", DATA_DIR=tmp_path / "data",
                           INDEX_DIR=tmp_path / "index", SERVE_DOCUMENTS="false").items():
        monkeypatch.setenv(f"EDGE_AGENT_{key}", str(value))

    assert main(["setup", "--check"]) == 1
    assert "built by an older builder" in capsys.readouterr().out and not calls
    assert main(["setup", "--no-build-model"]) == 0
    assert "install-default --force" in capsys.readouterr().out and not calls

    assert main(["setup"]) == 0
    out = capsys.readouterr().out
    assert "rebuilding the default model bundle" in out and "model: default OK" in out
    assert calls == [(True, {"lm_head": "int8", "attn_out": "int8", "smooth_alpha": None})]
    recipe = json.loads((models_dir / "default" / "manifest.json").read_text())["source"]["recipe"]
    assert recipe["builder"] == DEFAULT_BUILDER
    assert main(["setup", "--check"]) == 0 and len(calls) == 1  # up to date: nothing left to do
