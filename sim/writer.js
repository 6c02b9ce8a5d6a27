// Writes <dir>/cluster (replaced whole on every start) and <dir>/env.
import { execFileSync } from 'node:child_process'
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  renameSync,
} from 'node:fs'
import { join, resolve, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { stringify } from 'yaml'
import { openSshEd25519 } from './pki.js'

export const BIN_DIR = resolve(dirname(fileURLToPath(import.meta.url)), 'bin')
// the real clients `task tools` provides (scripts/tools.sh)
export const REAL_BIN_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '.tools', 'bin')
// what `task tools` accepts as supported (scripts/tools.sh `supported`)
const SUPPORTED = {
  talosctl: { args: ['version', '--client'], ok: /^\s*Tag:\s*v1\.12\./m },
  helm: { args: ['version', '--short'], ok: /^v[34]\./ },
}
// linked into <dir>/bin when `task tools` has it: the operator's bootstrap helmfile needs it, nothing else does
const OPTIONAL = ['helmfile']

/** the simulator's start fails without the real clients: there is no simulated talosctl or helm */
export class ToolsMissingError extends Error {
  constructor(missing) {
    super(
      `${missing.join(' and ')} not found: the simulator needs the real talosctl (v1.12.x) and helm (v3 or v4) ` +
        `(fix: run \`task tools\`, which puts them into .tools/bin, or put them on PATH)`,
    )
    this.exitCode = 3 // a required tool is missing (the exit code the product uses for it)
  }
}

/** the file starts with ELF's magic: its first 4 bytes only (the programs are 27–180 MB, and every simulator's start checks several) */
export const isElf = (file) => {
  let fd
  try {
    fd = openSync(file, 'r')
    const head = Buffer.alloc(4)
    return readSync(fd, head, 0, 4, 0) === 4 && head.toString('latin1') === '\x7fELF'
  } catch {
    return false
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}
/** a real (compiled) client at a supported version, as `task tools` would accept it */
function supported(tool, file) {
  if (!isElf(file)) return false
  try {
    return SUPPORTED[tool].ok.test(
      execFileSync(file, SUPPORTED[tool].args, { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] }),
    )
  } catch {
    return false
  }
}

/** the real talosctl and helm: .tools/bin (`task tools`), else the first supported one on PATH; throws ToolsMissingError */
export function realTools(pathEnv = process.env.PATH ?? '') {
  const found = {}
  for (const tool of Object.keys(SUPPORTED)) {
    const fromTools = join(REAL_BIN_DIR, tool)
    if (isElf(fromTools)) {
      found[tool] = realpathSync(fromTools)
      continue
    }
    for (const d of pathEnv.split(':').filter(Boolean)) {
      const file = join(d, tool)
      if (existsSync(file) && supported(tool, file)) {
        found[tool] = realpathSync(file)
        break
      }
    }
  }
  const missing = Object.keys(SUPPORTED).filter((t) => !found[t])
  if (missing.length) throw new ToolsMissingError(missing)
  for (const tool of OPTIONAL) if (isElf(join(REAL_BIN_DIR, tool))) found[tool] = realpathSync(join(REAL_BIN_DIR, tool))
  return found
}

/**
 * <dir>/bin, what goes first on PATH: the real talosctl and helm (the nodes speak talosctl's gRPC
 * API; the Kubernetes API and chart repository serve real helm) and the simulated flux (the real one
 * cannot be built offline).
 */
function writeBinDir(dir, tools) {
  const bin = join(dir, 'bin')
  rmSync(bin, { recursive: true, force: true })
  mkdirSync(bin, { recursive: true })
  for (const [tool, file] of Object.entries(tools)) symlinkSync(file, join(bin, tool))
  writeFileSync(join(bin, 'flux'), `#!/usr/bin/env bash\nexec '${join(BIN_DIR, 'flux')}' "$@"\n`, { mode: 0o755 })
  return bin
}
const b64 = (s) => Buffer.from(s).toString('base64')
const y = (o) => stringify(o, { lineWidth: 0, indent: 4 })
const fmtDur = (ms) => (ms % 60000 === 0 ? `${ms / 60000}m` : ms % 1000 === 0 ? `${ms / 1000}s` : `${Math.round(ms)}ms`)

export function installImage(talosVersion) {
  return `ghcr.io/siderolabs/installer:${talosVersion}`
}

/** a structurally real Talos v1alpha1 machine config for one node (cached by what differs:
 *  rendering 300 full documents through the YAML library is slow) */
