#!/usr/bin/env bash
# `make demo`: the whole system on the local cluster, in one command.
#
#  1. starts the local cluster: deploy/local/cluster.sh up (idempotent; `make demo` runs `make setup`
#     first, which installs the packages and builds the binaries on a fresh machine);
#  2. installs the chart (CRDs, RBAC, the default SpeculationPolicy and AdmissionCheck) with helm;
#  3. starts the telemetry simulator, registers it and the operator with the cluster's Prometheus,
#     and starts the operator (`sovereignspec run`) AS THE CHART'S ServiceAccount (TokenRequest token);
#  4. applies deploy/examples (3 tenants, sovereignty policies, queues, vLLM workloads) on eight fake GPU
#     nodes at mixed background load (deploy/demo/nodes.yaml);
#  5. prints `kubectl get speculationdecisions -A` and `sovereignspec explain` of one decision.
#
# Ctrl-C at any point stops what this script started (by pid) and removes its scrape targets; the
# cluster and the applied objects stay (`make cluster-down` stops the cluster).
# DEMO_WAIT=1 keeps the operator running after the output until Ctrl-C (default when stdin is a TTY).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export SOVEREIGNSPEC_CACHE="${SOVEREIGNSPEC_CACHE:-$HOME/.cache/sovereignspec}"
PY="${PY:-$ROOT/.venv/bin/python}"
RELEASE=sovereignspec
NS=sovereignspec-system
T0=$(date +%s)
WORK="$(mktemp -d -t sovereignspec-demo.XXXXXX)"
PIDS=()
TARGETS=()

