"""The `jobmesh` command: each process of the mesh, started from its settings (see `processes.settings`), and
the API's commands (`jobmesh jobs`, `jobmesh runs`, `jobmesh apply`) from the Python SDK's CLI
(`jobmesh.client._cli`).

- `jobmesh dev`: the whole mesh in one process on the embedded adapters (SQLite, in-process queue and
  signals).
- `jobmesh server`, `jobmesh watcher`, `jobmesh executor`: each process alone, on the adapters its URLs name.
- `jobmesh migrate`: brings a database's schema up to date.
- `jobmesh jobs …`, `jobmesh runs …`, `jobmesh apply -f FILE`: calls to a server, on the SDK (their options
  and exit codes are theirs).

Every option can also come from its `JOBMESH_*` variable (`--help` names it). A bad value stops the command
before anything starts: exit code 2, and a message that names the option and the variable.

Each command imports what it runs when it runs, so that `jobmesh --help` and the API's commands answer at
once: the processes' wiring loads SQLAlchemy, Alembic, Kafka and Redis; the SDK loads grpc and the contract's
stubs (`tests/processes/test_command_imports.py` checks what each loads; `benchmarks/cli_startup.py` times
them).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from jobmesh.executor.handlers import HandlerRegistry
    from jobmesh.processes.settings import Setting

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
# The SDK's command groups (`jobmesh.client._cli`) and their summaries.
_API_GROUPS = {
    "jobs": "Create, read and steer jobs (JobService, SearchService).",
    "runs": "Read, follow and steer runs.",
    "apply": "Makes the server's jobs match a file: creates, updates and deletes jobs.",
}


class _SettingType(click.ParamType[Any, str]):
    """A setting's parser as a click type: its ValueError becomes click's usage error."""

    def __init__(self, setting: Setting) -> None:
        self.setting = setting
        self.name = setting.metavar

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self.setting.parse(value)
        except ValueError as error:
            self.fail(str(error), param, ctx)


def _setting_options(command: str) -> list[click.Parameter]:
    """The command's options, one per setting that applies to it."""
    from jobmesh.processes import settings

    return [
        click.Option(
            [setting.flag, setting.name],
            envvar=list(setting.variables),
            show_envvar=True,
            type=_SettingType(setting),
            default=None,
            metavar=setting.metavar,
            help=f"{setting.help} (default: {setting.default})".replace("`", ""),
        )
        for setting in settings.settings_of(command)
    ]


class _ProcessCommand(click.Command):
    """A process of the mesh (its name is a command of `settings`): its options are made from the settings
    table when first asked for, since that table imports the adapters' URL parsers."""

    _options: list[click.Parameter] | None = None
    _declared: list[click.Parameter]

    @property
    def params(self) -> list[click.Parameter]:
        if self._options is None:
            self._options = [*_setting_options(str(self.name)), *self._declared]
        return self._options

    @params.setter
    def params(self, declared: list[click.Parameter]) -> None:
        self._declared, self._options = declared, None

    def invoke(self, ctx: click.Context) -> Any:
        """Logs as its settings say before anything runs."""
        from jobmesh.processes.config_builders import log_settings
        from jobmesh.processes.logs import configure_logging

        configure_logging(str(self.name), settings=log_settings(ctx.params))
        return super().invoke(ctx)


class _Unloaded(click.Command):
    """One of the SDK's groups, by its name and summary alone, until it is called."""


