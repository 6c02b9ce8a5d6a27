// Test support: a simulated API on a loopback address, a kubeconfig for it, and a runner
// for the real kubectl (a fresh --cache-dir per call: kubectl keeps discovery on disk there,
// k8s.io/client-go discovery/cached/disk, and would not see a new CRD's kinds at once).
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createKube, createKubeServer, createRealtimeClock } from './index.js'

// A fault set the tests can change: add('wrkr-1', 'cni'), add(null, 'flux', 'message').
export function createTestFaults() {
  const set = new Map()
  return {
    has: (node, kind) => set.has(`${node ?? '*'}:${kind}`),
    message: (kind) => [...set].find(([k]) => k.endsWith(`:${kind}`))?.[1],
    add(node, kind, message) {
      set.set(`${node ?? '*'}:${kind}`, message)
    },
    clear(node, kind) {
      set.delete(`${node ?? '*'}:${kind}`)
    },
  }
}

export async function startTestKube({
  host,
  port = 6443,
  speed = 600,
  timings = {},
  kubernetesVersion = 'v1.35.0',
  tls,
  bootstrap = true,
} = {}) {
  const clock = createRealtimeClock({ speed })
  const faults = createTestFaults()
  const calls = []
  const kube = createKube({ clock, kubernetesVersion, timings, faults, record: (c) => calls.push(c) })
  if (bootstrap) kube.bootstrap()
  const server = await createKubeServer({ kube, tls, host, port })
  const dir = await mkdtemp(join(tmpdir(), 'sim-kube-'))
  const kubeconfig = join(dir, 'kubeconfig')
  await writeFile(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: sim, cluster: {server: "${server.url}"${tls?.ca ? `, certificate-authority-data: ${Buffer.from(tls.ca).toString('base64')}` : ''}}}]`,
      'contexts: [{name: sim, context: {cluster: sim, user: sim}}]',
      'current-context: sim',
      `users: [{name: sim, user: {${tls?.clientCert ? `client-certificate-data: ${Buffer.from(tls.clientCert).toString('base64')}, client-key-data: ${Buffer.from(tls.clientKey).toString('base64')}` : ''}}}]`,
      '',
    ].join('\n'),
  )
  let n = 0
  async function kubectl(args, { input, timeoutMs = 60_000 } = {}) {
    const cache = join(dir, `cache-${n++}`)
    const started = Date.now()
    return new Promise((resolve) => {
      const child = execFile(
        'kubectl',
        ['--cache-dir', cache, ...args],
        { env: { ...process.env, KUBECONFIG: kubeconfig }, timeout: timeoutMs },
        (err, stdout, stderr) => {
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr, ms: Date.now() - started })
        },
      )
      child.stdin.end(input) // never leave kubectl waiting on a prompt
    })
  }
  async function writeManifest(name, text) {
    const p = join(dir, name)
    await writeFile(p, text)
    return p
  }
  return {
    kube,
    clock,
    faults,
    calls,
    url: server.url,
    kubeconfig,
    dir,
    kubectl,
    writeManifest,
    async stop() {
      kube.stop()
      await server.close()
      await rm(dir, { recursive: true, force: true })
    },
  }
}