const configCache = new WeakMap()
export function machineConfig(scenario, pki, node) {
  let cache = configCache.get(pki)
  if (!cache) configCache.set(pki, (cache = new Map()))
  const key = JSON.stringify([node.role, node.installDisk, node.installDiskSelector])
  if (!cache.has(key)) cache.set(key, renderMachineConfig(scenario, pki, { ...node, name: 'zzsimnodenamezz', ip: '127.255.255.254' }))
  // a name YAML would read as a bool, null or number is quoted, as the YAML library would have done
  const name = /^(true|false|null|yes|no|on|off|~|[-+]?[0-9.]+(e[-+]?[0-9]+)?|0x[0-9a-f]+|0o[0-7]+)$/i.test(node.name)
    ? JSON.stringify(node.name)
    : node.name
  return cache.get(key).replaceAll('zzsimnodenamezz', name).replaceAll('127.255.255.254', node.ip)
}

/**
 * The pod subnet of a cluster of `nodes`: 127.244.0.0/16, widened (127.244.0.0/15, /14 …) past 256
 * nodes as its operator must: Talos passes kube-controller-manager no --node-cidr-mask-size
 * (control_plane_static_pod.go: only `cluster.controllerManager.extraArgs` would), so each Node takes
 * the default /24 of the subnet and a /16 holds 256 of them (the 300-node bench, SIM_KUBE=real)
 */
export function podSubnet(nodes) {
  const prefix = 16 - Math.max(0, Math.ceil(Math.log2(Math.ceil(nodes / 256))))
  const second = 244 & ~((1 << (16 - prefix)) - 1)
  return `127.${second}.0.0/${prefix}`
}

function renderMachineConfig(scenario, pki, node) {
  const cp = node.role === 'controlplane'
  const { cluster } = scenario
  const k8s = cluster.kubernetesVersion
  const install = node.installDiskSelector
    ? { diskSelector: node.installDiskSelector, image: installImage(cluster.talosVersion), wipe: false }
    : { disk: node.installDisk, image: installImage(cluster.talosVersion), wipe: false }
  const machine = {
    type: cp ? 'controlplane' : 'worker',
    token: pki.secrets.machineToken,
    ca: cp ? { crt: b64(pki.talos.ca.cert), key: b64(pki.talos.ca.key) } : { crt: b64(pki.talos.ca.cert), key: '' },
    certSANs: [],
    kubelet: { image: `ghcr.io/siderolabs/kubelet:${k8s}`, defaultRuntimeSeccompProfileEnabled: true, disableManifestsDirectory: true },
    network: { hostname: node.name, interfaces: [{ deviceSelector: { physical: true }, addresses: [`${node.ip}/8`], dhcp: false }] },
    install,
    features: {
      rbac: true,
      stableHostname: true,
      apidCheckExtKeyUsage: true,
      diskQuotaSupport: true,
      kubePrism: { enabled: true, port: 7445 },
      hostDNS: { enabled: true, forwardKubeDNSToHost: true },
    },
    nodeLabels: cp ? { 'node.kubernetes.io/exclude-from-external-load-balancers': '' } : undefined,
  }
  if (!cp) delete machine.nodeLabels
  if (!cp) machine.ca = { crt: b64(pki.talos.ca.cert) } // workers carry no CA key
  if (cp && cluster.vip) machine.network.interfaces[0].vip = { ip: cluster.vip.address }
  const c = {
    id: pki.secrets.clusterId,
    secret: pki.secrets.clusterSecret,
    controlPlane: { endpoint: cluster.endpoint },
    clusterName: cluster.name,
    // loopback ranges, the same the simulated API hands out for pod and service IPs (sim/kube)
    network: {
      cni: { name: 'none' },
      dnsDomain: 'cluster.local',
      podSubnets: [podSubnet(scenario.nodes.length)],
      serviceSubnets: ['127.96.0.0/12'],
    },
    token: pki.secrets.bootstrapToken,
    ca: { crt: b64(pki.kube.ca.cert), key: cp ? b64(pki.kube.ca.key) : '' },
    // as the scenario says: a worker with discovery finds the control planes' trustd without the endpoint
    discovery:
      cluster.discovery === 'enabled' ? { enabled: true, registries: { kubernetes: { disabled: true }, service: {} } } : { enabled: false },
  }
  if (cp && cluster.allowSchedulingOnControlPlanes) c.allowSchedulingOnControlPlanes = true
  if (cp) {
    Object.assign(c, {
      secretboxEncryptionSecret: pki.secrets.secretboxEncryptionSecret,
      aggregatorCA: { crt: b64(pki.aggregator.ca.cert), key: b64(pki.aggregator.ca.key) },
      serviceAccount: { key: b64(pki.serviceAccount.key) },
      apiServer: {
        image: `registry.k8s.io/kube-apiserver:${k8s}`,
        certSANs: [new URL(cluster.endpoint).hostname],
        disablePodSecurityPolicy: true,
      },
      controllerManager: { image: `registry.k8s.io/kube-controller-manager:${k8s}` },
      proxy: { disabled: true },
      scheduler: { image: `registry.k8s.io/kube-scheduler:${k8s}` },
      etcd: { ca: { crt: b64(pki.etcd.ca.cert), key: b64(pki.etcd.ca.key) } },
    })
  } else {
    c.ca = { crt: b64(pki.kube.ca.cert), key: '' }
  }
  return `version: v1alpha1\ndebug: false\npersist: true\n${y({ machine, cluster: c })}`
}

