"""The hops from the mesh to its services over TLS, against the real services that `make test` starts: each
also serves TLS with a certificate of a CA made for the run (tools/services/services.sh, `make_tls`).

PostgreSQL by libpq's `sslmode=verify-full` in the database URL (as the `tls_only` role, which the server
refuses without TLS), Redis by `rediss://`, Kafka by the queue URL's `security_protocol=SSL`: each works with
the right CA and is refused, with the adapter's own error, with another CA or without TLS.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy
from sqlalchemy import text

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.factory import open_store
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.queue import QueueUnavailable
from jobmesh.core.ports.signals import CancelNotice, SignalsUnavailable
from tests.adapters.queue.support import drain, make_run, names
from tests.support import require_service_url
from tests.support_certificates import CertificateAuthority


def services_ca() -> str:
    return require_service_url("JOBMESH_SERVICES_CA")


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA that vouches for none of the services."""
    return CertificateAuthority("not the services' CA").write(tmp_path_factory.mktemp("ca") / "other.pem")


def with_ca(url: str, option: str, ca: Path | str) -> str:
    """`url` with its CA option pointing at `ca` instead."""
    base, _, query = url.partition("?")
    kept = [part for part in query.split("&") if part and not part.startswith(f"{option}=")]
    return f"{base}?{'&'.join([*kept, f'{option}={ca}'])}"


# PostgreSQL -----------------------------------------------------------------------------------------------


@pytest.mark.postgres
def test_the_store_works_over_tls_verified_by_the_ca() -> None:
    store = open_store(require_service_url("JOBMESH_DATABASE_TLS_URL"))
    try:
        with store.engine.connect() as connection:
            ssl = connection.execute(text("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))
            assert ssl.scalar() is True
        assert store.session_renewals(["nobody"]) == {}
    finally:
        store.close()


@pytest.mark.postgres
def test_the_store_refuses_a_server_that_another_ca_vouches_for_and_plaintext_is_refused(
    other_ca: Path,
) -> None:
    url = require_service_url("JOBMESH_DATABASE_TLS_URL")
    for refused in (with_ca(url, "sslrootcert", other_ca), with_ca(url, "sslmode", "disable")):
        engine = sqlalchemy.create_engine(refused, poolclass=sqlalchemy.pool.NullPool)
        try:
            with pytest.raises(sqlalchemy.exc.OperationalError) as error, engine.connect():
                pass
        finally:
            engine.dispose()
        assert "certificate verify failed" in str(error.value) or "no encryption" in str(error.value)


# Redis ----------------------------------------------------------------------------------------------------


@pytest.mark.redis
def test_the_signal_bus_works_over_tls() -> None:
    bus = open_signals(require_service_url("JOBMESH_REDIS_TLS_URL"))
    received: list[CancelNotice] = []
    came = threading.Event()

    def handle(notice: CancelNotice) -> None:
        received.append(notice)
        came.set()

    try:
        subscription = bus.subscribe_cancels(handle)
        ref = AttemptRef(f"job-{uuid.uuid4().hex[:8]}", "run-1", 1)
        notice = CancelNotice(executor_id="exec-tls", attempts=(ref,), reason="over TLS")
        for _ in range(50):  # the subscription comes up in the background: publish until it hears
            bus.publish_cancel(notice)
            if came.wait(0.2):
                break
        assert received
        assert set(received) == {notice}
        subscription.close()
        bus.set_cancel_keys([ref], ttl=timedelta(minutes=1))
        assert bus.cancelled([ref]) == {ref}
    finally:
        bus.close()


@pytest.mark.redis
def test_the_signal_bus_refuses_another_ca_and_plaintext_on_the_tls_port(other_ca: Path) -> None:
    url = require_service_url("JOBMESH_REDIS_TLS_URL")
    for refused in (
        with_ca(url, "ssl_ca_certs", other_ca),
        "redis://" + url.removeprefix("rediss://").partition("?")[0],
    ):
        bus = open_signals(refused)
        try:
            with pytest.raises(SignalsUnavailable):
                bus.set_cancel_keys([AttemptRef("job", "run", 1)], ttl=timedelta(minutes=1))
        finally:
            bus.close()


# Kafka ----------------------------------------------------------------------------------------------------


def kafka_tls_url(ca: Path | str) -> str:
    bootstrap = require_service_url("JOBMESH_KAFKA_TLS_BOOTSTRAP")
    return f"kafka://{bootstrap}?security_protocol=SSL&ssl_ca_location={ca}&session_timeout_ms=2000"


@pytest.fixture
def queue_name() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


@pytest.mark.kafka
def test_the_queue_publishes_and_delivers_over_tls(queue_name: str) -> None:
    queue = open_queue(kafka_tls_url(services_ca()))
    try:
        consumer = queue.consumer(f"group-{queue_name}", [queue_name])
        run = make_run(queue_name, "job-tls", "run-tls")
        queue.publish([run])
        got = drain(consumer, 1, timeout=30)
        assert names(got) == ["jobs/job-tls/runs/run-tls"]
        assert got[0].run == run
        consumer.commit(got)
        consumer.close()
    finally:
        queue.close()


@pytest.mark.kafka
def test_the_queue_refuses_brokers_that_another_ca_vouches_for(other_ca: Path, queue_name: str) -> None:
    queue = open_queue(kafka_tls_url(other_ca))
    try:
        with pytest.raises(QueueUnavailable):
            queue.publish([make_run(queue_name, "job-tls", "run-refused")], timeout=5.0)
    finally:
        queue.close()


# The services' folder is written by services.sh, which starts all three.
@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.kafka
def test_the_env_file_names_every_tls_service() -> None:
    env = (Path(require_service_url("JOBMESH_SERVICES_DIR")) / "env").read_text()
    for variable in ("JOBMESH_DATABASE_TLS_URL", "JOBMESH_REDIS_TLS_URL", "JOBMESH_KAFKA_TLS_BOOTSTRAP"):
        assert f"export {variable}=" in env
