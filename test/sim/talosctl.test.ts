// Conformance of the simulated talosctl against a small fake node server (real TLS, H1's PKI).
// Addresses: 127.30.0.0/24 only.
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import https from 'node:https'
import { execFile, spawn } from 'node:child_process'
import net from 'node:net'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { generatePki } from '../../sim/pki.js'

// the node process: what sim/bin/talosctl runs without a simulator to serve it
const BIN = path.resolve(__dirname, '../../sim/talosctl/cli.js')
const MAINT = '127.30.0.11' // maintenance node
const CONF = '127.30.0.12' // configured node (mTLS)
const OTHER = '127.30.0.13' // configured with another CA (pki-mismatch)
const DOWN = '127.30.0.19' // nothing listens

type Run = { code: number; stdout: string; stderr: string }
let home: string
let talosconfig: string
const servers: https.Server[] = []
const seen: any[] = []

function run(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH!, HOME: home, ...env } }, (err: any, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, stdout, stderr })
    })
  })
}

const ms = (stage: string) => ({
  metadata: { namespace: 'runtime', type: 'MachineStatuses.runtime.talos.dev', id: 'machine', version: 3, owner: 'runtime.MachineStatusController', phase: 'running', created: '2026-08-20T10:00:03Z', updated: '2026-08-20T10:04:41Z' },
  spec: { stage, status: { ready: stage !== 'booting', unmetConditions: stage === 'booting' ? [{ name: 'services', reason: 'etcd not running' }] : [] } },
})
const msDef = { type: 'MachineStatuses.runtime.talos.dev', displayType: 'MachineStatus', aliases: ['machinestatus'], columns: [{ name: 'Stage', jsonPath: '{.stage}' }, { name: 'Ready', jsonPath: '{.status.ready}' }] }

function handler(kind: 'maintenance' | 'configured') {
  return (req: any, res: any) => {
    let body = ''
    req.on('data', (c: string) => (body += c))
    req.on('end', () => {
      const method = req.url.slice(1)
      const nodes = String(req.headers['x-talos-nodes'] ?? '').split(',').filter(Boolean)
      seen.push({ method, nodes, argv: JSON.parse(req.headers['x-sim-argv'] ?? 'null'), body: JSON.parse(body || '{}') })
      const per = (fn: (n: string) => any) => ({ messages: (nodes.length ? nodes : ['']).map(fn) })
      let reply: any
      if (method === 'resources.Get') {
        const b = JSON.parse(body)
        if (b.type === 'foo') reply = { messages: [{ node: nodes[0] ?? '', error: { code: 'NotFound', message: 'resource "foo" is not registered' } }] }
        else reply = per((n) => (n === '127.30.0.99' ? { node: n, error: { code: 'Unavailable', message: 'connection refused' } } : { node: n, error: null, data: { definition: msDef, resources: [ms(kind === 'maintenance' ? 'maintenance' : 'booting')] } }))
      } else if (method === 'machine.Version') {
        reply = kind === 'maintenance' ? { error: { code: 'Unimplemented', message: 'API is not implemented in maintenance mode' } }
          : per((n) => (n === '127.30.0.99' ? { node: n, error: { code: 'Unavailable', message: 'connection error' } } : { node: n, error: null, data: { tag: 'v1.12.0', sha: 'abcdef12', goVersion: 'go1.25.1', os: 'linux', arch: 'amd64', features: { rbac: true } } }))
      } else if (method === 'machine.Bootstrap') {
        reply = per((n) => ({ node: n, error: { code: 'AlreadyExists', message: 'etcd data directory is not empty' } }))
      } else if (method === 'machine.ApplyConfiguration') {
        reply = per((n) => ({ node: n, error: null, data: { modeDetails: kind === 'maintenance' ? '' : 'Applied configuration without a reboot', warnings: [] } }))
      } else if (method === 'machine.Kubeconfig') {
        reply = per((n) => ({ node: n, error: null, data: { kubeconfig: 'apiVersion: v1\nkind: Config\nclusters: []\n' } }))
      } else reply = { error: { code: 'Unimplemented', message: `unknown method ${method}` } }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify(reply))
    })
  }
}

function listen(server: https.Server, ip: string) {
  servers.push(server)
  return new Promise<void>((r) => server.listen(50000, ip, () => r()))
}

