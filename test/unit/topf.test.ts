// Issue 29 item 1: a topf repository (onedr0p/cluster-template's layout since 2026-07: talos/topf.yaml,
// talos/patches/{all,control-plane,node/<host>}/*.yaml.tpl) is read as topf reads it; its configs are
// `topf render -o output`'s files and the talosconfig `topf talosconfig` printed. topf cannot be built
// here: test/support/topf/topf stands in for it (talosctl's generator with the fixture's patches).
import { cpSync, mkdtempSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join, resolve } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { loadInventory } from '../../lib/input/inventory.js'
import { generateConfigs } from '../../lib/input/generate.js'
import { InputError } from '../../lib/core/errors.js'
import { realTool } from '../support/real-tools.js'
import { inputErrors } from './fixtures.js'

const FIXTURE = resolve(import.meta.dirname, '../fixtures/topf/cluster-template/talos')
const STANDIN = resolve(import.meta.dirname, '../support/topf')
const talosctl = realTool('talosctl')

/** A copy of the fixture; `env` has the stand-in topf (and the real talosctl) on PATH. */
function copy(): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'tb-topf-')), 'talos')
  cpSync(FIXTURE, dir, { recursive: true })
  return dir
}
const env = (withTopf: boolean): NodeJS.ProcessEnv => ({
  PATH: [...(withTopf ? [STANDIN] : []), resolve('.tools/bin'), resolve('.tools/node/bin'), process.env.PATH ?? ''].join(delimiter),
  TALOSCTL: talosctl.path ?? 'talosctl',
})
function generate(dir: string, options: { withTopf?: boolean; generate?: boolean; dryRun?: boolean } = {}): string[] {
  const said: string[] = []
  generateConfigs(
    dir,
    {},
    {
      generate: options.generate ?? true,
      dryRun: options.dryRun ?? false,
      env: env(options.withTopf ?? true),
      say: (l) => said.push(l),
      warn: (l) => said.push(`warning: ${l}`),
    },
  )
  return said
}

let rendered: string
beforeAll(() => {
  if (talosctl.skip) return
  rendered = copy()
  generate(rendered)
})