class _Mesh(click.Group):
    """The `jobmesh` group: the SDK's groups are imported when one of them is called; its help and its
    suggestions for a mistyped command name them without."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if isinstance(self.commands.get(cmd_name), _Unloaded):
            from jobmesh.client._cli import apply, jobs, runs

            self.add_command(jobs)
            self.add_command(runs)
            self.add_command(apply)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        click.Group(commands=self.commands).format_commands(ctx, formatter)


@contextlib.contextmanager
def _blamed() -> Iterator[None]:
    """A value that parsed but that a component refused: the same usage error, naming its setting."""
    from jobmesh.processes.settings import SettingsError

    try:
        yield
    except SettingsError as error:
        variables = ", ".join(f"'{name}'" for name in error.setting.variables)
        raise click.BadParameter(
            str(error), param_hint=f"'{error.setting.flag}' (env var: {variables})"
        ) from None


def _handlers(values: dict[str, Any]) -> HandlerRegistry | None:
    from jobmesh.executor.handlers import HandlerRegistry
    from jobmesh.processes import settings

    spec = values.get("handlers")
    if spec is None:
        return None
    try:
        return HandlerRegistry.load(spec)
    except ValueError as error:
        raise settings.SettingsError(settings.BY_NAME["handlers"], str(error)) from None


@click.group(cls=_Mesh, context_settings=_CONTEXT)
@click.version_option(package_name="jobmesh", message="%(prog)s %(version)s")
def jobmesh() -> None:
    """A distributed job scheduler: the processes of the mesh (dev, server, watcher, executor, migrate,
    token), and the API from a shell (jobs, runs, apply)."""
    from jobmesh.processes.logs import configure_logging

    configure_logging(click.get_current_context().invoked_subcommand or "jobmesh")


for _name, _summary in _API_GROUPS.items():
    jobmesh.add_command(_Unloaded(_name, help=_summary))


@jobmesh.command(cls=_ProcessCommand, context_settings=_CONTEXT)
def dev(**values: Any) -> None:
    """The whole mesh in one process on the embedded adapters (SQLite by default)."""
    import asyncio

    from jobmesh.processes import assembly, config_builders
    from jobmesh.processes.exposure import Exposure, readable_by_anyone, refuse_insecure_public

    with _blamed():
        plan = (
            config_builders.connections(values),
            config_builders.server_config(values),
            config_builders.watcher_config(values),
            config_builders.executor_config(values, dev=True),
        )
        handlers, dashboard = _handlers(values), config_builders.dashboard_config(values)
        exposure = Exposure(
            listen=plan[1].listen,
            dashboard_listen=dashboard.dashboard_listen if dashboard.dashboard else None,
            tls=plan[1].tls is not None,
            authentication=plan[1].authentication,
        )
        warnings = refuse_insecure_public(exposure, allowed=bool(values.get("allow_insecure_public")))
        warnings += readable_by_anyone((*plan[1].secret_files, *plan[3].credential_files))
    for warning in warnings:
        print(warning, file=sys.stderr, flush=True)
    asyncio.run(assembly.run_dev(*plan, handlers=handlers, dashboard=dashboard))


@jobmesh.command(cls=_ProcessCommand, context_settings=_CONTEXT)
def server(**values: Any) -> None:
    """The gRPC server (JobService, SearchService, ExecutorControl, health, reflection)."""
    import asyncio

    from jobmesh.processes import config_builders
    from jobmesh.processes.exposure import readable_by_anyone, unprotected_server

    with _blamed():
        plan = config_builders.connections(values), config_builders.server_config(values)
        workers = config_builders.server_workers(values, plan[0])
    config = plan[1]
    warnings = unprotected_server(
        config.listen, tls=config.tls is not None, authentication=config.authentication
    )
    for warning in [*warnings, *readable_by_anyone(config.secret_files)]:
        print(warning, file=sys.stderr, flush=True)
    if workers > 1:  # a supervisor, which imports nothing of the server side
        from jobmesh.processes.server_workers import run_server_workers

        sys.exit(run_server_workers(*plan, workers))
    from jobmesh.processes import assembly

    asyncio.run(assembly.run_server(*plan))


@jobmesh.command(cls=_ProcessCommand, context_settings=_CONTEXT)
def watcher(**values: Any) -> None:
    """The scheduling loop (any number may run: one leads, the others stand by)."""
    import asyncio

    from jobmesh.processes import assembly, config_builders

    with _blamed():
        plan = config_builders.connections(values), config_builders.watcher_config(values)
    asyncio.run(assembly.run_watcher(*plan))


@jobmesh.command(cls=_ProcessCommand, context_settings=_CONTEXT)
def executor(**values: Any) -> None:
    """A worker that runs jobs; it connects to the server given by --server."""
    import asyncio

    from jobmesh.processes import assembly, config_builders
    from jobmesh.processes.exposure import readable_by_anyone

    with _blamed():
        config = config_builders.executor_config(values)
        handlers = _handlers(values)
    for warning in readable_by_anyone(config.credential_files):
        print(warning, file=sys.stderr, flush=True)
    asyncio.run(assembly.run_executor(config, handlers))


@jobmesh.command(cls=_ProcessCommand, context_settings=_CONTEXT)
def migrate(**values: Any) -> None:
    """Upgrades a database's schema to the latest version."""
    from jobmesh.processes import assembly, config_builders

    with _blamed():
        connections = config_builders.connections(values)
    assembly.run_migrations(connections)


