// Scenario validation: errors name the file, line and field; defaults fill what is optional.
import { describe, expect, it } from 'vitest'
import { parseScenario, loadScenario } from '../../sim/index.js'

const base = `cluster: { name: demo, endpoint: https://127.0.10.10:6443 }
nodes:
  - { name: cp-1, ip: 127.0.10.11, role: controlplane }
  - { name: w-1, ip: 127.0.10.21, role: worker }
`
const err = (text: string) => {
  try {
    parseScenario(text, 'scenario.yaml')
    return 'no error'
  } catch (e) {
    return (e as Error).message
  }
}

describe('scenario validation', () => {
  it('refuses any address outside 127.0.0.0/8, naming line and field', () => {
    expect(err(base.replace('127.0.10.21', '10.0.0.5'))).toBe('scenario.yaml:4: nodes[1].ip: "10.0.0.5" is not in 127.0.0.0/8')
    expect(err(base.replace('https://127.0.10.10:6443', 'https://192.168.1.10:6443'))).toBe(
      'scenario.yaml:1: cluster.endpoint: "192.168.1.10" is not in 127.0.0.0/8',
    )
    expect(
      err(
        `${base.replace('127.0.10.10:6443', '127.0.10.9:6443')}`.replace(
          'cluster: { name: demo,',
          'cluster: { vip: { address: 10.1.1.1 }, name: demo,',
        ),
      ),
    ).toMatch(/cluster\.vip\.address: "10\.1\.1\.1" is not in 127\.0\.0\.0\/8/)
  })
  it('refuses unknown fault kinds, `on` values and nodes', () => {
    expect(err(`${base}faults:\n  - { node: w-1, kind: meltdown }\n`)).toMatch(
      /^scenario\.yaml:6: faults\[0\]\.kind: unknown fault kind "meltdown"/,
    )
    expect(err(`${base}faults:\n  - { node: w-1, kind: crash, on: apply }\n`)).toBe(
      'scenario.yaml:6: faults[0].on: "apply" is not valid for a crash fault (use: install)',
    )
    expect(err(`${base}faults:\n  - { node: w-1, kind: refused, on: sometimes }\n`)).toMatch(
      /faults\[0\]\.on: "sometimes" is not valid for a refused fault/,
    )
    expect(err(`${base}faults:\n  - { node: w-9, kind: refused }\n`)).toBe(
      'scenario.yaml:6: faults[0].node: "w-9" is not a node of this scenario',
    )
    expect(err(`${base}faults:\n  - { node: w-1, kind: refused, times: 0 }\n`)).toMatch(/faults\[0\]\.times: must be an integer >= 1/)
    expect(err(`${base}faults:\n  - { node: w-1, kind: latency }\n`)).toMatch(/faults\[0\]\.ms: must be a number/)
    // a chart fault names the chart whose pods crash (sim/charts/oci.js); no node
    expect(err(`${base}faults:\n  - { kind: chart }\n`)).toMatch(/^scenario\.yaml:6: faults\[0\]\.chart: /)
    expect(err(`${base}faults:\n  - { node: w-1, kind: refused, chart: cilium }\n`)).toBe(
      'scenario.yaml:6: faults[0].chart: only chart faults take chart',
    )
  })
  it('names other invalid fields', () => {
    expect(err(base.replace('role: worker', 'role: boss'))).toBe('scenario.yaml:4: nodes[1].role: "boss" must be controlplane or worker')
    expect(err(base.replace('w-1, ip: 127.0.10.21', 'cp-1, ip: 127.0.10.21'))).toBe(
      'scenario.yaml:4: nodes[1].name: duplicate node name "cp-1"',
    )
    expect(err(`${base}speed: -3\n`)).toBe('scenario.yaml:5: speed: must be a number >= 0, got -3')
    expect(err(`${base}timings: { install: fast }\n`)).toMatch(/^scenario\.yaml:5: timings\.install: must be a number/)
    expect(err(`${base}colour: blue\n`)).toMatch(/^scenario\.yaml:5: colour: unknown field/)
    expect(err('cluster: { name: demo }\nnodes: []\n')).toMatch(/nodes: must be a non-empty list/)
    expect(err('cluster: { name: demo }\nnodes:\n  - { name: w, ip: 127.0.0.5, role: worker }\n')).toMatch(
      /nodes: needs at least one controlplane node/,
    )
    expect(err('cluster: [oops\n')).toMatch(/^scenario\.yaml:\d+: /)
  })
  it('fills defaults and treats a non-node endpoint as a VIP', () => {
    const s = parseScenario(base)
    expect(s.speed).toBe(60)
    expect(s.timings).toMatchObject({ install: 120, reboot: 40, boot: 30, etcd: 20, kubelet: 15, cni: 20 })
    expect(s.cluster).toMatchObject({
      talosVersion: 'v1.12.11',
      kubernetesVersion: 'v1.35.0',
      vip: { address: '127.0.10.10', up: 'after-bootstrap' },
    })
    expect(s.nodes[0]).toMatchObject({ image: 'iso', installDisk: '/dev/sda' })
    expect(s.nodes[0]!.disks[0]).toMatchObject({ dev: '/dev/sda', size: 100e9, model: 'QEMU HARDDISK' })
    const noVip = loadScenario({ cluster: { name: 'x' }, nodes: [{ name: 'cp', ip: '127.0.0.9', role: 'controlplane' }] })
    expect(noVip.cluster.endpoint).toBe('https://127.0.0.9:6443')
    expect(noVip.cluster.vip).toBeNull()
  })
  it('object scenarios report fields without a line', () => {
    expect(() => loadScenario({ cluster: { name: 'x' }, nodes: [{ name: 'cp', ip: '8.8.8.8', role: 'controlplane' }] })).toThrow(
      'scenario: nodes[0].ip: "8.8.8.8" is not in 127.0.0.0/8',
    )
  })
  it('every shipped scenario is valid', async () => {
    const { readdirSync } = await import('node:fs')
    const files = ['sim/scenarios/demo.yaml', ...readdirSync('sim/scenarios/faults').map((f) => `sim/scenarios/faults/${f}`)]
    for (const f of files) expect(() => loadScenario(f), f).not.toThrow()
    expect(files.length).toBeGreaterThanOrEqual(16)
  })
})
