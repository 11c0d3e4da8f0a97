"""Bearer tokens, verified: JWTs against PEM public keys and a JWKS file (issuer, audience, expiry and not
before checked, algorithms pinned to the key), opaque tokens against a file of their hashes, and the grant
format both carry. Every refusal is `Unauthenticated` with the one message callers see."""

from __future__ import annotations

import base64
import json
import logging
from datetime import timedelta
from pathlib import Path

import jwt
import pytest

from jobmesh.core.errors import Unauthenticated
from jobmesh.server.auth import watched_file
from jobmesh.server.auth.authentication import authenticate
from jobmesh.server.auth.grants import principal_of_grant
from jobmesh.server.auth.jwt_tokens import JwtConfig, JwtTokens
from jobmesh.server.auth.opaque_tokens import OpaqueTokens, parse_token_file
from jobmesh.server.principals import ANY_NAMESPACE, CredentialSource, ExecutorGrant, Role
from tests.server.tokens import (
    AUDIENCE,
    ISSUER,
    Signer,
    TokenFile,
    claims_now,
    ec_signer,
    hmac_token_keyed_with,
    rsa_signer,
    tampered,
    unsigned_token,
    write_jwks,
)

GRANT = {
    "roles": {"team-a": "operator", "*": "viewer"},
    "executor": {"name": "exec-1", "queues": ["default"], "namespaces": ["*"]},
}
NO_PEER: dict[str, list[bytes]] = {}


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
def signer(tmp_path: Path) -> Signer:
    return ec_signer(tmp_path)


@pytest.fixture
def jwts(signer: Signer, tmp_path: Path) -> JwtTokens:
    other = rsa_signer(tmp_path)
    return JwtTokens(
        JwtConfig(issuer=ISSUER, audience=AUDIENCE, public_keys=(signer.public_pem, other.public_pem))
    )


def refused(source: JwtTokens | OpaqueTokens, token: str) -> str:
    with pytest.raises(Unauthenticated) as caught:
        source.principal_of(bearer(token), NO_PEER)
    assert caught.value.message == "a valid credential is required"  # the same whatever was wrong
    return caught.value.detail


def test_a_valid_jwt_stands_for_its_subject_with_its_roles_and_executor_grant(
    jwts: JwtTokens, signer: Signer
) -> None:
    principal = jwts.principal_of(bearer(signer.token("ci", GRANT)), NO_PEER)
    assert principal is not None
    assert principal.subject == "ci"
    assert principal.role_in("team-a") is Role.OPERATOR
    assert principal.role_in("team-b") is Role.VIEWER
    assert principal.executor == ExecutorGrant("exec-1", frozenset({"default"}), frozenset({ANY_NAMESPACE}))


def test_an_rsa_key_checks_rs256_tokens_too(jwts: JwtTokens, tmp_path: Path) -> None:
    rsa = rsa_signer(tmp_path, "service")
    other = JwtTokens(JwtConfig(issuer=ISSUER, audience=AUDIENCE, public_keys=(rsa.public_pem,)))
    principal = other.principal_of(bearer(rsa.token("svc")), NO_PEER)
    assert principal is not None
    assert principal.subject == "svc"
    assert principal.executor is None
    assert not principal.roles


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"expires_in": -120}, "ExpiredSignature"),
        ({"not_before_in": 600}, "ImmatureSignature"),
        ({"issuer": "https://elsewhere.test"}, "InvalidIssuer"),
        ({"audience": "another-service"}, "InvalidAudience"),
    ],
)
def test_a_jwt_out_of_its_time_or_for_another_issuer_or_audience_is_refused(
    jwts: JwtTokens, signer: Signer, change: dict[str, object], why: str
) -> None:
    assert why in refused(jwts, signer.token("ci", GRANT, **change))  # type: ignore[arg-type]


def test_a_jwt_within_the_leeway_of_its_expiry_is_accepted(jwts: JwtTokens, signer: Signer) -> None:
    assert jwts.principal_of(bearer(signer.token("ci", expires_in=-5)), NO_PEER) is not None


