#!/usr/bin/env bash
# Builds the control-plane programs the simulator runs for real (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) from their Go modules into OUT_DIR.
#   usage: scripts/build-control-plane.sh OUT_DIR TOOL...
# Called by scripts/tools.sh, which caches the result per machine. Versions: ETCD_VER, KUBE_VER.
#   etcd: `go install go.etcd.io/etcd/server/v3` is refused (its go.mod has replace lines), so the
#     two-line main package in scripts/etcd-main imports etcdmain and is built instead.
#   kube-*: the k8s.io/kubernetes module's go.mod points its 31 staging modules at ./staging/src,
#     which the module zip lacks; a copy of the tree gets them pointed at the published
#     k8s.io/* v0.<minor>.<patch> of the same release, and the version ldflags hack/lib/version.sh
#     would give (without them the programs report v0.0.0-master and refuse a 1.35 emulation).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
ETCD_VER=${ETCD_VER:?}
KUBE_VER=${KUBE_VER:?}
export GOFLAGS=-mod=mod CGO_ENABLED=0

build_etcd() {
  local src
  src=$(mktemp -d)
  cp "$here/etcd-main/go.mod" "$here/etcd-main/go.sum" "$here/etcd-main/main.go" "$src/"
  # every etcd module at the one release (its version string lives in api/v3)
  (cd "$src" && for m in api/v3 client/pkg/v3 client/v3 pkg/v3 server/v3; do go mod edit -require="go.etcd.io/etcd/$m@$ETCD_VER"; done &&
    go build -trimpath -ldflags='-s -w' -o "$out/etcd" .)
  rm -rf "$src"
}

kube_tree=
prepare_kube_tree() {
  [ -n "$kube_tree" ] && return 0
  local mod staging
  mod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VER" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  kube_tree=$(mktemp -d)
  cp -r "$mod/." "$kube_tree/"
  chmod -R u+w "$kube_tree"
  staging="v0.${KUBE_VER#v1.}"
  # k8s.io/api => ./staging/src/k8s.io/api  becomes  k8s.io/api => k8s.io/api v0.35.0
  sed -i -E "s#^(\s*)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+\$#\1\2 => \2 $staging#" "$kube_tree/go.mod"
  rm -f "$kube_tree/go.work" "$kube_tree/go.work.sum"
  rm -rf "$kube_tree/vendor"
}

build_kube() {
  prepare_kube_tree
  local minor=${KUBE_VER#v1.}
  minor=${minor%%.*}
  local flags=() key val
  for kv in "gitVersion=$KUBE_VER" gitMajor=1 "gitMinor=$minor" gitTreeState=clean \
    "gitCommit=${KUBE_GIT_COMMIT:-unknown}" "buildDate=1970-01-01T00:00:00Z"; do
    key=${kv%%=*} val=${kv#*=}
    flags+=("-X 'k8s.io/client-go/pkg/version.$key=$val'" "-X 'k8s.io/component-base/version.$key=$val'")
  done
  (cd "$kube_tree" && go build -trimpath -ldflags="-s -w ${flags[*]}" -o "$out/$1" "./cmd/$1")
}

trap '[ -n "$kube_tree" ] && rm -rf "$kube_tree"' EXIT
for tool in "$@"; do
  case $tool in
    etcd) build_etcd ;;
    kube-apiserver | kube-controller-manager | kube-scheduler) build_kube "$tool" ;;
    *) echo "build-control-plane: unknown tool $tool" >&2; exit 2 ;;
  esac
done
