#!/usr/bin/env bash
# The local test bed: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK (fake GPU
# nodes), the LeaderWorkerSet controller, the Kueue manager and Prometheus, all as plain processes on
# 127.0.0.1. No Docker.
#
#   cluster.sh up       build (once) and start whatever is not running, wait until all is ready
#   cluster.sh down     stop exactly the processes this script started (by pidfile)
#   cluster.sh status   state and RSS of each component
#   cluster.sh restart kube-apiserver   stop and start just the API server (fault tests)
#
# State lives in $SOVEREIGNSPEC_CACHE (default ~/.cache/sovereignspec); $CACHE/run/env is the
# contract with tests/harness (KUBECONFIG, PROMETHEUS_URL, ports, ...).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok lws kueue prometheus)
ADMIN_KUBECONFIG="$CONF_DIR/admin.kubeconfig"
API_URL="https://127.0.0.1:$APISERVER_PORT"
PROMETHEUS_URL="http://127.0.0.1:$PROMETHEUS_PORT"
PROM_TARGETS_DIR="$CACHE/prometheus/targets"
KUEUE_SHARE="$CACHE/share/kueue-$KUEUE_VERSION"
LWS_SHARE="$CACHE/share/lws-$LWS_VERSION"
KWOK_STAGES="$CACHE/share/kwok-$KWOK_VERSION/stages.yaml"
# Kueue v0.19 reads its metrics serving cert from this fixed path when internal cert management is
# off (cmd/kueue/main.go); see kueue_metrics_cert_launcher.
KUEUE_METRICS_CERT_PATH=/etc/kueue/metrics/certs
PYTHON="${PYTHON:-$REPO_ROOT/.venv/bin/python}"
[[ -x "$PYTHON" ]] || PYTHON=python3
KUBECTL=("$BIN_DIR/kubectl" --kubeconfig "$ADMIN_KUBECONFIG")

# ---------------------------------------------------------------------------------------------
# processes

pidfile() { echo "$RUN_DIR/$1.pid"; }

# binary_of NAME -> the executable a component runs (used to check a pid is really ours).
binary_of() {
  case "$1" in
  prometheus) command -v prometheus || echo /usr/bin/prometheus ;;
  *) echo "$BIN_DIR/$1" ;;
  esac
}

# our_pid NAME -> pid if the pidfile names a live process running this component's binary.
our_pid() {
  local f pid exe
  f=$(pidfile "$1")
  [[ -f "$f" ]] || return 1
  pid=$(cat "$f")
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  exe=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -d' ' -f1)
  [[ "$exe" == "$(binary_of "$1")" ]] || return 1
  echo "$pid"
}

# port_owner PORT -> "users:((...))" of whoever listens on 127.0.0.1/any:PORT, empty if free.
port_owner() { ss -ltnpH "sport = :$1" 2>/dev/null | awk '{print $NF}' | head -1; }
port_busy() { [[ -n "$(ss -ltnH "sport = :$1" 2>/dev/null)" ]]; }

require_free_ports() { # NAME PORT...
  local name=$1 p
  shift
  for p in "$@"; do
    if port_busy "$p"; then
      die "$name: port $p is already in use by another process ($(port_owner "$p")). " \
        "Stop it or choose another block with SOVEREIGNSPEC_PORT_BASE (now $PORT_BASE)."
    fi
  done
}