def test_alg_none_is_refused(jwts: JwtTokens) -> None:
    assert "'none'" in refused(jwts, unsigned_token(claims_now(jobmesh={"roles": {"*": "admin"}})))


def test_a_tampered_signature_is_refused(jwts: JwtTokens, signer: Signer) -> None:
    assert "signature" in refused(jwts, tampered(signer.token("ci", GRANT)))


def test_an_hs256_token_keyed_with_the_public_key_is_refused(jwts: JwtTokens, signer: Signer) -> None:
    """The key confusion attack: a public key is public, so an HMAC keyed with it proves nothing."""
    forged = hmac_token_keyed_with(
        signer.public_pem.read_bytes(), claims_now(jobmesh={"roles": {"*": "admin"}})
    )
    assert "HS256" in refused(jwts, forged)


def test_hs_algorithms_cannot_even_be_configured(signer: Signer) -> None:
    with pytest.raises(ValueError, match="HS256"):
        JwtTokens(
            JwtConfig(ISSUER, AUDIENCE, public_keys=(signer.public_pem,), algorithms=frozenset({"HS256"}))
        )


def test_a_token_signed_by_an_unknown_key_is_refused(jwts: JwtTokens, tmp_path: Path) -> None:
    stranger = ec_signer(tmp_path, "stranger")  # its public key is configured nowhere
    assert "signature" in refused(jwts, stranger.token("ci", GRANT))


def test_an_rs256_header_on_an_ec_signed_token_finds_no_key_to_confuse(
    jwts: JwtTokens, signer: Signer
) -> None:
    """The header's algorithm must fit the key: the EC key never checks an RS256 signature."""
    _, body, signature = signer.token("ci", GRANT).split(".")
    forged_header = base64.urlsafe_b64encode(json.dumps({"alg": "RS256", "kid": "ec"}).encode()).rstrip(b"=")
    refused(jwts, f"{forged_header.decode()}.{body}.{signature}")


def test_a_jwt_without_exp_or_sub_is_refused(jwts: JwtTokens, signer: Signer) -> None:
    no_exp = jwt.encode({"sub": "ci", "iss": ISSUER, "aud": AUDIENCE}, signer.key, algorithm="ES256")
    assert "exp" in refused(jwts, no_exp)


def test_a_jwt_with_a_bad_grant_is_refused(jwts: JwtTokens, signer: Signer) -> None:
    assert "role" in refused(jwts, signer.token("ci", {"roles": {"team-a": "owner"}}))


def test_jwks_keys_are_chosen_by_kid_and_the_file_is_read_again_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watched_file, "CHECK_INTERVAL", 0.0)
    old, new = ec_signer(tmp_path, "old"), rsa_signer(tmp_path, "new")
    jwks = write_jwks(tmp_path / "jwks.json", [old])
    source = JwtTokens(JwtConfig(ISSUER, AUDIENCE, jwks_file=jwks))
    assert source.principal_of(bearer(old.token("ci")), NO_PEER) is not None
    assert "no configured key" in refused(source, new.token("ci"))

    write_jwks(jwks, [new])  # the old key is retired
    assert source.principal_of(bearer(new.token("ci")), NO_PEER) is not None
    assert "no configured key" in refused(source, old.token("ci"))


def test_a_jwks_with_a_symmetric_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    path.write_text('{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "s"}]}')
    with pytest.raises(ValueError, match="RSA, EC and OKP"):
        JwtTokens(JwtConfig(ISSUER, AUDIENCE, jwks_file=path))


def test_a_token_of_another_form_is_not_a_jwt(jwts: JwtTokens) -> None:
    assert jwts.principal_of(bearer("jm_opaque"), NO_PEER) is None
    assert jwts.principal_of({}, NO_PEER) is None


# Opaque tokens. ---------------------------------------------------------------------------------------------


@pytest.fixture
def token_file(tmp_path: Path) -> TokenFile:
    return TokenFile(tmp_path / "tokens.yaml")