beforeAll(async () => {
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'talosctl-test-'))
  const nodes = [{ name: 'm', ip: MAINT, role: 'controlplane' }, { name: 'c', ip: CONF, role: 'controlplane' }, { name: 'o', ip: OTHER, role: 'controlplane' }]
  const pki: any = await generatePki({ nodes, vip: null })
  const maint = pki.maintenance.get('m')
  await listen(https.createServer({ cert: maint.cert, key: maint.key }, handler('maintenance')), MAINT)
  const mtls = { requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' as const }
  await listen(https.createServer({ cert: pki.talos.apid.cert, key: pki.talos.apid.key, ca: pki.talos.ca.cert, ...mtls }, handler('configured')), CONF)
  const other = await pki.otherIdentity(nodes[2])
  await listen(https.createServer({ cert: other.cert, key: other.key, ca: other.ca, ...mtls }, handler('configured')), OTHER)
  const b64 = (s: string) => Buffer.from(s).toString('base64')
  talosconfig = path.join(home, 'talosconfig')
  fs.writeFileSync(talosconfig, `context: sim\ncontexts:\n    sim:\n        endpoints:\n            - ${CONF}\n        ca: ${b64(pki.talos.ca.cert)}\n        crt: ${b64(pki.talos.admin.cert)}\n        key: ${b64(pki.talos.admin.key)}\n`)
})

afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))))
  fs.rmSync(home, { recursive: true, force: true })
})

describe('command line (cobra/pflag)', () => {
  it('rejects an unknown flag with the usage block on stderr, exit 1', async () => {
    const r = await run(['get', 'machinestatus', '--bogus'])
    expect(r.code).toBe(1)
    expect(r.stdout).toBe('')
    expect(r.stderr.startsWith('unknown flag: --bogus\n\nUsage:\n  talosctl get <type> [<id>] [flags]\n\nAliases:\n  get, g\n')).toBe(true)
    expect(r.stderr.endsWith('watch resource changes\n\n')).toBe(true)
  })

  it('rejects an unknown command with cobra text and suggestions', async () => {
    const r = await run(['bootstap'])
    expect(r.code).toBe(1)
    expect(r.stderr).toContain('unknown command "bootstap" for "talosctl"\n\nDid you mean this?\n\tbootstrap\n\n\nUsage:')
  })

  it('counts args as cobra does, and bad enum values as pflag does', async () => {
    let r = await run(['apply-config', 'a', 'b'])
    expect(r.stderr.split('\n')[0]).toBe('accepts at most 1 arg(s), received 2')
    r = await run(['reset', '--wipe-mode', 'x'])
    expect(r.stderr.split('\n')[0]).toBe('invalid argument "x" for "--wipe-mode" flag: possible options are: all, system-disk, user-disks')
    r = await run(['version', '--insecure=maybe'])
    expect(r.stderr.split('\n')[0]).toBe('invalid argument "maybe" for "-i, --insecure" flag: strconv.ParseBool: parsing "maybe": invalid syntax')
    r = await run(['validate', '-c', 'x.yaml'])
    expect(r.stderr.split('\n')[0]).toBe('required flag(s) "mode" not set')
    expect(r.code).toBe(1)
  })

  it('prints help to stdout with exit 0', async () => {
    const r = await run(['bootstrap', '--help'])
    expect(r.code).toBe(0)
    expect(r.stderr).toBe('')
    expect(r.stdout).toContain('Usage:\n  talosctl bootstrap [flags]\n\nFlags:\n')
    expect(r.stdout).toContain('      --recover-skip-hash-check    skip integrity check')
  })

  it('version --client and --short need no server', async () => {
    let r = await run(['version', '--client'], { SIM_TALOSCTL_VERSION: 'v1.13.9' })
    expect(r.stdout).toMatch(/^Client:\n\tTag:         v1\.13\.9\n\tSHA:         [0-9a-f]{8}\n\tBuilt:       \n\tGo version:  go\S+\n\tOS\/Arch:     linux\/amd64\n$/)
    r = await run(['version', '--client', '--short'])
    expect(r.stdout).toBe('Client:\nTalos v1.12.11\n')
  })
})

