"""`.venv/bin/python -m benchmarks.peers`: see `benchmarks/peers/bench.py`."""

import sys

from benchmarks.peers.bench import main

sys.exit(main())
