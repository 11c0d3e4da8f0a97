import sys

from jobmesh.processes.command import main

sys.exit(main())