describe('talking to nodes', () => {
  it('maintenance probe: get machinestatus --insecure table and -o json byte for byte', async () => {
    let r = await run(['get', 'machinestatus', '--insecure', '-n', MAINT])
    expect(r).toEqual({ code: 0, stderr: '', stdout: 'NODE   NAMESPACE   TYPE            ID        VERSION   STAGE         READY\n       runtime     MachineStatus   machine   3         maintenance   true\n' })
    r = await run(['get', 'machinestatus', '--insecure', '-n', MAINT, '-o', 'json'])
    expect(r.code).toBe(0)
    expect(r.stdout).toBe(`{
    "metadata": {
        "created": "2026-08-20T10:00:03Z",
        "id": "machine",
        "namespace": "runtime",
        "owner": "runtime.MachineStatusController",
        "phase": "running",
        "type": "MachineStatuses.runtime.talos.dev",
        "updated": "2026-08-20T10:04:41Z",
        "version": 3
    },
    "node": "",
    "spec": {
        "stage": "maintenance",
        "status": {
            "ready": true,
            "unmetConditions": []
        }
    }
}
`)
    const last = seen[seen.length - 1]
    expect(last.argv).toEqual(['get', 'machinestatus', '--insecure', '-n', MAINT, '-o', 'json'])
    expect(last.nodes).toEqual([])
  })

  it('secure get: -o yaml, jsonpath, version-skew WARNING, NODE column = -n string', async () => {
    let r = await run(['--talosconfig', talosconfig, '-n', CONF, 'get', 'machinestatus', '-o', 'yaml'])
    expect(r.code).toBe(0)
    expect(r.stderr).toBe(`WARNING: ${CONF}: server version 1.12.0 is older than client version 1.12.11\n`)
    expect(r.stdout).toBe(`node: ${CONF}\nmetadata:\n    namespace: runtime\n    type: MachineStatuses.runtime.talos.dev\n    id: machine\n    version: 3\n    owner: runtime.MachineStatusController\n    phase: running\n    created: 2026-08-20T10:00:03Z\n    updated: 2026-08-20T10:04:41Z\nspec:\n    stage: booting\n    status:\n        ready: false\n        unmetConditions:\n            - name: services\n              reason: etcd not running\n`)
    r = await run(['get', 'machinestatus', '--talosconfig', talosconfig, '-e', CONF, '-n', CONF, '-o', 'jsonpath={.spec.stage}'], { SIM_TALOSCTL_VERSION: 'v1.12.0' })
    expect(r).toEqual({ code: 0, stderr: '', stdout: 'booting\n' })
  })

  it('get: unknown type is a raw gRPC error; failing later nodes give the unnamed wrapper', async () => {
    let r = await run(['get', 'foo', '--talosconfig', talosconfig, '-n', CONF], { SIM_TALOSCTL_VERSION: 'v1.12.0' })
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'rpc error: code = NotFound desc = resource "foo" is not registered\n' })
    r = await run(['get', 'machinestatus', '--talosconfig', talosconfig, '-n', `${CONF},127.30.0.99`], { SIM_TALOSCTL_VERSION: 'v1.12.0' })
    expect(r.code).toBe(1)
    expect(r.stdout.split('\n')[1]).toMatch(/^127\.30\.0\.12 {3}runtime/)
    expect(r.stderr).toBe('1 error occurred:\n\t* rpc error: code = Unavailable desc = connection refused\n\n\n')
  })

  it('maps a refused connect to the grpc-go text', async () => {
    const r = await run(['apply-config', '--insecure', '-n', DOWN, '-f', talosconfig])
    expect(r).toEqual({ code: 1, stdout: '', stderr: `error applying new configuration: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${DOWN}:50000: connect: connection refused"\n` })
  })

  it('insecure call to a configured node: certificate required (a real TLS 1.3 alert)', async () => {
    const r = await run(['get', 'machinestatus', '--insecure', '-n', CONF])
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: certificate required"\n' })
  })

  it('secure call to a maintenance node: unknown authority; to a node of another CA: the Ed25519 hint', async () => {
    let r = await run(['get', 'machinestatus', '--talosconfig', talosconfig, '-e', MAINT, '-n', MAINT])
    expect(r.stderr).toBe('rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"\n')
    r = await run(['bootstrap', '--talosconfig', talosconfig, '-e', OTHER, '-n', OTHER])
    expect(r.code).toBe(1)
    expect(r.stderr).toBe('error executing bootstrap: rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of \\"x509: Ed25519 verification failure\\" while trying to verify candidate authority certificate \\"talos\\")"\n')
  })

  it('apply (silent on success), bootstrap AlreadyExists wrapper, multi-node bootstrap refused', async () => {
    let r = await run(['apply-config', '--insecure', '-n', MAINT, '-f', talosconfig])
    expect(r).toEqual({ code: 0, stdout: '', stderr: '' })
    r = await run(['apply', '--talosconfig', talosconfig, '-n', CONF, '-f', talosconfig])
    expect(r).toEqual({ code: 0, stdout: '', stderr: 'Applied configuration without a reboot\n' })
    r = await run(['bootstrap', '--talosconfig', talosconfig, '-n', CONF])
    expect(r).toEqual({ code: 1, stdout: '', stderr: `error executing bootstrap: 1 error occurred:\n\t* ${CONF}: rpc error: code = AlreadyExists desc = etcd data directory is not empty\n\n\n` })
    r = await run(['bootstrap', '--talosconfig', talosconfig, '-n', `${CONF},${MAINT}`])
    expect(r.stderr.startsWith('command "bootstrap" is not supported with multiple nodes\n\nUsage:\n  talosctl bootstrap [flags]')).toBe(true)
  })

  it('version: partial failure is a WARNING and exit 0', async () => {
    const r = await run(['version', '--talosconfig', talosconfig, '-n', `${CONF},127.30.0.99`])
    expect(r.code).toBe(0)
    expect(r.stderr).toBe('WARNING: 1 error occurred:\n\t* 127.30.0.99: rpc error: code = Unavailable desc = connection error\n\n\n')
    expect(r.stdout).toContain(`Server:\n\tNODE:        ${CONF}\n\tTag:         v1.12.0\n\tSHA:         abcdef12\n\tBuilt:       \n\tGo version:  go1.25.1\n\tOS/Arch:     linux/amd64\n\tEnabled:     RBAC\n`)
  })

  it('kubeconfig: written 0600, refuses to overwrite without --force', async () => {
    const dir = fs.mkdtempSync(path.join(home, 'kc-'))
    const target = path.join(dir, 'sub', 'kubeconfig')
    let r = await run(['kubeconfig', target, '--talosconfig', talosconfig, '-n', CONF, '--merge=false'])
    expect(r).toEqual({ code: 0, stdout: '', stderr: '' })
    expect(fs.statSync(target).mode & 0o777).toBe(0o600)
    r = await run(['kubeconfig', target, '--talosconfig', talosconfig, '-n', CONF, '--merge=false'])
    expect(r).toEqual({ code: 1, stdout: '', stderr: `kubeconfig file already exists, use --force to overwrite: "${target}"\n` })
    r = await run(['kubeconfig', target, '--talosconfig', talosconfig, '-n', CONF, '--merge=false', '--force'])
    expect(r.code).toBe(0)
  })
})

