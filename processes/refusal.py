"""A setting that cannot work, found when the process starts or first connects (a taken port, a queue that
cannot be the mesh's): shown by the `jobmesh` command as one line, `Error: …`, that names what to change, with
exit code 2, as any other bad setting."""

from __future__ import annotations

import click


class Refused(click.ClickException):
    exit_code = 2
