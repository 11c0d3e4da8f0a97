"""Certificate grants carry namespaces, as token grants do: `NAME=QUEUES@NAMESPACES` binds an executor known
by its client certificate to the namespaces whose runs it may claim (the claim's check is the one every
executor grant meets: tests/server/test_executor_identity.py). The attack: a certified executor of namespace
A's queue claimed namespace B's job on that queue; it is repeated here against a server with TLS and
authentication on, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.server.auth.client_certificates import (
    CertificateGrant,
    ClientCertificates,
    parse_certificate_grants,
)
from jobmesh.server.auth.tls import ServerTls
from jobmesh.server.principals import ExecutorGrant
from jobmesh.transport.tls import ChannelTls, channel
from jobmesh.v1 import run_pb2
from tests.server.secured import Secured, secured_server
from tests.server.test_executor_identity import RawStream, claimed, get_run, new_run
from tests.support_certificates import CertificateAuthority


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


# Through a whole server (SQLite and PostgreSQL): an executor on the executor address, known by its client
# certificate alone, claims over its stream as a token's executor does.
CERTIFIED = "exec-cert"  # granted the default queue of team-a alone


@dataclass
class Certified:
    server: Secured
    api: grpc.Channel  # the API's address, over TLS
    executor: grpc.Channel  # the executor address, with the certificate of CERTIFIED


@pytest.fixture(scope="module")
def certified_server(store: SchedulerStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Certified]:
    directory = tmp_path_factory.mktemp("certified")
    authority = CertificateAuthority()
    ca = authority.write(directory / "ca.pem")
    leaf = authority.issue_server(directory / "server")
    client = authority.issue_client(directory / CERTIFIED, CERTIFIED)
    with secured_server(
        store,
        directory,
        tls=ServerTls(leaf.chain, leaf.key, client_ca=ca),
        executor_listen="127.0.0.1:0",
        executor_certificates=parse_certificate_grants(f"{CERTIFIED}=default@team-a"),
    ) as server:
        executors = ChannelTls(ca_bundle=ca, client_certificate=client.chain, client_key=client.key)
        with (
            channel(server.address, ChannelTls(ca_bundle=ca)) as api,
            channel(f"127.0.0.1:{server.server.executor_port}", executors) as executor,
        ):
            yield Certified(server, api, executor)


def test_a_certified_executor_is_not_granted_a_run_of_a_namespace_its_certificate_does_not_carry(
    certified_server: Certified,
) -> None:
    certified = certified_server
    stream = RawStream(certified.executor, certified.server, None, CERTIFIED, ("default",))
    try:
        stream.next("welcome")
        theirs = new_run(certified.api, certified.server, namespace="team-b")  # on the queue it serves
        assert claimed(stream, theirs) == pb.CLAIM_OUTCOME_NOT_FOUND
        assert claimed(stream, pb.AttemptRef(run=theirs.run, attempt=2)) == pb.CLAIM_OUTCOME_NOT_FOUND
        assert get_run(certified.api, certified.server, theirs).state != run_pb2.RUN_STATE_RUNNING
        ours = new_run(certified.api, certified.server, namespace="team-a")
        assert claimed(stream, ours) == pb.CLAIM_OUTCOME_GRANTED
        assert get_run(certified.api, certified.server, ours).executor == CERTIFIED
    finally:
        stream.close()
