"""API keys, the Host allow-list, CORS, and the start-up refusal to expose the server without a key."""
from __future__ import annotations

import http.client
import json
import logging

import pytest

from api_helpers import KEY, ORIGIN, api_settings


def test_every_route_but_health_needs_the_key(live):
    for method, path in [("GET", "/v1/models"), ("GET", "/metrics"), ("GET", "/ready"), ("GET", "/openapi.json"),
                         ("POST", "/v1/chat/completions"), ("GET", "/no/such/route"), ("GET", "/v1/documents")]:
        status, headers, body = live.request(method, path, {} if method == "POST" else None, key=None)
        assert status == 401, (path, body)
        assert headers["www-authenticate"] == "Bearer"
        assert json.loads(body)["error"]["code"] == "invalid_api_key"
        assert live.request(method, path, None, key="sk-test-wrong")[0] == 401
        assert live.request(method, path, None, headers={"Authorization": f"Basic {KEY}"}, key=None)[0] == 401
    assert live.request("GET", "/health", key=None)[0] == 200
    assert live.request("GET", "/v1/models")[0] == 200
    assert live.request("GET", "/v1/models", headers={"Authorization": f"bearer  {KEY} "}, key=None)[0] == 200


def test_keys_from_a_key_file_and_never_logged(tmp_path, tiny_bundles, api_tmp, caplog):
    from edge_agent.api.app import create_app
    from edge_agent.runtime import build_runtime

    keyfile = tmp_path / "keys"
    keyfile.write_text("# comment\n\nsk-from-file\n")
    settings = api_settings(tiny_bundles["llama"], api_tmp, api_keys=[], api_key_file=keyfile, max_batch=1)
    rt = build_runtime(settings, load_documents=False)
    try:
        client = create_app(rt).test_client()
        with caplog.at_level(logging.DEBUG):
            assert client.get("/v1/models", headers={"Authorization": "Bearer sk-from-file"}).status_code == 200
            assert client.get("/v1/models", headers={"Authorization": "Bearer sk-nope"}).status_code == 401
        assert "sk-from-file" not in caplog.text and "sk-nope" not in caplog.text
        assert all("sk-from-file" not in row["value"] for row in settings.describe())
    finally:
        rt.close()


@pytest.mark.parametrize("host,ok", [
    ("127.0.0.1", True), ("localhost", True), ("LOCALHOST:8080", True), ("[::1]:8080", True),
    ("evil.example", False), ("evil.example:8080", False), ("127.0.0.1.evil.example", False), ("", False),
])
def test_host_header_allow_list(live, host, ok):
    conn = http.client.HTTPConnection(live.host, live.port, timeout=10)
    conn.putrequest("GET", "/v1/models", skip_host=True)
    if host:
        conn.putheader("Host", host)
    conn.putheader("Authorization", f"Bearer {KEY}")
    conn.endheaders()
    r = conn.getresponse()
    body = r.read()
    conn.close()
    if ok:
        assert r.status == 200, body
    elif host:
        assert r.status == 403 and json.loads(body)["error"]["code"] == "host_not_allowed"
    else:
        assert r.status in (400, 403)  # HTTP/1.1 without Host


def test_host_check_covers_every_blueprint(live):
    status, _, body = live.request("GET", "/v1/documents", headers={"Host": "evil.example"})
    assert status == 403 and json.loads(body)["error"]["code"] == "host_not_allowed"


def test_health_answers_any_host(live):
    assert live.request("GET", "/health", headers={"Host": "monitor.internal"}, key=None)[0] == 200


