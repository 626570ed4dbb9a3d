"""AWS credentials without botocore: the environment, the container credentials endpoint, then IMDSv2.

The same order and variables as the AWS SDKs, so whatever SageMaker gives a training container works. Temporary
credentials are cached until five minutes before they expire; that refresh is advisory: when it fails, the cached
credentials are used for as long as they are valid (as botocore does), so uploads go on.

The container endpoint gets the container's authorization token, so, as botocore's ContainerMetadataFetcher does, a
``AWS_CONTAINER_CREDENTIALS_FULL_URI`` is used only over https, or over http to a loopback address or one of the
ECS/EKS container endpoints; anything else is refused before the token is read or sent. Credential requests go to
the endpoint itself: never through a proxy from the environment, and never after a redirect.
"""

from __future__ import annotations

import calendar
import ipaddress
import json
import os
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass

CONTAINER_HOST = "http://169.254.170.2"
#: Hosts the container credentials endpoint may be on over plain http, besides loopback addresses: botocore's
#: ContainerMetadataFetcher._ALLOWED_HOSTS (the ECS endpoint, the EKS Pod Identity endpoints over IPv4 and IPv6).
CONTAINER_HTTP_HOSTS = ("169.254.170.2", "169.254.170.23", "fd00:ec2::23", "localhost")
IMDS_ENDPOINT = "http://169.254.169.254"
TIMEOUT_S = 2.0
REFRESH_BEFORE_S = 300.0
#: Cached credentials closer than this to their expiry are not used any more, even when the refresh fails.
MANDATORY_BEFORE_S = 30.0


class CredentialsError(Exception):
    """No credentials could be found; the message lists what was tried."""


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    token: str | None = None
    expires: float | None = None


def _expiry(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))


def _from_document(document: dict, source: str) -> Credentials:
    try:
        return Credentials(document["AccessKeyId"], document["SecretAccessKey"], document.get("Token"),
                           _expiry(document.get("Expiration")))
    except (KeyError, TypeError) as exc:
        raise CredentialsError(f"{source} returned no AccessKeyId/SecretAccessKey") from exc


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: urllib would send the Authorization header on to wherever it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201 - urllib's signature
        return None


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def _get(url: str, headers: dict | None = None, method: str = "GET") -> bytes:
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    with _OPENER.open(request, timeout=TIMEOUT_S) as response:  # checked endpoints (container_url_refusal), IMDS
        return response.read()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def container_url_refusal(url: str) -> str | None:
    """Why the container credentials endpoint ``url`` is not used (None: it may be): botocore's rule (https to any
    host; http to a loopback address or one of CONTAINER_HTTP_HOSTS), and no other scheme at all."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme == "https" and host:
        return None
    if parts.scheme != "http":
        return f"the scheme {parts.scheme or '(none)'!r} is neither https nor http"
    if host and (host in CONTAINER_HTTP_HOSTS or _is_loopback(host)):
        return None
    return (f"http to {host or '(no host)'!r}: over plain http only a loopback address or one of "
            f"{', '.join(CONTAINER_HTTP_HOSTS)} is used; use https for any other host")


def from_environment(env: dict) -> Credentials | None:
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return Credentials(key, secret, env.get("AWS_SESSION_TOKEN") or None)
    return None


def from_container(env: dict) -> Credentials | None:
    relative, full = env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"), env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    if not relative and not full:
        return None
    url = CONTAINER_HOST + relative if relative else full
    refusal = container_url_refusal(url)
    if refusal is not None:  # before the token is even read: it never leaves for a host that is not allowed
        raise CredentialsError(f"the container credentials endpoint was not used: {refusal}")
    headers = {}
    token = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
    token_file = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
    if token_file:
        with open(token_file, encoding="utf-8") as handle:
            token = handle.read().strip()
    if token:
        headers["Authorization"] = token
    return _from_document(json.loads(_get(url, headers)), "the container credentials endpoint")


def from_imds(env: dict) -> Credentials | None:
    if env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return None
    base = env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", IMDS_ENDPOINT).rstrip("/")
    token = _get(base + "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "21600"}, "PUT").decode()
    headers = {"X-aws-ec2-metadata-token": token}
    role = _get(base + "/latest/meta-data/iam/security-credentials/", headers).decode().split("\n")[0].strip()
    if not role:
        return None
    document = json.loads(_get(f"{base}/latest/meta-data/iam/security-credentials/{role}", headers))
    return _from_document(document, "the instance metadata service")


class CredentialChain:
    """The first source that answers wins; its credentials are reused until shortly before they expire."""

    def __init__(self, env: dict | None = None, clock=time.time):
        self.env = dict(os.environ if env is None else env)
        self.clock = clock
        self.cached: Credentials | None = None

    def get(self) -> Credentials:
        cached = self.cached
        if cached is not None and (cached.expires is None or cached.expires - REFRESH_BEFORE_S > self.clock()):
            return cached
        tried = []
        for source in (from_environment, from_container, from_imds):
            try:
                found = source(self.env)
            except (OSError, ValueError, CredentialsError) as exc:
                tried.append(f"{source.__name__}: {type(exc).__name__}: {exc}")
                continue
            if found is not None:
                self.cached = found
                return found
            tried.append(f"{source.__name__}: not configured")
        if cached is not None and cached.expires is not None and cached.expires - MANDATORY_BEFORE_S > self.clock():
            return cached  # the advisory refresh failed; these are still valid, try again at the next upload
        raise CredentialsError("no AWS credentials (" + "; ".join(tried) + ")")
