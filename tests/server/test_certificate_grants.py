"""Certificate grants carry namespaces, as token grants do: `NAME=QUEUES@NAMESPACES` binds an executor known
by its client certificate to the namespaces whose runs it may claim (the claim's check is the one every
executor grant meets: tests/server/test_executor_identity.py). The attack: a certified executor of namespace
A's queue claimed namespace B's job on that queue."""

from __future__ import annotations

import pytest

from jobmesh.server.client_certificates import CertificateGrant, ClientCertificates, parse_certificate_grants
from jobmesh.server.principals import ExecutorGrant


def certified(name: str) -> dict[str, list[bytes]]:
    """The auth context of a call with a verified client certificate whose common name is `name`."""
    return {
        "transport_security_type": [b"ssl"],
        "x509_pem_cert": [b"-----BEGIN CERTIFICATE-----"],
        "x509_common_name": [name.encode()],
    }


def grant_of(grants: str, name: str) -> ExecutorGrant:
    principal = ClientCertificates(parse_certificate_grants(grants)).principal_of({}, certified(name))
    assert principal is not None
    assert principal.executor is not None
    return principal.executor


def test_a_certificate_grant_binds_its_executor_to_its_namespaces() -> None:
    grants = "executor-a=default@team-a,executor-ab=default+mail@team-a+team-b,*=default"
    own = grant_of(grants, "executor-a")
    assert own.serves_queue("default")
    assert own.serves_namespace("team-a")
    assert not own.serves_namespace("team-b")  # B's job on A's queue is not its to claim
    both = grant_of(grants, "executor-ab")
    assert both.serves_namespace("team-a")
    assert both.serves_namespace("team-b")
    assert not both.serves_namespace("team-c")
    assert grant_of(grants, "any-other").serves_namespace("team-c")  # namespaces left out: any, as a token's


def test_certificate_grants_parse_as_documented() -> None:
    assert parse_certificate_grants("executor-1=default+mail@team-a") == {
        "executor-1": CertificateGrant(frozenset({"default", "mail"}), frozenset({"team-a"}))
    }
    assert parse_certificate_grants("*=*@*")["*"] == CertificateGrant(frozenset({"*"}), frozenset({"*"}))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("executor-1=default@", "NAME=QUEUE"),
        ("executor-1=@team-a", "NAME=QUEUE"),
        ("executor-1=default@Team_A", "not a namespace"),
        ("executor-1=bad queue@team-a", "not a queue name"),
    ],
)
def test_a_bad_certificate_grant_is_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_certificate_grants(text)
