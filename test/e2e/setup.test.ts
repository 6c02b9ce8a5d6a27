// Issue 24 items 1 and 2: what `task setup` decides, run offline against stand-ins for node, npm,
// ldconfig and go: which Node the project runs on (scripts/node.sh), sops and age-keygen installed
// into GOPATH/bin once (scripts/go-tools.sh), and talosctl and helm built once per machine
// (scripts/tools.sh).
import { execFileSync, spawnSync } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { realTool } from '../support/real-tools.js'

const ROOT = resolve(import.meta.dirname, '../..')
const temps: string[] = []
afterEach(() => {
  for (const t of temps.splice(0)) rmSync(t, { recursive: true, force: true })
})

function script(path: string, body: string): void {
  mkdirSync(resolve(path, '..'), { recursive: true })
  writeFileSync(path, `#!/bin/sh\n${body}\n`)
  chmodSync(path, 0o755)
}

/** A checkout holding the set-up scripts, and a bin directory of stand-ins that log their calls. */
function checkout(): { root: string; bin: string; log: string; run: (name: string) => ReturnType<typeof spawnSync> } {
  const root = join(mkdtempSync(join(tmpdir(), 'tb-setup-')), 'repo')
  temps.push(resolve(root, '..'))
  mkdirSync(join(root, 'scripts', 'node'), { recursive: true })
  for (const file of ['node.sh', 'go-tools.sh', 'node/package.json', 'node/package-lock.json'])
    copyFileSync(join(ROOT, 'scripts', file), join(root, 'scripts', file))
  const bin = join(root, '..', 'bin')
  const log = join(root, '..', 'calls.log')
  writeFileSync(log, '')
  const run = (name: string) =>
    spawnSync('bash', [join(root, 'scripts', name)], { encoding: 'utf8', env: { PATH: `${bin}:/usr/bin:/bin`, HOME: join(root, '..') } })
  return { root, bin, log, run }
}

/** the machine's node, of one version */
const machineNode = (bin: string, version: string): void =>
  script(join(bin, 'node'), `case "$1" in -p) echo ${version.split('.')[0]} ;; --version) echo v${version} ;; esac`)
const ldconfig = (bin: string, libatomic: boolean): void =>
  script(
    join(bin, 'ldconfig'),
    `echo "2 libs found in cache"\necho "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6"${libatomic ? '\necho "\tlibatomic.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libatomic.so.1"' : ''}`,
  )

const pinned = JSON.parse(readFileSync(join(ROOT, 'scripts', 'node', 'package.json'), 'utf8')) as {
  optionalDependencies: Record<string, string>
}
const arch = process.arch === 'arm64' ? 'arm64' : 'x64'
const want = `v${pinned.optionalDependencies[`node-linux-${arch}`] ?? ''}`

describe('task node (scripts/node.sh)', () => {
  it('pins Node 26 for both Linux platforms, each at a 26.x the lockfile has with its integrity', () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'scripts', 'node', 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version: string; integrity?: string }>
    }
    for (const platform of ['x64', 'arm64']) {
      const version = pinned.optionalDependencies[`node-linux-${platform}`] ?? ''
      expect(version).toMatch(/^26\.\d+\.\d+$/)
      expect(lock.packages[`node_modules/node-linux-${platform}`]).toMatchObject({ version, integrity: expect.stringMatching(/^sha512-/) })
    }
  })

  it.each(['24.21.0', '26.12.1'])('a machine node %s is used as it is: nothing installed', (version) => {
    const { bin, log, run, root } = checkout()
    machineNode(bin, version)
    script(join(bin, 'npm'), `echo "npm $*" >> '${log}'`)
    const r = run('node.sh')
    expect(r.status, String(r.stderr)).toBe(0)
    expect(r.stdout).toBe(`node v${version}: ${bin}/node (24 or 26: nothing to install)\n`)
    expect(readFileSync(log, 'utf8')).toBe('')
    expect(existsSync(join(root, '.tools'))).toBe(false)
  })

  it.each(['20.20.2', '22.22.2', '25.9.0'])(
    'a machine node %s gets Node 26 in .tools/node, from npm ci; a second run does nothing',
    (version) => {
      const { bin, log, run, root } = checkout()
      machineNode(bin, version)
      ldconfig(bin, true)
      // npm ci: the package's binary, as node-linux-<arch> lays it out
      script(
        join(bin, 'npm'),
        `echo "npm $* in $(basename "$PWD")" >> '${log}'\nmkdir -p node_modules/.bin\nprintf '#!/bin/sh\\necho ${want}\\n' > node_modules/.bin/node\nchmod +x node_modules/.bin/node`,
      )
      const first = run('node.sh')
      expect(first.status, String(first.stderr)).toBe(0)
      expect(first.stdout).toContain(`node v${version} is not 24 or 26: installing node ${want} from the npm registry into .tools/node`)
      expect(first.stdout).toMatch(new RegExp(`node ${want}: .tools/node/bin/node\\n$`))
      expect(readFileSync(log, 'utf8')).toBe('npm ci --no-audit --no-fund --ignore-scripts --loglevel=error in node\n')
      expect(readFileSync(join(root, '.tools', 'node', 'package-lock.json'), 'utf8')).toBe(
        readFileSync(join(ROOT, 'scripts', 'node', 'package-lock.json'), 'utf8'),
      )
      const second = run('node.sh')
      expect(second).toMatchObject({ status: 0, stdout: `node ${want}: .tools/node/bin/node\n` })
      expect(readFileSync(log, 'utf8').split('\n').filter(Boolean)).toHaveLength(1)
    },
  )

  it('without libatomic.so.1 (which Node 25 and later link): exit 3 naming the package, nothing installed', () => {
    const { bin, log, run, root } = checkout()
    machineNode(bin, '20.20.2')
    ldconfig(bin, false)
    script(join(bin, 'npm'), `echo "npm $*" >> '${log}'`)
    const r = run('node.sh')
    expect(r.status).toBe(3)
    expect(r.stderr).toBe(
      `error: Node.js ${want} needs libatomic.so.1, which this system does not have (fix: apt-get install libatomic1 (dnf install libatomic, apk add libatomic), or install Node.js 24 or 26 yourself, then run: task setup)\n`,
    )
    expect(readFileSync(log, 'utf8')).toBe('')
    expect(existsSync(join(root, '.tools', 'node'))).toBe(false)
  })
})

