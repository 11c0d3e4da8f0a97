"""`python -m jobmesh.processes` is the `jobmesh` command."""

import sys

from jobmesh.processes.command import main

sys.exit(main())