# start NAME PORTS CMD... : start a component unless ours already runs; logs to $LOG_DIR/NAME.log.
STARTED=()
start() {
  local name=$1 ports=$2 pid
  shift 2
  if pid=$(our_pid "$name"); then
    log "$name: running (pid $pid), reused"
    return 0
  fi
  # shellcheck disable=SC2086
  require_free_ports "$name" $ports
  {
    echo "===== $(date -u +%FT%TZ) starting: $*"
  } >>"$LOG_DIR/$name.log"
  # The component keeps no inherited descriptor above 2: a caller's `flock /tmp/ss-cluster.lock ...`
  # holds that lock on one (fd 3), and a daemon inheriting it held the lock for as long as it ran
  # (every later `flock` waited forever). The subshell execs setsid, so $! is still the component.
  (
    for fd in /proc/self/fd/*; do
      fd=${fd##*/}
      if ((fd > 2)); then eval "exec ${fd}>&-" 2>/dev/null || true; fi
    done
    exec setsid "$@"
  ) </dev/null >>"$LOG_DIR/$name.log" 2>&1 &
  echo $! >"$(pidfile "$name")"
  STARTED+=("$name")
  log "$name: started (pid $!), log $LOG_DIR/$name.log"
}

# wait_for NAME TIMEOUT_S CHECK_CMD... : poll until CHECK succeeds; on failure show the log tail.
wait_for() {
  local name=$1 timeout=$2 t0=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    # Liveness by pid only: a launcher (e.g. unshare) may not have exec'd the binary yet.
    if [[ -f "$(pidfile "$name")" ]] && ! kill -0 "$(cat "$(pidfile "$name")")" 2>/dev/null; then
      tail -25 "$LOG_DIR/$name.log" >&2 || true
      die "$name exited during start-up (log: $LOG_DIR/$name.log)"
    fi
    if ((SECONDS - t0 > timeout)); then
      tail -25 "$LOG_DIR/$name.log" >&2 || true
      die "$name not ready after ${timeout}s (log: $LOG_DIR/$name.log)"
    fi
    sleep 0.5
  done
  log "$name: ready ($((SECONDS - t0))s)"
}

stop() {
  local name=$1 pid f
  f=$(pidfile "$name")
  if ! pid=$(our_pid "$name"); then
    [[ -f "$f" ]] && log "$name: stale pidfile removed"
    rm -f "$f"
    return 0
  fi
  kill -TERM "$pid"
  for _ in $(seq 1 40); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name: did not stop on TERM, sending KILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
  log "$name: stopped (pid $pid)"
}

# ---------------------------------------------------------------------------------------------
# certificates and kubeconfigs (generated once, kept in $PKI_DIR)

# cert NAME CN ORG KIND [SAN] : key + cert signed by our CA; KIND is server or client.
cert() {
  local name=$1 cn=$2 org=$3 kind=$4 san=${5:-} ext
  [[ -f "$PKI_DIR/$name.crt" ]] && return 0
  ext="$PKI_DIR/$name.ext"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ "$kind" == server ]]; then echo "extendedKeyUsage=serverAuth"; else echo "extendedKeyUsage=clientAuth"; fi
    [[ -n "$san" ]] && echo "subjectAltName=$san"
  } >"$ext"
  local subj="/CN=$cn"
  [[ -n "$org" ]] && subj="/O=$org/CN=$cn"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI_DIR/$name.key" -subj "$subj" \
    -out "$PKI_DIR/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI_DIR/$name.csr" -CA "$PKI_DIR/ca.crt" -CAkey "$PKI_DIR/ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "$ext" -out "$PKI_DIR/$name.crt" 2>/dev/null
  rm -f "$PKI_DIR/$name.csr" "$ext"
}

kubeconfig() { # NAME CERT_NAME
  local out="$CONF_DIR/$1.kubeconfig"
  [[ -f "$out" ]] && return 0
  cat >"$out" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sovereignspec-local
  cluster:
    server: $API_URL
    certificate-authority: $PKI_DIR/ca.crt
users:
- name: $1
  user:
    client-certificate: $PKI_DIR/$2.crt
    client-key: $PKI_DIR/$2.key
contexts:
- name: sovereignspec-local
  context: {cluster: sovereignspec-local, user: $1}
current-context: sovereignspec-local
EOF
}

