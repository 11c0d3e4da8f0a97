"""The pipeline benchmark's `--secure` mode: the mesh as "Running it securely" (README) runs it. The API is
served over TLS with authentication on and the senders call it with an operator's opaque token; executors
connect to an address of their own over mutual TLS, each known by its client certificate, whose common name
is its executor id. Certificates come from a CA made for the run (`tests/support_certificates.py`), tokens
from `jobmesh.server.auth.opaque_tokens`, as `jobmesh token new` makes them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jobmesh.server.auth.opaque_tokens import append_entry, new_opaque_token, token_entry
from jobmesh.transport.tls import ChannelTls
from tests.support_certificates import CertificateAuthority

Metadata = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Security:
    """What the processes and the load of one secure run present and check."""

    ca_bundle: Path
    server_flags: tuple[str, ...]
    executor_flags: dict[str, tuple[str, ...]]  # by executor id
    executor_address: str
    token: str  # the senders' operator token

    def client_tls(self) -> ChannelTls:
        return ChannelTls(ca_bundle=self.ca_bundle)

    def metadata(self) -> Metadata:
        return (("authorization", f"Bearer {self.token}"),)


def prepare(work: Path, queue: str, executor_ids: Sequence[str], executor_address: str) -> Security:
    """A CA, the server's certificate, one client certificate per executor and an operator's token, written
    under `work/secure`."""
    folder = work / "secure"
    folder.mkdir(exist_ok=True)
    authority = CertificateAuthority("jobmesh benchmark CA")
    ca_bundle = authority.write(folder / "ca.pem")
    server = authority.issue_server(folder / "server")
    token, tokens = new_opaque_token(), folder / "tokens.yaml"
    append_entry(tokens, token_entry(token, "benchmark-load", {"roles": {"*": "operator"}}))
    server_flags = (
        *("--tls-cert", str(server.chain), "--tls-key", str(server.key)),
        *("--tls-client-ca", str(ca_bundle), "--executor-listen", executor_address),
        *("--authentication", "on", "--token-hashes", str(tokens)),
        *("--executor-certificates", f"*={queue}"),
    )
    executor_flags: dict[str, tuple[str, ...]] = {}
    for executor_id in executor_ids:
        leaf = authority.issue_client(folder / executor_id, executor_id)
        executor_flags[executor_id] = (
            *("--tls-ca", str(ca_bundle)),
            *("--tls-client-cert", str(leaf.chain), "--tls-client-key", str(leaf.key)),
        )
    return Security(ca_bundle, server_flags, executor_flags, executor_address, token)
