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
import { parseAllDocuments } from 'yaml'
import { MachineConfig } from './machine-config.ts'
import { InputError, InputErrors } from '../core/errors.ts'
import type { ClusterNode } from '../core/model.ts'
import type { Run } from '../engine/run.ts'
import { SETTINGS_FILE, type CniSettings } from './settings.ts'
import { YamlFile } from './yaml-file.ts'

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
  /** cluster.coreDNS.disabled: true (Talos then deploys no CoreDNS), with its line */
  coreDnsDisabled: { value: boolean; line: number | undefined }
  /** what the config's own manifests install (a control plane's: Talos applies them) */
  installs: AddonInstaller[]
}

/** Something that installs a cluster add-on the nodes need: which one, and where it is said. */
export interface AddonInstaller {
  addon: 'cni' | 'coredns'
  /** e.g. `cluster.inlineManifests "cilium" in <file>` */
  source: string
}

const CNI_NAMES = /cilium|calico|tigera|flannel|canal|kube-router|antrea|weave/i

/**
 * What a manifest installs. A CNI: a DaemonSet whose pods mount the host's /etc/cni/net.d, where a
 * CNI writes the configuration the kubelet waits for (NetworkReady) - cilium, calico and flannel all
 * do. CoreDNS: the kube-dns Service or a coredns Deployment, what Talos's own CoreDNS manifest holds
 * (machined k8stemplates/core_dns.go).
 */
export function manifestInstalls(text: string): Array<AddonInstaller['addon']> {
  const found = new Set<AddonInstaller['addon']>()
  for (const doc of parseAllDocuments(text)) {
    const o = doc.errors.length === 0 ? (doc.toJS() as Record<string, unknown> | null) : null
    if (!o || typeof o !== 'object') continue
    const name = (o.metadata as { name?: unknown } | undefined)?.name
    const volumes = (o.spec as { template?: { spec?: { volumes?: Array<{ hostPath?: { path?: unknown } }> } } } | undefined)?.template?.spec
      ?.volumes
    if (o.kind === 'DaemonSet' && volumes?.some((v) => String(v.hostPath?.path ?? '').replace(/\/$/, '') === '/etc/cni/net.d'))
      found.add('cni')
    if ((o.kind === 'Service' && name === 'kube-dns') || (o.kind === 'Deployment' && name === 'coredns')) found.add('coredns')
  }
  return [...found]
}

/** The add-ons one control plane's config installs: its inline manifests, its extra manifests' URLs, a custom CNI's URLs. */
function configInstalls(doc: { toJS(): unknown }, file: string): AddonInstaller[] {
  const installs: AddonInstaller[] = []
  const cluster = ((doc.toJS() as { cluster?: unknown } | null)?.cluster ?? {}) as {
    inlineManifests?: Array<{ name?: unknown; contents?: unknown }>
    extraManifests?: unknown[]
    network?: { cni?: { name?: unknown; urls?: unknown[] } }
  }
  const where = basename(file)
  for (const m of Array.isArray(cluster.inlineManifests) ? cluster.inlineManifests : []) {
    if (typeof m?.contents !== 'string') continue
    for (const addon of manifestInstalls(m.contents))
      installs.push({ addon, source: `cluster.inlineManifests ${JSON.stringify(m.name ?? '')} in ${where}` })
  }
  // a URL cannot be read offline: its file name says what it is
  for (const url of Array.isArray(cluster.extraManifests) ? cluster.extraManifests : []) {
    const file = typeof url === 'string' ? (url.split('?')[0]?.split('/').pop() ?? '') : ''
    if (CNI_NAMES.test(file)) installs.push({ addon: 'cni', source: `cluster.extraManifests ${String(url)} in ${where}` })
    if (/coredns/i.test(file)) installs.push({ addon: 'coredns', source: `cluster.extraManifests ${String(url)} in ${where}` })
  }
  const urls = cluster.network?.cni?.urls
  if (cluster.network?.cni?.name === 'custom' && Array.isArray(urls) && urls.length > 0)
    installs.push({ addon: 'cni', source: `cluster.network.cni.urls in ${where}` })
  return installs
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
    coreDnsDisabled: { value: value(['cluster', 'coreDNS', 'disabled']) === true, line: lineOf(['cluster', 'coreDNS', 'disabled']) },
    // Talos applies a config's manifests from its control planes only (machined controllers/k8s/extra_manifests.go, inline too)
    installs: cp ? configInstalls(doc, node.configFile) : [],
  }
}

