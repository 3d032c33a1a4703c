#!/usr/bin/env bash
# Everything the README's two commands need on a fresh machine, in one place (`make setup`; `make demo`,
# `make test` and .ci/run all call it): Debian packages, the Python environment, the pinned binaries.
# Idempotent: a warm machine skips each step in a second.
#
#   setup.sh            install what is missing
#   setup.sh --dry-run  print what would be installed or built, change nothing
#
# Not root and packages missing: prints the one apt-get command to run and exits 1.
set -euo pipefail
LOCAL_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$LOCAL_DIR/../.." && pwd)"
DRY_RUN=0
case "${1:-}" in
--dry-run) DRY_RUN=1 ;;
"") ;;
*) echo "usage: setup.sh [--dry-run]" >&2 && exit 2 ;;
esac

# prometheus: metrics store; openssl: test-bed certificates; curl: health checks; iproute2 (ss): port
# checks; util-linux: setsid/flock/unshare; make + python3-venv: the Python environment.
APT_PACKAGES=(prometheus openssl ca-certificates curl iproute2 util-linux make python3-venv)
t0=$SECONDS
say() { printf '[setup %4ds] %s\n' "$((SECONDS - t0))" "$*" >&2; }

missing_packages() {
  local p
  for p in "${APT_PACKAGES[@]}"; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == "install ok installed" ]] || printf '%s ' "$p"
  done
}

install_packages() {
  local missing
  missing=$(missing_packages)
  if [[ -z "$missing" ]]; then
    say "Debian packages: all present (${APT_PACKAGES[*]})"
    return 0
  fi
  local cmd="apt-get update && apt-get install -y --no-install-recommends ${missing% }"
  if [[ $DRY_RUN == 1 ]]; then
    say "Debian packages: would install: ${missing% }"
    return 0
  fi
  if [[ $(id -u) != 0 ]]; then
    say "Debian packages missing: ${missing% }. Run as root: sudo sh -c '$cmd'"
    exit 1
  fi
  say "Debian packages: installing ${missing% }"
  export DEBIAN_FRONTEND=noninteractive
  # Packaged daemons must not start system-wide services (Prometheus on :9090): the test bed runs its
  # own processes on loopback. policy-rc.d answering 101 is Debian's switch for that.
  local policy_added=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && policy_added=1
  fi
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
  [[ $policy_added == 1 ]] && rm -f /usr/sbin/policy-rc.d
  say "Debian packages: installed ${missing% }"
}

python_env() {
  if [[ $DRY_RUN == 1 ]]; then
    if [[ -x "$REPO_ROOT/.venv/bin/sovereignspec" ]]; then say "Python environment: present (.venv)"; else say "Python environment: would create .venv (pip install -e '.[dev]')"; fi
    return 0
  fi
  say "Python environment (.venv)"
  make -s -C "$REPO_ROOT" venv
}

install_packages
command -v go >/dev/null || {
  say "Go >= 1.26 is required and none is on PATH"
  exit 1
}
python_env
if [[ $DRY_RUN == 1 ]]; then
  BUILD_DRY_RUN=1 "$LOCAL_DIR/build.sh"
else
  say "pinned binaries (first run builds them from Go modules)"
  "$LOCAL_DIR/build.sh"
fi
if [[ $DRY_RUN == 1 ]]; then say "dry run: nothing installed or built"; else say "ready"; fi
