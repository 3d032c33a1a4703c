#!/usr/bin/env bash
# Builds the local test bed's binaries from pinned Go modules into $SOVEREIGNSPEC_CACHE/bin.
#
# Each binary set is built in a throwaway Go module under $CACHE/build (outside git) that requires the
# pinned module; one `go build -o bin pkg1 pkg2 ...` per set so shared packages compile once. A stamp
# keyed by the set's version makes warm runs skip the set. Prints the build time of every set.
#
# Usage: build.sh [SET...]   (sets: kubernetes kwok kueue lws helm etcd; default: all)
# BUILD_DRY_RUN=1 prints which sets would be built and changes nothing.
# While a set compiles, a progress line every PROGRESS_SECONDS (30) names the set (n of N), the elapsed
# time and the number of Go packages compiled so far, so a cold build (~18 min on 2 cores) never looks hung.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v go >/dev/null || die "go is not installed (need Go >= $GO_MIN_VERSION)"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" GOTOOLCHAIN=local
NICE=(nice -n 10)
BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# mod_file MODULE@VERSION -> path of that module's go.mod in the module cache.
mod_file() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p'; }

# new_module SET  -> fresh throwaway module dir on stdout.
new_module() {
  local dir="$BUILD_DIR/$1"
  rm -rf "$dir" && mkdir -p "$dir"
  printf 'module sovereignspec.local/build/%s\n\ngo %s\n' "$1" "$(go env GOVERSION | sed 's/^go//')" >"$dir/go.mod"
  echo "$dir"
}

# tools_file DIR PKG... : a build-tagged file importing the commands so `go mod tidy` resolves them.
tools_file() {
  local dir=$1
  shift
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    printf '\t_ "%s"\n' "$@"
    printf ')\n'
  } >"$dir/tools.go"
}

# is_cached NAME BIN... : true when NAME's stamp matches its pinned version and all its binaries exist.
is_cached() {
  local name=$1 stamp="$STAMP_DIR/$1"
  shift
  [[ -f "$stamp" && "$(cat "$stamp")" == "$(set_key "$name")" ]] || return 1
  for b in "$@"; do [[ -x "$BIN_DIR/$b" ]] || return 1; done
}

# set_key NAME -> the version string a set's stamp must hold.
set_key() {
  case "$1" in
  kubernetes) echo "$KUBERNETES_VERSION" ;;
  kwok) echo "$KWOK_VERSION" ;;
  kueue) echo "$KUEUE_VERSION" ;;
  lws) echo "$LWS_VERSION" ;;
  helm) echo "$HELM_MODULE@$HELM_VERSION" ;;
  etcd) echo "$ETCD_VERSION" ;;
  esac
}

# build_set NAME LDFLAGS PKG... (run inside the set's throwaway module dir)
build_set() {
  local name=$1 ldflags=$2
  shift 2
  local out="$BIN_DIR/"
  # A single package may be given its binary name (etcd's main package is its module root, ".../v3";
  # LWS's is ".../cmd").
  [[ -n "${OUT_NAME:-}" ]] && out="$BIN_DIR/$OUT_NAME"
  local t0=$SECONDS vlog="$LOG_DIR/build-$name.packages"
  log "$name $(set_key "$name"): resolving modules"
  "${NICE[@]}" go mod tidy >"$LOG_DIR/build-$name.log" 2>&1 || {
    tail -20 "$LOG_DIR/build-$name.log" >&2
    die "$name: go mod tidy failed (full log: $LOG_DIR/build-$name.log)"
  }
  # How many packages the build may compile (fewer when Go's build cache already holds some).
  PKG_TOTAL=$(go list -deps "$@" 2>/dev/null | wc -l)
  : >"$vlog"
  progress "$name" "$t0" "$vlog" "$BASHPID" &
  # shellcheck disable=SC2064
  trap "kill $! 2>/dev/null || true" EXIT
  log "$name $(set_key "$name"): go build $(basename -a "$@" | tr '\n' ' ')"
  # -v lists each package as it is compiled: the progress line counts them.
  "${NICE[@]}" go build -v -trimpath -ldflags="-s -w $ldflags" -o "$out" "$@" 2>"$vlog" || {
    grep -v "$PKG_LINE" "$vlog" | tail -30 >&2
    die "$name: go build failed (full log: $vlog)"
  }
  set_key "$name" >"$STAMP_DIR/$name"
  local dt=$((SECONDS - t0))
  log "$name $(set_key "$name"): built in ${dt}s"
  echo "$name $(set_key "$name") ${dt}s $(date -u +%FT%TZ)" >>"$CACHE/build-times.log"
}