@jobmesh.group(context_settings=_CONTEXT)
def token() -> None:
    """Opaque bearer tokens for the server's token file (`--token-hashes`)."""


def _pairs(values: Sequence[str], option: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        namespace, _, role = value.partition("=")
        if not namespace or not role:
            raise click.BadParameter(f"expected NAMESPACE=ROLE, got {value!r}", param_hint=option)
        pairs[namespace] = role
    return pairs


@token.command("new", context_settings=_CONTEXT)
@click.option("--subject", required=True, help="who the token stands for, in logs and the audit trail")
@click.option(
    "--role",
    "roles",
    multiple=True,
    metavar="NAMESPACE=ROLE",
    help="viewer, operator or admin in a namespace (`*`: all); repeatable",
)
@click.option(
    "--executor",
    "executor_name",
    metavar="NAME",
    help="the executor name the token binds (an executor's token)",
)
@click.option(
    "--queue",
    "queues",
    multiple=True,
    metavar="QUEUE",
    help="a queue that executor may serve (default: all); repeatable",
)
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    metavar="NS",
    help="a namespace whose runs it may claim (default: all); repeatable",
)
@click.option(
    "--append",
    "append_to",
    type=click.Path(dir_okay=False, path_type=Path),
    help="add the entry to this token file instead of printing it",
)
def new_token(  # noqa: PLR0917 - click passes options by name
    subject: str,
    roles: tuple[str, ...],
    executor_name: str | None,
    queues: tuple[str, ...],
    namespaces: tuple[str, ...],
    append_to: Path | None,
) -> None:
    """A new opaque token, printed once, and its entry for the token file (only the token's SHA-256 is kept
    there). Give the token to its caller; it cannot be read back."""
    import yaml

    from jobmesh.server.auth.opaque_tokens import append_entry, new_opaque_token, token_entry

    grant: dict[str, object] = {}
    if roles:
        grant["roles"] = _pairs(roles, "'--role'")
    if executor_name:
        grant["executor"] = {
            "name": executor_name,
            "queues": list(queues or ["*"]),
            "namespaces": list(namespaces or ["*"]),
        }
    elif queues or namespaces:
        raise click.BadParameter("--queue and --namespace belong to an --executor", param_hint="'--executor'")
    secret = new_opaque_token()
    try:
        entry = token_entry(secret, subject, grant)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    if append_to is not None:
        append_entry(append_to, entry)
        click.echo(f"# added to {append_to}: the server reads it again within a second", err=True)
    else:
        click.echo("# the entry, for the server's token file (under `tokens:`):", err=True)
        click.echo(yaml.safe_dump([entry], sort_keys=False), err=True, nl=False)
    click.echo(secret)


def resolved(command: str, args: Sequence[str] = ()) -> dict[str, Any]:
    """The values a command would run with (flags, then the environment; None where neither sets one),
    resolved as the command itself resolves them."""
    target = jobmesh.commands[command]
    with target.make_context(command, list(args)) as context:
        return dict(context.params)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: the exit code of the command (2 for bad usage or settings, 1 for an OS error)."""
    try:
        code = jobmesh.main(
            args=list(argv) if argv is not None else None, prog_name="jobmesh", standalone_mode=False
        )
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.exceptions.Abort:
        return 130
    except OSError as error:
        print(f"jobmesh: {error}", file=sys.stderr)
        return 1
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