describe('no deadline of its own; signals', () => {
  it('hangs on a server that never answers until SIGTERM, then prints the abort text and Canceled, exit 1', async () => {
    const socks: net.Socket[] = []
    const silent = net.createServer((c) => { socks.push(c) })
    await new Promise<void>((r) => silent.listen(50000, '127.30.0.20', () => r()))
    try {
      const p = spawn(process.execPath, [BIN, 'get', 'machinestatus', '--insecure', '-n', '127.30.0.20'], { env: { PATH: process.env.PATH!, HOME: home } })
      let err = ''
      p.stderr.on('data', (d) => (err += d))
      const exited = new Promise<number>((r) => p.on('exit', (c) => r(c ?? -1)))
      const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), 700))])
      expect(early).toBe('still running')
      p.kill('SIGTERM')
      expect(await exited).toBe(1)
      expect(err).toBe('Signal received, aborting, press Ctrl+C once again to abort immediately...\nrpc error: code = Canceled desc = context canceled\n')
    } finally {
      socks.forEach((c) => c.destroy())
      await new Promise((r) => silent.close(r))
    }
  })
})

describe('talosconfig resolution', () => {
  it('creates an empty config when missing and fails with the client texts', async () => {
    const p = path.join(home, 'new', 'config')
    let r = await run(['version', '--talosconfig', p, '-n', CONF])
    expect(r.stderr).toBe('error constructing client: failed to determine endpoints\n')
    expect(fs.readFileSync(p, 'utf8')).toBe('context: ""\ncontexts: {}\n')
    expect(fs.statSync(p).mode & 0o777).toBe(0o600)
    r = await run(['version', '--talosconfig', p, '-e', CONF, '-n', CONF])
    expect(r.stderr).toBe('error constructing client: failed to create client connection: failed to resolve configuration context: talos config file is empty\n')
    r = await run(['bootstrap', '--talosconfig', talosconfig])
    expect(r.stderr.startsWith('nodes are not set for the command: please use `--nodes` flag or configuration file to set the nodes to run the command against\n\nUsage:')).toBe(true)
    r = await run(['get', 'machinestatus', '--insecure'])
    expect(r.stderr).toBe('failed to determine endpoints\n')
  })
})

describe('validate (offline)', () => {
  it('checks the install section in metal mode', async () => {
    const good = path.join(home, 'cp.yaml')
    fs.writeFileSync(good, 'version: v1alpha1\nmachine:\n  type: controlplane\n  ca: {crt: x, key: y}\n  install: {disk: /dev/sda}\n')
    let r = await run(['validate', '-c', good, '--mode', 'metal'])
    expect(r).toEqual({ code: 0, stdout: `${good} is valid for metal mode\n`, stderr: '' })
    const bad = path.join(home, 'bad.yaml')
    fs.writeFileSync(bad, 'version: v1alpha1\nmachine:\n  type: controlplane\n  ca: {crt: x, key: y}\n  install: {disk: /dev/sda, extraKernelArgs: [a], grubUseUKICmdline: true}\n')
    r = await run(['validate', '-c', bad, '-m', 'metal'])
    expect(r.code).toBe(1)
    expect(r.stderr).toBe("1 error occurred:\n\t* v1alpha1.Config: 1 error occurred:\n\t* install.extraKernelArgs and install.grubUseUKICmdline can't be used together\n\n\n\n\n")
  })
})
