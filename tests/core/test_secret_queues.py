"""Secrets granted to some queues of their namespace (core/secret_refs.py): the grants' form, and what
`refused_reference` tells a job of each namespace and queue."""

from __future__ import annotations

import pytest

from jobmesh.core.secret_refs import SecretQueues, parse_secret_queues, refused_reference, secret_reference

GRANTS = parse_secret_queues(" TOKEN = mail , team-a/DB_PASSWORD=db+reports ")


def refusal(reference: str, namespace: str, queue: str, granted: SecretQueues = GRANTS) -> str | None:
    parsed = secret_reference(reference)
    assert parsed is not None
    return refused_reference(parsed, namespace, queue, granted)


def test_grants_name_a_secret_as_a_secrets_file_does() -> None:
    assert GRANTS.granted == {
        ("default", "TOKEN"): frozenset({"mail"}),
        ("team-a", "DB_PASSWORD"): frozenset({"db", "reports"}),
    }


@pytest.mark.parametrize(
    ("reference", "namespace", "queue"),
    [
        ("secret://TOKEN", "default", "mail"),
        ("secret://TOKEN", "team-a", "anything"),  # team-a's own TOKEN is not granted to some queues
        ("secret://team-a/DB_PASSWORD", "team-a", "reports"),
        ("secret://DB_PASSWORD", "team-a", "db"),
        ("secret://OTHER", "default", ""),
    ],
)
def test_a_job_on_a_granted_queue_may_reference_the_secret(
    reference: str, namespace: str, queue: str
) -> None:
    assert refusal(reference, namespace, queue) is None


def test_a_job_on_another_queue_is_told_which_queues_may() -> None:
    assert refusal("secret://DB_PASSWORD", "team-a", "mail") == (
        "secret://DB_PASSWORD of namespace 'team-a' is granted to the queues db, reports only:"
        " a job on queue 'mail' may not reference it"
    )
    assert "a job on queue 'default' may not" in (refusal("secret://TOKEN", "default", "") or "")


def test_another_namespaces_secret_is_refused_whatever_the_queue() -> None:
    refused = refusal("secret://team-a/DB_PASSWORD", "team-b", "db")
    assert refused is not None
    assert "may reference only its own namespace's secrets" in refused


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected NAME=QUEUE"),
        (" , ", "expected NAME=QUEUE"),
        ("TOKEN", "expected NAME=QUEUE"),
        ("TOKEN=", "expected NAME=QUEUE"),
        ("TOKEN=+", "expected NAME=QUEUE"),
        ("=mail", "expected NAME=QUEUE"),
        ("has-dash=mail", "expected NAME=QUEUE"),
        ("Team/TOKEN=mail", "expected NAME=QUEUE"),
        ("a/b/TOKEN=mail", "expected NAME=QUEUE"),
        ("secret://TOKEN=mail", "expected NAME=QUEUE"),
        ("TOKEN=Mail", "'Mail' is not a queue name"),
        ("TOKEN=mail+-x", "'-x' is not a queue name"),
        ("TOKEN=mail,TOKEN=db", "granted queues twice"),
        ("TOKEN=mail,default/TOKEN=db", "granted queues twice"),
    ],
)
def test_malformed_grants_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_secret_queues(text)
