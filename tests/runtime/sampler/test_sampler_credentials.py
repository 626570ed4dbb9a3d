"""The sampler's container credentials (standard library only) follow the AWS SDKs' allow-list for
AWS_CONTAINER_CREDENTIALS_FULL_URI: https anywhere, plain http only to loopback or the ECS/EKS container endpoints,
anything else refused before the authorization token is read or sent. Checked against the installed botocore's own
rule and with real HTTP servers on loopback."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.utils import ContainerMetadataFetcher

from cdk_sagemaker_debugger.runtime.sampler import credentials
from cdk_sagemaker_debugger.runtime.sampler.credentials import CredentialsError, container_url_refusal, from_container

ALLOWED = ["http://169.254.170.2/v2/credentials/x", "http://169.254.170.23/v1/credentials",
           "http://[fd00:ec2::23]/v1/credentials", "http://localhost:8080/creds", "http://127.0.0.1/creds",
           "http://127.9.9.9:1/creds", "http://[::1]:51679/creds", "https://creds.example.com/role",
           "https://10.0.0.5/creds"]
REFUSED = ["http://attacker.example/collect", "http://10.0.0.5/creds", "http://169.254.169.254/latest",
           "http://169.254.170.3/", "http://[fd00:ec2::254]/", "http://localhost.attacker.example/",
           "http://169.254.170.2@attacker.example/", "http://0.0.0.0/"]


@pytest.mark.parametrize("url", ALLOWED + REFUSED)
def test_the_allow_list_is_botocores(url: str) -> None:
    try:
        ContainerMetadataFetcher()._validate_allowed_url(url)  # the installed botocore's rule
        botocore_allows = True
    except ValueError:
        botocore_allows = False
    assert (container_url_refusal(url) is None) == botocore_allows == (url in ALLOWED)


@pytest.mark.parametrize("url", ["file://localhost/etc/passwd", "ftp://127.0.0.1/creds", "localhost/creds", ""])
def test_other_schemes_are_refused_even_on_loopback(url: str) -> None:
    """Stricter than botocore, whose own HTTP client can only speak http(s): urllib would open file:// and ftp://."""
    assert container_url_refusal(url) is not None


class _Endpoint(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, str]]
    reply: tuple[int, dict[str, str], bytes]

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).seen.append(dict(self.headers))
        code, headers, body = type(self).reply
        self.send_response(code)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _serve(reply: tuple[int, dict[str, str], bytes]) -> Iterator[tuple[str, list[dict[str, str]]]]:
    handler = type("Handler", (_Endpoint,), {"seen": [], "reply": reply})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler.seen
    finally:
        server.shutdown()
        server.server_close()


CREDS = json.dumps({"AccessKeyId": "AKIA", "SecretAccessKey": "s", "Token": "t",
                    "Expiration": "2099-01-01T00:00:00Z"}).encode()


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[dict[str, str]]]]:
    yield from _serve((200, {"Content-Type": "application/json"}, CREDS))


def test_a_loopback_endpoint_gets_the_token_and_answers(endpoint, tmp_path) -> None:
    url, seen = endpoint
    token_file = tmp_path / "token"
    token_file.write_text("secret-token\n")
    found = from_container({"AWS_CONTAINER_CREDENTIALS_FULL_URI": url + "/creds",
                            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token_file),
                            "HTTP_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9"})
    assert found is not None and found.access_key == "AKIA"
    assert [h.get("Authorization") for h in seen] == ["secret-token"]  # directly, not through the proxy


@pytest.mark.parametrize("url", ["http://attacker.example/collect", "http://10.0.0.5/creds"])
def test_a_host_off_the_list_never_gets_a_connection_or_the_token(url: str, monkeypatch, tmp_path) -> None:
    def no_network(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    token_file = tmp_path / "token"  # not even read: a path that does not exist would raise otherwise
    with pytest.raises(CredentialsError, match="not used: http to"):
        from_container({"AWS_CONTAINER_CREDENTIALS_FULL_URI": url, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "secret",
                        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token_file / "missing")})


def test_a_redirect_is_not_followed_with_the_token(endpoint) -> None:
    target, seen_by_target = endpoint
    for redirector, _seen in _serve((302, {"Location": target + "/stolen"}, b"")):
        with pytest.raises(OSError):
            from_container({"AWS_CONTAINER_CREDENTIALS_FULL_URI": redirector + "/creds",
                            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "secret"})
    assert seen_by_target == []


def test_the_chain_goes_on_when_the_endpoint_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(credentials, "from_imds", lambda env: None)
    chain = credentials.CredentialChain({"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://attacker.example/"})
    with pytest.raises(CredentialsError, match="from_container: CredentialsError: the container credentials endpoint "
                                               "was not used: http to 'attacker.example'"):
        chain.get()
