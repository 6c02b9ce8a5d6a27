// Do the machine configs and the CNI settings fit together? Offline, before any node is touched.
// What Talos does with each key (talos-src, v1.12):
// - cluster.network.cni.name: absent means flannel (types/v1alpha1/v1alpha1_clusterconfig.go CNI());
//   a control plane renders Talos's own flannel when it is flannel, applies the URLs when custom
//   (machined controllers/k8s/control_plane.go, FlannelEnabled and the extra manifests).
// - cluster.proxy.disabled: kube-proxy is deployed unless true (v1alpha1_proxyconfig.go Enabled()),
//   rendered by control planes only (control_plane.go ProxyEnabled; worker configs carry no proxy).
// - machine.features.kubePrism: on only when enabled: true (v1alpha1_features.go), port 7445 when
//   unset (defaultKubePrismPort); each node runs its own, so every node's config counts.
import { existsSync } from 'node:fs'
import { basename, join } from 'node:path'
import { MachineConfig } from './machine-config.js'
import { InputError, InputErrors } from '../core/errors.js'
import type { ClusterNode } from '../core/model.js'
import type { Run } from '../engine/run.js'
import { SETTINGS_FILE, type CniSettings } from './settings.js'
import { YamlFile } from './yaml-file.js'

export const KUBEPRISM_DEFAULT_PORT = 7445

/** The keys of one machine config that matter to the CNI, each with the line it stands on. */
export interface ConfigNetwork {
  node: ClusterNode
  file: string
  /** effective CNI name; `explicit` false when the config does not say (Talos then uses flannel) */
  cni: { name: string; explicit: boolean; line: number | undefined }
  /** undefined: the config does not say (a worker's config carries no proxy section) */
  proxyDisabled: { value: boolean | undefined; line: number | undefined }
  kubePrism: { enabled: boolean; port: number; line: number | undefined }
}

type Path = ReadonlyArray<string>

/** Reads the CNI-related keys of a machine config (the v1alpha1 document of a multi-document file). */
export function readConfigNetwork(node: ClusterNode): ConfigNetwork | undefined {
  const config = MachineConfig.of(node.configFile)
  const doc = config.documents.find((d) => d.get('version') === 'v1alpha1')
  if (!doc) return undefined // not a v1alpha1 config: `talosctl validate` says so
  const lineOf = (path: Path): number | undefined => config.lineOf(doc, path)
  const value = (path: Path): unknown => doc.getIn(path)
  const name = value(['cluster', 'network', 'cni', 'name'])
  const disabled = value(['cluster', 'proxy', 'disabled'])
  const prismEnabled = value(['machine', 'features', 'kubePrism', 'enabled'])
  const prismPort = Number(value(['machine', 'features', 'kubePrism', 'port']) ?? 0)
  const cp = node.role === 'controlplane'
  return {
    node,
    file: node.configFile,
    cni: {
      name: typeof name === 'string' && name ? name : 'flannel',
      explicit: typeof name === 'string' && name !== '',
      line: lineOf(['cluster', 'network', 'cni', 'name']),
    },
    proxyDisabled: {
      value: disabled === true ? true : disabled === false || cp ? false : undefined,
      line: lineOf(['cluster', 'proxy', 'disabled']),
    },
    kubePrism: {
      enabled: prismEnabled === true,
      port: prismPort > 0 ? prismPort : KUBEPRISM_DEFAULT_PORT,
      line: lineOf(['machine', 'features', 'kubePrism', prismEnabled === true ? 'port' : 'enabled']),
    },
  }
}

export interface CniCheckResult {
  errors: InputError[]
  /** checks that did not apply, said as a warning */
  skipped: string[]
}

const REGENERATE = 'then regenerate the machine configs (talhelper genconfig)'
const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '::1'])

/** The chart is cilium (cilium/cilium, cilium with a repo, or an OCI reference ending in /cilium). */
export function isCilium(cni: CniSettings): boolean {
  return (cni.chart.split('/').pop() ?? '') === 'cilium'
}