def test_an_opaque_token_in_the_file_stands_for_its_entry(token_file: TokenFile) -> None:
    token = token_file.add("exec-1", executor={"name": "exec-1", "queues": ["default"]})
    token_file.add("ci", roles={"team-a": "admin"})
    principal = OpaqueTokens(token_file.path).principal_of(bearer(token), NO_PEER)
    assert principal is not None
    assert principal.subject == "exec-1"
    assert principal.executor is not None
    assert principal.executor.serves_queue("default")
    assert not principal.executor.serves_queue("payments")
    assert principal.role_in("team-a") is None


def test_an_opaque_token_not_in_the_file_is_refused(token_file: TokenFile) -> None:
    token_file.add("ci", roles={"*": "viewer"})
    assert "not in" in refused(OpaqueTokens(token_file.path), "jm_" + "x" * 43)


def test_the_token_file_is_read_again_when_it_changes_and_a_bad_version_refuses_every_token(
    token_file: TokenFile, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(watched_file, "CHECK_INTERVAL", 0.0)
    first = token_file.add("first")
    source = OpaqueTokens(token_file.path)
    second = token_file.add("second")
    assert source.principal_of(bearer(second), NO_PEER) is not None
    assert source.principal_of(bearer(first), NO_PEER) is not None
    good = token_file.path.read_bytes()

    token_file.path.write_text("tokens: [{sha256: nope}]")
    with caplog.at_level(logging.ERROR):
        assert "not in" in refused(source, second)  # fail closed: the file no longer vouches for it
    assert "every token it held is refused until it is fixed" in caplog.text
    token_file.path.write_bytes(good)
    assert source.principal_of(bearer(second), NO_PEER) is not None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[]", "tokens"),
        (b"tokens: [{subject: a}]", "sha256"),
        (b"tokens: [{sha256: " + b"a" * 64 + b"}]", "subject"),
        (b"tokens: [{sha256: " + b"a" * 64 + b", subject: a, roles: {x: owner}}]", "role"),
        (b"tokens: [{sha256: " + b"a" * 64 + b", subject: a, executor: {queues: [q]}}]", "name"),
        (b"tokens: [{sha256: " + b"a" * 64 + b", subject: a, colour: red}]", "unknown"),
    ],
)
def test_a_bad_token_file_is_refused_naming_what_is_wrong(content: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_token_file(content)


def test_the_token_file_must_exist_when_the_server_starts(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        OpaqueTokens(tmp_path / "missing.yaml")


# The sources together. -------------------------------------------------------------------------------------


def test_authenticate_asks_the_sources_in_order_and_refuses_a_call_without_a_credential(
    jwts: JwtTokens, signer: Signer, token_file: TokenFile
) -> None:
    opaque_token = token_file.add("ci")
    sources: list[CredentialSource] = [jwts, OpaqueTokens(token_file.path)]
    assert authenticate(sources, bearer(opaque_token), NO_PEER).subject == "ci"
    assert authenticate(sources, bearer(signer.token("svc")), NO_PEER).subject == "svc"
    with pytest.raises(Unauthenticated, match="credential"):
        authenticate(sources, {}, NO_PEER)
    for bad in ("Basic dXNlcjpwYXNz", "Bearer", "Bearer not-a-known-kind"):
        with pytest.raises(Unauthenticated):
            authenticate(sources, {"authorization": bad}, NO_PEER)


def test_grants_name_roles_by_namespace_and_bind_an_executor() -> None:
    principal = principal_of_grant("x", {"roles": {"*": "ADMIN"}})
    assert principal.may(Role.ADMIN, "any")
    assert principal_of_grant("x", None).roles == {}
    with pytest.raises(ValueError, match="subject"):
        principal_of_grant("", {})
    with pytest.raises(ValueError, match="queues"):
        principal_of_grant("x", {"executor": {"name": "e", "queues": "default"}})


def test_the_leeway_is_configurable(signer: Signer) -> None:
    strict = JwtTokens(JwtConfig(ISSUER, AUDIENCE, public_keys=(signer.public_pem,), leeway=timedelta(0)))
    assert "Expired" in refused(strict, signer.token("ci", expires_in=-5))
