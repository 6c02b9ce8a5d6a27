#!/usr/bin/env bash
# `task tools` (a step of `task setup`): makes .tools/bin hold the talosctl, helm and helmfile this
# project runs (tests, .sim/env, CI), and helm3 (helm v3, for the one end-to-end run on helm 3).
# helm is helm 4; an operator's helm 3 on PATH is used as it is. Per tool, the first that holds:
#   1. .tools/bin already has it at a supported version: nothing to do;
#   2. a real binary on PATH at a supported version (what an operator has) is linked there;
#   3. one built earlier on this machine, in the per-machine cache
#      ${XDG_CACHE_HOME:-$HOME/.cache}/talos-bootstrap/tools/<tool>-<version>/ (helm3 is
#      helm-v3.21.4/helm), is linked there (so a fresh clone does not build again);
#   4. it is built from source into that cache, then linked, with ../shared/tools/build-real-clients
#      when that script and the Talos source archive are beside the repository, or beside the local
#      checkout it was cloned from (a cold build is about 5 minutes on 2 cores; helmfile about 9);
#   5. else talosctl and helm: exit 3 with the install instructions (talosctl and helm of your own
#      on PATH); helmfile and helm3: a warning (the tests that need them are skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="$root/.tools/bin"
TALOS_TAG=v1.12.11
HELM_VER=v4.3.1
HELM3_VER=v3.21.4
HELMFILE_VER=v1.8.0
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

# supported: the Talos minor the product targets, helm 3 or 4, helmfile v1
supported() {
  case $1 in
    talosctl) "$2" version --client 2>/dev/null | grep -Eq '^[[:space:]]*Tag:[[:space:]]*v1\.12\.' ;;
    helm) "$2" version --short 2>/dev/null | grep -Eq '^v[34]\.' ;;
    helm3) "$2" version --short 2>/dev/null | grep -Eq '^v3\.' ;;
    helmfile) "$2" --help 2>/dev/null | grep -q 'helmfile' ;;
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

version_of() { case $1 in talosctl) echo "$TALOS_TAG" ;; helm) echo "$HELM_VER" ;; helm3) echo "$HELM3_VER" ;; helmfile) echo "$HELMFILE_VER" ;; esac; }
# what build-real-clients calls it (helm3 is a helm)
built_as() { case $1 in helm3) echo helm ;; *) echo "$1" ;; esac; }
cached() { echo "$cache/$(built_as "$1")-$(version_of "$1")/$(built_as "$1")"; }
# this machine's own helm 3 build once linked as helm: replaced by helm 4 (an operator's helm 3 stays)
stale() { [ "$1" = helm ] && [ "$(readlink -f "$bin/helm")" = "$(readlink -f "$cache/helm-$HELM3_VER/helm")" ]; }

missing=()
for tool in talosctl helm helmfile helm3; do
  if usable "$tool" "$bin/$tool" && ! stale "$tool"; then continue; fi
  if [ "$tool" != helm3 ] && path=$(found_on_path "$tool"); then ln -sfn "$path" "$bin/$tool"; echo "$tool: using $path"; continue; fi
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
      helm_ver=$HELM_VER
      [ "$tool" = helm3 ] && helm_ver=$HELM3_VER
      TALOS_TAG=$TALOS_TAG HELM_VER=$helm_ver TALOS_SRC_ARCHIVE=$archive "$builder" "$work" "$(built_as "$tool")"
      mkdir -p "$(dirname "$final")"
      mv -f "$work/$(built_as "$tool")" "$final"
      rm -rf "$work"
      trap - EXIT
      echo "$tool built in $((SECONDS - started)) s"
      ln -sfn "$final" "$bin/$tool"
    done
  else
    required=()
    optional=()
    for tool in "${missing[@]}"; do
      case $tool in talosctl | helm) required+=("$tool") ;; *) optional+=("$tool") ;; esac
    done
    if [ ${#optional[@]} -gt 0 ]; then
      echo "warning: ${optional[*]} not found and cannot be built here: the tests of the bootstrap helmfile (helmfile v1) and the end-to-end run on helm 3 are skipped" >&2
    fi
    if [ ${#required[@]} -gt 0 ]; then
      cat >&2 <<EOF
error: ${required[*]} not found at a supported version (talosctl v1.12.x, helm v3 or v4) and cannot be built here
  (fix: install them and re-run \`task tools\`:
    talosctl: curl -sL https://talos.dev/install | sh   (or brew install siderolabs/tap/talosctl)
    helm:     https://helm.sh/docs/intro/install/
   or provide Go and ../shared/tools/build-real-clients with ../shared/vendor/talos-$TALOS_TAG-src.tar.gz)
EOF
      exit 3
    fi
  fi
fi

for tool in talosctl helm helmfile helm3; do
  [ -x "$bin/$tool" ] || continue
  case $tool in
    talosctl) v=$("$bin/$tool" version --client | awk '/Tag:/ {print $2; exit}') ;;
    helm | helm3) v=$("$bin/$tool" version --short) ;;
    helmfile) v=$HELMFILE_VER ;;
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
