// The real talosctl v1.12.11 (from `task tools`) against the simulated nodes' gRPC API (sim/grpc):
// every command the product runs (lib/tools/talosctl.ts), with the outputs the real client prints.
// What the nodes answer follows machined's and apid's source: internal/app/maintenance/server.go
// (insecure API), internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (machine API),
// internal/app/apid/pkg/director/director.go and backend/apid.go (proxying, per-node metadata and
// errors). Range 127.37.1.x.
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startOn, type Started } from './helpers.js'
import { realTool } from '../support/real-tools.js'

const tool = realTool('talosctl')
if (tool.skip) console.warn(`SKIPPED test/sim/talosctl-real.test.ts: ${tool.skip}`)

const R = '127.37.1'
const CP1 = `${R}.11`,
  CP2 = `${R}.12`,
  W1 = `${R}.21`,
  NOBODY = `${R}.99`

interface Run {
  code: number
  stdout: string
  stderr: string
}

describe.skipIf(!!tool.skip)('the real talosctl against the simulator', () => {
  let s: Started
  const talosctl = (...args: string[]): Promise<Run> =>
    new Promise((done) => {
      execFile(
        tool.path ?? 'talosctl',
        args,
        { encoding: 'utf8', timeout: 30_000, env: { PATH: process.env.PATH ?? '', HOME: s.dir, TALOSCONFIG: s.sim.env.TALOSCONFIG } },
        (err, stdout, stderr) => done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
      )
    })
  const secure = (node: string, endpoint = node): string[] => ['-e', endpoint, '-n', node]
  const config = (name: string): string => join(s.sim.clusterDir, 'clusterconfig', `test-${name}.yaml`)
  const json = (text: string): Array<Record<string, any>> =>
    text
      .split(/\n(?=\{)/)
      .filter((t) => t.trim())
      .map((t) => JSON.parse(t))

  // discovery on: the worker's apid gets its certificate from a booting control plane, before the bootstrap (secrets/api.go)
  beforeAll(async () => {
    s = await startOn(R, { cps: 2, workers: 1, speed: 1000, discovery: 'enabled' })
  })
  afterAll(async () => {
    await s?.stop()
  })

  it('is the real build the tools entry point gives (not the simulated CLI)', async () => {
    expect(tool.path).toBe(resolve('.tools/bin/talosctl'))
    expect(readFileSync(tool.path!).subarray(0, 4).toString('latin1')).toBe('\x7fELF')
    const v = await talosctl('version', '--client')
    expect(v.code).toBe(0)
    expect(v.stdout).toMatch(/^Client:\n\tTag: +v1\.12\.11\n/)
  })

  it('validate --mode metal accepts the generated configs', async () => {
    const v = await talosctl('validate', '--mode', 'metal', '-c', config('cp-1'))
    expect(v).toMatchObject({ code: 0, stdout: expect.stringContaining('is valid for metal mode') })
  })

  it('maintenance: get machinestatus / disks --insecure -o json, version is not served', async () => {
    const ms = await talosctl('get', 'machinestatus', '--insecure', '-n', CP1, '-e', CP1, '-o', 'json')
    expect(ms.code).toBe(0)
    const [status] = json(ms.stdout)
    expect(status).toMatchObject({
      node: '',
      metadata: { namespace: 'runtime', type: 'MachineStatuses.runtime.talos.dev', id: 'machine', phase: 'running' },
      spec: { stage: 'maintenance' },
    })

    const disks = await talosctl('get', 'disks', '--insecure', '-n', CP1, '-e', CP1, '-o', 'json')
    expect(disks.code).toBe(0)
    expect(json(disks.stdout).map((d) => [d.metadata.id, d.spec.dev_path])).toContainEqual(['sda', '/dev/sda'])

    const table = await talosctl('get', 'disks', '--insecure', '-n', CP1)
    expect(table.stdout.split('\n')[0]).toMatch(
      /^NODE +NAMESPACE +TYPE +ID +VERSION +SIZE +READ ONLY +TRANSPORT +ROTATIONAL +WWID +MODEL +SERIAL$/,
    )

    const version = await talosctl('version', '--insecure', '-n', CP1)
    expect(version.code).toBe(1)
    expect(version.stderr).toContain(
      'error getting version: rpc error: code = Unimplemented desc = API is not implemented in maintenance mode',
    )

    const unknown = await talosctl('get', 'nosuchthing', '--insecure', '-n', CP1)
    expect(unknown).toMatchObject({ code: 1, stderr: 'rpc error: code = NotFound desc = resource "nosuchthing" is not registered\n' })
  })

  it('apply-config --insecure: accepted silently, the node leaves maintenance and then wants a client certificate', async () => {
    for (const [name, ip] of [
      ['cp-1', CP1],
      ['cp-2', CP2],
      ['wrkr-1', W1],
    ]) {
      expect(await talosctl('apply-config', '--insecure', '-n', ip!, '-e', ip!, '-f', config(name!))).toEqual({
        code: 0,
        stdout: '',
        stderr: '',
      })
    }
    await s.sim.until(() => ['cp-1', 'cp-2', 'wrkr-1'].every((n) => s.sim.node(n)?.listener === 'secure'), 30_000)
    // TLS 1.3: the alert may lose the race against the client's first write (then `broken pipe`); the product retries those
    let probe: Run | undefined
    for (let i = 0; i < 5 && !probe?.stderr.includes('certificate'); i++)
      probe = await talosctl('get', 'machinestatus', '--insecure', '-n', CP1, '-e', CP1, '-o', 'json')
    expect(probe).toMatchObject({
      code: 1,
      stderr: expect.stringContaining(
        'rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: certificate required"',
      ),
    })
  })

  it('get machinestatus over mTLS, one node and batched through an endpoint (NODE per row, a failed node in the error list)', async () => {
    const one = await talosctl('get', 'machinestatus', ...secure(CP1), '-o', 'json')
    expect(one.code).toBe(0)
    expect(json(one.stdout)[0]).toMatchObject({ node: CP1, spec: { stage: expect.stringMatching(/booting|running/) } })

    const batch = await talosctl('get', 'machinestatus', '-e', CP1, '-n', `${W1},${NOBODY},${CP2}`, '-o', 'json')
    expect(batch.code).toBe(1)
    expect(json(batch.stdout).map((d) => d.node)).toEqual([W1, CP2])
    expect(batch.stderr).toBe(
      `1 error occurred:\n\t* rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${NOBODY}:50000: connect: connection refused"\n\n\n`,
    )

    // a worker's apid forwards nothing
    const viaWorker = await talosctl('get', 'machinestatus', ...secure(CP1, W1))
    expect(viaWorker).toMatchObject({ code: 1, stderr: 'rpc error: code = PermissionDenied desc = no request forwarding\n' })
  })

  it('version over mTLS; type names resolved through the meta ResourceDefinitions; get -w streams events', async () => {
    const v = await talosctl('version', ...secure(CP1))
    expect(v.code).toBe(0)
    expect(v.stdout).toMatch(
      new RegExp(`\nServer:\n\tNODE:        ${CP1.replace(/\./g, '\\.')}\n\tTag:         v1\.12\.11\n[^]*\tEnabled:     RBAC\n$`),
    )

    const rd = await talosctl('get', 'rd', ...secure(CP1))
    expect(rd.code).toBe(0)
    expect(rd.stdout).toMatch(/^NODE +NAMESPACE +TYPE +ID +VERSION +ALIASES\n/)
    expect(rd.stdout).toMatch(/ meta +ResourceDefinition +machinestatuses\.runtime\.talos\.dev +1 +machinestatus ms\n/)
    // MachineStatus and MountStatus both abbreviate to `ms`
    expect(await talosctl('get', 'ms', ...secure(CP1))).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('code = InvalidArgument desc = resource type "ms" is ambiguous'),
    })

    const watch = execFile(tool.path!, ['get', 'machinetype', '-w', ...secure(CP1)], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', HOME: s.dir, TALOSCONFIG: s.sim.env.TALOSCONFIG },
    })
    let out = ''
    watch.stdout?.on('data', (d: string) => {
      out += d
    })
    for (let i = 0; i < 200 && !out.includes('controlplane'); i++) await new Promise((r) => setTimeout(r, 100))
    watch.kill()
    expect(out).toMatch(
      new RegExp(
        `^NODE +\\* +NAMESPACE +TYPE +ID +VERSION +TYPE\n${CP1.replace(/\./g, '\\.')} +\\+ +config +MachineType +machine-type +\\d+ +controlplane\n`,
      ),
    )
  })

  it('bootstrap: once on a control plane; not on a worker', async () => {
    expect(await talosctl('bootstrap', ...secure(W1))).toMatchObject({
      code: 1,
      stderr:
        'error executing bootstrap: rpc error: code = FailedPrecondition desc = bootstrap can only be performed on a control plane node\n',
    })
    expect(await talosctl('bootstrap', ...secure(CP1))).toEqual({ code: 0, stdout: '', stderr: '' })
    await s.sim.until(() => s.sim.node('cp-1')?.etcdHealthy === true && s.sim.node('cp-2')?.etcdMember != null, 30_000)
    // again: apid's per-node error (the control plane proxies to itself), as the product's bootstrap phase reads it
    expect(await talosctl('bootstrap', ...secure(CP1))).toEqual({
      code: 1,
      stdout: '',
      stderr: `error executing bootstrap: 1 error occurred:\n\t* ${CP1}: rpc error: code = AlreadyExists desc = etcd data directory is not empty\n\n\n`,
    })
  })

  it('service <id>: one block per node; a node the endpoint cannot reach is a warning', async () => {
    const one = await talosctl('service', 'etcd', ...secure(CP1))
    expect(one.code).toBe(0)
    expect(one.stdout).toMatch(
      new RegExp(
        `^NODE     ${CP1.replace(/\./g, '\\.')}\nID       etcd\nSTATE    Running\nHEALTH   OK\nEVENTS   \\[Running\\]: Health check successful \\(\\S+ ago\\)\n`,
      ),
    )

    const batch = await talosctl('service', 'kubelet', '-e', CP1, '-n', `${CP1},${NOBODY},${W1}`)
    expect(batch.code).toBe(0)
    expect([...batch.stdout.matchAll(/^NODE +(\S+)$/gm)].map((m) => m[1])).toEqual([CP1, W1])
    expect(batch.stderr).toBe(
      `WARNING: 1 error occurred:\n\t* ${NOBODY}: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${NOBODY}:50000: connect: connection refused"\n\n\n`,
    )
  })

  it('service <id> restart: a NODE/RESPONSE table (the kubelet hint runs it)', async () => {
    const r = await talosctl('service', 'kubelet', 'restart', ...secure(W1, CP1))
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(new RegExp(`^NODE +RESPONSE\n${W1.replace(/\./g, '\\.')} +Service "kubelet" restarted\n$`))
    const unknown = await talosctl('service', 'nope', 'stop', ...secure(CP1))
    expect(unknown.code).toBe(1)
    // machined's own words for a service it does not know (pkg/system/system.go IsRunning)
    expect(unknown.stderr).toContain('rpc error: code = Unknown desc = service "nope" not defined')
  })

  it('etcd members: the table with the NODE column and 16-hex-digit ids', async () => {
    await s.sim.until(() => s.sim.node('cp-2')?.etcdHealthy === true, 30_000)
    const members = await talosctl('etcd', 'members', ...secure(CP1))
    expect(members.code).toBe(0)
    const lines = members.stdout.trimEnd().split('\n')
    expect(lines[0]).toMatch(/^NODE +ID +HOSTNAME +PEER URLS +CLIENT URLS +LEARNER$/)
    expect(
      lines
        .slice(1)
        .map((l) => l.split(/\s+/))
        .map((c) => [c[0], /^[0-9a-f]{16}$/.test(c[1]!), c[2], c[3], c[5]])
        .sort((a, b) => String(a[2]).localeCompare(String(b[2]))),
    ).toEqual([
      [CP1, true, 'cp-1', `https://${CP1}:2380`, 'false'],
      [CP1, true, 'cp-2', `https://${CP2}:2380`, 'false'],
    ])

    // a worker answers for itself without proxying: a plain error, no per-node list
    expect(await talosctl('etcd', 'members', ...secure(W1))).toMatchObject({
      code: 1,
      stderr: 'error getting members: rpc error: code = Unimplemented desc = member list is only available on control plane nodes\n',
    })
  })

  it('kubeconfig <path> --merge=false --force: the streamed archive written as the file', async () => {
    const path = join(s.dir, 'kubeconfig')
    expect(await talosctl('kubeconfig', path, ...secure(CP1), '--merge=false', '--force')).toEqual({ code: 0, stdout: '', stderr: '' })
    const text = readFileSync(path, 'utf8')
    expect(text).toContain('kind: Config')
    expect(text).toContain('current-context: admin@test')
    expect(text).toContain(s.sim.scenario.cluster.endpoint)
  })

  it('apply-config over mTLS on a configured node', async () => {
    expect(await talosctl('apply-config', ...secure(W1), '-f', config('wrkr-1'))).toEqual({
      code: 0,
      stdout: '',
      stderr: 'Applied configuration without a reboot\n',
    })
  })

  it('reboot --wait=false: accepted, the node goes down and comes back running', async () => {
    const boot = s.sim.node('wrkr-1')?.bootId
    expect(await talosctl('reboot', ...secure(W1), '--wait=false')).toEqual({ code: 0, stdout: '', stderr: '' })
    // at speed 1000 the reboot may be over before talosctl has exited: a new boot ID says it went down
    await s.sim.until(() => {
      const w = s.sim.node('wrkr-1')
      return w?.bootId !== boot && w?.stage === 'running' && w?.listener === 'secure'
    }, 30_000)
  })

  // the member goes first: with two members, one of them down leaves no quorum to commit its removal (real etcd)
  it('etcd remove-member <hex id> through a healthy control plane, then reset --wait=false', async () => {
    const before = await talosctl('etcd', 'members', ...secure(CP1))
    const id = /^\S+\s+([0-9a-f]{16})\s+cp-2\s/m.exec(before.stdout)?.[1]
    expect(id).toBeDefined()
    const reset = [
      'reset',
      ...secure(CP2),
      '--graceful=false',
      '--reboot',
      '--system-labels-to-wipe',
      'STATE',
      '--system-labels-to-wipe',
      'EPHEMERAL',
      '--wait=false',
    ]
    let removed = await talosctl('etcd', 'remove-member', id!, ...secure(CP1))
    // real etcd refuses while a peer has been connected for less than 5 s (cp-2 joined moments ago): transient
    for (let i = 0; i < 40 && removed.stderr.includes('etcdserver: unhealthy cluster'); i++) {
      await new Promise((r) => setTimeout(r, 250))
      removed = await talosctl('etcd', 'remove-member', id!, ...secure(CP1))
    }
    expect(removed).toEqual({ code: 0, stdout: '', stderr: '' })
    expect(await talosctl(...reset)).toEqual({ code: 0, stdout: '', stderr: '' })
    const after = await talosctl('etcd', 'members', ...secure(CP1))
    expect(after.stdout).not.toContain(' cp-2 ')
    expect(after.stdout).toContain(' cp-1 ')
    await s.sim.until(() => s.sim.node('cp-2')?.stage === 'maintenance', 30_000)
  })
})
