// Test support for the helm and flux CLI tests: a simulated Kubernetes API (sim/kube) behind a real
// TLS listener with client certificates on a loopback address, a kubeconfig for it, the chart
// repository (sim/charts/repo.js) with its CA, and a runner for the CLIs as child processes: the
// real helm from `task tools` (.tools/bin), the simulated flux (sim/bin). Used by test/sim/helm,
// flux and cni-network tests.
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { generatePki } from './pki.js'
import { createKube, createKubeServer, createRealtimeClock } from './kube/index.js'
import { startChartRepo } from './charts/repo.js'
import { trustBundle } from './writer.js'

const HERE = path.dirname(fileURLToPath(import.meta.url))
export const BIN_DIR = path.resolve(HERE, 'bin')
/** where `task tools` (scripts/tools.sh) puts the real talosctl and helm */
export const REAL_BIN_DIR = path.resolve(HERE, '..', '.tools', 'bin')

/**
 * Start an API on `ip`:6443. nodes: [{name, ip, role}] registered at once (their kubelets started).
 * faults: a mutable Set of strings `<node>:cni` or `flux`; fluxMessage: the flux fault's text; crash: a
 * mutable Map chart → message, the charts whose pods crash-loop while they are in it (a scenario `chart` fault);
 * coreDNS false: the configs disable Talos's CoreDNS (cluster.coreDNS.disabled), as cluster-template's do.
 */
export async function startKubeForTest({
  ip,
  speed = 1000,
  nodes = [],
  faults = new Set(),
  fluxMessage,
  timings = {},
  kubernetesVersion = 'v1.35.0',
  network,
  flux,
  crash = new Map(),
  coreDNS = true,
}) {
  const pki = await generatePki({ nodes: nodes.length ? nodes : [{ name: 'cp-1', ip, role: 'controlplane' }], vip: ip })
  const calls = []
  const kube = createKube({
    clock: createRealtimeClock({ speed }),
    kubernetesVersion,
    timings: { cni: 20, ...timings },
    faults: {
      has: (node, kind) => faults.has(node ? `${node}:${kind}` : kind),
      message: (kind) => (kind === 'flux' ? fluxMessage : undefined),
      chartCrash: (chart) => crash.get(chart),
    },
    record: (c) => calls.push(c),
    network, // optional: what each node's machine config says (sim/kube/index.js)
    flux,
  })
  kube.bootstrap({ coreDNS })
  for (const n of nodes) kube.registerNode(n)
  const srv = await createKubeServer({
    kube,
    host: ip,
    port: 6443,
    tls: { key: pki.kube.server.key, cert: pki.kube.server.cert, ca: pki.kube.ca.cert, requestCert: true },
  })
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sim-kube-'))
  const kubeconfig = path.join(dir, 'kubeconfig')
  const repo = await startChartRepo({ cert: pki.charts.server.cert, key: pki.charts.server.key })
  const caFile = path.join(dir, 'charts-ca.crt')
  fs.writeFileSync(caFile, pki.charts.ca.cert)
  const trustFile = path.join(dir, 'trust.pem')
  fs.writeFileSync(trustFile, trustBundle(pki))
  const b64 = (s) => Buffer.from(s).toString('base64')
  fs.writeFileSync(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: sim\n  cluster:\n    server: https://${ip}:6443\n    certificate-authority-data: ${b64(pki.kube.ca.cert)}`,
      'contexts:',
      '- name: admin@sim\n  context:\n    cluster: sim\n    user: admin@sim\n    namespace: default',
      'current-context: admin@sim',
      'users:',
      `- name: admin@sim\n  user:\n    client-certificate-data: ${b64(pki.kube.admin.cert)}\n    client-key-data: ${b64(pki.kube.admin.key)}`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  )
  return {
    kube,
    calls,
    dir,
    kubeconfig,
    faults,
    /** the chart repository and its CA; `chart`: the cilium chart's arguments for helm */
    repo: { url: repo.url, caFile, requests: repo.requests },
    /** host:port of the OCI registry (sim/charts/oci.js), and the trust bundle that makes helm accept it (SSL_CERT_FILE) */
    registry: repo.registry,
    trustFile,
    chart: ['cilium', '--repo', repo.url, '--ca-file', caFile],
    // helm's caches and config in the test's directory, not the user's
    env: {
      ...process.env,
      KUBECONFIG: kubeconfig,
      SIM_FLUX_POLL_MS: '100',
      HELM_CACHE_HOME: path.join(dir, 'helm-cache'),
      HELM_CONFIG_HOME: path.join(dir, 'helm-config'),
      HELM_DATA_HOME: path.join(dir, 'helm-data'),
    },
    async close() {
      kube.stop()
      await srv.close()
      await repo.close()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** Run a CLI (the real `helm`, the simulated `flux`, kubectl from PATH) and collect { code, stdout, stderr }. */
export function run(tool, args, { env = process.env, input, timeoutMs = 60000 } = {}) {
  return new Promise((resolve) => {
    const real = path.join(REAL_BIN_DIR, tool)
    const bin = fs.existsSync(real) ? real : fs.existsSync(path.join(BIN_DIR, tool)) ? path.join(BIN_DIR, tool) : tool
    const child = execFile(bin, args, { env, timeout: timeoutMs }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr })
    })
    if (input !== undefined) child.stdin.end(input)
    else child.stdin.end()
  })
}