describe('task go-tools (scripts/go-tools.sh)', () => {
  /** a go whose `install` writes a binary carrying its module version, as `go version -m` reads it */
  function fakeGo(bin: string, gopath: string, log: string): void {
    script(
      join(bin, 'go'),
      [
        `case "$1" in`,
        `  env) echo '${gopath}' ;;`,
        `  version) sed -n 's/^mod /mod\\t/p' "$3" ;;`,
        `  install) echo "go install $2 GOBIN=$GOBIN" >> '${log}'; name=\${2%@*}; name=\${name##*/}; mod=\${2%/cmd/*}; mkdir -p "$GOBIN"; printf '#!/bin/sh\\nmod %s %s\\n' "$mod" "\${2#*@}" > "$GOBIN/$name"; chmod +x "$GOBIN/$name" ;;`,
        `esac`,
      ].join('\n'),
    )
  }

  it('installs sops and age-keygen into GOPATH/bin at their pinned versions, once', () => {
    const { bin, log, run, root } = checkout()
    const gopath = join(root, '..', 'gopath')
    fakeGo(bin, `${gopath}:/elsewhere`, log)
    const first = run('go-tools.sh')
    expect(first.status, String(first.stderr)).toBe(0)
    expect(readFileSync(log, 'utf8')).toBe(
      [
        `go install github.com/getsops/sops/v3/cmd/sops@v3.10.2 GOBIN=${gopath}/bin`,
        `go install filippo.io/age/cmd/age-keygen@v1.2.1 GOBIN=${gopath}/bin`,
        '',
      ].join('\n'),
    )
    expect(first.stdout).toContain(`sops v3.10.2: ${gopath}/bin/sops\n`)
    const second = run('go-tools.sh')
    expect(second).toMatchObject({ status: 0, stdout: `sops v3.10.2: ${gopath}/bin/sops\nage-keygen v1.2.1: ${gopath}/bin/age-keygen\n` })
    expect(readFileSync(log, 'utf8').split('\n').filter(Boolean)).toHaveLength(2)
  })

  it('replaces one of another version', () => {
    const { bin, log, run, root } = checkout()
    const gopath = join(root, '..', 'gopath')
    fakeGo(bin, gopath, log)
    script(join(gopath, 'bin', 'sops'), 'mod github.com/getsops/sops/v3 v3.9.0')
    script(join(gopath, 'bin', 'age-keygen'), 'mod filippo.io/age v1.2.1')
    const r = run('go-tools.sh')
    expect(r.status, String(r.stderr)).toBe(0)
    expect(readFileSync(log, 'utf8')).toBe(`go install github.com/getsops/sops/v3/cmd/sops@v3.10.2 GOBIN=${gopath}/bin\n`)
  })

  it('without Go: exit 3 saying what to install', () => {
    const { root } = checkout()
    const r = spawnSync('/bin/bash', [join(root, 'scripts', 'go-tools.sh')], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } })
    expect(r.status).toBe(3)
    expect(r.stderr).toMatch(
      /^error: go not found: sops and age-keygen are built with it \(fix: install Go 1\.26 .*then run: task setup\)\n$/,
    )
  })
})

