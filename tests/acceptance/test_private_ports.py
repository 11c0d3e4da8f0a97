"""The private services' ports (tests/acceptance/conftest.py): each pytest-xdist worker has a set of its own,
apart from the suite's set and below the kernel's ephemeral range."""

from __future__ import annotations

import re

from tests.acceptance.conftest import SERVICES, private_ports

EPHEMERAL_FLOOR = 32768  # Linux's default ip_local_port_range starts here


def suite_ports() -> set[int]:
    """The suite's preferred ports, as tools/services/services.sh names them."""
    match = re.search(r"JOBMESH_SERVICES_PORTS:-([\d ]+)\}", SERVICES.read_text())
    assert match is not None
    return {int(port) for port in match.group(1).split()}


def test_every_workers_private_ports_are_its_own() -> None:
    sets = [{int(port) for port in private_ports(f"gw{index}").split()} for index in range(8)]
    assert private_ports("master") == private_ports("gw0")
    taken = set(suite_ports())
    for ports in sets:
        assert len(ports) == 6
        assert not ports & taken, ports & taken
        assert max(ports) < EPHEMERAL_FLOOR
        taken |= ports
