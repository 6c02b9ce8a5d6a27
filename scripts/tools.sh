#!/usr/bin/env bash
# `task tools`: makes .tools/bin hold the talosctl and helm this project runs (tests, .sim/env, CI).
# Per tool: a real binary already on PATH at a supported version is linked there (what an operator
# has); else it is built from source with ../shared/tools/build-real-clients when that script and
# the Talos source archive are there; else exit 3 with the install instructions. A second run finds
# .tools/bin already right and does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="$root/.tools/bin"
builder="$root/../shared/tools/build-real-clients"
archive=${TALOS_SRC_ARCHIVE:-$root/../shared/vendor/talos-v1.12.11-src.tar.gz}
mkdir -p "$bin"

# supported: the Talos minor the product targets, and helm 3
supported() {
  case $1 in
    talosctl) "$2" version --client 2>/dev/null | grep -Eq '^[[:space:]]*Tag:[[:space:]]*v1\.12\.' ;;
    helm) "$2" version --short 2>/dev/null | grep -Eq '^v3\.' ;;
  esac
}
# a real client is a compiled program: a wrapper script never counts
real() { [ -x "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

found_on_path() {
  local dir
  IFS=: read -ra dirs <<<"${PATH:-}"
  for dir in "${dirs[@]}"; do
    [ -n "$dir" ] && [ "$(cd "$dir" 2>/dev/null && pwd -P)" != "$(cd "$bin" && pwd -P)" ] || continue
    if real "$dir/$1" && supported "$1" "$dir/$1"; then echo "$dir/$1"; return 0; fi
  done
  return 1
}

missing=()
for tool in talosctl helm; do
  if real "$bin/$tool" && supported "$tool" "$bin/$tool"; then continue; fi
  if path=$(found_on_path "$tool"); then ln -sfn "$path" "$bin/$tool"; echo "$tool: using $path"; continue; fi
  rm -f "$bin/$tool"
  missing+=("$tool")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ -x "$builder" ] && [ -f "$archive" ] && command -v go >/dev/null 2>&1; then
    echo "building ${missing[*]} from source into .tools/bin (a few minutes, once)"
    "$builder" "$bin" "${missing[@]}"
  else
    cat >&2 <<EOF
error: ${missing[*]} not found at a supported version (talosctl v1.12.x, helm v3) and cannot be built here
  (fix: install them and re-run \`task tools\`:
    talosctl: curl -sL https://talos.dev/install | sh   (or brew install siderolabs/tap/talosctl)
    helm:     https://helm.sh/docs/intro/install/
   or provide Go and ../shared/tools/build-real-clients with ../shared/vendor/talos-v1.12.11-src.tar.gz)
EOF
    exit 3
  fi
fi

for tool in talosctl helm; do
  case $tool in
    talosctl) v=$("$bin/$tool" version --client | awk '/Tag:/ {print $2; exit}') ;;
    helm) v=$("$bin/$tool" version --short) ;;
  esac
  echo "$tool $v: .tools/bin/$tool"
done