PKG_LINE='^[a-zA-Z0-9._~/-]*$'
# progress NAME T0 VLOG PARENT: every PROGRESS_SECONDS while PARENT lives, one line naming the set, its
# place in this run, the elapsed time and the packages compiled so far (go build -v: one line each).
progress() {
  local name=$1 since=$2 vlog=$3 parent=$4 n last
  while sleep "${PROGRESS_SECONDS:-30}" && kill -0 "$parent" 2>/dev/null; do
    n=$(grep -c "$PKG_LINE" "$vlog" 2>/dev/null || true)
    last=$(grep "$PKG_LINE" "$vlog" 2>/dev/null | tail -1)
    log "building $name (set $SET_INDEX of $SET_COUNT): ${n:-0} of at most ${PKG_TOTAL:-?} packages compiled${last:+ (now $last)}, $((SECONDS - since))s on this set, $((SECONDS - total0))s in all"
  done
}

# module_dir MODULE@VERSION -> the extracted module in the module cache (for manifests shipped in it).
module_dir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }

build_kubernetes() {
  local v=$KUBERNETES_VERSION sv=$KUBERNETES_STAGING_VERSION dir gomod
  dir=$(new_module kubernetes)
  cd "$dir"
  gomod=$(mod_file "k8s.io/kubernetes@$v")
  [[ -f "$gomod" ]] || die "cannot download k8s.io/kubernetes@$v"
  # k8s.io/kubernetes replaces every staging module with ./staging/src/...; a dependent module must
  # replace them with their published versions instead. Generated from its own go.mod.
  {
    echo
    echo "require k8s.io/kubernetes $v"
    echo
    sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/k8s\.io/[a-z0-9-]*$#replace \1 => \1 '"$sv"'#p' "$gomod"
  } >>go.mod
  [[ $(grep -c '^replace ' go.mod) -gt 20 ]] || die "could not derive the staging replace list from $gomod"
  local pkgs=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
  tools_file "$dir" "${pkgs[@]}"
  local major minor ld=""
  major=$(echo "${v#v}" | cut -d. -f1)
  minor=$(echo "${v#v}" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$BUILD_DATE"
  done
  build_set kubernetes "$ld" "${pkgs[@]}"
}

build_simple() { # NAME MODULE VERSION LDFLAGS PKG...
  local name=$1 module=$2 v=$3 ld=$4 dir
  shift 4
  dir=$(new_module "$name")
  cd "$dir"
  printf '\nrequire %s %s\n' "$module" "$v" >>go.mod
  tools_file "$dir" "$@"
  build_set "$name" "$ld" "$@"
}

build_kwok() {
  build_simple kwok sigs.k8s.io/kwok "$KWOK_VERSION" \
    "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$KUBERNETES_VERSION" \
    sigs.k8s.io/kwok/cmd/kwok
}

# Manifests shipped inside the pinned modules, copied next to the binaries so cluster.sh needs no Go.
share_kwok() {
  local src dst="$CACHE/share/kwok-$KWOK_VERSION"
  [[ -f "$dst/stages.yaml" ]] && return 0
  src=$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")
  mkdir -p "$dst"
  # Node: initialize + heartbeat via leases. Pod: the "general" stages, whose delays can be set per
  # pod by annotation (e.g. pod-complete.stage.kwok.x-k8s.io/delay keeps a Job's pod Running).
  for f in "$src"/kustomize/stage/node/fast/node-initialize.yaml \
    "$src"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    "$src"/kustomize/stage/pod/general/pod-*.yaml; do
    printf -- '---\n' && cat "$f"
  done >"$dst/stages.yaml.tmp"
  mv "$dst/stages.yaml.tmp" "$dst/stages.yaml"
}

# share_manifests NAME MODULE VERSION DIR...: copy DIRs (each a crd or webhook folder) of a pinned module
# to $CACHE/share/NAME-VERSION/, whole or not at all; the render_*.py scripts read them there.
share_manifests() {
  local name=$1 module=$2 version=$3 src dst d
  shift 3
  dst="$CACHE/share/$name-$version"
  [[ -f "$dst/webhook/manifests.yaml" ]] && return 0
  src=$(module_dir "$module@$version")
  rm -rf "$dst.tmp" && mkdir -p "$dst.tmp"
  for d in "$@"; do cp -r "$src/$d" "$dst.tmp/"; done
  chmod -R u+w "$dst.tmp"
  rm -rf "$dst" && mv "$dst.tmp" "$dst"
}

share_kueue() {
  share_manifests kueue sigs.k8s.io/kueue "$KUEUE_VERSION" config/components/crd config/components/webhook
}

build_kueue() {
  build_simple kueue sigs.k8s.io/kueue "$KUEUE_VERSION" \
    "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION -X sigs.k8s.io/kueue/pkg/version.BuildDate=$BUILD_DATE" \
    sigs.k8s.io/kueue/cmd/kueue
}

# LeaderWorkerSet at the version Kueue's own go.mod requires (versions.env); its cmd/ is the manager.
# Its main package is "cmd", so the binary is named explicitly.
build_lws() {
  OUT_NAME=lws build_simple lws sigs.k8s.io/lws "$LWS_VERSION" \
    "-X sigs.k8s.io/lws/pkg/version.GitVersion=$LWS_VERSION -X sigs.k8s.io/lws/pkg/version.BuildDate=$BUILD_DATE" \
    sigs.k8s.io/lws/cmd
}

# LWS's CRDs (config/crd) and webhook configurations (config/webhook), rendered by render_lws.py.
share_lws() {
  share_manifests lws sigs.k8s.io/lws "$LWS_VERSION" config/crd config/webhook
}

build_helm() {
  build_simple helm "$HELM_MODULE" "$HELM_VERSION" \
    "-X $HELM_MODULE/internal/version.version=$HELM_VERSION" \
    "$HELM_MODULE/cmd/helm"
}

build_etcd() {
  local v=$ETCD_VERSION dir gomod
  dir=$(new_module etcd)
  cd "$dir"
  gomod=$(mod_file "go.etcd.io/etcd/server/v3@$v")
  # etcd's server module replaces its sibling modules with ../ paths; use the same published version.
  {
    printf '\nrequire go.etcd.io/etcd/server/v3 %s\n\n' "$v"
    sed -n 's#^[[:space:]]*\(go\.etcd\.io/etcd/[a-z/0-9]*\) => \.\./.*$#replace \1 => \1 '"$v"'#p' "$gomod"
  } >>go.mod
  tools_file "$dir" go.etcd.io/etcd/server/v3
  OUT_NAME=etcd build_set etcd "" go.etcd.io/etcd/server/v3
}

ALL_SETS=(kubernetes kwok kueue lws helm etcd)
declare -A SET_BINS=([kubernetes]="kube-apiserver kube-controller-manager kube-scheduler kubectl"
  [kwok]=kwok [kueue]=kueue [lws]=lws [helm]=helm [etcd]=etcd)
sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=("${ALL_SETS[@]}")
total0=$SECONDS
SET_COUNT=${#sets[@]}
SET_INDEX=0
for s in "${sets[@]}"; do
  SET_INDEX=$((SET_INDEX + 1))
  [[ -n "${SET_BINS[$s]:-}" ]] || die "unknown binary set '$s' (known: ${ALL_SETS[*]})"
  # shellcheck disable=SC2086
  if is_cached "$s" ${SET_BINS[$s]}; then
    log "[$SET_INDEX/$SET_COUNT] $s $(set_key "$s"): cached (${SET_BINS[$s]})"
    [[ "${BUILD_DRY_RUN:-0}" == 1 ]] && continue
  elif [[ "${BUILD_DRY_RUN:-0}" == 1 ]]; then
    log "[$SET_INDEX/$SET_COUNT] $s $(set_key "$s"): would build (${SET_BINS[$s]})"
    continue
  else
    log "[$SET_INDEX/$SET_COUNT] $s $(set_key "$s"): building"
    (build_"$s")
  fi
  case "$s" in
  kwok) share_kwok ;;
  kueue) share_kueue ;;
  lws) share_lws ;;
  esac
done
[[ "${BUILD_DRY_RUN:-0}" == 1 ]] && exit 0
log "binaries ready in $BIN_DIR ($((SECONDS - total0))s)"
