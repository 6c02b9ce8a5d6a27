// ApplyConfiguration on a configured node as day 2 meets it (internal/app/machined/internal/server/
// v1alpha1/v1alpha1_server.go ApplyConfiguration and generateDiff; v1alpha1_runtime.go CanApplyImmediate,
// RollbackToConfigAfter, CancelConfigRollbackTimeout, SetConfig/SetPersistedConfig;
// controllers/config/acquire.go: no `persistent` after a boot from STATE alone): the `persistent`
// MachineConfig, staged and try with its rollback timer (try_mode_timeout, simulated), any other
// apply (a dry run too) cancelling a pending rollback, the dry run's unified diff
// (pkg/machinery/configdiff, textdiff), the mode the node resolved, the apply mutex. Driven with the
// real talosctl v1.12.11; v1.13.9 prints the same (cmd/talosctl/pkg/talos/helpers/mode.go
// PrintApplyResults: only mode_details, in both). Range 127.240.2.
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import grpc from '@grpc/grpc-js'
import protoLoader from '@grpc/proto-loader'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import {
  applyInsecure,
  at,
  bootstrapWhenReady,
  configFile,
  configOf,
  jsonDocs,
  sleep,
  startOn,
  talosCreds,
  talosctl,
  type Started,
} from './helpers.js'
import { realTool } from '../support/real-tools.js'

const tool = realTool('talosctl')
if (tool.skip) console.warn(`SKIPPED test/sim/apply-day2.test.ts: ${tool.skip}`)
const TALOSCTL_113 = resolve('.tools/talosctl-v1.13.9/talosctl')

const R = '127.240.2'
const W1 = `${R}.21`
const SPEED = 10
const failed = (desc: string) => `error applying new configuration: rpc error: code = ${desc}\n`

/** the parts of a v1alpha1 config these tests change */
interface Cfg {
  machine: { env?: Record<string, string>; nodeLabels?: Record<string, string>; [k: string]: unknown }
  [k: string]: unknown
}
interface ApplyAnswer {
  mode: string
  mode_details: string
}
interface MachineClient {
  ApplyConfiguration(
    req: { data: Buffer; mode: string; dry_run: boolean },
    cb: (e: Error | null, r: { messages: ApplyAnswer[] }) => void,
  ): void
  close(): void
}

