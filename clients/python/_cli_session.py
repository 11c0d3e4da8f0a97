"""What every `jobmesh jobs` and `jobmesh runs` command shares: the connection options (each also from a
`JOBMESH_*` variable), the output format, and the exit code each kind of failure ends with."""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import click

from jobmesh.client._client import Client
from jobmesh.client._config import DEFAULT_TARGET, ClientConfig, RetryConfig
from jobmesh.client._errors import (
    Conflict,
    DeadlineExceeded,
    InvalidArgument,
    JobmeshError,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from jobmesh.client._output import Status
from jobmesh.transport.tls import ChannelTls, TlsFileError

__all__ = [
    "EXIT_CODES_HELP",
    "EXIT_CONFLICT",
    "EXIT_FAILED_RUN",
    "EXIT_INVALID",
    "Session",
    "complete_jobs",
    "connected",
]

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OTHER, EXIT_INVALID, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_DENIED, EXIT_UNAVAILABLE = 1, 2, 3, 4, 5, 6
EXIT_FAILED_RUN, EXIT_INTERRUPTED = 7, 130
_EXIT_CODES: tuple[tuple[type[JobmeshError], int], ...] = (
    (InvalidArgument, EXIT_INVALID),
    (NotFound, EXIT_NOT_FOUND),
    (Conflict, EXIT_CONFLICT),
    (PermissionDenied, EXIT_DENIED),
    (Unauthenticated, EXIT_DENIED),
    (Unavailable, EXIT_UNAVAILABLE),
    (DeadlineExceeded, EXIT_UNAVAILABLE),
    (ResourceExhausted, EXIT_UNAVAILABLE),
)
EXIT_CODES_HELP = """\b
Exit codes:
  0    done
  1    any other failure, or a --filter call that could not change some (each is printed)
  2    bad usage, or INVALID_ARGUMENT (each field violation is printed); `apply`: a bad file
  3    NOT_FOUND: no such job or run
  4    ALREADY_EXISTS, ABORTED (stale --etag) or FAILED_PRECONDITION; `apply`: an id it must not take
  5    UNAUTHENTICATED or PERMISSION_DENIED
  6    UNAVAILABLE, DEADLINE_EXCEEDED (or a --timeout that passed) or RESOURCE_EXHAUSTED
  7    `runs get --wait`: the run ended, but not SUCCEEDED
  130  interrupted (Ctrl-C)

Shell completion: eval "$(_JOBMESH_COMPLETE=bash_source jobmesh)" (zsh_source, fish_source);
job names come from the server the command names."""


def _told(error: JobmeshError) -> int:
    """Tells a failed call on stderr (its field violations and reason too); its exit code."""
    lines = [f"jobmesh: {error}"]
    lines += [
        f"  {v.field}: {v.description}" for v in error.field_violations if v.description not in lines[0]
    ]
    if error.reason and error.reason != error.code.name:
        lines.append(f"  reason: {error.reason}")
    click.echo("\n".join(lines), err=True)
    return next((code for kind, code in _EXIT_CODES if isinstance(error, kind)), EXIT_OTHER)


@dataclass
class Session:
    """One command's connection and output format."""

    config: ClientConfig
    output: str
    status: Status

    @property
    def json(self) -> bool:
        return self.output == "json"

    @contextlib.contextmanager
    def client(self) -> Iterator[Client]:
        with Client.from_config(self.config) as client:
            yield client


def _token(token: str | None, token_file: Path | None) -> str | None:
    if token and token_file:
        raise click.UsageError("give --token or --token-file, not both")
    if token_file is not None:
        return token_file.read_text().strip() or None
    return token or None


def _tls(
    tls: bool, ca: Path | None, cert: Path | None, key: Path | None, server_name: str | None
) -> ChannelTls | None:
    if not (tls or ca or cert or key):
        return None
    try:
        return ChannelTls(ca_bundle=ca, client_certificate=cert, client_key=key, server_name=server_name)
    except ValueError as error:
        raise click.UsageError(f"--tls-cert and --tls-key: {error}") from None


_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
_OPTIONS = (
    click.option(
        "--server",
        envvar="JOBMESH_SERVER",
        default=DEFAULT_TARGET,
        show_default=True,
        show_envvar=True,
        metavar="HOST:PORT",
        help="the jobmesh server (or the proxy in front of it)",
    ),
    click.option(
        "--token", envvar="JOBMESH_TOKEN", show_envvar=True, help="a bearer token (prefer --token-file)"
    ),
    click.option(
        "--token-file",
        envvar="JOBMESH_TOKEN_FILE",
        show_envvar=True,
        type=_FILE,
        help="a file holding the token",
    ),
    click.option(
        "--tls", is_flag=True, help="TLS verified by the system's roots (implied by the options below)"
    ),
    click.option(
        "--tls-ca",
        envvar="JOBMESH_TLS_CA",
        show_envvar=True,
        type=_FILE,
        help="the CA bundle (PEM) that verifies the server",
    ),
    click.option(
        "--tls-cert",
        "--tls-client-cert",
        "tls_cert",
        envvar="JOBMESH_TLS_CLIENT_CERT",
        show_envvar=True,
        type=_FILE,
        help="a client certificate (PEM) for mutual TLS",
    ),
    click.option(
        "--tls-key",
        "--tls-client-key",
        "tls_key",
        envvar="JOBMESH_TLS_CLIENT_KEY",
        show_envvar=True,
        type=_FILE,
        help="the key of --tls-cert (PEM)",
    ),
    click.option(
        "--tls-server-name",
        envvar="JOBMESH_TLS_SERVER_NAME",
        show_envvar=True,
        metavar="NAME",
        help="the name the server's certificate must carry, when --server is an IP or another name",
    ),
    click.option(
        "--output",
        "-o",
        envvar="JOBMESH_OUTPUT",
        show_envvar=True,
        type=click.Choice(["table", "json", "name"]),
        default="table",
        show_default=True,
        help="a table; JSON (one object per line for logs and watch); or only the resources' names",
    ),
)


def connected(function: F) -> F:
    """The connection and output options, given to the command as one `Session`; the SDK's errors become
    exit codes and Ctrl-C ends it with 130."""

    @functools.wraps(function)
    def command(
        *args: Any,
        server: str,
        token: str | None,
        token_file: Path | None,
        tls: bool,
        tls_ca: Path | None,
        tls_cert: Path | None,
        tls_key: Path | None,
        tls_server_name: str | None,
        output: str,
        **values: Any,
    ) -> Any:
        try:
            config = ClientConfig(
                server, _tls(tls, tls_ca, tls_cert, tls_key, tls_server_name), _token(token, token_file)
            )
        except ValueError as error:
            raise click.UsageError(str(error)) from None
        session = Session(config, output, Status())
        try:
            return function(session, *args, **values)
        except JobmeshError as error:
            session.status.clear()
            raise click.exceptions.Exit(_told(error)) from None
        except (ValueError, TlsFileError) as error:
            raise click.UsageError(str(error)) from None
        except KeyboardInterrupt:
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        finally:
            session.status.clear()

    for option in reversed(_OPTIONS):
        command = option(command)
    return command  # type: ignore[return-value]


_COMPLETION_LIMIT = 50


def complete_jobs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The jobs whose names start with what is typed, from the server (and with the token and TLS) that the
    command's options so far name; nothing when that server does not answer within a second."""
    values = ctx.params
    prefix = incomplete.removeprefix("jobs/")
    if '"' in prefix or "\\" in prefix:
        return []
    try:
        tls = _tls(
            bool(values.get("tls")),
            values.get("tls_ca"),
            values.get("tls_cert"),
            values.get("tls_key"),
            values.get("tls_server_name"),
        )
        config = ClientConfig(
            values.get("server") or DEFAULT_TARGET,
            tls,
            _token(values.get("token"), values.get("token_file")),
            timedelta(seconds=1),
            RetryConfig(max_attempts=1),
        )
        with Client.from_config(config) as client:
            found = client.list_jobs(filter=f'name = "jobs/{prefix}*"', page_size=_COMPLETION_LIMIT)
            names = [job.name for job in itertools.islice(found, _COMPLETION_LIMIT)]
    except (JobmeshError, ValueError, OSError, click.ClickException):
        return []
    return names if incomplete.startswith("jobs/") else [name.removeprefix("jobs/") for name in names]