export function talosconfig(scenario, pki) {
  const name = scenario.cluster.name
  return y({
    context: name,
    contexts: { [name]: { endpoints: [], ca: b64(pki.talos.ca.cert), crt: b64(pki.talos.admin.cert), key: b64(pki.talos.admin.key) } },
  }).replace('endpoints: []', 'endpoints: []') // gen config writes an empty list, and no nodes
}

export function talconfig(scenario) {
  const { cluster } = scenario
  return y({
    clusterName: cluster.name,
    talosVersion: cluster.talosVersion,
    kubernetesVersion: cluster.kubernetesVersion,
    endpoint: cluster.endpoint,
    nodes: scenario.nodes.map((n) => ({
      hostname: n.name,
      ipAddress: n.ip,
      controlPlane: n.role === 'controlplane',
      ...(n.installDiskSelector ? { installDiskSelector: n.installDiskSelector } : { installDisk: n.installDisk }),
    })),
  })
}

/** cilium's values from the Talos guide "Deploying Cilium CNI" (kube-proxy-free, through KubePrism):
 *  what the generated configs need (cni none, cluster.proxy.disabled, kubePrism on 7445) */
export const CILIUM_VALUES = {
  ipam: { mode: 'kubernetes' },
  kubeProxyReplacement: true,
  securityContext: {
    capabilities: {
      ciliumAgent: [
        'CHOWN',
        'KILL',
        'NET_ADMIN',
        'NET_RAW',
        'IPC_LOCK',
        'SYS_ADMIN',
        'SYS_RESOURCE',
        'DAC_OVERRIDE',
        'FOWNER',
        'SETGID',
        'SETUID',
      ],
      cleanCiliumState: ['NET_ADMIN', 'SYS_ADMIN', 'SYS_RESOURCE'],
    },
  },
  cgroup: { autoMount: { enabled: false }, hostRoot: '/sys/fs/cgroup' },
  k8sServiceHost: 'localhost',
  k8sServicePort: 7445,
}

/** the product's settings, with waits scaled by speed (never below what a process needs) */
export function bootstrapSettings(scenario, { chartRepo } = {}) {
  const s = scenario.speed
  const scaled = (ms, min) => fmtDur(Math.max(min, Math.round(ms / s)))
  return {
    concurrency: 4,
    retries: 5,
    retryDelay: scaled(3000, 50),
    retryMaxDelay: scaled(60000, 50),
    pollInterval: scaled(5000, 200),
    callTimeout: '30s',
    verifyTimeout: scaled(300000, 60000),
    bootstrapTimeout: scaled(300000, 60000),
    readyTimeout: scaled(600000, 60000),
    fluxTimeout: scaled(600000, 60000),
    resetTimeout: scaled(900000, 60000),
    kubeconfig: 'kubeconfig',
    // the simulator's own chart repository (sim/charts/repo.js) and its CA; never the public one
    cni: {
      chart: 'cilium',
      repo: chartRepo ?? 'https://helm.cilium.io/',
      ...(chartRepo ? { caFile: 'charts-ca.crt' } : {}),
      version: '1.18.4',
      release: 'cilium',
      namespace: 'kube-system',
      daemonset: 'cilium',
      values: CILIUM_VALUES,
    },
    flux: {
      mode: 'bootstrap',
      kustomization: 'flux-system/flux-system',
      git: {
        url: 'ssh://git@127.0.0.1/fleet.git',
        branch: 'main',
        path: `clusters/${scenario.cluster.name}`,
        privateKeyFile: 'flux-deploy-key',
      },
    },
  }
}