/** Installers found outside the configs and bootstrap.yaml (the bootstrap helmfile), and what was looked at, for the message. */
export interface OtherInstallers {
  installers: AddonInstaller[]
  /** e.g. `no CNI release in bootstrap/helmfile/apps.yaml` */
  looked: string[]
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
export function checkCniCompat(
  configs: ConfigNetwork[],
  cni: CniSettings | undefined,
  settingsPath: string,
  others?: OtherInstallers,
): CniCheckResult {
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

  // what installs the CNI and CoreDNS besides Talos itself: the configs' own manifests, and what the caller adds (the bootstrap helmfile's releases)
  const installed = [...configs.flatMap((c) => c.installs), ...(others?.installers ?? [])]
  const extraSources = others?.looked ?? []
  // a CNI from the settings and a CNI from Talos: both would run
  if (cni) {
    for (const i of installed.filter((i) => i.addon === 'cni' && i.source.startsWith('cluster.')))
      errors.push(
        atSettings(
          ['cni'],
          `${SETTINGS_FILE} installs ${cni.chart} and the configs install a CNI too (${i.source}): two CNIs on every node`,
          `remove cni: from ${SETTINGS_FILE}, or the CNI from the configs and ${REGENERATE}`,
        ),
      )
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
  } else if (controlPlanes.length > 0 && controlPlanes.every((c) => c.cni.name === 'none') && !installed.some((i) => i.addon === 'cni')) {
    errors.push(
      at(
        reference,
        reference.cni.line,
        `cluster.network.cni.name is none and nothing installs a CNI (no cni: in ${SETTINGS_FILE}${extraSources.length ? `, ${extraSources.join(', ')}` : ''}, and no CNI in the configs' inlineManifests, extraManifests or cni.urls): no node could ever turn Ready`,
        `add a cni: section to ${settingsPath} (the cilium example in talos/bootstrap.yaml, docs/settings.md), install one from the configs (cluster.inlineManifests), or set cluster.network.cni.name: flannel and regenerate the configs`,
      ),
    )
  }
  // Talos deploys CoreDNS unless a control plane's config disables it (machined controllers/k8s/control_plane.go, CoreDNSEnabled)
  const noCoreDns = controlPlanes.find((c) => c.coreDnsDisabled.value)
  if (noCoreDns && !installed.some((i) => i.addon === 'coredns')) {
    errors.push(
      at(
        noCoreDns,
        noCoreDns.coreDnsDisabled.line,
        `cluster.coreDNS.disabled is true and nothing installs CoreDNS (${extraSources.length ? `${extraSources.join(', ')}, ` : ''}no kube-dns Service or coredns Deployment in the configs' inlineManifests or extraManifests): no pod could resolve a name, Flux's included`,
        `remove cluster.coreDNS.disabled (Talos then deploys CoreDNS) and ${REGENERATE}, or install CoreDNS from the configs (cluster.inlineManifests) or from the repository's bootstrap helmfile (a coredns release: docs/helmfile.md)`,
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
export async function checkClusterCni(
  nodes: ClusterNode[],
  cni: CniSettings | undefined,
  clusterDir: string,
  others?: OtherInstallers,
): Promise<CniCheckResult> {
  const configs: ConfigNetwork[] = []
  for (const node of nodes) {
    const config = readConfigNetwork(node)
    if (config) configs.push(config)
    await new Promise<void>((resolve) => setImmediate(resolve))
  }
  return checkCniCompat(configs, cni, join(clusterDir, SETTINGS_FILE), others)
}

const checked = new WeakSet<Run>()

/**
 * The check as a phase runs it: exit 2 on any error, skipped checks as a warning; once per run.
 * `others`: what installs the CNI or CoreDNS besides bootstrap.yaml and the configs (the bootstrap helmfile's releases).
 */
export async function checkCni(run: Run, others?: OtherInstallers): Promise<void> {
  if (checked.has(run)) return
  checked.add(run)
  const { errors, skipped } = await checkClusterCni(run.inventory.nodes, run.settings.cni, run.inventory.clusterDir, others)
  for (const note of skipped) run.warn(`CNI check: ${note}`)
  if (errors.length === 1) throw errors[0]
  if (errors.length > 1) throw new InputErrors(errors)
}