describe('task tools (scripts/tools.sh): built once per machine', () => {
  const talosctl = realTool('talosctl')
  const helm = realTool('helm')
  const helm3 = realTool('helm3')
  const helmfile = realTool('helmfile')
  const talhelper = realTool('talhelper')
  it.skipIf(!!talosctl.skip || !!helm.skip || !!helm3.skip || !!helmfile.skip || !!talhelper.skip)(
    'a local clone with no build kit beside it builds with the one beside its origin, into the per-machine cache; another clone reuses that',
    () => {
      const base = mkdtempSync(join(tmpdir(), 'tb-tools-cache-'))
      temps.push(base)
      const git = (cwd: string, ...args: string[]): string =>
        execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', ...args], {
          cwd,
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
        })
      // the maintainers' layout: a checkout with the kit beside it
      const origin = join(base, 'work', 'origin')
      mkdirSync(join(origin, 'scripts'), { recursive: true })
      copyFileSync(join(ROOT, 'scripts', 'tools.sh'), join(origin, 'scripts', 'tools.sh'))
      git(origin, 'init', '-q')
      git(origin, 'add', '.')
      git(origin, 'commit', '-q', '-m', 'tools')
      const log = join(base, 'builds.log')
      writeFileSync(log, '')
      // the kit's build script, standing in for a build: the real binaries, linked
      const sources: Record<string, string> = {
        talosctl: talosctl.path ?? '',
        helm: helm.path ?? '',
        helm3: helm3.path ?? '',
        helmfile: helmfile.path ?? '',
        talhelper: talhelper.path ?? '',
      }
      script(
        join(base, 'work', 'shared', 'tools', 'build-real-clients'),
        [
          `out=$1; shift`,
          `for t in "$@"; do echo "$t $TALOS_TAG $HELM_VER $TALOS_SRC_ARCHIVE" >> '${log}'`,
          `  case $t in talosctl) ln -s '${sources.talosctl}' "$out/talosctl" ;; helmfile) ln -s '${sources.helmfile}' "$out/helmfile" ;;`,
          `    talhelper) ln -s '${sources.talhelper}' "$out/talhelper" ;;`,
          `    helm) if [ "$HELM_VER" = v3.21.4 ]; then ln -s '${sources.helm3}' "$out/helm"; else ln -s '${sources.helm}' "$out/helm"; fi ;; esac`,
          `done`,
        ].join('\n'),
      )
      mkdirSync(join(base, 'work', 'shared', 'vendor'))
      writeFileSync(join(base, 'work', 'shared', 'vendor', 'talos-v1.12.11-src.tar.gz'), '')
      script(join(base, 'bin', 'go'), 'exit 0')
      const home = join(base, 'home')
      const run = (clone: string) =>
        spawnSync('bash', [join(clone, 'scripts', 'tools.sh')], {
          encoding: 'utf8',
          env: { PATH: `${join(base, 'bin')}:/usr/bin:/bin`, HOME: home },
        })
      const cache = join(home, '.cache', 'talos-bootstrap', 'tools')

      const first = join(base, 'elsewhere', 'clone')
      git(base, 'clone', '-q', origin, first)
      const built = run(first)
      expect(built.status, String(built.stderr)).toBe(0)
      expect(built.stdout).toContain(
        `building talosctl v1.12.11 from source into ${cache}/talosctl-v1.12.11 (a few minutes, once per machine)\n`,
      )
      expect(built.stdout).toMatch(/helm built in \d+ s\n/)
      expect(readFileSync(log, 'utf8')).toBe(
        [
          `talosctl v1.12.11 v4.3.1 ${join(base, 'work', 'shared')}/vendor/talos-v1.12.11-src.tar.gz`,
          `helm v1.12.11 v4.3.1 ${join(base, 'work', 'shared')}/vendor/talos-v1.12.11-src.tar.gz`,
          `helmfile v1.12.11 v4.3.1 ${join(base, 'work', 'shared')}/vendor/talos-v1.12.11-src.tar.gz`,
          // helm3 is a helm build at helm 3's version
          `helm v1.12.11 v3.21.4 ${join(base, 'work', 'shared')}/vendor/talos-v1.12.11-src.tar.gz`,
          // the tests' talhelper (talosctl v1.13.9 is not built: no v1.13.9 source archive in this kit)
          `talhelper v3.1.17  ${join(base, 'work', 'shared')}/vendor/talos-v3.1.17-src.tar.gz`,
          '',
        ].join('\n'),
      )
      expect(readlinkSync(join(first, '.tools', 'bin', 'talosctl'))).toBe(join(cache, 'talosctl-v1.12.11', 'talosctl'))

      const second = join(base, 'other', 'clone')
      git(base, 'clone', '-q', origin, second)
      const reused = run(second)
      expect(reused.status, String(reused.stderr)).toBe(0)
      expect(reused.stdout).toBe(
        [
          `talosctl: using ${cache}/talosctl-v1.12.11/talosctl (built earlier on this machine)`,
          `helm: using ${cache}/helm-v4.3.1/helm (built earlier on this machine)`,
          `helmfile: using ${cache}/helmfile-v1.8.0/helmfile (built earlier on this machine)`,
          `helm3: using ${cache}/helm-v3.21.4/helm (built earlier on this machine)`,
          'talosctl v1.12.11: .tools/bin/talosctl',
          'helm v4.3.1: .tools/bin/helm',
          'helmfile v1.8.0: .tools/bin/helmfile',
          'helm3 v3.21.4: .tools/bin/helm3',
          'talhelper v3.1.17: .tools/bin/talhelper',
          '',
        ].join('\n'),
      )
      expect(readFileSync(log, 'utf8').split('\n').filter(Boolean)).toHaveLength(5)
    },
  )
})
