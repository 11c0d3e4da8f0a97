#!/usr/bin/env bash
# `make test`: static checks, then the whole pytest suite against PostgreSQL, Redis and Kafka started here
# (or the ones named by JOBMESH_DATABASE_URL / JOBMESH_REDIS_URL / JOBMESH_KAFKA_BOOTSTRAP), stopped after.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/lint.sh

state=.jobmesh/test-services
trap 'bash tools/services/services.sh down "$state"' EXIT
bash tools/services/services.sh up "$state"
# shellcheck disable=SC1091
source "$state/env"
export JOBMESH_SERVICES_DIR="$PWD/$state"  # the degraded-mode tests freeze these services
export CI="${CI:-}"
.venv/bin/python -m pytest "$@"
