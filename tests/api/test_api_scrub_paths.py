"""No server path leaves in an error text (api.errors.scrub_paths), and nothing that is not a path is cut: a failed
summarize item's error quoting "https://www.rijksoppen.nl/index_14897" came out as "https:index_14897"."""
from __future__ import annotations

from edge_agent.api.errors import scrub_paths


def test_absolute_paths_are_scrubbed_urls_and_mail_addresses_kept(tmp_path):
    root = tmp_path / "docs"
    (root / "beleid").mkdir(parents=True)
    inside = root / "beleid" / "nota.pdf"
    inside.write_bytes(b"%PDF-1.4")
    outside = tmp_path / "elders" / "geheim.txt"
    url = "https://www.rijksoppen.nl/index_14897"
    message = (f"cannot read {inside}: it links to {url} (see http://intranet.local/a/b?x=1#y), "
               f"mail beheer@rijksoppen.nl; also '{outside}' and /etc/edge-agent/config.toml")
    out = scrub_paths(message, [root])
    assert str(tmp_path) not in out and "/etc/" not in out, out
    assert out == ("cannot read beleid/nota.pdf: it links to https://www.rijksoppen.nl/index_14897 (see "
                   "http://intranet.local/a/b?x=1#y), mail beheer@rijksoppen.nl; also 'geheim.txt' and config.toml"), out


def test_a_path_that_holds_an_at_sign_or_follows_a_url_is_still_scrubbed(tmp_path):
    path = tmp_path / "jan.de.vries@rijksoppen.nl" / "notes.txt"
    out = scrub_paths(f"HTTPS://Example.org/x failed; {path} failed", [])
    assert out == "HTTPS://Example.org/x failed; notes.txt failed", out
