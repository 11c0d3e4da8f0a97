#!/usr/bin/env bash
# `make test`: static checks and the dashboard's unit tests (Vitest), then the whole pytest suite (or what the
# arguments name) against PostgreSQL, Redis and Kafka started here (or the ones named by
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
.venv/bin/python -m pytest "$@"
