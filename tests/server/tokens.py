"""Real credentials for the authentication tests: key pairs made with `cryptography`, JWTs signed with PyJWT,
and opaque tokens with their hashed file."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from jobmesh.server.auth.opaque_tokens import new_opaque_token, token_digest

ISSUER = "https://issuer.test"
AUDIENCE = "jobmesh"
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class Signer:
    """A private key, its public half written to `public_pem`, and the JWTs it signs."""

    key: PrivateKey
    algorithm: str
    public_pem: Path
    key_id: str = "key-1"

    def token(
        self,
        subject: str = "someone",
        grant: Mapping[str, Any] | None = None,
        *,
        issuer: str = ISSUER,
        audience: str = AUDIENCE,
        expires_in: float = 300.0,
        not_before_in: float | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> str:
        now = time.time()
        claims: dict[str, Any] = {"sub": subject, "iss": issuer, "aud": audience, "iat": int(now)}
        claims["exp"] = int(now + expires_in)
        if not_before_in is not None:
            claims["nbf"] = int(now + not_before_in)
        if grant is not None:
            claims["jobmesh"] = dict(grant)
        return jwt.encode(
            claims, self.key, algorithm=self.algorithm, headers={"kid": self.key_id, **(headers or {})}
        )

    def jwk(self) -> dict[str, Any]:
        algorithm = jwt.get_algorithm_by_name(self.algorithm)
        data: dict[str, Any] = json.loads(algorithm.to_jwk(self.key.public_key()))
        return {**data, "kid": self.key_id, "use": "sig"}


def ec_signer(directory: Path, name: str = "ec") -> Signer:
    return _written(ec.generate_private_key(ec.SECP256R1()), "ES256", directory / f"{name}.pem")


def rsa_signer(directory: Path, name: str = "rsa") -> Signer:
    """An RS256 signer; each name has one 2048-bit key a process (making one takes 50 to 200 ms), so keys of
    different names still differ."""
    return _written(_rsa_key(name), "RS256", directory / f"{name}.pem")


@functools.cache
def _rsa_key(name: str) -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _written(key: PrivateKey, algorithm: str, path: Path) -> Signer:
    path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Signer(key, algorithm, path, key_id=path.stem)


def write_jwks(path: Path, signers: Sequence[Signer]) -> Path:
    path.write_text(json.dumps({"keys": [signer.jwk() for signer in signers]}))
    return path


def unsigned_token(claims: Mapping[str, Any]) -> str:
    """`alg: none`: a token with no signature at all."""
    header = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{_b64(json.dumps(dict(claims)).encode())}."


def hmac_token_keyed_with(secret: bytes, claims: Mapping[str, Any]) -> str:
    """HS256 with `secret` (a public key's PEM, in the key-confusion attack) as the HMAC key."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(dict(claims)).encode())
    signature = hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


def tampered(token: str) -> str:
    """The same token with one claim changed and the signature kept."""
    header, body, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["sub"] = "admin"
    return f"{header}.{_b64(json.dumps(claims).encode())}.{signature}"


def claims_now(**extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": "mallory", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300, **extra}


@dataclass
class TokenFile:
    """An opaque-token file and the tokens it lists, by subject."""

    path: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def add(self, subject: str, token: str | None = None, **grant: Any) -> str:
        """Lists `token` (a new one when None) for `subject` with `grant`."""
        token = token or new_opaque_token()
        self.tokens[subject] = token
        entries = yaml.safe_load(self.path.read_text()) if self.path.exists() else {"tokens": []}
        entries["tokens"].append({"sha256": token_digest(token), "subject": subject, **grant})
        self.path.write_text(yaml.safe_dump(entries))
        return token


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)