/** Every check of configs against each other and against the CNI settings. */
export function checkCniCompat(configs: ConfigNetwork[], cni: CniSettings | undefined, settingsPath: string): CniCheckResult {
  const errors: InputError[] = []
  const skipped: string[] = []
  const at = (c: ConfigNetwork, line: number | undefined, message: string, fix: string): InputError =>
    new InputError(`${c.node.name}: ${message}`, { file: c.file, ...(line ? { line } : {}), fix })
  const settings = existsSync(settingsPath) ? YamlFile.read(settingsPath, `fix ${SETTINGS_FILE}`) : undefined
  const atSettings = (path: Path, message: string, fix: string): InputError =>
    settings ? settings.error(path, message, fix) : new InputError(message, { file: settingsPath, fix })

  const controlPlanes = configs.filter((c) => c.node.role === 'controlplane')
  const reference = controlPlanes[0] ?? configs[0]
  if (!reference) return { errors, skipped }

  // the configs of one cluster agree with each other (a worker's config is taken where it says something)
  const cniDisagrees = new Set<ConfigNetwork>()
  const differs = <T>(
    key: string,
    line: (c: ConfigNetwork) => number | undefined,
    of: (c: ConfigNetwork) => T | undefined,
    fix: string,
  ): void => {
    const want = of(reference)
    for (const c of configs) {
      const got = of(c)
      if (c === reference || got === undefined || got === want) continue
      if (key === 'cluster.network.cni.name') cniDisagrees.add(c)
      errors.push(
        at(
          c,
          line(c),
          `${key} is ${String(got)} here but ${String(want)} in ${basename(reference.file)} (${reference.node.name}): the configs of one cluster disagree`,
          `${fix}, ${REGENERATE}`,
        ),
      )
    }
  }
  differs(
    'cluster.network.cni.name',
    (c) => c.cni.line,
    (c) => (c.node.role === 'controlplane' || c.cni.explicit ? c.cni.name : undefined),
    'give every node the same cluster.network.cni.name (talhelper: cniConfig)',
  )
  differs(
    'cluster.proxy.disabled',
    (c) => c.proxyDisabled.line,
    (c) => c.proxyDisabled.value,
    'give every node the same cluster.proxy.disabled (one talhelper patch for all nodes)',
  )
  differs(
    'machine.features.kubePrism.enabled',
    (c) => c.kubePrism.line,
    (c) => c.kubePrism.enabled,
    'enable KubePrism on every node (machine.features.kubePrism.enabled: true)',
  )
  differs(
    'machine.features.kubePrism.port',
    (c) => c.kubePrism.line,
    (c) => (c.kubePrism.enabled ? c.kubePrism.port : undefined),
    'use one KubePrism port on every node',
  )

  // a CNI from the settings and a CNI from Talos: both would run
  if (cni) {
    for (const c of configs) {
      if (c.cni.name === 'none' || (c.node.role !== 'controlplane' && !c.cni.explicit) || cniDisagrees.has(c)) continue
      const what =
        c.cni.name === 'custom' ? 'Talos applies the manifests of cluster.network.cni.urls' : `Talos installs its own ${c.cni.name}`
      errors.push(
        at(
          c,
          c.cni.line,
          `cluster.network.cni.name is ${c.cni.explicit ? c.cni.name : 'not set (Talos defaults to flannel)'}: ${what} next to ${cni.chart} from ${SETTINGS_FILE}, two CNIs on every node`,
          `set cluster.network.cni.name: none (talhelper: cniConfig: { name: none }), ${REGENERATE}; or remove cni: from ${SETTINGS_FILE} to keep Talos's CNI`,
        ),
      )
    }
  } else if (controlPlanes.length > 0 && controlPlanes.every((c) => c.cni.name === 'none')) {
    errors.push(
      at(
        reference,
        reference.cni.line,
        `cluster.network.cni.name is none and ${SETTINGS_FILE} installs no CNI: no node could ever turn Ready`,
        `add a cni: section to ${settingsPath} (the cilium example in talos/bootstrap.yaml, docs/settings.md), or set cluster.network.cni.name: flannel and regenerate the configs`,
      ),
    )
  }
  if (!cni) return { errors, skipped }

  if (!isCilium(cni)) {
    skipped.push(
      `chart ${cni.chart} is not cilium: checked the CNI name only; kube-proxy (cluster.proxy.disabled), k8sServiceHost/k8sServicePort and KubePrism against the values were not checked`,
    )
    return { errors, skipped }
  }

  // cilium's values against kube-proxy and KubePrism (the Talos guide "Deploying Cilium CNI")
  const values = cni.values ?? {}
  const valuesPath = cni.values ? ['cni', 'values'] : ['cni']
  const kpr = values.kubeProxyReplacement
  const host = typeof values.k8sServiceHost === 'string' ? values.k8sServiceHost : undefined
  const portRaw = values.k8sServicePort
  const port = typeof portRaw === 'number' || (typeof portRaw === 'string' && /^\d+$/.test(portRaw)) ? Number(portRaw) : undefined
  const prismPort = reference.kubePrism.port
  const kubePrismFix = `set cni.values k8sServiceHost: localhost and k8sServicePort: ${prismPort} (KubePrism) in ${SETTINGS_FILE}`
  const noProxy = controlPlanes.find((c) => c.proxyDisabled.value === true)
  if (noProxy) {
    if (kpr !== true && kpr !== 'true' && kpr !== 'strict') {
      errors.push(
        atSettings(
          kpr === undefined ? valuesPath : ['cni', 'values', 'kubeProxyReplacement'],
          `cni.values.kubeProxyReplacement is ${kpr === undefined ? 'not set' : JSON.stringify(kpr)} but ${basename(noProxy.file)} disables kube-proxy (cluster.proxy.disabled: true): Services would not work`,
          `set kubeProxyReplacement: true under cni.values, or enable kube-proxy (cluster.proxy.disabled: false) and ${REGENERATE}`,
        ),
      )
    }
    if (host === undefined || portRaw === undefined) {
      const missing = [host === undefined ? 'k8sServiceHost' : '', portRaw === undefined ? 'k8sServicePort' : '']
        .filter(Boolean)
        .join(' and ')
      errors.push(
        atSettings(
          valuesPath,
          `cni.values has no ${missing} but ${basename(noProxy.file)} disables kube-proxy (cluster.proxy.disabled: true): cilium could not reach the API server, its agents would never be ready`,
          kubePrismFix,
        ),
      )
    }
  }
  if (portRaw !== undefined && port === undefined) {
    errors.push(
      atSettings(
        ['cni', 'values', 'k8sServicePort'],
        `cni.values.k8sServicePort must be a port number, got ${JSON.stringify(portRaw)}`,
        kubePrismFix,
      ),
    )
  }
  if (host !== undefined && LOCAL_HOSTS.has(host)) {
    // localhost on a Talos node is KubePrism: it must run on every node, on that port
    for (const c of configs.filter((c) => !c.kubePrism.enabled)) {
      errors.push(
        at(
          c,
          c.kubePrism.line,
          `KubePrism is disabled (machine.features.kubePrism.enabled) but cilium reaches the API server through it (cni.values.k8sServiceHost: ${host})`,
          `set machine.features.kubePrism.enabled: true and ${REGENERATE}; or point k8sServiceHost/k8sServicePort at the cluster endpoint`,
        ),
      )
    }
    if (port !== undefined && port !== prismPort && reference.kubePrism.enabled) {
      errors.push(
        atSettings(
          ['cni', 'values', 'k8sServicePort'],
          `cni.values.k8sServicePort is ${port} but KubePrism listens on ${prismPort} (machine.features.kubePrism.port in ${basename(reference.file)})`,
          `set k8sServicePort: ${prismPort}`,
        ),
      )
    }
  } else if (host !== undefined) {
    skipped.push(
      `cni.values.k8sServiceHost is ${host}, not KubePrism (localhost): the KubePrism port was not checked against k8sServicePort`,
    )
  }
  return { errors, skipped }
}

/**
 * Reads the configs of every node of the cluster and checks them against the CNI settings. Parsing
 * a machine config takes a few ms (300 nodes: about 0.5 s): one at a time, letting other work (the
 * `talosctl validate` processes) go on in between.
 */
export async function checkClusterCni(nodes: ClusterNode[], cni: CniSettings | undefined, clusterDir: string): Promise<CniCheckResult> {
  const configs: ConfigNetwork[] = []
  for (const node of nodes) {
    const config = readConfigNetwork(node)
    if (config) configs.push(config)
    await new Promise<void>((resolve) => setImmediate(resolve))
  }
  return checkCniCompat(configs, cni, join(clusterDir, SETTINGS_FILE))
}

const checked = new WeakSet<Run>()

/** The check as a phase runs it: exit 2 on any error, skipped checks as a warning; once per run. */
export async function checkCni(run: Run): Promise<void> {
  if (checked.has(run)) return
  checked.add(run)
  const { errors, skipped } = await checkClusterCni(run.inventory.nodes, run.settings.cni, run.inventory.clusterDir)
  for (const note of skipped) run.warn(`CNI check: ${note}`)
  if (errors.length === 1) throw errors[0]
  if (errors.length > 1) throw new InputErrors(errors)
}
