// cluster:apply runs the operator's GATE_COMMAND after each node it changed live, as after a reboot
// (docs/day2-design.md): NODE names the node, its detail says the gate passed; a gate that keeps
// failing fails that node (kind `gate-command`) with a hint that runs as printed once the gate
// passes. One control plane and one worker (real talosctl v1.12.11). Range 127.248.5.0/24.
// vitest sets MODE=test, which cluster:apply would take as its MODE
delete process.env.MODE

import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { hintOf, nodeIn, runInFreshShell, sharedCluster } from './harness.js'
import { fastWith } from '../faults/helpers.js'

const R = '127.248.5'
const CASE_TIMEOUT = 240_000
const SLOW_OK = fastWith('--ready-timeout', '60s', fastWith('--call-timeout', '20s'))
const FLAGS = [...SLOW_OK, '--gate-timeout', '3s', '--gate-interval', '500ms']

describe('cluster:apply: the gate command after a live change', () => {
  const shared = sharedCluster(R, { cps: 1, workers: 1, image: 'disk', speed: 60, kube: 'model' }, SLOW_OK)
  /** a node label in wrkr-1's generated config: a change Talos applies live */
  function label(value: string): void {
    const dir = join(shared().clusterDir, 'clusterconfig')
    const file = join(dir, readdirSync(dir).find((f) => f.endsWith('-wrkr-1.yaml')) ?? '')
    const docs = readFileSync(file, 'utf8').split(/^---$/m)
    const at = docs.findIndex((d) => /^machine:/m.test(d))
    const cfg = parse(docs[at]!) as { machine: { nodeLabels?: Record<string, string> } }
    cfg.machine.nodeLabels = { ...cfg.machine.nodeLabels, gate: value }
    docs[at] = `${at === 0 ? '' : '\n'}${stringify(cfg)}`
    writeFileSync(file, docs.join('---'))
  }

  it(
    'runs after the live change with NODE set; its passing is in the detail',
    async () => {
      label('one')
      const marks = join(shared().dir, 'marks')
      const r = await shared().task('cluster:apply', { GATE_COMMAND: `echo "[$NODE $PHASE]" >> ${marks}` }, FLAGS)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      const node = nodeIn(shared().report(), 'cluster-apply', 'wrkr-1')
      expect(node.detail).toBe('applied live; gate command passed')
      expect(readFileSync(marks, 'utf8')).toBe('[wrkr-1 cluster-apply]\n')
    },
    CASE_TIMEOUT,
  )

  it(
    'a gate that keeps failing fails the node, the change kept; once it passes the hint runs as printed',
    async () => {
      label('two')
      const ok = join(shared().dir, 'gate-ok')
      const gate = `test -f ${ok} || { echo "volumes degraded"; exit 4; }`
      const r = await shared().task('cluster:apply', { GATE_COMMAND: gate }, FLAGS)
      expect(r.code, r.stdout + r.stderr).toBe(1)
      const node = nodeIn(shared().report(), 'cluster-apply', 'wrkr-1')
      expect(node.error?.kind).toBe('gate-command')
      expect(node.error?.message).toMatch(/volumes degraded/)
      const { hint, command } = hintOf(r.stderr, 'wrkr-1')
      expect(hint).toMatch(/^the gate command \(GATE_COMMAND\) kept failing after wrkr-1's live change: .*the change is applied and stays/)
      expect(command).toContain('cluster:apply')
      // the hint repeats the run's gate command: without it the rerun would check nothing
      expect(command).toContain(`'GATE_COMMAND=test -f ${ok}`)
      writeFileSync(ok, '')
      expect(existsSync(ok)).toBe(true)
      const recovered = await runInFreshShell(shared(), command)
      expect(recovered.code, `${command}\n${recovered.stdout}\n${recovered.stderr}`).toBe(0)
    },
    CASE_TIMEOUT,
  )
})