def test_cors_preflight_and_response_headers(live):
    status, headers, _ = live.request("OPTIONS", "/v1/chat/completions", key=None, headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"})
    assert status == 204
    assert headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in headers["access-control-allow-methods"] and "Authorization" in headers["access-control-allow-headers"]
    assert "access-control-allow-credentials" not in headers
    status, headers, _ = live.request("OPTIONS", "/v1/chat/completions", key=None, headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert status == 403 and "access-control-allow-origin" not in headers
    status, headers, _ = live.request("GET", "/v1/models", headers={"Origin": ORIGIN})
    assert status == 200 and headers["access-control-allow-origin"] == ORIGIN and "Origin" in headers["vary"]
    status, headers, _ = live.request("GET", "/v1/models", headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in headers


def test_options_on_a_route_is_204_with_allow_and_no_body(live):
    """Was Flask's automatic answer: 200 with an empty text/html body. Not a CORS preflight: no CORS headers."""
    for path, methods in (("/v1/chat/completions", {"POST"}), ("/v1/models", {"GET", "HEAD"}),  # HEAD: Flask's, with GET
                          ("/v1/documents/1", {"GET", "HEAD", "DELETE"})):
        status, headers, body = live.request("OPTIONS", path)
        assert status == 204 and body == b"" and "content-type" not in headers, (path, status, headers)
        allow = {m.strip() for m in headers["allow"].split(",")}
        assert allow == methods | {"OPTIONS"}, (path, allow)
        assert not [h for h in headers if h.startswith("access-control-")], headers
    status, headers, body = live.request("OPTIONS", "/v1/no-such-route")
    assert status == 404 and headers["content-type"] == "application/json" and json.loads(body)["error"], body


def test_cors_off_by_default_and_star_never_with_credentials(tiny_bundles, api_tmp):
    from edge_agent.api.app import create_app
    from edge_agent.runtime import build_runtime

    rt = build_runtime(api_settings(tiny_bundles["llama"], api_tmp, cors_origins=[], max_batch=1), load_documents=False)
    try:
        client = create_app(rt).test_client()
        auth = {"Authorization": f"Bearer {KEY}", "Origin": ORIGIN}
        r = client.get("/v1/models", headers=auth)
        assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers
        rt.settings.cors_origins = ["*"]
        client = create_app(rt).test_client()
        r = client.get("/v1/models", headers=auth)
        assert r.headers["Access-Control-Allow-Origin"] == "*" and "Access-Control-Allow-Credentials" not in r.headers
        pre = client.options("/v1/models", headers={"Origin": "http://x.example", "Access-Control-Request-Method": "GET"})
        assert pre.status_code == 204 and "Access-Control-Allow-Credentials" not in pre.headers
    finally:
        rt.close()


def test_non_loopback_bind_without_key_is_refused(tmp_path):
    from edge_agent.cli.serve import main
    from edge_agent.config import Settings
    from edge_agent.server import ServeError, check_bind

    import socket

    for host in ("0.0.0.0", "192.168.1.20", "::", socket.gethostname()):  # a name that resolves (example.com does not offline)
        with pytest.raises(ServeError, match="without an API key"):
            check_bind(Settings(host=host, api_keys=[]))
        assert check_bind(Settings(host=host, api_keys=["k"])) == ["k"]
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert check_bind(Settings(host=host, api_keys=[])) == []
    with pytest.raises(ServeError, match="cannot read api_key_file"):
        check_bind(Settings(api_key_file=tmp_path / "missing"))
    assert main(["--host", "0.0.0.0", "--models-dir", str(tmp_path)]) == 2  # refused before loading any model


def test_made_up_methods_do_not_grow_the_metrics(live):
    """A label per request method would let any client, key or not, add series to /metrics without bound."""
    import re

    for i in range(40):
        status, _, body = live.request(f"X{i:04d}", "/v1/models", key=None)
        assert status in (401, 405) and b'"error"' in body
    status, _, body = live.request("GET", "/metrics")
    methods = set(re.findall(r'edge_agent_http_requests_total\{method="([^"]*)"', body.decode()))
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}, methods
    assert live.metric("edge_agent_http_requests_total", 'method="other",route="/v1/models",status="401"') >= 40


def test_a_lan_allow_list_keeps_the_loopback_names(tiny_bundles, api_tmp):
    """lan.conf.example's `allowed_hosts = ["edge-agent.lan", "192.168.10.5"]` replaced the default list, so
    `curl localhost:8080/ready` (install.sh's last line), `edge-agent cluster status` and every local client got
    403 host_not_allowed. A browser tricked by DNS rebinding sends the attacker's name, never a loopback one, so
    loopback names stay accepted; other names still need the list."""
    from api_helpers import start_server

    server = start_server(api_settings(tiny_bundles["llama"], api_tmp / "lan", allowed_hosts=["edge-agent.lan"]))
    try:
        for host, status in (("localhost:8080", 200), ("127.0.0.1", 200), ("[::1]:8080", 200), ("edge-agent.lan", 200),
                             ("192.168.10.5", 403), ("evil.example", 403)):
            got, _, body = server.request("GET", "/v1/models", headers={"Host": host})
            assert got == status, (host, body)
    finally:
        server.close()