step() { printf '\n\033[1m== [%3ds] %s\033[0m\n' "$(($(date +%s) - T0))" "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for t in "${TARGETS[@]}"; do rm -f "$t"; done
  for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  done
  [ "${#PIDS[@]}" -gt 0 ] && echo "demo: stopped the operator and the simulator (logs in $WORK)"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT TERM

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_http() { # URL SECONDS WHAT PID
  local deadline=$(($(date +%s) + $2))
  until curl -fsS -o /dev/null "$1" 2>/dev/null; do
    kill -0 "$4" 2>/dev/null || { tail -20 "$WORK"/*.log >&2; die "$3 exited"; }
    [ "$(date +%s)" -lt "$deadline" ] || die "$3 not answering on $1 after $2 s"
    sleep 0.5
  done
}

step "local cluster (binaries built by make setup)"
deploy/local/cluster.sh up
# shellcheck disable=SC1091
source <(grep -E '^[A-Z_]+=' "$SOVEREIGNSPEC_CACHE/run/env" | sed 's/^/export /')
K=("$KUBECTL" --kubeconfig "$KUBECONFIG")

# The admission policy (charts/sovereignspec/README.md) with this test bed's Kueue identity (client
# certificate CN kueue-manager), over the demo's own tenant namespaces (deploy/examples/00-tenants.yaml)
# only: the test bed is shared with `make test`, whose namespaces must not inherit the demo's policy (a
# test that needs it installs its own).
ADMISSION_POLICY='{"kueueUsernames": ["kueue-manager"], "namespaceSelector": {"matchExpressions": [
  {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["bank-kr", "clinic-de", "shop-us"]}]}}'

step "helm upgrade --install $RELEASE (CRDs, RBAC, default SpeculationPolicy + AdmissionCheck, admission policy)"
# The operator runs below as a local process with the chart's ServiceAccount identity; the chart's own
# Deployment is scaled to 0 here (no container runtime: the image cannot run on the fake nodes).
"$HELM" upgrade --install "$RELEASE" charts/sovereignspec -n "$NS" --create-namespace \
  --set replicas=1 --set podDisruptionBudget.enabled=false --set-string 'nodeSelector.sovereignspec\.io/no-such-node=true' \
  --set "operator.prometheusUrl=$PROMETHEUS_URL" --set-json "admissionPolicy=$ADMISSION_POLICY" \
  --wait=false >"$WORK/helm.log"
"${K[@]}" scale deploy -n "$NS" "$RELEASE" --replicas 0 >/dev/null
# Retried: `kubectl wait` exits at once on a CRD whose status the API server has not written yet.
for _ in $(seq 60); do
  "${K[@]}" wait --for condition=Established --timeout 10s -f charts/sovereignspec/crds >/dev/null 2>&1 && break
  sleep 1
done
"${K[@]}" wait --for condition=Established --timeout 10s -f charts/sovereignspec/crds >/dev/null
echo "installed: $("$HELM" list -n "$NS" -f "^$RELEASE\$" -o json | "$PY" -c 'import json,sys; r=json.load(sys.stdin)[0]; print(r["chart"], r["status"])')"

step "fake GPU nodes (KR, DE, US; background load 0.05 ... 0.95)"
"${K[@]}" apply --server-side --force-conflicts --field-manager sovereignspec-demo -f deploy/demo/nodes.yaml >/dev/null
"${K[@]}" wait --for condition=Ready --timeout 90s -l sovereignspec.io/pool=gpu node >/dev/null
"${K[@]}" get nodes -l sovereignspec.io/pool=gpu -L sovereignspec.io/jurisdiction -L nvidia.com/gpu.product

step "telemetry simulator (dcgm-exporter + vLLM metrics for the cluster's GPU pods)"
SIM_PORT=$(free_port)
"$PY" -m sovereignspec telemetry-sim --kubeconfig "$KUBECONFIG" --port "$SIM_PORT" --tick 1 >"$WORK/telemetry-sim.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$SIM_PORT/metrics" 60 "telemetry simulator" "${PIDS[-1]}"

step "operator: sovereignspec run as system:serviceaccount:$NS:$RELEASE"
TOKEN=$("${K[@]}" create token "$RELEASE" -n "$NS" --duration 2h)
SERVER=$("${K[@]}" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
cat >"$WORK/sa.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "$SERVER", certificate-authority: "$KUBE_CA_FILE"}}]
users: [{name: $RELEASE, user: {token: "$TOKEN"}}]
contexts: [{name: sa, context: {cluster: local, user: $RELEASE}}]
current-context: sa
EOF
chmod 600 "$WORK/sa.kubeconfig"
MET_PORT=$(free_port)
HEALTH_PORT=$(free_port)
SOVEREIGNSPEC_TELEMETRY_REFRESH_SECONDS=2 SOVEREIGNSPEC_RESYNC_SECONDS=2 \
  "$PY" -m sovereignspec run --kubeconfig "$WORK/sa.kubeconfig" --prometheus-url "$PROMETHEUS_URL" \
  --lease-namespace "$NS" --identity "demo-$(hostname)-$$" --metrics-port "$MET_PORT" --health-port "$HEALTH_PORT" \
  --bind-address 127.0.0.1 --log-format text >"$WORK/operator.log" 2>&1 &
PIDS+=($!)
OP_PID=${PIDS[-1]}
for name in sim:$SIM_PORT operator:$MET_PORT; do
  f="$PROMETHEUS_TARGETS_DIR/sovereignspec-demo-${name%%:*}-$$.json"
  printf '[{"targets":["127.0.0.1:%s"],"labels":{"job":"sovereignspec-demo-%s"}}]\n' "${name#*:}" "${name%%:*}" >"$f"
  TARGETS+=("$f")
done
wait_http "http://127.0.0.1:$HEALTH_PORT/readyz" 90 "operator" "$OP_PID"
until curl -fsS "http://127.0.0.1:$HEALTH_PORT/readyz" | grep -q '"leading": true'; do
  kill -0 "$OP_PID" 2>/dev/null || die "operator exited: $(tail -20 "$WORK/operator.log")"
  sleep 0.5
done
echo "operator leads (Lease $NS/sovereignspec-leader); log: $WORK/operator.log"

step "waiting for Prometheus to hold the GPU load of the demo nodes"
q='count(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{Hostname=~"demo-.*"})'
for i in $(seq 120); do
  n=$(curl -fsS --get "$PROMETHEUS_URL/api/v1/query" --data-urlencode "query=$q" |
    "$PY" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)')
  [ "$n" -ge 40 ] && break
  [ "$i" -eq 120 ] && die "Prometheus has no telemetry for the demo nodes (targets in $PROMETHEUS_TARGETS_DIR)"
  sleep 1
done
echo "$n GPUs reporting"
sleep 3 # one operator telemetry refresh

step "applying deploy/examples (tenants, sovereignty, queues, a LeaderWorkerSet, a StatefulSet, vLLM Deployments and Jobs)"
"${K[@]}" apply --server-side --force-conflicts --field-manager sovereignspec-demo -f deploy/examples/00-tenants.yaml -f deploy/examples/10-sovereignty.yaml -f deploy/examples/20-queues.yaml
"${K[@]}" wait --for jsonpath='{.status.conditions[?(@.type=="Active")].status}'=True --timeout 60s clusterqueue.kueue.x-k8s.io/llm-serving >/dev/null
# The pod groups first: the LeaderWorkerSet takes two whole DE nodes (its decision reserves both) before
# the single-GPU workloads arrive.
"${K[@]}" apply --server-side --force-conflicts --field-manager sovereignspec-demo -f deploy/examples/50-vllm-leaderworkerset.yaml -f deploy/examples/55-vllm-statefulset.yaml
for i in $(seq 60); do
  "${K[@]}" get speculationdecisions -n clinic-de --no-headers 2>/dev/null | grep -q . && break
  sleep 1
done
"${K[@]}" apply --server-side --force-conflicts --field-manager sovereignspec-demo -f deploy/examples/30-vllm-interactive.yaml -f deploy/examples/35-vllm-interactive-jobs.yaml -f deploy/examples/40-vllm-batch.yaml

step "waiting for the decisions"
want=10
for i in $(seq 120); do
  n=$("${K[@]}" get speculationdecisions -A --no-headers 2>/dev/null | awk '$1 ~ /^(bank-kr|clinic-de|shop-us)$/ && $8 != "Pending"' | wc -l)
  [ "$n" -ge "$want" ] && break
  kill -0 "$OP_PID" 2>/dev/null || die "operator exited: $(tail -20 "$WORK/operator.log")"
  [ "$i" -eq 120 ] && { echo "only $n of $want decided after 120 s" >&2; break; }
  sleep 1
done

step "kubectl get speculationdecisions -A"
"${K[@]}" get speculationdecisions -A
WL=$("${K[@]}" get speculationdecisions -n bank-kr -o name | grep advisor | head -1)
step "sovereignspec explain bank-kr/${WL##*/}"
"$PY" -m sovereignspec explain "bank-kr/${WL##*/}" --kubeconfig "$KUBECONFIG"

printf '\ndemo ready in %ds. Try: %s get speculationdecisions -A; %s -m sovereignspec explain NAMESPACE/WORKLOAD\n' \
  "$(($(date +%s) - T0))" "kubectl --kubeconfig $KUBECONFIG" "$PY"
if [ "${DEMO_WAIT:-$([ -t 0 ] && echo 1 || echo 0)}" = 1 ]; then
  echo "operator and simulator keep running; Ctrl-C stops them."
  wait "$OP_PID"
fi
