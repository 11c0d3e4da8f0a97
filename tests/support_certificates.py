"""Real X.509 certificates for tests, made with `cryptography`: certificate authorities, server leaves (SANs
`localhost` and 127.0.0.1 by default) and client leaves, written as PEM files.

    ca = CertificateAuthority("test CA")
    server = ca.issue_server(tmp_path / "server")   # server.chain, server.key
    client = ca.issue_client(tmp_path / "exec", "executor-1")
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAMES = ("localhost", "127.0.0.1")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


@dataclass(frozen=True)
class Leaf:
    """A leaf certificate and its key, in memory and in files (`chain` holds the leaf then its CA)."""

    certificate: x509.Certificate
    chain: Path
    key: Path

    @property
    def serial(self) -> int:
        return self.certificate.serial_number

    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


class CertificateAuthority:
    """A self-signed CA that issues leaves; `bundle` is its certificate's PEM file once `write` is called."""

    def __init__(self, common_name: str = "jobmesh test CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )

    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.pem())
        return path

    def issue(
        self, prefix: Path, common_name: str, *, server_names: tuple[str, ...] = (), client: bool = False
    ) -> Leaf:
        """A leaf written to `PREFIX.chain` and `PREFIX.key`: for TLS servers (with SANs) or clients."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if server_names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_san(name) for name in server_names]), critical=False
            )
        certificate = builder.sign(self.key, hashes.SHA256())
        prefix.parent.mkdir(parents=True, exist_ok=True)
        chain, key_path = prefix.with_suffix(".chain"), prefix.with_suffix(".key")
        chain.write_bytes(certificate.public_bytes(serialization.Encoding.PEM) + self.pem())
        key_path.write_bytes(_pem_key(key))
        key_path.chmod(0o600)
        return Leaf(certificate, chain, key_path)

    def issue_server(self, prefix: Path, names: tuple[str, ...] = SERVER_NAMES) -> Leaf:
        return self.issue(prefix, names[0], server_names=names)

    def issue_client(self, prefix: Path, common_name: str) -> Leaf:
        return self.issue(prefix, common_name, client=True)


def serial_of_pem(pem: bytes) -> int:
    """The serial number of the first certificate in `pem`."""
    return x509.load_pem_x509_certificate(pem).serial_number
