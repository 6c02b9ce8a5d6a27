// Issue 24 item 3: every setting docs/settings.md gives a variable works both ways an operator gives
// it: `task <task> NAME=value` (go-task hands that over as a template variable, not an environment
// variable) and NAME=value in the environment; a task variable beats the environment, and an empty
// one counts as unset. Range 127.124.<n>.0/24.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { E2eCluster, nodeIn, ROOT, type TaskResult } from './harness.js'

/** The variables docs/settings.md names (its table's env column). */
function documentedVariables(): string[] {
  const text = readFileSync(join(ROOT, 'docs', 'settings.md'), 'utf8')
  return [...text.matchAll(/^\| *\w+ *\| *([A-Z][A-Z0-9_]*) *\|/gm)].map((m) => m[1] ?? '')
}

/**
 * A value for each variable, unlike the simulator's bootstrap.yaml (concurrency 4, retries 5, waits
 * scaled for speed 600, callTimeout 30s) and the defaults, with the report's key and value for it.
 */
const VALUES: Record<string, { value: string; key: string; want: number | string }> = {
  CONCURRENCY: { value: '3', key: 'concurrency', want: 3 },
  BOOTSTRAP_RETRIES: { value: '7', key: 'retries', want: 7 },
  BOOTSTRAP_RETRY_DELAY: { value: '1500ms', key: 'retryDelayMs', want: 1_500 },
  BOOTSTRAP_RETRY_MAX_DELAY: { value: '61s', key: 'retryMaxDelayMs', want: 61_000 },
  BOOTSTRAP_POLL_INTERVAL: { value: '700ms', key: 'pollIntervalMs', want: 700 },
  BOOTSTRAP_CALL_TIMEOUT: { value: '29s', key: 'callTimeoutMs', want: 29_000 },
  BOOTSTRAP_VERIFY_TIMEOUT: { value: '4m', key: 'verifyTimeoutMs', want: 240_000 },
  BOOTSTRAP_BOOTSTRAP_TIMEOUT: { value: '6m', key: 'bootstrapTimeoutMs', want: 360_000 },
  BOOTSTRAP_READY_TIMEOUT: { value: '9m', key: 'readyTimeoutMs', want: 540_000 },
  BOOTSTRAP_FLUX_TIMEOUT: { value: '11m', key: 'fluxTimeoutMs', want: 660_000 },
  BOOTSTRAP_RESET_TIMEOUT: { value: '14m', key: 'resetTimeoutMs', want: 840_000 },
  DRAIN_TIMEOUT: { value: '4m', key: 'drainTimeoutMs', want: 240_000 },
  GATE_COMMAND: { value: 'true', key: 'gateCommand', want: 'true' },
  GATE_TIMEOUT: { value: '3m', key: 'gateTimeoutMs', want: 180_000 },
  GATE_INTERVAL: { value: '7s', key: 'gateIntervalMs', want: 7_000 },
  BOOTSTRAP_UPGRADE_TIMEOUT: { value: '25m', key: 'upgradeTimeoutMs', want: 1_500_000 },
  BOOTSTRAP_K8S_UPGRADE_TIMEOUT: { value: '50m', key: 'k8sUpgradeTimeoutMs', want: 3_000_000 },
  BOOTSTRAP_STALL_TIMEOUT: { value: '8m', key: 'stallTimeoutMs', want: 480_000 },
  BOOTSTRAP_NODE: { value: 'cp-2', key: 'bootstrapNode', want: 'cp-2' },
  BOOTSTRAP_KUBECONFIG: { value: 'kube/admin.conf', key: 'kubeconfig', want: 'kube/admin.conf' },
  BOOTSTRAP_TALCONFIG: { value: 'talconfig.yaml', key: 'talconfig', want: 'talconfig.yaml' },
  BOOTSTRAP_TALHELPER_OUT_DIR: { value: 'clusterconfig', key: 'talhelperOutDir', want: 'clusterconfig' },
}
const all = Object.fromEntries(Object.entries(VALUES).map(([name, v]) => [name, v.value]))
const wanted = Object.fromEntries(Object.values(VALUES).map((v) => [v.key, v.want]))
const why = (r: TaskResult): string => `exit ${r.code}\n${r.stdout}\n${r.stderr}`.slice(-3000)

/** The two ways of giving variables: after the task name, or exported. */
const FORMS = [
  ['as task variables', (vars: Record<string, string>) => ({ vars, env: {} })],
  ['from the environment', (vars: Record<string, string>) => ({ vars: {}, env: vars })],
] as const

