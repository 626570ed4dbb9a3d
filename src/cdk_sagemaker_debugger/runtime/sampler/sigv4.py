"""AWS Signature Version 4 for one S3 request, with the standard library only (for images without boto3)."""

from __future__ import annotations

import hashlib
import hmac
import time
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def signing_key(secret_key: str, day: str, region: str, service: str) -> bytes:
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), day)
    key = _hmac(key, region)
    key = _hmac(key, service)
    return _hmac(key, "aws4_request")


def canonical_path(path: str) -> str:
    """S3 signs the path URI-encoded once (never twice), keeping the slashes."""
    return quote(path, safe="/-_.~")


def sign(method: str, host: str, path: str, region: str, credentials: object, payload_sha256: str,
         headers: dict | None = None, now: float | None = None, service: str = "s3") -> dict:
    """The headers to send (Authorization, x-amz-date, x-amz-content-sha256, the session token, ``headers``)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    day = stamp[:8]
    signed = {k.lower(): str(v).strip() for k, v in (headers or {}).items()}
    signed.update({"host": host, "x-amz-date": stamp, "x-amz-content-sha256": payload_sha256})
    token = getattr(credentials, "token", None)
    if token:
        signed["x-amz-security-token"] = token
    names = sorted(signed)
    canonical = "\n".join([
        method,
        canonical_path(path),
        "",
        "".join(f"{name}:{signed[name]}\n" for name in names),
        ";".join(names),
        payload_sha256,
    ])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
    signature = hmac.new(signing_key(credentials.secret_key, day, region, service), to_sign.encode("utf-8"),
                         hashlib.sha256).hexdigest()
    signed["authorization"] = (f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
                               f"SignedHeaders={';'.join(names)}, Signature={signature}")
    del signed["host"]
    return signed
