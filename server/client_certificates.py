"""Executors known by their client certificates: the `CredentialSource` of the executor address.

A call that came with a verified client certificate (see `server.tls.has_verified_certificate`) stands for
the executor named by the certificate's subject common name (CN). The queues that name may claim come from
the server's configuration, `NAME=QUEUE+QUEUE,...`, where `*` as a name is every certified executor not named
and `*` as a queue is every queue. A certificate whose name the configuration does not grant is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from jobmesh.core.errors import Unauthenticated
from jobmesh.core.names import QUEUE_NAME
from jobmesh.server.principals import ANY_NAMESPACE, ExecutorGrant, Principal
from jobmesh.server.tls import has_verified_certificate

__all__ = ["ClientCertificates", "parse_certificate_grants"]

ANY_NAME = "*"


def parse_certificate_grants(text: str) -> Mapping[str, frozenset[str]]:
    """`executor-1=default+mail,*=default` → {name: queues}; ValueError saying what was expected."""
    grants: dict[str, frozenset[str]] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, equals, queues = (item.strip() for item in entry.partition("="))
        names = frozenset(filter(None, (queue.strip() for queue in queues.split("+"))))
        if not equals or not name or not names:
            raise ValueError(f"expected NAME=QUEUE[+QUEUE...] entries, got {entry!r}")
        if bad := [q for q in names if q != ANY_NAMESPACE and not QUEUE_NAME.match(q)]:
            raise ValueError(f"{bad[0][:100]!r} is not a queue name")
        grants[name] = names
    if not grants:
        raise ValueError(f"expected NAME=QUEUE[+QUEUE...] entries, got {text!r}")
    return grants  # a plain dict: server workers get their config pickled


class ClientCertificates:
    """The executor principal of a call's verified client certificate."""

    def __init__(
        self, grants: Mapping[str, frozenset[str]], namespaces: frozenset[str] = frozenset({ANY_NAMESPACE})
    ) -> None:
        self._grants = MappingProxyType(dict(grants))
        self._namespaces = namespaces

    def principal_of(
        self, metadata: Mapping[str, str], peer: Mapping[str, Sequence[bytes]]
    ) -> Principal | None:
        if not has_verified_certificate(peer):
            return None
        names = [value.decode("utf-8", "replace") for value in peer.get("x509_common_name", ())]
        if len(names) != 1 or not names[0]:
            raise Unauthenticated(f"a client certificate with {len(names)} common names")
        name = names[0]
        queues = self._grants.get(name, self._grants.get(ANY_NAME))
        if queues is None:
            raise Unauthenticated(f"the client certificate of {name!r} is granted no queue")
        grant = ExecutorGrant(name=name, queues=queues, namespaces=self._namespaces)
        return Principal(subject=f"executor:{name}", executor=grant)
