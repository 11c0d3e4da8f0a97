import sys

from jobmesh.cli import main

sys.exit(main())
