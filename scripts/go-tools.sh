#!/usr/bin/env bash
# `task go-tools` (a step of `task setup`): sops and age-keygen in GOPATH/bin, where the tests take
# them (test/support/go-bin.ts): the Flux tests encrypt Secrets with the real sops to a key made by the
# real age-keygen. Each is built with `go install` from the Go module proxy at a pinned version, and
# only when GOPATH/bin does not already hold that version (read offline from the binary's build info:
# `go version -m`). A second run does nothing. Exit 3 without Go.
set -euo pipefail

tools=(
  "sops github.com/getsops/sops/v3/cmd/sops v3.10.2"
  "age-keygen filippo.io/age/cmd/age-keygen v1.2.1"
)

if ! command -v go >/dev/null 2>&1; then
  echo "error: go not found: sops and age-keygen are built with it (fix: install Go 1.26 (what go-task v3.54.0 needs), https://go.dev/doc/install, then run: task setup)" >&2
  exit 3
fi
gopath=$(go env GOPATH)
# `go install` writes to GOBIN when it is set; the tests look in the first GOPATH entry's bin
bin="${gopath%%:*}/bin"

for entry in "${tools[@]}"; do
  read -r name package version <<<"$entry"
  have=
  [ -x "$bin/$name" ] && have=$(go version -m "$bin/$name" 2>/dev/null | awk '$1 == "mod" { print $3; exit }')
  if [ "$have" = "$version" ]; then
    echo "$name $version: $bin/$name"
    continue
  fi
  echo "$name: installing $version into $bin (go install ${package}@${version})"
  GOBIN="$bin" go install "${package}@${version}"
  echo "$name $version: $bin/$name"
done
