#!/usr/bin/env bash
# Throwaway local services for the test suites, on 127.0.0.1 only:
# PostgreSQL 15, Redis and a single-node Apache Kafka (KRaft, combined broker+controller).
#
#   tools/services/services.sh up STATE_DIR     start them, write STATE_DIR/env (source it)
#   tools/services/services.sh down STATE_DIR   stop what `up` started, remove the data dirs
#   tools/services/services.sh kafka stop|start STATE_DIR   stop the broker, or start it again on its data
#   tools/services/services.sh postgres stop|start STATE_DIR   stop PostgreSQL at once (`-m immediate`: a
#                                             crash), or start it again on its data and port
#   tools/services/services.sh redis stop|start STATE_DIR      stop Redis, or start it again on its port
#   tools/services/services.sh browser      install Debian's Chromium for the browser tests, once
#   tools/services/services.sh prometheus   Debian's Prometheus and promtool (pinned), unpacked once into the
#                                             cache (nothing installed or started); prints their folder
#
# A service whose variable (JOBMESH_DATABASE_URL, JOBMESH_REDIS_URL, JOBMESH_KAFKA_BOOTSTRAP) is already
# set and non-empty is not started: the given value is written to STATE_DIR/env as it is.
# PYTHON (default .venv/bin/python, relative to the repo root) must have confluent-kafka (Kafka readiness check).
# The Kafka jars are fetched once with Maven (tools/services/kafka/pom.xml) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/jobmesh/kafka-<version>/libs.
# JOBMESH_SERVICES_PORTS (six numbers: postgres redis kafka kafka-controller redis-tls kafka-tls) changes the
# preferred ports, for a second set of services beside the first.
# JOBMESH_SERVICES_DURABLE=1 keeps PostgreSQL's fsync, synchronous_commit and full_page_writes on, for tests
# that crash it and count what an acknowledged commit kept (off by default: the suite runs faster without).
set -euo pipefail
shopt -s inherit_errexit
export LC_NUMERIC=C

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
KAFKA_VERSION=4.4.0 # keep in step with kafka.version in tools/services/kafka/pom.xml
KAFKA_POM=$SCRIPT_DIR/kafka/pom.xml
KAFKA_LOG4J=$SCRIPT_DIR/kafka/log4j2.properties
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms128m -Xmx512m}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_PACKAGE=postgresql-15
# postgres redis kafka-broker kafka-controller, TLS: redis kafka; preferred, below the kernel's ephemeral range
# (a second set, for tests that stop their own services, comes from JOBMESH_SERVICES_PORTS)
read -r -a DEFAULT_PORTS <<<"${JOBMESH_SERVICES_PORTS:-25432 26379 29092 29093 26380 29094}"
((${#DEFAULT_PORTS[@]} == 6)) || { echo "services: JOBMESH_SERVICES_PORTS needs 6 ports" >&2; exit 2; }
READY_TIMEOUT=${JOBMESH_SERVICES_TIMEOUT:-90}

log() { printf 'services: %s\n' "$*"; }
warn() { printf 'services: %s\n' "$*" >&2; }
die() {
	warn "ERROR: $*"
	exit 1
}
usage() {
	echo "usage: $0 up|down STATE_DIR, $0 kafka|postgres|redis stop|start STATE_DIR, $0 browser, $0 prometheus, or $0 sandbox" >&2
	exit 2
}

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }'; }

show_log() { # FILE...: the tail of each log that exists
	local f
	for f in "$@"; do
		[[ -s $f ]] || continue
		warn "---- last lines of $f ----"
		tail -n 40 "$f" >&2 || true
		warn "----"
	done
}

# ---------------------------------------------------------------- installs

APT_UPDATED=0
apt_install() {
	((EUID == 0)) || die "$* missing and not root: install it (apt-get install -y $*)"
	if ((APT_UPDATED == 0)); then
		log "apt-get update"
		apt-get update -qq >/dev/null
		APT_UPDATED=1
	fi
	log "apt-get install -y $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_postgres_installed() { [[ -x $PG_BIN/initdb ]] || apt_install "$PG_PACKAGE"; }
ensure_redis_installed() { command -v redis-server >/dev/null || apt_install redis-server; }
ensure_java_installed() { command -v java >/dev/null || apt_install openjdk-17-jre-headless; }
ensure_maven_installed() { command -v mvn >/dev/null || apt_install maven; }
# the dashboard's browser tests drive it headless (tests/web)
ensure_chromium_installed() { [[ -x /usr/bin/chromium ]] || apt_install chromium; }
# the metrics tests (tests/processes/test_prometheus*.py, tests/deploy): Debian's package, pinned, unpacked
# rather than installed, so that no service of the package's own starts
PROMETHEUS_DEB_VERSION=${JOBMESH_PROMETHEUS_DEB_VERSION:-2.42.0+ds-5+deb12u1}
ensure_prometheus_unpacked() {
	local dir=${XDG_CACHE_HOME:-$HOME/.cache}/jobmesh/prometheus-${PROMETHEUS_DEB_VERSION//[^A-Za-z0-9.-]/_}
	if [[ ! -x $dir/usr/bin/prometheus || ! -x $dir/usr/bin/promtool ]]; then
		local work
		work=$(mktemp -d)
		if ! (cd "$work" && apt-get download -qq "prometheus=$PROMETHEUS_DEB_VERSION" >/dev/null 2>&1); then
			((EUID == 0)) || die "cannot download prometheus=$PROMETHEUS_DEB_VERSION (apt-get update as root first)"
			apt-get update -qq >/dev/null
			(cd "$work" && apt-get download -qq "prometheus=$PROMETHEUS_DEB_VERSION" >/dev/null) ||
				die "apt-get download prometheus=$PROMETHEUS_DEB_VERSION failed"
		fi
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
		dpkg-deb -x "$work"/prometheus_*.deb "$dir.tmp"
		rm -rf "$work" "$dir" && mv "$dir.tmp" "$dir"
	fi
	echo "$dir/usr/bin"
}
# executors run commands in a bubblewrap sandbox (executor/sandbox.py); without it, with a warning
ensure_bubblewrap_installed() {
	command -v bwrap >/dev/null && return
	if ((EUID == 0)); then
		apt_install bubblewrap
	else
		warn "bubblewrap (bwrap) is missing: executors will run commands without namespaces (apt-get install -y bubblewrap)"
	fi
}

python_bin() {
	local p=${PYTHON:-.venv/bin/python}
	if [[ $p != */* ]]; then
		command -v "$p" || die "PYTHON=$p not found on PATH"
	elif [[ $p == /* ]]; then
		echo "$p"
	elif [[ -x $p ]]; then
		echo "$PWD/$p"
	else
		echo "$REPO_ROOT/$p"
	fi
}

# ---------------------------------------------------------------- ports

# pick_ports PREFERRED...: one free loopback port per argument, the preferred one when it is free,
# else one the kernel hands out; all distinct.
pick_ports() {
	"$PY" - "$@" <<'EOF'
import socket, sys

chosen = []

def bindable(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return s.getsockname()[1]
    except OSError:
        return None
    finally:
        s.close()

for want in map(int, sys.argv[1:]):
    port = want if want not in chosen and bindable(want) else None
    while port is None or port in chosen:
        port = bindable(0)
    chosen.append(port)
print(" ".join(map(str, chosen)))
EOF
}

# ---------------------------------------------------------------- processes

proc_alive() { # PID: running, not a zombie
	local state
	[[ -r /proc/$1/stat ]] || return 1
	state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z && $state != X ]]
}

proc_in_state() { # PID: the process belongs to STATE (its command line or working dir points into it)
	local cmd cwd
	cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
	cwd=$(readlink "/proc/$1/cwd" 2>/dev/null) || cwd=
	[[ $cmd == *"$STATE/"* || $cwd == "$STATE/"* ]]
}

wait_gone() { # TIMEOUT PID...: 0 when all gone in time
	local deadline=$((SECONDS + $1)) p left
	shift
	while :; do
		left=0
		for p in "$@"; do proc_alive "$p" && left=1; done
		((left)) || return 0
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# stop_pid NAME PID TIMEOUT [group]: SIGTERM (the process group with "group"), SIGKILL after TIMEOUT s
stop_pid() {
	local name=$1 pid=$2 timeout=$3 group=${4:-} target
	[[ $pid =~ ^[0-9]+$ ]] && proc_alive "$pid" && proc_in_state "$pid" || return 0
	target=$pid
	[[ -n $group ]] && target=-$pid
	kill -TERM -- "$target" 2>/dev/null || true
	if ! wait_gone "$timeout" "$pid"; then
		warn "$name (pid $pid) did not stop in ${timeout}s: SIGKILL"
		kill -KILL -- "$target" 2>/dev/null || true
		wait_gone 10 "$pid" || warn "$name (pid $pid) still there after SIGKILL"
	fi
}

recorded_pid() { # NAME: the pid `up` recorded for it
	[[ -f $STATE/pids ]] || return 0
	awk -v n="$1" '$1 == n { print $2 }' "$STATE/pids" | tail -n 1
}

record_pid() { echo "$1 $2" >>"$STATE/pids"; }

# Any postgres / redis-server / java process still pointing into STATE (a run that died halfway).
sweep() {
	local d pid comm left=()
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		[[ $pid == "$$" ]] && continue
		comm=$(cat "$d/comm" 2>/dev/null) || continue
		case $comm in postgres | redis-server | java) ;; *) continue ;; esac
		proc_alive "$pid" && proc_in_state "$pid" && left+=("$pid")
	done
	((${#left[@]})) || return 0
	warn "killing leftover processes of $STATE: ${left[*]}"
	kill -KILL "${left[@]}" 2>/dev/null || true
	wait_gone 10 "${left[@]}" || warn "processes still there: ${left[*]}"
}

stop_all() {
	local pid
	# Kafka: its own process group (setsid)
	stop_pid kafka "$(recorded_pid kafka)" 30 group
	# Redis
	pid=$(recorded_pid redis)
	[[ -z $pid && -f $STATE/redis/redis.pid ]] && pid=$(<"$STATE/redis/redis.pid")
	stop_pid redis "$pid" 10
	# PostgreSQL
	pid=$(recorded_pid postgres)
	if [[ -f $STATE/postgres/data/postmaster.pid ]]; then
		[[ -n $pid ]] || pid=$(head -n 1 "$STATE/postgres/data/postmaster.pid")
		if [[ $pid =~ ^[0-9]+$ ]] && proc_alive "$pid" && proc_in_state "$pid"; then
			as_pg "$PG_BIN/pg_ctl" -D "$STATE/postgres/data" -m fast -w -t 20 stop >/dev/null 2>&1 || true
		fi
	fi
	stop_pid postgres "$pid" 10 group
	sweep
}

remove_state() {
	rm -rf "${STATE:?}/postgres" "$STATE/redis" "$STATE/kafka" "$STATE/env" "$STATE/env.tmp" "$STATE/pids"
	rmdir "$STATE" 2>/dev/null || true
}

as_pg() { # run as the postgres user when root (initdb and postgres refuse root)
	if ((EUID == 0)); then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# ---------------------------------------------------------------- PostgreSQL

run_postgres() { # PORT: pg_ctl start on STATE's data, until it answers
	local port=$1 dir=$STATE/postgres pid deadline
	as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -o "-p $port -h 127.0.0.1" -w -t "$READY_TIMEOUT" \
		start >"$dir/pg_ctl.log" 2>&1 || {
		show_log "$dir/pg_ctl.log" "$dir/postgres.log"
		die "postgres did not start on 127.0.0.1:$port"
	}
	pid=$(head -n 1 "$dir/data/postmaster.pid")
	record_pid postgres "$pid"
	deadline=$((SECONDS + READY_TIMEOUT))
	until "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres; do
		proc_alive "$pid" && ((SECONDS < deadline)) || {
			show_log "$dir/postgres.log"
			die "postgres on 127.0.0.1:$port not ready"
		}
		sleep 0.1
	done
}

durability_settings() { # postgresql.conf lines: throwaway (the default) or durable
	if [[ ${JOBMESH_SERVICES_DURABLE:-0} == 1 ]]; then
		printf 'fsync = on\nsynchronous_commit = on\nfull_page_writes = on\n'
	else
		printf 'fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n'
	fi
}

start_postgres() {
	local port=$1 dir=$STATE/postgres t0=$EPOCHREALTIME
	ensure_postgres_installed
	mkdir -p "$dir"
	echo "$port" >"$dir/port"
	((EUID == 0)) && chown postgres: "$dir"
	chmod 700 "$dir"
	as_pg test -w "$dir" ||
		die "the postgres user cannot write $dir: put STATE_DIR where it can reach (e.g. under /tmp or the repo)"
	as_pg "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
		--no-sync >"$dir/initdb.log" 2>&1 || {
		show_log "$dir/initdb.log"
		die "initdb failed"
	}
	cat >>"$dir/data/postgresql.conf" <<EOF

# jobmesh throwaway test server (tools/services/services.sh)
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = ''
$(durability_settings)
max_connections = 200
# statements per run, counted by benchmarks/statements.py (the extension is created only there)
shared_preload_libraries = 'pg_stat_statements'
ssl = on
ssl_cert_file = 'server.pem'
ssl_key_file = 'server.key'
EOF
	install -m 600 "$STATE/tls/server.key" "$dir/data/server.key"
	install -m 644 "$STATE/tls/server.pem" "$dir/data/server.pem"
	((EUID == 0)) && chown postgres: "$dir/data/server.key" "$dir/data/server.pem"
	# the tls_only role is refused without TLS: a test that reaches it has TLS
	printf 'hostnossl all tls_only 127.0.0.1/32 reject\n%s\n' "$(cat "$dir/data/pg_hba.conf")" >"$dir/data/pg_hba.new"
	mv "$dir/data/pg_hba.new" "$dir/data/pg_hba.conf"
	((EUID == 0)) && chown postgres: "$dir/data/pg_hba.conf"
	run_postgres "$port"
	"$PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres jobmesh &&
		"$PG_BIN/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE ROLE tls_only LOGIN" &&
		"$PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres -O tls_only jobmesh_tls || {
		show_log "$dir/postgres.log"
		die "createdb jobmesh failed"
	}
	log "postgres up on 127.0.0.1:$port in $(since "$t0")"
}

# ---------------------------------------------------------------- TLS

# A CA made for this run and one server certificate (127.0.0.1 and localhost) that every service also serves
# TLS with: PostgreSQL on its port (the `tls_only` role may connect with TLS alone), Redis and Kafka on ports of
# their own. The tests of the TLS hops use them (JOBMESH_*_TLS_* in the env file).
make_tls() {
	local dir=$STATE/tls
	mkdir -p "$dir"
	(
		cd "$dir" &&
			openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
				-subj "/CN=jobmesh services CA" -keyout ca.key -out ca.pem &&
			openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
				-keyout server.key -out server.csr &&
			printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext &&
			openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
				-extfile server.ext -out server.pem &&
			cat server.key server.pem >server-keystore.pem # Kafka's PEM keystore: the key, then the chain
	) >"$dir/openssl.log" 2>&1 || {
		show_log "$dir/openssl.log"
		die "could not make the services' TLS certificates (openssl)"
	}
	chmod 644 "$dir"/*.pem
	chmod 755 "$dir"
}

# ---------------------------------------------------------------- Redis

redis_ping() { # PORT
	if command -v redis-cli >/dev/null; then
		[[ $(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]
	else
		(
			exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
			printf 'PING\r\n' >&3
			IFS= read -r -t 2 line <&3 && [[ $line == +PONG* ]]
		) 2>/dev/null
	fi
}

start_redis() {
	local port=$1 tls_port=$2 dir=$STATE/redis t0=$EPOCHREALTIME pid= deadline
	ensure_redis_installed
	mkdir -p "$dir"
	echo "$port $tls_port" >"$dir/ports"
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes \
		--tls-port "$tls_port" --tls-cert-file "$STATE/tls/server.pem" --tls-key-file "$STATE/tls/server.key" \
		--tls-ca-cert-file "$STATE/tls/ca.pem" --tls-auth-clients no \
		--pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir" >"$dir/start.log" 2>&1 || {
		show_log "$dir/start.log" "$dir/redis.log"
		die "redis-server did not start on 127.0.0.1:$port"
	}
	deadline=$((SECONDS + READY_TIMEOUT))
	until [[ -n $pid ]] && redis_ping "$port"; do
		if [[ -z $pid && -s $dir/redis.pid ]]; then
			pid=$(<"$dir/redis.pid")
			record_pid redis "$pid"
		fi
		if ((SECONDS >= deadline)) || { [[ -n $pid ]] && ! proc_alive "$pid"; }; then
			show_log "$dir/start.log" "$dir/redis.log"
			die "redis on 127.0.0.1:$port not ready"
		fi
		sleep 0.05
	done
	log "redis up on 127.0.0.1:$port (TLS :$tls_port) in $(since "$t0")"
}

# ---------------------------------------------------------------- Kafka

kafka_libs() { # prints the directory of the broker's jars, fetching them once
	local cache=${XDG_CACHE_HOME:-$HOME/.cache}/jobmesh/kafka-$KAFKA_VERSION stamp
	stamp=$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)
	mkdir -p "$cache"
	(
		flock 9
		if [[ -f $cache/libs/.complete && $(<"$cache/libs/.complete") == "$stamp" ]]; then
			exit 0
		fi
		ensure_maven_installed
		local t0=$EPOCHREALTIME tmp=$cache/libs.tmp.$$
		log "fetching Kafka $KAFKA_VERSION jars with Maven into $cache/libs" >&2
		rm -rf "$cache"/libs.tmp.*
		mvn -B -q -f "$KAFKA_POM" dependency:copy-dependencies -DoutputDirectory="$tmp" >"$cache/mvn.log" 2>&1 || {
			show_log "$cache/mvn.log"
			rm -rf "$tmp"
			die "mvn dependency:copy-dependencies failed"
		}
		compgen -G "$tmp/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null ||
			die "kafka_2.13-$KAFKA_VERSION.jar not fetched: is kafka.version in $KAFKA_POM $KAFKA_VERSION?"
		echo "$stamp" >"$tmp/.complete"
		rm -rf "$cache/libs"
		mv "$tmp" "$cache/libs"
		log "Kafka jars fetched in $(since "$t0")" >&2
	) 9>"$cache/.lock" >&2
	echo "$cache/libs"
}

kafka_ready() { # BOOTSTRAP PID TIMEOUT: 0 ready, 1 timeout, 2 no confluent_kafka, 3 the broker died
	"$PY" - "$@" <<'EOF'
import os, sys, time

bootstrap, pid, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
try:
    from confluent_kafka.admin import AdminClient
except ImportError as exc:
    print(f"cannot import confluent_kafka with {sys.executable}: {exc}", file=sys.stderr)
    sys.exit(2)


def alive():
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "socket.connection.setup.timeout.ms": 2000})
deadline = time.monotonic() + timeout
while True:
    if not alive():
        sys.exit(3)
    try:
        md = admin.list_topics(timeout=2)
        if md.brokers and md.controller_id >= 0:
            sys.exit(0)
    except Exception:
        pass
    if time.monotonic() >= deadline:
        sys.exit(1)
    time.sleep(0.2)
EOF
}

start_kafka() {
	local port=$1 cport=$2 ssl_port=$3 dir=$STATE/kafka t0=$EPOCHREALTIME libs cluster_id pid rc=0
	local -a java_cmd
	ensure_java_installed
	libs=$(kafka_libs)
	mkdir -p "$dir/data" "$dir/logs"
	cat >"$dir/server.properties" <<EOF
# jobmesh throwaway test broker (tools/services/services.sh): single node, KRaft, broker+controller
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport,SSL://127.0.0.1:$ssl_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SSL://127.0.0.1:$ssl_port
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
ssl.keystore.type=PEM
ssl.keystore.location=$STATE/tls/server-keystore.pem
ssl.client.auth=none
log.dirs=$dir/data
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# lets failover tests use 2 s consumer sessions (a stock broker's floor is 6 s)
group.min.session.timeout.ms=1000
log.segment.bytes=16777216
EOF
	# shellcheck disable=SC2206 # KAFKA_HEAP_OPTS is a list of JVM options
	# C1 only (TieredStopAtLevel=1): starts ~1s faster and leaves the 2 cores to the tests
	java_cmd=(java $KAFKA_HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError
		-Djava.awt.headless=true -Djava.net.preferIPv4Stack=true
		"-Dlog4j2.configurationFile=$KAFKA_LOG4J" "-Dkafka.logs.dir=$dir/logs"
		-cp "$libs/*")
	# A random id in Kafka's form (URL-safe base64 of 16 bytes), never starting with `-`, which the storage
	# tool would read as an option (as Kafka's own Uuid.randomUuid avoids).
	cluster_id=$("$PY" -c 'import base64, uuid
while (i := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"): pass
print(i)')
	"${java_cmd[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" --standalone \
		</dev/null >"$dir/logs/format.log" 2>&1 || {
		show_log "$dir/logs/format.log" "$dir/logs/server.log"
		die "kafka storage format failed"
	}
	# kept so that `kafka start` can bring the broker back on its data (failure tests stop it)
	printf '%q ' "${java_cmd[@]}" kafka.Kafka "$dir/server.properties" >"$dir/start-command"
	# its own session and process group, so that `down` stops it with all it runs
	setsid "${java_cmd[@]}" kafka.Kafka "$dir/server.properties" </dev/null >"$dir/logs/kafka.out" 2>&1 &
	pid=$!
	record_pid kafka "$pid"
	kafka_ready "127.0.0.1:$port" "$pid" "$READY_TIMEOUT" || rc=$?
	case $rc in
	0) ;;
	2) die "the Kafka readiness check needs confluent-kafka in PYTHON=$PY" ;;
	3)
		show_log "$dir/logs/kafka.out" "$dir/logs/server.log"
		die "kafka exited during startup"
		;;
	*)
		show_log "$dir/logs/kafka.out" "$dir/logs/server.log"
		die "kafka on 127.0.0.1:$port not ready after ${READY_TIMEOUT}s"
		;;
	esac
	log "kafka $KAFKA_VERSION up on 127.0.0.1:$port (controller :$cport, TLS :$ssl_port) in $(since "$t0")"
}

# ---------------------------------------------------------------- commands

set_state() {
	[[ -n ${1:-} ]] || usage
	[[ $1 != / ]] || die "STATE_DIR must not be /"
	mkdir -p "$1"
	STATE=$(cd "$1" && pwd -P)
}

on_up_exit() {
	local rc=$?
	((rc == 0)) && return 0
	warn "up failed: stopping what it started (logs kept in $STATE; \`$0 down $STATE\` removes them)"
	stop_all || true
	exit "$rc"
}

cmd_up() {
	local t0=$EPOCHREALTIME db_url redis_url kafka_bootstrap need=() ports i tls variable
	set_state "${1:-}"
	# a previous run that crashed: stop what it left, start clean
	if [[ -e $STATE/pids || -e $STATE/env || -d $STATE/postgres || -d $STATE/redis || -d $STATE/kafka ]]; then
		log "cleaning stale $STATE"
		stop_all
		remove_state
		mkdir -p "$STATE"
	fi
	: >"$STATE/pids"
	trap on_up_exit EXIT
	PY=$(python_bin)
	[[ -x $PY ]] || PY=$(command -v python3) || die "no python: set PYTHON"
	if [[ -z ${JOBMESH_KAFKA_BOOTSTRAP:-} ]] && ! "$PY" -c 'import confluent_kafka' 2>/dev/null; then
		die "the Kafka readiness check needs confluent-kafka in PYTHON=$PY (install the venv first)"
	fi

	db_url=${JOBMESH_DATABASE_URL:-}
	redis_url=${JOBMESH_REDIS_URL:-}
	kafka_bootstrap=${JOBMESH_KAFKA_BOOTSTRAP:-}
	[[ -n $db_url ]] || need+=("${DEFAULT_PORTS[0]}")
	[[ -n $redis_url ]] || need+=("${DEFAULT_PORTS[1]}" "${DEFAULT_PORTS[4]}")
	[[ -n $kafka_bootstrap ]] || need+=("${DEFAULT_PORTS[2]}" "${DEFAULT_PORTS[3]}" "${DEFAULT_PORTS[5]}")
	ports=()
	((${#need[@]} == 0)) || read -r -a ports <<<"$(pick_ports "${need[@]}")"
	((${#need[@]} == 0)) || make_tls
	i=0
	tls=()

	if [[ -n $db_url ]]; then
		log "postgres: using JOBMESH_DATABASE_URL as given"
	else
		start_postgres "${ports[i]}"
		db_url=postgresql+psycopg://postgres@127.0.0.1:${ports[i]}/jobmesh
		tls+=("JOBMESH_DATABASE_TLS_URL=postgresql+psycopg://tls_only@127.0.0.1:${ports[i]}/jobmesh_tls?sslmode=verify-full&sslrootcert=$STATE/tls/ca.pem")
		i=$((i + 1))
	fi
	if [[ -n $redis_url ]]; then
		log "redis: using JOBMESH_REDIS_URL as given"
	else
		start_redis "${ports[i]}" "${ports[i + 1]}"
		redis_url=redis://127.0.0.1:${ports[i]}/0
		tls+=("JOBMESH_REDIS_TLS_URL=rediss://127.0.0.1:${ports[i + 1]}/0?ssl_ca_certs=$STATE/tls/ca.pem")
		i=$((i + 2))
	fi
	if [[ -n $kafka_bootstrap ]]; then
		log "kafka: using JOBMESH_KAFKA_BOOTSTRAP as given"
	else
		start_kafka "${ports[i]}" "${ports[i + 1]}" "${ports[i + 2]}"
		kafka_bootstrap=127.0.0.1:${ports[i]}
		tls+=("JOBMESH_KAFKA_TLS_BOOTSTRAP=127.0.0.1:${ports[i + 2]}")
	fi

	{
		printf 'export JOBMESH_DATABASE_URL=%q\n' "$db_url"
		printf 'export JOBMESH_REDIS_URL=%q\n' "$redis_url"
		printf 'export JOBMESH_KAFKA_BOOTSTRAP=%q\n' "$kafka_bootstrap"
		((${#need[@]} == 0)) || printf 'export JOBMESH_SERVICES_CA=%q\n' "$STATE/tls/ca.pem"
		for variable in "${tls[@]}"; do
			printf 'export %s=%q\n' "${variable%%=*}" "${variable#*=}"
		done
	} >"$STATE/env.tmp"
	mv "$STATE/env.tmp" "$STATE/env"
	trap - EXIT
	log "all up in $(since "$t0"): source $STATE/env"
}

cmd_down() {
	local t0=$EPOCHREALTIME
	[[ -n ${1:-} ]] || usage
	if [[ ! -d $1 ]]; then
		log "nothing to stop in $1"
		return 0
	fi
	STATE=$(cd "$1" && pwd -P)
	stop_all
	remove_state
	log "down in $(since "$t0")"
}

# kafka stop|start STATE_DIR: stops the broker `up` started, or starts it again on the same data and port
cmd_kafka() {
	local action=${1:-} pid bootstrap rc=0
	set_state "${2:-}"
	[[ -f $STATE/kafka/start-command ]] || die "no Kafka was started in $STATE"
	case $action in
	stop) stop_pid kafka "$(recorded_pid kafka)" 30 group ;;
	start)
		PY=$(python_bin)
		bootstrap=$(sed -n 's/^export JOBMESH_KAFKA_BOOTSTRAP=//p' "$STATE/env")
		setsid bash -c "exec $(cat "$STATE/kafka/start-command")" </dev/null >>"$STATE/kafka/logs/kafka.out" 2>&1 &
		pid=$!
		record_pid kafka "$pid"
		kafka_ready "$bootstrap" "$pid" "$READY_TIMEOUT" || rc=$?
		((rc == 0)) || die "kafka did not come back on $bootstrap"
		log "kafka back on $bootstrap"
		;;
	*) usage ;;
	esac
}

# postgres stop|start STATE_DIR: stops PostgreSQL as a crash would (`-m immediate`: no checkpoint, recovery
# from the WAL at the next start), or starts it again on the same data and port
cmd_postgres() {
	local action=${1:-} dir
	set_state "${2:-}"
	dir=$STATE/postgres
	[[ -f $dir/port ]] || die "no PostgreSQL was started in $STATE"
	case $action in
	stop)
		as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate -w -t 20 stop >"$dir/pg_ctl.log" 2>&1 ||
			stop_pid postgres "$(recorded_pid postgres)" 10 group
		;;
	start)
		run_postgres "$(<"$dir/port")"
		log "postgres back on 127.0.0.1:$(<"$dir/port")"
		;;
	*) usage ;;
	esac
}

# redis stop|start STATE_DIR: stops Redis (it keeps nothing: --save ''), or starts it again on its ports
cmd_redis() {
	local action=${1:-} ports
	set_state "${2:-}"
	[[ -f $STATE/redis/ports ]] || die "no Redis was started in $STATE"
	case $action in
	stop) stop_pid redis "$(recorded_pid redis)" 10 ;;
	start)
		read -r -a ports <"$STATE/redis/ports"
		rm -f "$STATE/redis/redis.pid"
		start_redis "${ports[0]}" "${ports[1]}"
		;;
	*) usage ;;
	esac
}

case ${1:-} in
up) cmd_up "${2:-}" ;;
down) cmd_down "${2:-}" ;;
kafka) cmd_kafka "${2:-}" "${3:-}" ;;
postgres) cmd_postgres "${2:-}" "${3:-}" ;;
redis) cmd_redis "${2:-}" "${3:-}" ;;
browser) ensure_chromium_installed ;;
prometheus) ensure_prometheus_unpacked ;;
sandbox) # never stops `make run`: without bubblewrap, executors say so loudly and run commands unsandboxed
	ensure_bubblewrap_installed || warn "bubblewrap could not be installed: executors will run commands without namespaces" ;;
*) usage ;;
esac
