#!/usr/bin/env bash
# `task tools` (a step of `task setup`): makes .tools/bin hold the talosctl and helm this project runs
# (tests, .sim/env, CI). Per tool, the first that holds:
#   1. .tools/bin already has it at a supported version: nothing to do;
#   2. a real binary on PATH at a supported version (what an operator has) is linked there;
#   3. one built earlier on this machine, in the per-machine cache
#      ${XDG_CACHE_HOME:-$HOME/.cache}/talos-bootstrap/tools/<tool>-<version>/, is linked there (so a
#      fresh clone does not build again);
#   4. it is built from source into that cache, then linked, with ../shared/tools/build-real-clients
#      when that script and the Talos source archive are beside the repository, or beside the local
#      checkout it was cloned from (a cold build is about 5 minutes on 2 cores);
#   5. else exit 3 with the install instructions (talosctl and helm of your own on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="$root/.tools/bin"
TALOS_TAG=v1.12.11
HELM_VER=v3.21.4
# the build kit (../shared: the build script and the Talos source archive): beside this checkout, or
# beside the checkout this one was cloned from when that is a local path (git clone /path/to/checkout)
origin=$(git -C "$root" config --get remote.origin.url 2>/dev/null || true)
case $origin in file://*) origin=${origin#file://} ;; /*) ;; *) origin= ;; esac
kit="$root/../shared"
for base in "$root" ${origin:+"$origin"}; do
  if [ -x "$base/../shared/tools/build-real-clients" ]; then kit=$(cd "$base/../shared" && pwd); break; fi
done
builder="$kit/tools/build-real-clients"
archive=${TALOS_SRC_ARCHIVE:-$kit/vendor/talos-$TALOS_TAG-src.tar.gz}
cache="${XDG_CACHE_HOME:-${HOME:-$root}/.cache}/talos-bootstrap/tools"
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
usable() { real "$2" && supported "$1" "$2"; }

found_on_path() {
  local dir
  IFS=: read -ra dirs <<<"${PATH:-}"
  for dir in "${dirs[@]}"; do
    [ -n "$dir" ] && [ "$(cd "$dir" 2>/dev/null && pwd -P)" != "$(cd "$bin" && pwd -P)" ] || continue
    if usable "$1" "$dir/$1"; then echo "$dir/$1"; return 0; fi
  done
  return 1
}

version_of() { case $1 in talosctl) echo "$TALOS_TAG" ;; helm) echo "$HELM_VER" ;; esac; }
cached() { echo "$cache/$1-$(version_of "$1")/$1"; }

missing=()
for tool in talosctl helm; do
  if usable "$tool" "$bin/$tool"; then continue; fi
  if path=$(found_on_path "$tool"); then ln -sfn "$path" "$bin/$tool"; echo "$tool: using $path"; continue; fi
  if usable "$tool" "$(cached "$tool")"; then ln -sfn "$(cached "$tool")" "$bin/$tool"; echo "$tool: using $(cached "$tool") (built earlier on this machine)"; continue; fi
  rm -f "$bin/$tool"
  missing+=("$tool")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ -x "$builder" ] && [ -f "$archive" ] && command -v go >/dev/null 2>&1; then
    for tool in "${missing[@]}"; do
      final=$(cached "$tool")
      mkdir -p "$cache"
      # built aside, then moved in: a second clone building at the same time never links a half-written file
      work=$(mktemp -d "$cache/.build-$tool-XXXXXX")
      trap 'rm -rf "$work"' EXIT
      echo "building $tool $(version_of "$tool") from source into $(dirname "$final") (a few minutes, once per machine)"
      started=$SECONDS
      TALOS_TAG=$TALOS_TAG HELM_VER=$HELM_VER TALOS_SRC_ARCHIVE=$archive "$builder" "$work" "$tool"
      mkdir -p "$(dirname "$final")"
      mv -f "$work/$tool" "$final"
      rm -rf "$work"
      trap - EXIT
      echo "$tool built in $((SECONDS - started)) s"
      ln -sfn "$final" "$bin/$tool"
    done
  else
    cat >&2 <<EOF
error: ${missing[*]} not found at a supported version (talosctl v1.12.x, helm v3) and cannot be built here
  (fix: install them and re-run \`task tools\`:
    talosctl: curl -sL https://talos.dev/install | sh   (or brew install siderolabs/tap/talosctl)
    helm:     https://helm.sh/docs/intro/install/
   or provide Go and ../shared/tools/build-real-clients with ../shared/vendor/talos-$TALOS_TAG-src.tar.gz)
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

# For the tests only, each kept in the per-machine cache like the two above and linked into .tools/:
# talhelper v3.1.17 (the last release: the tests run the operator's `talhelper genconfig` with it) as
# .tools/bin/talhelper, and talosctl v1.13.9 (the Talos 1.13 runs) as .tools/talosctl-v1.13.9/talosctl.
# Neither is needed to run the tool: without the build kit (an operator's machine) nothing is said, and
# the tests that need them skip.
test_tool() { # name version link check...
  local name=$1 version=$2 link=$3; shift 3
  local final="$cache/$name-$version/${name%%-*}"
  if [ -x "$link" ] && "$@" "$link" >/dev/null 2>&1; then return; fi
  if ! { [ -x "$final" ] && "$@" "$final" >/dev/null 2>&1; }; then
    local tag_archive="$kit/vendor/talos-$version-src.tar.gz"
    if [ ! -x "$builder" ] || ! command -v go >/dev/null 2>&1 || { [ "$name" = talosctl ] && [ ! -f "$tag_archive" ]; }; then return; fi
    local work; work=$(mktemp -d "$cache/.build-$name-XXXXXX")
    echo "building $name $version from source into $(dirname "$final") (minutes, once per machine)"
    local started=$SECONDS
    TALOS_TAG=$version TALOS_SRC_ARCHIVE=$tag_archive "$builder" "$work" "${name%%-*}" || { rm -rf "$work"; exit 1; }
    mkdir -p "$(dirname "$final")"; mv -f "$work/${name%%-*}" "$final"; rm -rf "$work"
    echo "$name built in $((SECONDS - started)) s"
  fi
  mkdir -p "$(dirname "$link")"; ln -sfn "$final" "$link"; echo "$name $version: ${link#"$root"/}"
}
talhelper_works() { real "$1" && "$1" genconfig --help | grep -q -- '--secret-file'; }
talosctl_113() { real "$1" && "$1" version --client | grep -Eq 'Tag:[[:space:]]*v1\.13\.9'; }
test_tool talhelper v3.1.17 "$bin/talhelper" talhelper_works
test_tool talosctl v1.13.9 "$root/.tools/talosctl-v1.13.9/talosctl" talosctl_113
