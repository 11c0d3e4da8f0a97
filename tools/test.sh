#!/usr/bin/env bash
# `make test`: static checks and the dashboard's unit tests (Vitest), then the whole pytest suite (or what the
# pytest arguments given name) against PostgreSQL, Redis and Kafka started here (or the ones named by
# JOBMESH_DATABASE_URL / JOBMESH_REDIS_URL / JOBMESH_KAFKA_BOOTSTRAP), stopped after; the browser tests drive
# Debian's Chromium, installed here once.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/lint.sh
echo "test: vitest (clients/web)"
npm run --silent test --workspace clients/web
bash tools/services/services.sh browser  # Debian's Chromium, for tests/web

state=.jobmesh/test-services
trap 'bash tools/services/services.sh down "$state"' EXIT
bash tools/services/services.sh up "$state"
# shellcheck disable=SC1091
source "$state/env"
export JOBMESH_SERVICES_DIR="$PWD/$state"  # the degraded-mode tests freeze these services
export CI="${CI:-}"
if (($#)); then
	.venv/bin/python -m pytest "$@"
	exit
fi
# The garbage test (tests/server/test_garbage.py, 10,000 examples per RPC on PostgreSQL) runs in a pytest run
# of its own, on two workers, after the rest, which runs in one process (its timing checks and the service
# outages it makes must not share the machine). Measured on 2 cores: 14 min and 6 min 49 s. Each run lists
# its slowest tests, to keep the time in view.
.venv/bin/python -m pytest --durations=30 --ignore=tests/server/test_garbage.py
.venv/bin/python -m pytest --durations=10 -n 2 tests/server/test_garbage.py