/** write <dir>/cluster whole (via a temp dir and rename) and <dir>/env; returns the paths */
// the system's CA bundle, as Go looks for it (crypto/x509 root_linux.go): kept in the trust file
// SSL_CERT_FILE names, which replaces the system roots for every Go client started from .sim/env
const SYSTEM_CA_BUNDLES = [
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/pki/tls/certs/ca-bundle.crt',
  '/etc/ssl/ca-bundle.pem',
  '/etc/pki/tls/cacert.pem',
  '/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem',
  '/etc/ssl/cert.pem',
]
/** the system's roots and the simulator's chart CA: helm (and helmfile through it) trust the OCI registry with no flag */
export function trustBundle(pki) {
  const system = SYSTEM_CA_BUNDLES.find((f) => existsSync(f))
  return `${system ? readFileSync(system, 'utf8').trimEnd() + '\n' : ''}${pki.charts.ca.cert}`
}

export async function writeClusterDir(dir, scenario, pki, { chartRepo, registry, tools = realTools() } = {}) {
  dir = resolve(dir)
  mkdirSync(dir, { recursive: true })
  const clusterDir = join(dir, 'cluster')
  const tmp = join(dir, `.cluster-${process.pid}-${Date.now()}`)
  mkdirSync(tmp, { recursive: true })
  // external configs: the operator brings the configs and the talosconfig; only the settings are written
  if (scenario.cluster.configs !== 'external') {
    mkdirSync(join(tmp, 'clusterconfig'), { recursive: true })
    writeFileSync(join(tmp, 'talconfig.yaml'), talconfig(scenario))
    for (const n of scenario.nodes) {
      writeFileSync(join(tmp, 'clusterconfig', `${scenario.cluster.name}-${n.name}.yaml`), machineConfig(scenario, pki, n), { mode: 0o600 })
    }
    writeFileSync(join(tmp, 'clusterconfig', 'talosconfig'), talosconfig(scenario, pki), { mode: 0o600 })
  }
  writeFileSync(
    join(tmp, 'bootstrap.yaml'),
    `# written by the simulator: waits scaled for speed ${scenario.speed}\n${stringify(bootstrapSettings(scenario, { chartRepo }), { lineWidth: 0 })}`,
  )
  writeFileSync(join(tmp, 'charts-ca.crt'), pki.charts.ca.cert)
  const deployKey = await openSshEd25519(`flux-${scenario.cluster.name}`)
  writeFileSync(join(tmp, 'flux-deploy-key'), deployKey.privateKey, { mode: 0o600 })
  writeFileSync(join(tmp, 'flux-deploy-key.pub'), deployKey.publicKey)
  rmSync(clusterDir, { recursive: true, force: true })
  renameSync(tmp, clusterDir)

  const binDir = writeBinDir(dir, tools)
  const trustFile = join(dir, 'trust.pem')
  writeFileSync(trustFile, trustBundle(pki))
  const env = {
    PATH: `${binDir}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    ...(scenario.cluster.configs === 'external' ? {} : { TALOSCONFIG: join(clusterDir, 'clusterconfig', 'talosconfig') }),
    KUBECONFIG: join(clusterDir, 'kubeconfig'),
    CLUSTER_DIR: clusterDir,
    // the OCI registry (sim/charts/oci.js) and the trust that makes helm accept its certificate
    ...(registry ? { SIM_OCI_REGISTRY: registry, SSL_CERT_FILE: trustFile } : {}),
  }
  const q = (v) => `'${String(v).replace(/'/g, `'\\''`)}'`
  writeFileSync(
    join(dir, 'env'),
    [
      '# source this file: the real talosctl and helm (`task tools`) and the simulated flux first on PATH',
      `export PATH=${q(binDir)}:"$PATH"`,
      ...['TALOSCONFIG', 'KUBECONFIG', 'CLUSTER_DIR', 'SIM_OCI_REGISTRY', 'SSL_CERT_FILE']
        .filter((k) => env[k])
        .map((k) => `export ${k}=${q(env[k])}`),
      '',
    ].join('\n'),
  )
  return { dir, clusterDir, env, binDir }
}