pki() {
  command -v openssl >/dev/null || die "openssl is not installed (apt-get install openssl)"
  # Kubeconfigs embed the API port; regenerate them if the port block changed.
  if [[ -f "$PKI_DIR/port-base" && "$(cat "$PKI_DIR/port-base")" != "$PORT_BASE" ]]; then
    rm -f "$CONF_DIR"/*.kubeconfig
  fi
  echo "$PORT_BASE" >"$PKI_DIR/port-base"
  if [[ ! -f "$PKI_DIR/ca.crt" ]]; then
    openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI_DIR/ca.key" -days 3650 -sha256 \
      -subj "/CN=sovereignspec-local-ca" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out "$PKI_DIR/ca.crt" 2>/dev/null
  fi
  [[ -f "$PKI_DIR/sa.key" ]] || openssl genrsa -out "$PKI_DIR/sa.key" 2048 2>/dev/null
  [[ -f "$PKI_DIR/sa.pub" ]] || openssl rsa -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub" 2>/dev/null
  local loop="IP:127.0.0.1,DNS:localhost"
  cert apiserver kube-apiserver "" server \
    "$loop,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert kueue-webhook kueue-webhook "" server "$loop"
  cert kueue-metrics kueue-metrics "" server "$loop"
  cert lws-webhook lws-webhook "" server "$loop"
  cert admin sovereignspec-admin system:masters client
  cert kube-controller-manager system:kube-controller-manager "" client
  cert kube-scheduler system:kube-scheduler "" client
  # KWOK writes status for nodes and pods of every namespace; Kueue manages cluster-wide objects and
  # its own webhook configurations. Both run as cluster admins in this throwaway test bed.
  cert kwok kwok system:masters client
  cert kueue kueue-manager system:masters client
  cert lws lws-manager system:masters client
  # Kueue's watchers read tls.crt/tls.key (and ca.crt) from a directory.
  local d
  for d in kueue-webhook kueue-metrics lws-webhook; do
    mkdir -p "$PKI_DIR/$d"
    cp -f "$PKI_DIR/$d.crt" "$PKI_DIR/$d/tls.crt"
    cp -f "$PKI_DIR/$d.key" "$PKI_DIR/$d/tls.key"
    cp -f "$PKI_DIR/ca.crt" "$PKI_DIR/$d/ca.crt"
  done
  kubeconfig admin admin
  kubeconfig kube-controller-manager kube-controller-manager
  kubeconfig kube-scheduler kube-scheduler
  kubeconfig kwok kwok
  kubeconfig kueue kueue
  kubeconfig lws lws
}

# KUEUE_CMD: how to launch Kueue so that it finds its metrics cert at the fixed path.
# Preferred: a private mount namespace per Kueue process with $PKI_DIR/kueue-metrics bind-mounted
# there, so several test beds (different caches/ports) coexist on one machine. Without the right to
# unshare (not root), fall back to a symlink, which allows one test bed per machine.
kueue_metrics_cert_launcher() {
  local src="$PKI_DIR/kueue-metrics" dst=$KUEUE_METRICS_CERT_PATH
  if unshare -m --propagation private true 2>/dev/null; then
    if [[ -L "$dst" && ! -e "$dst" ]]; then rm -f "$dst"; fi
    mkdir -p "$dst"
    # shellcheck disable=SC2016
    KUEUE_CMD=(unshare -m --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
      kueue-metrics-certs "$src" "$dst")
    return 0
  fi
  KUEUE_CMD=()
  if [[ -L "$dst" && "$(readlink "$dst")" == "$src" ]]; then return 0; fi
  if [[ -e "$dst" && ! -L "$dst" ]] && [[ -n "$(ls -A "$dst" 2>/dev/null)" ]]; then
    die "$dst exists and is not ours; Kueue $KUEUE_VERSION reads its metrics certificate from there."
  fi
  { rm -rf "$dst" && mkdir -p "$(dirname "$dst")" && ln -sfn "$src" "$dst"; } 2>/dev/null ||
    die "cannot create $dst -> $src (Kueue $KUEUE_VERSION reads its metrics certificate from that" \
      "fixed path). Run as root, or once: mkdir -p $(dirname "$dst") && ln -sfn $src $dst"
}

# ---------------------------------------------------------------------------------------------
# health checks

curl_ok() { curl -fsS --max-time 3 "$@"; }
etcd_ready() { curl_ok "http://127.0.0.1:$ETCD_CLIENT_PORT/health" | grep -q '"health":"true"'; }
api_ready() {
  curl_ok --cacert "$PKI_DIR/ca.crt" --cert "$PKI_DIR/admin.crt" --key "$PKI_DIR/admin.key" \
    "$API_URL/readyz" | grep -qx ok
}
https_healthz() { curl_ok -k "https://127.0.0.1:$1/healthz" | grep -qx ok; }
kwok_ready() { curl_ok "http://127.0.0.1:$KWOK_PORT/healthz" | grep -qx ok; }
nodes_ready() {
  local want have
  want=$(grep -c '^kind: Node' "$LOCAL_DIR/nodes.yaml")
  have=$("${KUBECTL[@]}" get nodes -l type=kwok \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -cx True)
  [[ "$have" -ge "$want" ]]
}
kueue_ready() { curl_ok "http://127.0.0.1:$KUEUE_HEALTH_PORT/readyz" | grep -qx ok; }
lws_ready() { curl_ok "http://127.0.0.1:$LWS_HEALTH_PORT/readyz" | grep -qx ok; }
# Through the apiserver: a server-side dry-run create of a LeaderWorkerSet passes LWS's mutating and
# validating webhooks (URL, CA bundle, serving cert). LWS starts before Kueue, so Kueue's own LWS
# webhooks are not registered yet and only LWS answers here.
lws_webhook_ready() {
  "${KUBECTL[@]}" create --dry-run=server -o name -f - <<EOF
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: webhook-probe, namespace: default}
spec:
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers: [{name: c, image: probe}]
EOF
}
# End to end through the apiserver: a server-side dry-run create passes Kueue's mutating and
# validating webhooks for ResourceFlavor, so the URL, the CA bundle and the serving cert all work.
kueue_webhook_ready() {
  "${KUBECTL[@]}" create --dry-run=server -o name -f - <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: webhook-probe
EOF
}
prometheus_ready() { curl_ok "$PROMETHEUS_URL/-/ready" | grep -qi ready; }

# ---------------------------------------------------------------------------------------------
# components

up_etcd() {
  if ! our_pid etcd >/dev/null && [[ "${SOVEREIGNSPEC_KEEP_DATA:-0}" != 1 ]]; then
    # A fresh control plane per cold start: no objects left over from earlier runs.
    rm -rf "$DATA_DIR/etcd"
  fi
  # --unsafe-no-fsync: a throwaway test store on a shared 2-core machine; durability is not wanted.
  start etcd "$ETCD_CLIENT_PORT $ETCD_PEER_PORT" "$BIN_DIR/etcd" \
    --name local --data-dir "$DATA_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "local=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --quota-backend-bytes 2147483648 --log-level warn
  wait_for etcd 60 etcd_ready
}

up_apiserver() {
  start kube-apiserver "$APISERVER_PORT" "$BIN_DIR/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
    --tls-cert-file "$PKI_DIR/apiserver.crt" --tls-private-key-file "$PKI_DIR/apiserver.key" \
    --client-ca-file "$PKI_DIR/ca.crt" \
    --service-account-key-file "$PKI_DIR/sa.pub" --service-account-signing-key-file "$PKI_DIR/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range 10.96.0.0/16 \
    --authorization-mode Node,RBAC \
    --allow-privileged=true --profiling=false --v=1
  wait_for kube-apiserver 180 api_ready
}

up_controller_manager() {
  local kc="$CONF_DIR/kube-controller-manager.kubeconfig"
  start kube-controller-manager "$KCM_PORT" "$BIN_DIR/kube-controller-manager" \
    --kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
    --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file "$PKI_DIR/sa.key" --root-ca-file "$PKI_DIR/ca.crt" \
    --cluster-signing-cert-file "$PKI_DIR/ca.crt" --cluster-signing-key-file "$PKI_DIR/ca.key" \
    --controllers '*' --profiling=false --v=1
  local ks="$CONF_DIR/kube-scheduler.kubeconfig"
  start kube-scheduler "$SCHEDULER_PORT" "$BIN_DIR/kube-scheduler" \
    --kubeconfig "$ks" --authentication-kubeconfig "$ks" --authorization-kubeconfig "$ks" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --leader-elect=false \
    --profiling=false --v=1
  wait_for kube-controller-manager 120 https_healthz "$KCM_PORT"
  wait_for kube-scheduler 120 https_healthz "$SCHEDULER_PORT"
}

up_kwok() {
  [[ -f "$KWOK_STAGES" ]] || die "KWOK stages missing ($KWOK_STAGES); run deploy/local/build.sh kwok"
  "${KUBECTL[@]}" apply --server-side --force-conflicts -f "$LOCAL_DIR/nodes.yaml" >/dev/null
  start kwok "$KWOK_PORT" "$BIN_DIR/kwok" \
    --kubeconfig "$CONF_DIR/kwok.kubeconfig" --config "$KWOK_STAGES" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds 40 --cidr 10.244.0.0/16 --node-ip 127.0.0.1 \
    --server-address "127.0.0.1:$KWOK_PORT"
  wait_for kwok 60 kwok_ready
  wait_for kwok 120 nodes_ready
}

kueue_config() {
  cat >"$CONF_DIR/kueue-config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:$KUEUE_HEALTH_PORT
metrics:
  # HTTPS with authn/authz by the API server (controller-runtime filter); cert from
  # $KUEUE_METRICS_CERT_PATH -> $PKI_DIR/kueue-metrics.
  bindAddress: 127.0.0.1:$KUEUE_METRICS_PORT
webhook:
  host: 127.0.0.1
  port: $KUEUE_WEBHOOK_PORT
  certDir: $PKI_DIR/kueue-webhook
# The on-demand visibility API server reads its serving cert from a fixed /visibility directory
# when internal cert management is off (pkg/visibility/server.go); this test bed does not need it.
featureGates:
  VisibilityOnDemand: false
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
# Tenant namespaces: every Job and pod is Kueue's, queue name or not (charts/sovereignspec/README.md).
# Kueue ignores system namespaces and those labelled sovereignspec.io/system=true (as the chart's
# admission policy does), and, in this test bed only, sovereignspec.io/test-outside-kueue=true: tests
# that need a pod running outside Kueue (a tenant DaemonSet, a neighbour engine) use that label.
manageJobsWithoutQueueName: true
managedJobsNamespaceSelector:
  matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: [kube-system, kueue-system, kube-public, kube-node-lease]
  - key: sovereignspec.io/system
    operator: NotIn
    values: ["true"]
  - key: sovereignspec.io/test-outside-kueue
    operator: NotIn
    values: ["true"]
clientConnection:
  qps: 100
  burst: 200
integrations:
  frameworks:
  - batch/job
  - pod
  - deployment
  - statefulset
  - leaderworkerset.x-k8s.io/leaderworkerset
EOF
}

lws_config() {
  cat >"$CONF_DIR/lws-config.yaml" <<EOF
apiVersion: config.lws.x-k8s.io/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:$LWS_HEALTH_PORT
metrics:
  # HTTPS with authn/authz by the API server; controller-runtime serves a self-signed cert.
  bindAddress: 127.0.0.1:$LWS_METRICS_PORT
webhook:
  host: 127.0.0.1
  port: $LWS_WEBHOOK_PORT
  certDir: $PKI_DIR/lws-webhook
# Certificates come from our CA (cluster.sh pki), not LWS's in-cluster cert rotator.
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
clientConnection:
  qps: 100
  burst: 200
EOF
}

# established FILE : wait (60 s) until every CRD in FILE is Established. `kubectl wait` alone exits at once
# with ".status.conditions accessor error" when it reads a CRD whose status the API server has not
# written yet (seen in CI right after the apply), so it is retried until the deadline.
established() {
  local file=$1 t0=$SECONDS
  until "${KUBECTL[@]}" wait --for condition=Established --timeout 10s -f "$file" >/dev/null 2>&1; do
    ((SECONDS - t0 < 60)) || die "CRDs of $file not Established after 60s"
    sleep 1
  done
}

# The LeaderWorkerSet controller (sigs.k8s.io/lws at the version Kueue requires). Started before
# Kueue: Kueue's LWS integration needs the LeaderWorkerSet CRD served when it sets up.
up_lws() {
  [[ -f "$LWS_SHARE/webhook/manifests.yaml" ]] || die "LWS manifests missing; run deploy/local/build.sh lws"
  "$PYTHON" -c 'import yaml' 2>/dev/null || die "$PYTHON lacks PyYAML: run 'make venv' first"
  "$PYTHON" "$LOCAL_DIR/render_lws.py" "$LWS_SHARE" "$LWS_WEBHOOK_PORT" "$PKI_DIR/ca.crt" \
    "$CONF_DIR/lws-crds.yaml" "$CONF_DIR/lws-webhooks.yaml"
  "${KUBECTL[@]}" apply --server-side --force-conflicts -f "$CONF_DIR/lws-crds.yaml" >/dev/null
  established "$CONF_DIR/lws-crds.yaml"
  "${KUBECTL[@]}" create namespace lws-system --dry-run=client -o yaml | "${KUBECTL[@]}" apply -f - >/dev/null
  "${KUBECTL[@]}" apply --server-side --force-conflicts -f "$CONF_DIR/lws-webhooks.yaml" >/dev/null
  lws_config
  start lws "$LWS_WEBHOOK_PORT $LWS_METRICS_PORT $LWS_HEALTH_PORT" "$BIN_DIR/lws" \
    --kubeconfig "$CONF_DIR/lws.kubeconfig" --config "$CONF_DIR/lws-config.yaml" --zap-log-level=2
  wait_for lws 120 lws_ready
  wait_for lws 60 lws_webhook_ready
}

up_kueue() {
  [[ -f "$KUEUE_SHARE/webhook/manifests.yaml" ]] || die "Kueue manifests missing; run deploy/local/build.sh kueue"
  kueue_metrics_cert_launcher
  "$PYTHON" -c 'import yaml' 2>/dev/null || die "$PYTHON lacks PyYAML: run 'make venv' first"
  "$PYTHON" "$LOCAL_DIR/render_kueue.py" "$KUEUE_SHARE" "$KUEUE_WEBHOOK_PORT" "$PKI_DIR/ca.crt" \
    "$CONF_DIR/kueue-crds.yaml" "$CONF_DIR/kueue-webhooks.yaml"
  "${KUBECTL[@]}" apply --server-side --force-conflicts -f "$CONF_DIR/kueue-crds.yaml" >/dev/null
  established "$CONF_DIR/kueue-crds.yaml"
  "${KUBECTL[@]}" create namespace kueue-system --dry-run=client -o yaml | "${KUBECTL[@]}" apply -f - >/dev/null
  "${KUBECTL[@]}" apply --server-side --force-conflicts -f "$CONF_DIR/kueue-webhooks.yaml" >/dev/null
  kueue_config
  start kueue "$KUEUE_WEBHOOK_PORT $KUEUE_METRICS_PORT $KUEUE_HEALTH_PORT" "${KUEUE_CMD[@]}" "$BIN_DIR/kueue" \
    --kubeconfig "$CONF_DIR/kueue.kubeconfig" --config "$CONF_DIR/kueue-config.yaml" --zap-log-level=2
  wait_for kueue 180 kueue_ready
  wait_for kueue 60 kueue_webhook_ready
}

# Prometheus may read Kueue's metrics: a ServiceAccount allowed GET /metrics, token in a file.
prometheus_token() {
  local token="$CONF_DIR/prometheus.token"
  "${KUBECTL[@]}" apply --server-side --force-conflicts -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: prometheus, namespace: kueue-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: sovereignspec-metrics-reader}
rules:
- nonResourceURLs: [/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sovereignspec-metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: sovereignspec-metrics-reader}
subjects:
- {kind: ServiceAccount, name: prometheus, namespace: kueue-system}
EOF
  "${KUBECTL[@]}" -n kueue-system create token prometheus --duration 8760h >"$token.tmp"
  mv "$token.tmp" "$token"
}

prometheus_config() {
  mkdir -p "$PROM_TARGETS_DIR"
  cat >"$CONF_DIR/prometheus.yml" <<EOF
# Generated by deploy/local/cluster.sh. Extra targets: drop a file_sd JSON file into
# $PROM_TARGETS_DIR ([{"targets": ["127.0.0.1:PORT"], "labels": {"job": "..."}}]); Prometheus
# re-reads that directory every 5s. A config change needs POST $PROMETHEUS_URL/-/reload.
global:
  scrape_interval: 5s
  evaluation_interval: 5s
  external_labels:
    cluster: sovereignspec-local
scrape_configs:
- job_name: file-sd
  file_sd_configs:
  - files: ['$PROM_TARGETS_DIR/*.json']
    refresh_interval: 5s
- job_name: kueue
  scheme: https
  tls_config:
    ca_file: $PKI_DIR/ca.crt
  authorization:
    credentials_file: $CONF_DIR/prometheus.token
  static_configs:
  - targets: ['127.0.0.1:$KUEUE_METRICS_PORT']
- job_name: prometheus
  static_configs:
  - targets: ['127.0.0.1:$PROMETHEUS_PORT']
EOF
}

up_prometheus() {
  command -v prometheus >/dev/null || die "prometheus is not installed (apt-get install prometheus)"
  prometheus_token
  prometheus_config
  if ! our_pid prometheus >/dev/null && [[ "${SOVEREIGNSPEC_KEEP_DATA:-0}" != 1 ]]; then
    rm -rf "$DATA_DIR/prometheus"
  fi
  start prometheus "$PROMETHEUS_PORT" "$(binary_of prometheus)" \
    --config.file "$CONF_DIR/prometheus.yml" --storage.tsdb.path "$DATA_DIR/prometheus" \
    --storage.tsdb.retention.time 1d --web.listen-address "127.0.0.1:$PROMETHEUS_PORT" \
    --web.enable-lifecycle --log.level warn
  wait_for prometheus 60 prometheus_ready
  # A reused Prometheus picks up a regenerated config.
  curl_ok -X POST "$PROMETHEUS_URL/-/reload" >/dev/null || true
}

write_env() {
  cat >"$RUN_DIR/env.tmp" <<EOF
# Written by deploy/local/cluster.sh up; read by tests/harness. KEY=VALUE, no quoting.
SOVEREIGNSPEC_CACHE=$CACHE
KUBECONFIG=$ADMIN_KUBECONFIG
KUBE_API_URL=$API_URL
KUBE_CA_FILE=$PKI_DIR/ca.crt
KUBECTL=$BIN_DIR/kubectl
HELM=$BIN_DIR/helm
PROMETHEUS_URL=$PROMETHEUS_URL
PROMETHEUS_TARGETS_DIR=$PROM_TARGETS_DIR
PROMETHEUS_CONFIG=$CONF_DIR/prometheus.yml
NODES_FILE=$LOCAL_DIR/nodes.yaml
PORT_BASE=$PORT_BASE
ETCD_CLIENT_PORT=$ETCD_CLIENT_PORT
APISERVER_PORT=$APISERVER_PORT
KWOK_PORT=$KWOK_PORT
KUEUE_WEBHOOK_PORT=$KUEUE_WEBHOOK_PORT
KUEUE_METRICS_PORT=$KUEUE_METRICS_PORT
KUEUE_HEALTH_PORT=$KUEUE_HEALTH_PORT
LWS_WEBHOOK_PORT=$LWS_WEBHOOK_PORT
LWS_METRICS_PORT=$LWS_METRICS_PORT
LWS_HEALTH_PORT=$LWS_HEALTH_PORT
PROMETHEUS_PORT=$PROMETHEUS_PORT
FREE_PORT_FIRST=$FREE_PORT_FIRST
FREE_PORT_LAST=$FREE_PORT_LAST
KUBERNETES_VERSION=$KUBERNETES_VERSION
KUEUE_VERSION=$KUEUE_VERSION
LWS_VERSION=$LWS_VERSION
KWOK_VERSION=$KWOK_VERSION
ETCD_VERSION=$ETCD_VERSION
HELM_VERSION=$HELM_VERSION
EOF
  mv "$RUN_DIR/env.tmp" "$RUN_DIR/env"
}

cmd_up() {
  local t0=$SECONDS
  "$LOCAL_DIR/build.sh" kubernetes etcd kwok kueue lws # helm is built by build.sh (all), not needed to run
  local tb=$SECONDS
  pki
  up_etcd
  up_apiserver
  up_controller_manager
  up_kwok
  up_lws
  up_kueue
  up_prometheus
  write_env
  local kind=warm
  [[ ${#STARTED[@]} -gt 0 ]] && kind=cold
  [[ ${#STARTED[@]} -gt 0 && ${#STARTED[@]} -lt ${#COMPONENTS[@]} ]] && kind=partial
  log "cluster up ($kind start: started [${STARTED[*]:-}]) in $((SECONDS - tb))s" \
    "(+$((tb - t0))s binary check/build); env: $RUN_DIR/env"
  echo "$kind $((SECONDS - tb))s $(date -u +%FT%TZ)" >>"$CACHE/start-times.log"
}

cmd_down() {
  local i
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do stop "${COMPONENTS[$i]}"; done
  rm -f "$RUN_DIR/env"
}

cmd_status() {
  local name pid rss all=0
  printf '%-24s %-8s %8s %10s  %s\n' COMPONENT STATE PID RSS_MiB LOG
  for name in "${COMPONENTS[@]}"; do
    if pid=$(our_pid "$name"); then
      rss=$(awk '/^VmRSS:/ {printf "%.1f", $2/1024}' "/proc/$pid/status")
      printf '%-24s %-8s %8s %10s  %s\n' "$name" running "$pid" "$rss" "$LOG_DIR/$name.log"
    else
      all=1
      printf '%-24s %-8s %8s %10s  %s\n' "$name" stopped - - "$LOG_DIR/$name.log"
    fi
  done
  [[ -f "$RUN_DIR/env" ]] && echo "env: $RUN_DIR/env"
  return $all
}

# restart NAME: stop one component by its pidfile and start it again (fault tests). Only components
# that others recover from on their own are offered.
cmd_restart() {
  case "${1:-}" in
  kube-apiserver)
    stop kube-apiserver
    up_apiserver
    ;;
  *) die "restart: supported components: kube-apiserver (got '${1:-}')" ;;
  esac
}

# up and down of one cache are serialised (several test sessions may share a cache).
lock() {
  exec 9>"$RUN_DIR/lock"
  flock -w 1800 9 || die "another cluster.sh up/down on $CACHE did not finish within 30 min"
}

case "${1:-}" in
up) lock && cmd_up ;;
down) lock && cmd_down ;;
status) cmd_status ;;
restart) lock && cmd_restart "${2:-}" ;;
*)
  echo "usage: $0 up|down|status|restart kube-apiserver" >&2
  exit 2
  ;;
esac