describe.skipIf(!!tool.skip)('day-2 apply semantics (real talosctl)', () => {
  let s: Started
  /** the worker's config as last applied by these tests (the active one) */
  let active: Cfg

  const apply = (name: string, cfg: unknown, ...flags: string[]) =>
    talosctl(s.sim, ['apply-config', ...at(W1), '-f', configFile(s.sim, name, stringify(cfg)), ...flags])
  /** the worker's MachineConfigs by ID (`get mc -o json`): their spec is the config (its v1alpha1 document) */
  async function machineConfigs(): Promise<Record<string, Cfg>> {
    const r = await talosctl(s.sim, ['get', 'machineconfigs', ...at(W1), '-o', 'json'])
    expect(r.code, r.stderr).toBe(0)
    return Object.fromEntries(jsonDocs(r.stdout).map((d) => [String(d.metadata.id), d.spec as Cfg]))
  }
  async function rebooted() {
    const before = s.sim.node('wrkr-1')!.bootId
    expect(await talosctl(s.sim, ['reboot', '--wait=false', ...at(W1)])).toMatchObject({ code: 0 })
    await s.sim.until(() => s.sim.node('wrkr-1')!.bootId !== before && s.sim.node('wrkr-1')!.stage === 'running', 60_000)
  }
  const withChange = (f: (c: Cfg) => void) => {
    const c = structuredClone(active)
    f(c)
    return c
  }

  beforeAll(async () => {
    s = await startOn(R, { cps: 1, workers: 1, image: 'disk', vip: false, speed: SPEED })
    for (const n of ['cp-1', 'wrkr-1']) expect(await applyInsecure(s.sim, n)).toMatchObject({ code: 0 })
    await s.sim.until(() => s.sim.node('cp-1')?.listener === 'secure', 60_000)
    expect((await bootstrapWhenReady(s.sim, 'cp-1', 60_000)).code).toBe(0)
    await s.sim.until(() => s.sim.node('wrkr-1')?.stage === 'running', 60_000)
    active = parse(configOf(s.sim, 'wrkr-1')) as Cfg
  }, 120_000)
  afterAll(async () => {
    await s?.stop()
  })

  it('persistent: set by the maintenance apply, gone after a reboot; staged sets only it, and the next boot runs it', async () => {
    expect(Object.keys(await machineConfigs())).toEqual(['persistent', 'v1alpha1'])
    await rebooted()
    expect(Object.keys(await machineConfigs())).toEqual(['v1alpha1'])

    const staged = withChange((c) => (c.machine.env = { FOO: 'bar' }))
    expect(await apply('staged', staged, '--mode', 'staged')).toMatchObject({
      code: 0,
      stderr: 'Staged configuration to be applied after the next reboot\n',
    })
    let mcs = await machineConfigs()
    expect(mcs.persistent!.machine.env).toEqual({ FOO: 'bar' })
    expect(mcs.v1alpha1!.machine.env).toBeUndefined()
    // a dry run diffs the active config, not the staged one; auto's reason is not appended in a dry run
    const dry = await apply('staged', staged, '--dry-run')
    expect(dry.code, dry.stderr).toBe(0)
    expect(dry.stderr).toMatch(
      /^Dry run summary:\nApplied configuration with a reboot \(skipped in dry-run\)\.\nConfig diff:\n\n--- a\n\+\+\+ b\n@@ -\d+,\d+ \+\d+,\d+ @@\n/,
    )
    expect(dry.stderr).toContain('\n+    env:\n+        FOO: bar\n')
    expect(dry.stderr).not.toContain("can't be applied in immediate mode")

    await rebooted()
    mcs = await machineConfigs()
    expect(Object.keys(mcs)).toEqual(['v1alpha1'])
    expect(mcs.v1alpha1!.machine.env).toEqual({ FOO: 'bar' })
    active = staged
  })

  it('the dry-run diff: "No changes." only when both encode the same; a unified diff otherwise; no-reboot refuses with the diff of what needs a reboot; auto says why it reboots', async () => {
    const same = await apply('same', active, '--dry-run')
    expect(same).toMatchObject({
      code: 0,
      stderr: 'Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\nConfig diff:\n\nNo changes.\n',
    })
    // the same config with its keys in another order encodes the same
    const reordered = configFile(s.sim, 'reordered', stringify(active, { sortMapEntries: true }))
    expect((await talosctl(s.sim, ['apply-config', ...at(W1), '-f', reordered, '--dry-run'])).stderr).toContain('\n\nNo changes.\n')

    const labelled = withChange((c) => (c.machine.nodeLabels = { zone: 'a' }))
    const live = await apply('labelled', labelled, '--dry-run')
    expect(live.code, live.stderr).toBe(0)
    const body = live.stderr.split('Config diff:\n\n')[1]!
    expect(body).toMatch(/^--- a\n\+\+\+ b\n@@ -\d+,\d+ \+\d+,\d+ @@\n/)
    expect(body.split('\n').filter((l) => /^[-+](?!--|\+\+)/.test(l))).toEqual(['+    nodeLabels:', '+        zone: a'])
    expect(live.stderr).toMatch(/^Dry run summary:\nApplied configuration without a reboot \(skipped in dry-run\)\./)

    // a change needing a reboot next to a live one: the refusal's diff names only the former (the live fields are taken as they are)
    const both = withChange((c) => {
      c.machine.nodeLabels = { zone: 'b' }
      c.machine.env = { ...c.machine.env, BAR: 'baz' }
    })
    const refused = await apply('both', both, '--mode', 'no-reboot')
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(
      /^error applying new configuration: rpc error: code = InvalidArgument desc = this config change can't be applied in immediate mode\ndiff:\n--- a\n\+\+\+ b\n@@ -\d+,\d+ \+\d+,\d+ @@\n/,
    )
    expect(refused.stderr).toContain('\n+        BAR: baz\n')
    expect(refused.stderr).not.toContain('zone')
    expect((await apply('both', both, '--mode', 'try')).stderr).toMatch(
      /^error applying new configuration: rpc error: code = InvalidArgument desc = this config change can't be applied in immediate mode\n/,
    )

    const auto = await apply('both', both)
    expect(auto.code, auto.stderr).toBe(0)
    expect(auto.stderr).toMatch(
      /^Applied configuration with a reboot: this config change can't be applied in immediate mode\ndiff:\n--- a\n\+\+\+ b\n@@ /,
    )
    expect(auto.stderr).toContain('\n+        BAR: baz\n')
    await s.sim.until(() => s.sim.node('wrkr-1')!.stage === 'rebooting', 30_000)
    await s.sim.until(() => s.sim.node('wrkr-1')!.stage === 'running', 60_000)
    expect((await machineConfigs()).v1alpha1!.machine.env).toEqual({ FOO: 'bar', BAR: 'baz' })
    active = both
  })

  it('the answer carries the mode the node resolved: auto becomes NO_REBOOT or REBOOT', async () => {
    const dir = fileURLToPath(new URL('../../sim/grpc/proto/', import.meta.url))
    const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(['machine.proto'], { includeDirs: [dir], keepCase: true, enums: String }))
    const Service = (pkg.machine as grpc.GrpcObject).MachineService as unknown as new (
      target: string,
      creds: grpc.ChannelCredentials,
      options: grpc.ChannelOptions,
    ) => MachineClient
    const { ca, cert, key } = talosCreds(s.sim)
    // the certificate names the node's address; TLS refuses an IP as server name, so check it by the CA only
    const client = new Service(`${W1}:50000`, grpc.credentials.createSsl(ca, key, cert, { checkServerIdentity: () => undefined }), {
      'grpc.ssl_target_name_override': 'wrkr-1',
    })
    const call = (cfg: unknown, mode: string) =>
      new Promise<ApplyAnswer>((done, fail) =>
        client.ApplyConfiguration({ data: Buffer.from(stringify(cfg)), mode, dry_run: true }, (e, r) =>
          e ? fail(e) : done(r.messages[0]!),
        ),
      )
    try {
      expect(
        (
          await call(
            withChange((c) => (c.machine.nodeLabels = { zone: 'c' })),
            'AUTO',
          )
        ).mode,
      ).toBe('NO_REBOOT')
      expect(
        (
          await call(
            withChange((c) => (c.machine.env = { ...c.machine.env, QUX: '1' })),
            'AUTO',
          )
        ).mode,
      ).toBe('REBOOT')
      expect((await call(active, 'TRY')).mode).toBe('TRY')
      expect((await call(active, 'STAGED')).mode).toBe('STAGED')
    } finally {
      client.close()
    }
  })

  it('try: applied live only and reverted after try_mode_timeout (simulated); a dry run cancels the pending rollback, and the next reboot runs the persisted config', async () => {
    const t1 = withChange((c) => (c.machine.nodeLabels = { zone: 't1' }))
    const t0 = Date.now()
    expect(await apply('t1', t1, '--mode', 'try', '--timeout', '1m')).toMatchObject({
      code: 0,
      stderr:
        "Applied configuration without a reboot\nThe config is applied in 'try' mode and will be automatically reverted back in 1m0s\n",
    })
    const mcs = await machineConfigs()
    expect(mcs.v1alpha1!.machine.nodeLabels).toEqual({ zone: 't1' })
    expect(mcs.persistent).toBeUndefined()
    // 1 min simulated is 6 s at speed 10: not before, and back to the config active before the try
    let reverted = 0
    for (let i = 0; i < 300 && !reverted; i++) {
      if ((await machineConfigs()).v1alpha1!.machine.nodeLabels?.zone !== 't1') reverted = Date.now()
      else await sleep(200)
    }
    expect(reverted).toBeGreaterThan(0)
    expect(reverted - t0).toBeGreaterThanOrEqual(60_000 / SPEED)
    expect((await machineConfigs()).v1alpha1!.machine.nodeLabels).toEqual(active.machine.nodeLabels)

    const t2 = withChange((c) => (c.machine.nodeLabels = { zone: 't2' }))
    const t2at = Date.now()
    expect((await apply('t2', t2, '--mode', 'try', '--timeout', '2m')).code).toBe(0)
    expect((await apply('same', active, '--dry-run')).code).toBe(0)
    expect(Date.now() - t2at).toBeLessThan(120_000 / SPEED) // the dry run came before the rollback was due
    await sleep(120_000 / SPEED - (Date.now() - t2at) + 2000)
    expect((await machineConfigs()).v1alpha1!.machine.nodeLabels).toEqual({ zone: 't2' })
    // STATE still holds the config from before the try
    await rebooted()
    expect((await machineConfigs()).v1alpha1!.machine.nodeLabels).toEqual(active.machine.nodeLabels)
  })

  it('the apply mutex: fault apply-busy, and two applies at once while the first holds it (timings.apply)', async () => {
    s.sim.addFault({ node: 'wrkr-1', on: 'apply', kind: 'apply-busy', times: 1 })
    expect(await apply('same', active, '--dry-run')).toMatchObject({
      code: 1,
      stderr: failed('FailedPrecondition desc = another apply configuration is already in progress'),
    })
    expect((await apply('same', active, '--dry-run')).code).toBe(0)
    // the call's own work holds the lock 5 s of real time here: the second of two applies started together is refused
    const timings = s.sim.scenario.timings as { apply: number }
    timings.apply = 50
    try {
      const both = await Promise.all([apply('same', active, '--dry-run'), apply('same', active, '--dry-run')])
      expect(both.map((r) => r.code).sort()).toEqual([0, 1])
      expect(both.find((r) => r.code === 1)!.stderr).toBe(
        failed('FailedPrecondition desc = another apply configuration is already in progress'),
      )
    } finally {
      timings.apply = 0
    }
  })

  it.skipIf(!existsSync(TALOSCTL_113))('talosctl v1.13.9 prints the same: staged, the diff, the try timeout as Go prints it', async () => {
    const run = (name: string, cfg: unknown, ...flags: string[]) =>
      talosctl(s.sim, ['apply-config', ...at(W1), '-f', configFile(s.sim, name, stringify(cfg)), ...flags], { bin: TALOSCTL_113 })
    const staged = withChange((c) => (c.machine.env = { ...c.machine.env, NEW: 'x' }))
    expect(await run('staged13', staged, '--mode', 'staged')).toMatchObject({
      code: 0,
      stderr: 'Staged configuration to be applied after the next reboot\n',
    })
    expect((await machineConfigs()).persistent!.machine.env?.NEW).toBe('x')
    const dry = await run('staged13', staged, '--dry-run')
    expect(dry.stderr).toContain('Config diff:\n\n--- a\n+++ b\n@@ ')
    expect(dry.stderr).toContain('\n+        NEW: x\n')
    // a try in between: the staged config stays persisted (try sets only the active one)
    const tried = await run(
      'try13',
      withChange((c) => (c.machine.nodeLabels = { zone: 'v113' })),
      '--mode',
      'try',
      '--timeout',
      '90s',
    )
    expect(tried).toMatchObject({
      code: 0,
      stderr:
        "Applied configuration without a reboot\nThe config is applied in 'try' mode and will be automatically reverted back in 1m30s\n",
    })
    const mcs = await machineConfigs()
    expect(mcs.persistent!.machine.env?.NEW).toBe('x')
    expect(mcs.v1alpha1!.machine.nodeLabels).toEqual({ zone: 'v113' })
    await rebooted()
    const after = await machineConfigs()
    expect(Object.keys(after)).toEqual(['v1alpha1'])
    expect(after.v1alpha1!.machine.env?.NEW).toBe('x')
    expect(after.v1alpha1!.machine.nodeLabels).toEqual(active.machine.nodeLabels)
  })
})

