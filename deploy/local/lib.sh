# Shared by build.sh and cluster.sh (sourced, not executed): paths, pinned versions, ports, logging.
# Everything lives in $SOVEREIGNSPEC_CACHE, outside the git tree.

LOCAL_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$LOCAL_DIR/../.." && pwd)"
# shellcheck source=versions.env
source "$LOCAL_DIR/versions.env"

CACHE="${SOVEREIGNSPEC_CACHE:-$HOME/.cache/sovereignspec}"
BIN_DIR="$CACHE/bin"
BUILD_DIR="$CACHE/build"
STAMP_DIR="$CACHE/stamps"
RUN_DIR="$CACHE/run"       # pidfiles and the env file the test harness reads
LOG_DIR="$CACHE/logs"
DATA_DIR="$CACHE/data"     # etcd and Prometheus data
PKI_DIR="$CACHE/pki"       # generated CA, serving certs, service-account keys
CONF_DIR="$CACHE/conf"     # rendered kubeconfigs, Kueue config and manifests, Prometheus config

# One port block, all on 127.0.0.1. Override the base with SOVEREIGNSPEC_PORT_BASE if 24xx is busy.
PORT_BASE="${SOVEREIGNSPEC_PORT_BASE:-24300}"
ETCD_CLIENT_PORT=$((PORT_BASE + 0))
ETCD_PEER_PORT=$((PORT_BASE + 1))
APISERVER_PORT=$((PORT_BASE + 2))
KCM_PORT=$((PORT_BASE + 3))
SCHEDULER_PORT=$((PORT_BASE + 4))
KWOK_PORT=$((PORT_BASE + 5))
KUEUE_WEBHOOK_PORT=$((PORT_BASE + 6))
KUEUE_METRICS_PORT=$((PORT_BASE + 7))
KUEUE_HEALTH_PORT=$((PORT_BASE + 8))
PROMETHEUS_PORT=$((PORT_BASE + 9))
# +10: reserved (Kueue's visibility server, disabled: see cluster.sh kueue_config).
LWS_WEBHOOK_PORT=$((PORT_BASE + 11))
LWS_METRICS_PORT=$((PORT_BASE + 12))
LWS_HEALTH_PORT=$((PORT_BASE + 13))
# Left free for later components (telemetry simulator, operator, tests); published in $RUN_DIR/env.
FREE_PORT_FIRST=$((PORT_BASE + 14))
FREE_PORT_LAST=$((PORT_BASE + 29))

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

mkdir -p "$BIN_DIR" "$BUILD_DIR" "$STAMP_DIR" "$RUN_DIR" "$LOG_DIR" "$DATA_DIR" "$PKI_DIR" "$CONF_DIR"