describe('every documented variable, as a task variable and from the environment', () => {
  let cluster: E2eCluster
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.124.1', { cps: 2, workers: 1 })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  it('the test gives a value to every variable docs/settings.md names', () => {
    expect(documentedVariables().sort()).toEqual(Object.keys(VALUES).sort())
  })

  it.each(FORMS)(
    'all of them %s reach the effective settings (bootstrap:preflight report)',
    async (_form, given) => {
      const { vars, env } = given(all)
      const result = await cluster.task('bootstrap:preflight', vars, [], env)
      expect(result.code, why(result)).toBe(0)
      expect(result.stdout + result.stderr).toMatch(/\b3 node\(s\); concurrency 3\b/)
      expect(cluster.report().settings).toMatchObject(wanted)
    },
    60_000,
  )

  it('an empty task variable counts as unset: bootstrap.yaml applies', async () => {
    const result = await cluster.task('bootstrap:preflight', { BOOTSTRAP_RETRIES: '', BOOTSTRAP_NODE: '', CONCURRENCY: '' })
    expect(result.code, why(result)).toBe(0)
    const settings = cluster.report().settings as unknown as Record<string, unknown>
    expect(settings).toMatchObject({ retries: 5, concurrency: 4 })
    expect(settings.bootstrapNode).toBeUndefined()
  }, 60_000)

  // the dry run's plan: the bootstrap call goes to the control plane BOOTSTRAP_NODE names
  const bootstrapsOn = (result: TaskResult, node: string, ip: string): void => {
    expect(result.code, why(result)).toBe(0)
    expect(result.stdout).toMatch(new RegExp(`would bootstrap etcd on ${node}\\b`))
    expect(result.stdout).toMatch(new RegExp(`^${node}:\\n(  .*\\n)*  talosctl bootstrap .*-n ${ip.replace(/\./g, '\\.')}$`, 'm'))
    expect(result.stdout).not.toMatch(/^ {2}talosctl bootstrap .*-n 127\.124\.1\.11$/m)
  }

  it.each(FORMS)(
    'BOOTSTRAP_NODE=cp-2 %s: etcd is bootstrapped on cp-2 (bootstrap:talos DRY_RUN=true)',
    async (_form, given) => {
      const { vars, env } = given({ BOOTSTRAP_NODE: 'cp-2' })
      const result = await cluster.task('bootstrap:talos', { DRY_RUN: 'true', ...vars }, [], env)
      bootstrapsOn(result, 'cp-2', '127.124.1.12')
    },
    60_000,
  )

  it('a task variable beats the environment (BOOTSTRAP_NODE=cp-2 given, cp-1 exported)', async () => {
    const result = await cluster.task('bootstrap:talos', { DRY_RUN: 'true', BOOTSTRAP_NODE: 'cp-2' }, [], { BOOTSTRAP_NODE: 'cp-1' })
    bootstrapsOn(result, 'cp-2', '127.124.1.12')
  }, 60_000)

  it.each(FORMS)(
    'the other variables the scripts read reach them %s (FAIL_FAST, TALOSCTL)',
    async (_form, given) => {
      const failFast = given({ FAIL_FAST: 'maybe' })
      const bad = await cluster.task('bootstrap:preflight', failFast.vars, [], failFast.env)
      expect(bad.code, why(bad)).toBe(2)
      expect(bad.stderr).toMatch(/environment FAIL_FAST: fail-fast must be true or false, got "maybe"/)
      const missing = given({ TALOSCTL: '/nonexistent/talosctl' })
      const none = await cluster.task('bootstrap:preflight', missing.vars, [], missing.env)
      expect(none.code, why(none)).toBe(3)
      expect(none.stderr).toContain('/nonexistent/talosctl')
    },
    60_000,
  )
})

describe('retries and a timeout take effect given either way', () => {
  // wrkr-1 refuses every connection; wrkr-2 accepts its probe and never answers
  let cluster: E2eCluster
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.124.2', {
      cps: 1,
      workers: 2,
      faults: [
        { node: 'wrkr-1', on: 'any', kind: 'unreachable' },
        { node: 'wrkr-2', on: 'probe', kind: 'timeout' },
      ],
    })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  it.each(FORMS)(
    'BOOTSTRAP_RETRIES=1 %s: an unreachable node is given up after 2 attempts (bootstrap.yaml says 5)',
    async (_form, given) => {
      const { vars, env } = given({ BOOTSTRAP_RETRIES: '1', BOOTSTRAP_RETRY_DELAY: '100ms' })
      const result = await cluster.task('bootstrap:preflight', { NODES: 'wrkr-1', ...vars }, [], env)
      expect(result.code, why(result)).toBe(1)
      const node = nodeIn(cluster.report(), 'preflight', 'wrkr-1')
      expect(node).toMatchObject({ status: 'failed', attempts: 2, error: { kind: 'unreachable' } })
      expect(node.retries?.map((r) => r.attempt)).toEqual([1])
      expect(cluster.report().settings).toMatchObject({ retries: 1, retryDelayMs: 100 })
    },
    60_000,
  )

  it.each(FORMS)(
    'BOOTSTRAP_CALL_TIMEOUT=2s %s: a hung call is cut after 2 s (bootstrap.yaml says 30s)',
    async (_form, given) => {
      const { vars, env } = given({ BOOTSTRAP_CALL_TIMEOUT: '2s' })
      // the retries as a flag (known to work), so only the timeout comes from the variable
      const result = await cluster.task('bootstrap:preflight', { NODES: 'wrkr-2', ...vars }, ['--retries', '0'], env)
      expect(result.code, why(result)).toBe(1)
      const node = nodeIn(cluster.report(), 'preflight', 'wrkr-2')
      expect(node).toMatchObject({ status: 'failed', attempts: 1, error: { kind: 'timeout' } })
      expect(node.durationMs).toBeGreaterThanOrEqual(2_000)
      // cut by the 2 s deadline, not bootstrap.yaml's 30 s
      expect(node.durationMs).toBeLessThan(30_000)
      expect(cluster.report().settings).toMatchObject({ callTimeoutMs: 2_000 })
    },
    90_000,
  )
})
