"""JWT bearer tokens, verified with PyJWT against configured public keys (PEM files) or a JWKS file.

A token is accepted only when its signature verifies with one of the keys under an algorithm that is both
configured and of that key's type (an RSA key never checks an ES256 or HS256 signature, `none` is never
accepted), its issuer and audience are the configured ones, and it is within its `nbf`..`exp` (with a small
leeway for clocks). Its `sub` is the principal's subject and its `jobmesh` claim the grant
(`server/auth/grants.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from jobmesh.core.errors import Unauthenticated
from jobmesh.server.auth.bearer import bearer_token
from jobmesh.server.auth.grants import GRANT_CLAIM, principal_of_grant
from jobmesh.server.auth.watched_file import WatchedFile
from jobmesh.server.principals import Principal

__all__ = ["ASYMMETRIC_ALGORITHMS", "JwtConfig", "JwtTokens"]

_RSA = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_BY_CURVE = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
# What may be configured: signatures by public keys only (never HS*, whose "key" a public key would become).
ASYMMETRIC_ALGORITHMS = frozenset({*_RSA, *_EC_BY_CURVE.values(), "EdDSA"})
_PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey


@dataclass(frozen=True, slots=True)
class JwtConfig:
    issuer: str
    audience: str
    public_keys: tuple[Path, ...] = ()
    jwks_file: Path | None = None
    algorithms: frozenset[str] = frozenset({"RS256", "ES256", "EdDSA"})
    leeway: timedelta = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class _Key:
    key_id: str | None
    key: _PublicKey
    algorithms: frozenset[str]


def _algorithms_of(key: object) -> frozenset[str]:
    if isinstance(key, rsa.RSAPublicKey):
        return _RSA
    if isinstance(key, ec.EllipticCurvePublicKey):
        return frozenset({_EC_BY_CURVE[key.curve.name]}) if key.curve.name in _EC_BY_CURVE else frozenset()
    if isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return frozenset({"EdDSA"})
    return frozenset()


def _pem_key(content: bytes) -> tuple[_Key, ...]:
    try:
        key = load_pem_public_key(content)
    except ValueError as error:
        raise ValueError(f"not a PEM public key: {error}") from None
    algorithms = _algorithms_of(key)
    if not algorithms:
        raise ValueError(f"a {type(key).__name__} cannot check JWT signatures")
    return (_Key(None, key, algorithms),)  # type: ignore[arg-type]


def _jwks(content: bytes) -> tuple[_Key, ...]:
    try:
        keys = json.loads(content)["keys"]
    except (ValueError, KeyError, TypeError):
        raise ValueError("not a JWKS document (an object with a `keys` list)") from None
    parsed = []
    for number, data in enumerate(keys, 1):
        if not isinstance(data, dict) or data.get("kty") not in ("RSA", "EC", "OKP"):
            raise ValueError(f"key {number}: only RSA, EC and OKP public keys are accepted")
        if data.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(data).key
        except jwt.PyJWTError as error:
            raise ValueError(f"key {number}: {error}") from None
        algorithms = _algorithms_of(key)
        if "alg" in data:
            algorithms &= {data["alg"]}
        if not algorithms:
            raise ValueError(f"key {number}: no signature algorithm fits it")
        parsed.append(_Key(data.get("kid"), key, algorithms))
    return tuple(parsed)


class JwtTokens:
    """A credential source: the principal of a JWT bearer token (three dot-separated parts)."""

    def __init__(self, config: JwtConfig) -> None:
        if not config.public_keys and config.jwks_file is None:
            raise ValueError("JWT verification needs public keys or a JWKS file")
        refused = config.algorithms - ASYMMETRIC_ALGORITHMS
        if refused:
            raise ValueError(f"not public-key signature algorithms: {sorted(refused)}")
        self._config = config
        self._files = [WatchedFile(path, _pem_key) for path in config.public_keys]
        if config.jwks_file is not None:
            self._files.append(WatchedFile(config.jwks_file, _jwks))

    def principal_of(
        self, metadata: Mapping[str, str], peer: Mapping[str, Sequence[bytes]]
    ) -> Principal | None:
        token = bearer_token(metadata)
        if token is None or token.count(".") != 2:
            return None
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as error:
            raise Unauthenticated(f"a JWT whose header does not parse: {error}") from None
        algorithm = header.get("alg")
        if algorithm not in self._config.algorithms:
            raise Unauthenticated(f"a JWT signed with {algorithm!r}, not a configured algorithm")
        claims = self._verified(token, algorithm, header.get("kid"))
        try:
            return principal_of_grant(claims.get("sub"), claims.get(GRANT_CLAIM))
        except ValueError as error:
            raise Unauthenticated(f"a JWT whose claims do not parse: {error}") from None

    def _verified(self, token: str, algorithm: str, key_id: object) -> dict[str, object]:
        keys = [
            key
            for file in self._files
            for key in file.current()
            if algorithm in key.algorithms and (key_id is None or key.key_id in (None, key_id))
        ]
        if not keys:
            raise Unauthenticated(f"no configured key checks a JWT of {algorithm!r} (kid {key_id!r})")
        failure: jwt.PyJWTError | None = None
        for key in keys:
            try:
                claims: dict[str, object] = jwt.decode(
                    token,
                    key.key,
                    algorithms=[algorithm],
                    audience=self._config.audience,
                    issuer=self._config.issuer,
                    leeway=self._config.leeway,
                    options={"require": ["exp", "iss", "aud", "sub"]},
                )
                return claims
            except jwt.InvalidSignatureError as error:
                failure = error  # another key may be the one
            except jwt.PyJWTError as error:
                raise Unauthenticated(f"a JWT refused: {type(error).__name__}: {error}") from None
        raise Unauthenticated(f"a JWT whose signature no configured key verifies: {failure}")
