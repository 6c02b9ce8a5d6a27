#!/usr/bin/env bash
# `task tools`, after scripts/tools.sh: makes .tools/bin hold the control-plane programs the
# simulator runs for real (etcd; kube-apiserver, kube-controller-manager and kube-scheduler for the
# real control plane to come: docs/real-control-plane.md), at exactly the versions below:
#   1. .tools/bin already has it at that version: nothing to do;
#   2. one built earlier on this machine, in the per-machine cache
#      ${XDG_CACHE_HOME:-$HOME/.cache}/talos-bootstrap/tools/<tool>-<version>/, is linked there (a
#      fresh clone does not build again);
#   3. it is built from its Go module into that cache with scripts/build-control-plane.sh, then
#      linked (anywhere Go reaches the module proxy; cold, about 25 minutes on 2 busy cores, once per machine);
#   4. else (no Go) exit 3 naming the fix.
# Never taken from PATH: another version there would change what the tests rehearse.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="$root/.tools/bin"
ETCD_VER=v3.6.11 # the etcd Talos v1.12.11 runs (pkg/machinery/constants DefaultEtcdVersion)
KUBE_VER=v1.35.0 # the simulator's default kubernetesVersion (sim/scenario.js)
TOOLS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
cache="${XDG_CACHE_HOME:-${HOME:-$root}/.cache}/talos-bootstrap/tools"
mkdir -p "$bin"

version_of() { case $1 in etcd) echo "$ETCD_VER" ;; *) echo "$KUBE_VER" ;; esac; }
cached() { echo "$cache/$1-$(version_of "$1")/$1"; }
# a compiled program that reports exactly its pinned version
pinned() {
  [ -x "$2" ] && [ "$(head -c 4 "$2" | od -An -c | tr -d ' ')" = '177ELF' ] || return 1
  # read whole before matching: with pipefail, `grep -q` leaving early would fail the pipe (SIGPIPE)
  local said
  said=$("$2" --version 2>/dev/null) || return 1
  case $1 in
    etcd) grep -qx "etcd Version: ${ETCD_VER#v}" <<<"$said" ;;
    *) grep -qx "Kubernetes $KUBE_VER" <<<"$said" ;;
  esac
}

to_build=()
for tool in "${TOOLS[@]}"; do
  if pinned "$tool" "$bin/$tool"; then continue; fi
  if pinned "$tool" "$(cached "$tool")"; then ln -sfn "$(cached "$tool")" "$bin/$tool"; echo "$tool: using $(cached "$tool") (built earlier on this machine)"; continue; fi
  rm -f "$bin/$tool"
  to_build+=("$tool")
done
if [ ${#to_build[@]} -gt 0 ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "error: ${to_build[*]} not built yet and Go is missing (fix: install Go 1.25 or later from https://go.dev/dl/, put it on PATH and re-run \`task tools\`)" >&2
    exit 3
  fi
  mkdir -p "$cache"
  # built aside, then moved in: a second clone building at the same time never links a half-written file
  work=$(mktemp -d "$cache/.build-control-plane-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "building ${to_build[*]} (etcd $ETCD_VER, Kubernetes $KUBE_VER) from their Go modules into $cache (cold: about 25 minutes on 2 busy cores, once per machine)"
  started=$SECONDS
  ETCD_VER=$ETCD_VER KUBE_VER=$KUBE_VER bash scripts/build-control-plane.sh "$work" "${to_build[@]}"
  for tool in "${to_build[@]}"; do
    final=$(cached "$tool")
    mkdir -p "$(dirname "$final")"
    mv -f "$work/$tool" "$final"
    ln -sfn "$final" "$bin/$tool"
  done
  rm -rf "$work"
  trap - EXIT
  echo "${to_build[*]} built in $((SECONDS - started)) s"
fi

for tool in "${TOOLS[@]}"; do echo "$tool $(version_of "$tool"): .tools/bin/$tool"; done
