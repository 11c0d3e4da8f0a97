"""Executors known by their client certificates: the `CredentialSource` of the executor address.

A call that came with a verified client certificate (see `server.auth.tls.has_verified_certificate`) stands
for the executor named by the certificate's subject common name (CN). The queues and namespaces whose runs
that name may claim come from the server's configuration, `NAME=QUEUE+QUEUE[@NAMESPACE+NAMESPACE],...`, as a
token's executor grant says them: `*` as a name is every certified executor not named, `*` as a queue or a
namespace is every one, and namespaces left out are every namespace. A certificate whose name the
configuration does not grant is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from jobmesh.core.errors import Unauthenticated
from jobmesh.core.names import NAMESPACE, QUEUE_NAME
from jobmesh.server.auth.tls import has_verified_certificate
from jobmesh.server.principals import ANY_NAMESPACE, ExecutorGrant, Principal

__all__ = ["CertificateGrant", "ClientCertificates", "parse_certificate_grants"]

ANY_NAME = "*"
_FORM = "NAME=QUEUE[+QUEUE...][@NAMESPACE[+NAMESPACE...]]"


@dataclass(frozen=True, slots=True)
class CertificateGrant:
    queues: frozenset[str]
    namespaces: frozenset[str] = frozenset({ANY_NAMESPACE})


def parse_certificate_grants(text: str) -> Mapping[str, CertificateGrant]:
    """`executor-1=default+mail@team-a,*=default` → {name: grant}; ValueError saying what was expected."""
    grants: dict[str, CertificateGrant] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, equals, granted = (item.strip() for item in entry.partition("="))
        queues_text, at, namespaces_text = granted.partition("@")
        queues, namespaces = _items(queues_text), _items(namespaces_text)
        if not equals or not name or not queues or (at and not namespaces):
            raise ValueError(f"expected {_FORM} entries, got {entry!r}")
        if bad := [q for q in queues if q != ANY_NAMESPACE and not QUEUE_NAME.match(q)]:
            raise ValueError(f"{bad[0][:100]!r} is not a queue name")
        if bad := [n for n in namespaces if n != ANY_NAMESPACE and not NAMESPACE.match(n)]:
            raise ValueError(f"{bad[0][:100]!r} is not a namespace")
        grants[name] = CertificateGrant(queues, namespaces or frozenset({ANY_NAMESPACE}))
    if not grants:
        raise ValueError(f"expected {_FORM} entries, got {text!r}")
    return grants  # a plain dict: server workers get their config pickled


def _items(text: str) -> frozenset[str]:
    return frozenset(filter(None, (item.strip() for item in text.split("+"))))


class ClientCertificates:
    """The executor principal of a call's verified client certificate."""

    def __init__(self, grants: Mapping[str, CertificateGrant]) -> None:
        self._grants = MappingProxyType(dict(grants))

    def principal_of(
        self, metadata: Mapping[str, str], peer: Mapping[str, Sequence[bytes]]
    ) -> Principal | None:
        if not has_verified_certificate(peer):
            return None
        names = [value.decode("utf-8", "replace") for value in peer.get("x509_common_name", ())]
        if len(names) != 1 or not names[0]:
            raise Unauthenticated(f"a client certificate with {len(names)} common names")
        name = names[0]
        granted = self._grants.get(name, self._grants.get(ANY_NAME))
        if granted is None:
            raise Unauthenticated(f"the client certificate of {name!r} is granted no queue")
        grant = ExecutorGrant(name=name, queues=granted.queues, namespaces=granted.namespaces)
        return Principal(subject=f"executor:{name}", executor=grant)