// the simulator's textdiff against the shapes pkg/machinery/textdiff prints
describe('unified diff', () => {
  it('hunks of 3 context lines with both counts, merged when changes are 6 lines apart or less, nothing when equal', async () => {
    const { diff } = await import('../../sim/talos/textdiff.js')
    const lines = (n: number, f = (i: number) => `l${i}`) => `${Array.from({ length: n }, (_, i) => f(i)).join('\n')}\n`
    expect(diff('a\nb\n', 'a\nb\n')).toBe('')
    expect(diff('line 1\nline 3\n', 'line 1\nline 2\nline 3\n')).toBe('--- a\n+++ b\n@@ -1,2 +1,3 @@\n line 1\n+line 2\n line 3\n')
    expect(diff('x\ny\n', 'p\nq\n')).toBe('--- a\n+++ b\n@@ -1,2 +1,2 @@\n-x\n-y\n+p\n+q\n')
    expect(
      diff(
        lines(20),
        lines(20, (i) => (i === 2 || i === 15 ? `X${i}` : `l${i}`)),
      ),
    ).toBe(
      '--- a\n+++ b\n@@ -1,6 +1,6 @@\n l0\n l1\n-l2\n+X2\n l3\n l4\n l5\n@@ -13,7 +13,7 @@\n l12\n l13\n l14\n-l15\n+X15\n l16\n l17\n l18\n',
    )
    expect(
      diff(
        lines(20),
        lines(20, (i) => (i === 2 || i === 8 ? `X${i}` : `l${i}`)),
      ),
    ).toMatch(/^--- a\n\+\+\+ b\n@@ -1,12 \+1,12 @@\n/)
    expect(diff(lines(3), '')).toBe('--- a\n+++ b\n@@ -1,3 +0,0 @@\n-l0\n-l1\n-l2\n')
    expect(diff('', 'a\n')).toBe('--- a\n+++ b\n@@ -0,0 +1,1 @@\n+a\n')
    expect(
      diff(
        lines(40_000),
        lines(40_000, (i) => `m${i}`),
      ),
    ).toBe('@@ -1,40000 +1,40000 @@ diff too large to display\n')
  })
})