describe.skipIf(talosctl.skip)('topf.yaml (cluster-template, topf era)', () => {
  it('reads nodes, roles, addresses, endpoint and Talos version; configs are output/<host>.yaml', () => {
    const inv = loadInventory(rendered)
    expect(inv.source).toBe(join(rendered, 'topf.yaml'))
    expect(inv.clusterName).toBe('kubernetes')
    expect(inv.endpoint).toBe('https://127.231.1.10:6443')
    expect(inv.vip).toBe('127.231.1.10')
    expect(inv.talosVersion).toBe('v1.12.11')
    expect(inv.talosconfig).toBe(join(rendered, 'output', 'talosconfig'))
    expect(inv.nodes.map((n) => [n.name, n.address, n.role, n.configFile])).toEqual([
      ['k8s-0', '127.231.1.11', 'controlplane', join(rendered, 'output', 'k8s-0.yaml')],
      ['k8s-1', '127.231.1.12', 'controlplane', join(rendered, 'output', 'k8s-1.yaml')],
      ['k8s-2', '127.231.1.13', 'controlplane', join(rendered, 'output', 'k8s-2.yaml')],
      ['k8s-3', '127.231.1.21', 'worker', join(rendered, 'output', 'k8s-3.yaml')],
    ])
    // the stand-in applied the all/, role and node/<host>/ patches, templates rendered
    expect(readFileSync(join(rendered, 'output', 'k8s-0.yaml'), 'utf8')).toMatch(/topology\.kubernetes\.io\/zone: k8s-0-zone/)
    expect(readFileSync(join(rendered, 'output', 'k8s-1.yaml'), 'utf8')).not.toMatch(/zone/)
  })

  it('a fresh output is read as it is: no generator run', () => {
    const dir = copy()
    generate(dir)
    const before = statSync(join(dir, 'output', 'k8s-0.yaml')).mtimeMs
    expect(generate(dir, { withTopf: false })).toEqual([])
    expect(statSync(join(dir, 'output', 'k8s-0.yaml')).mtimeMs).toBe(before)
  })

  it('a patch changed after the render: rendered again (topf on PATH), the step said', () => {
    const dir = copy()
    generate(dir)
    const patch = join(dir, 'patches', 'control-plane', 'cluster.yaml.tpl')
    writeFileSync(patch, readFileSync(patch, 'utf8').replace('- 127.0.0.1', '- 127.0.0.1\n      - k8s.example'))
    const later = Date.now() / 1000 + 5
    utimesSync(patch, later, later)
    const said = generate(dir)
    expect(said[0]).toBe(
      `generate: patches/control-plane/cluster.yaml.tpl changed after output/ was written: running topf render -o output && topf talosconfig > output/talosconfig in ${dir}`,
    )
    expect(said[1]).toMatch(/^generate: topf wrote the configs of 4 node\(s\) and the talosconfig into .*\/output \(/)
    expect(readFileSync(join(dir, 'output', 'k8s-0.yaml'), 'utf8')).toContain('k8s.example')
  })

  it('with --no-generate, a stale render is exit 2 naming the changed files and the command', () => {
    const dir = copy()
    generate(dir)
    const later = Date.now() / 1000 + 5
    utimesSync(join(dir, 'topf.yaml'), later, later)
    const [msg] = inputErrors(() => generate(dir, { generate: false }))
    expect(msg).toBe(
      `${join(dir, 'output')}: the machine configs are out of date: topf.yaml changed after output/ was written (fix: run \`topf render -o output && topf talosconfig > output/talosconfig\` in ${dir}, or run again without --no-generate (the tool then runs it))`,
    )
  })

  it('no output and no topf on PATH: exit 2 with the command to run', () => {
    const dir = copy()
    const [msg] = inputErrors(() => generate(dir, { withTopf: false }))
    expect(msg).toMatch(
      /output: the machine configs are out of date \(output\/ lacks k8s-0\.yaml, k8s-1\.yaml, k8s-2\.yaml, k8s-3\.yaml, talosconfig\) and topf is not on PATH to render them \(fix: run `topf render -o output && topf talosconfig > output\/talosconfig` in /,
    )
  })

  it("a template error of topf render is exit 2 with topf's cause", () => {
    const dir = copy()
    writeFileSync(join(dir, 'patches', 'all', 'cluster.yaml.tpl'), 'cluster:\n  clusterName: {{ .Data.missing }}\n')
    const [msg] = inputErrors(() => generate(dir))
    expect(msg).toMatch(
      /topf\.yaml: topf render failed: k8s-0: failed to execute template .*cluster\.yaml\.tpl: map has no entry for key "\.Data\.missing" \(fix: correct what topf names/,
    )
  })
})

describe('topf.yaml bad input: file, line and fix', () => {
  const withTopf = (edit: (text: string) => string): string => {
    const dir = copy()
    writeFileSync(join(dir, 'topf.yaml'), edit(readFileSync(join(dir, 'topf.yaml'), 'utf8')))
    return dir
  }
  const first = (dir: string): string => {
    const errors = inputErrors(() => loadInventory(dir))
    return errors[0] as string
  }

  it("a role talhelper or talosctl would write (controlplane) is not topf's", () => {
    const dir = withTopf((t) => t.replace('ip: 127.231.1.12\n    role: control-plane', 'ip: 127.231.1.12\n    role: controlplane'))
    expect(first(dir)).toBe(
      `${join(dir, 'topf.yaml')}:20: k8s-1: invalid node role "controlplane": must be either "worker" or "control-plane" (fix: write role: control-plane or role: worker (topf knows no other role))`,
    )
  })

  it('a node without host', () => {
    const dir = withTopf((t) => t.replace('  - host: k8s-2\n', '  - name: k8s-2\n'))
    expect(first(dir)).toMatch(/topf\.yaml:\d+: node 'host' can't be empty \(fix: write host:/)
  })

  it('an ip that is a name', () => {
    const dir = withTopf((t) => t.replace('ip: 127.231.1.21', 'ip: k8s-3.lan'))
    expect(first(dir)).toBe(
      `${join(dir, 'topf.yaml')}:25: k8s-3: ip "k8s-3.lan" is not an IP address (fix: write the IP address topf connects to (or leave ip out to connect to host))`,
    )
  })

  it("topf's deprecated configDir", () => {
    const dir = withTopf((t) => t.replace('patchesDir: patches', 'configDir: patches'))
    expect(first(dir)).toBe(`${join(dir, 'topf.yaml')}:8: deprecated field 'configDir' (fix: rename it to patchesDir, as topf asks)`)
  })

  it('clusterEndpoint missing', () => {
    const dir = withTopf((t) => t.replace('clusterEndpoint: https://127.231.1.10:6443\n', ''))
    expect(first(dir)).toMatch(/topf\.yaml:\d+: clusterEndpoint is missing or not a string \(fix: set clusterEndpoint: https:/)
  })

  it('without a render, the config of each node is missing, with the command that renders it', () => {
    const dir = copy()
    const errors = inputErrors(() => loadInventory(dir))
    expect(errors[0]).toBe(
      `${join(dir, 'topf.yaml')}:14: k8s-0: machine config ${join(dir, 'output', 'k8s-0.yaml')} not found (fix: run \`topf render -o output && topf talosconfig > output/talosconfig\` in ${dir} (each run regenerates what is missing when topf is on PATH))`,
    )
  })

  it('is an InputError (exit 2)', () => {
    const dir = withTopf((t) => t.replace('role: worker', 'role: agent'))
    expect(() => loadInventory(dir)).toThrow(InputError)
  })
})
