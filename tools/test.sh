#!/usr/bin/env bash
# `make test`: static checks and the dashboard's unit tests (Vitest), then the whole pytest suite (or what the
# pytest arguments given name) against PostgreSQL, Redis and Kafka started here (or the ones named by
# JOBMESH_DATABASE_URL / JOBMESH_REDIS_URL / JOBMESH_KAFKA_BOOTSTRAP), stopped after; the browser tests drive
# Debian's Chromium, installed here once.
set -euo pipefail
cd "$(dirname "$0")/.."

# The services start while the static checks run (they mostly wait on the JVM and the disk); what they say
# comes after the checks' output. Whatever happens, they are stopped, once their start has ended.
state=.jobmesh/test-services
services_log=.jobmesh/test-services.log
mkdir -p .jobmesh
bash tools/services/services.sh up "$state" >"$services_log" 2>&1 &
starting=$!
trap 'wait "$starting" 2>/dev/null || true; bash tools/services/services.sh down "$state"' EXIT

bash tools/lint.sh
echo "test: vitest (clients/web)"
npm run --silent test --workspace clients/web
bash tools/services/services.sh browser  # Debian's Chromium, for tests/web
bash tools/services/services.sh prometheus  # Debian's Prometheus and promtool, for the metrics tests

if ! wait "$starting"; then
	cat "$services_log" >&2
	exit 1
fi
cat "$services_log"
# shellcheck disable=SC1091
source "$state/env"
export JOBMESH_SERVICES_DIR="$PWD/$state"  # the degraded-mode tests freeze these services
export CI="${CI:-}"
if (($#)); then
	.venv/bin/python -m pytest "$@"
	exit
fi
# Two pytest runs, each listing its slowest tests to keep the time in view:
# - everything but the timing tests, on JOBMESH_TEST_WORKERS pytest-xdist workers (4: most tests wait on
#   processes, streams and timers rather than compute). Each worker has its own Redis database
#   (tests/conftest.py); databases, queue names and topics are made per module or test; a module that stops
#   or freezes a service starts its own (tests/acceptance/conftest.py, `private_services`);
# - then the tests that assert how soon something happens (marked `timing`), on 3 workers and nothing else:
#   they mostly wait (on processes, timers, outages) and together keep about one core busy, so the machine
#   stays far quieter for them than the main tier keeps it.
workers=${JOBMESH_TEST_WORKERS:-4}
.venv/bin/python -m pytest -n "$workers" --dist worksteal -m "not timing" --durations=30
.venv/bin/python -m pytest -n 3 --dist worksteal -m timing --durations=10
