// upgrade:k8s (issue 31 item 3, docs/day2-design.md 2.7): upgrade Kubernetes with the real
// `talosctl upgrade-k8s` through one healthy control plane. A read-only pre-check first: the versions
// per node and component (the Node's kubelet, the KubeletSpec, each control plane's mirror pods and
// the *Config image behind each, the kube-proxy DaemonSet), and the refusals that touch nothing (a
// stale pod, a path not one minor at a time, TO outside a node's Talos range or beyond the talosctl
// client's path limit, a Kubernetes downgrade, a staged or try config pending on a control plane, an
// API server not Ready). Then the one call, under the product's own deadline and stall watchdog (its
// own waits have none), its lines turned into per-node progress; then every component and Node
// checked at TO. upgrade-k8s's `--dry-run` is never used: it applies a config to every control plane.
// A rerun is a plain rerun: upgrade-k8s skips what is already at TO.
import { isDeepStrictEqual } from 'node:util'
import { InputError, NodeError } from '../core/errors.ts'
import { hintFor, kubectlCommand, setHintKubeServer, setRerunArgs, talosctlCommand, taskCommand } from '../cli/hints.ts'
import { output } from '../cli/output.ts'
import { controlPlanes, kubeNodeName, type ClusterNode } from '../core/model.ts'
import type { NodeOutcome, Phase, StepReporter } from '../engine/phase.ts'
import type { Run } from '../engine/run.ts'
import {
  compareCore,
  kubernetesPath,
  kubernetesSupported,
  parseVersion,
  tagOf,
  TALOS_COMPATIBILITY,
  versionText,
  type Version,
} from '../input/versions.ts'
import { condition } from '../tools/kubectl.ts'
import { PollTimeout, type PollAnswer } from '../wait/poll.ts'
import { bootstrapNode } from './shared/bootstrap-node.ts'
import { apiUrl } from '../state/kubeconfig.ts'
import { acts, perRun } from './shared/per-run.ts'
import { CONTROL_PLANE_COMPONENTS, podWhy } from './shared/health.ts'
import { firstImage, mirrorPods, podImage, versionsStep } from './shared/versions.ts'

/** One control plane component as the node runs it. */
interface ComponentRead {
  /** the mirror pod's image tag (what runs), undefined without a mirror pod */
  pod?: string
  podReady: boolean
  /** why the pod is not Ready */
  podWhy?: string
  /** the pod's `talos.dev/config-version` */
  podConfigVersion?: string
  /** the image tag of its config (APIServerConfig, …: what Talos wants running) */
  config?: string
  configVersion?: string
}

/** What the pre-check read on one node. */
interface NodeRead {
  talos: string
  /** the Node's kubeletVersion */
  kubelet?: string
  nodeReady: boolean
  /** the kubelet service's state when it is not running and healthy (`Waiting: Error running …`) */
  kubeletDown?: string
  /** the KubeletSpec's image tag */
  kubeletSpec?: string
  components: Map<string, ComponentRead>
  /** a control plane whose next boot loads another config (`persistent` ≠ the active one: staged or try) */
  pending: boolean
}

interface K8sPlan {
  byNode: Map<string, NodeRead>
  /** the kube-proxy DaemonSet's image tag, when it exists */
  kubeProxy?: string
  /** the lowest version of all that was read */
  from?: string
  /** the pre-check passed: the steps that change the cluster may run */
  passed?: true
  /** upgrade-k8s's `--endpoint`: the one given, or a control plane's own API server while the endpoint does not answer */
  endpoint?: string
}

const planOf = perRun<K8sPlan>(() => ({ byNode: new Map() }))

/** TO as the tags read compare to: `v1.35.0` */
function targetTag(run: Run): string {
  const to = parseVersion(run.options.k8s?.to ?? '')
  if (!to) throw new Error('unchecked TO') // check() refused it before any step
  return `v${versionText(to)}`
}

/** The rerun as printed in a hint: the same TO, in a fresh shell. */
const rerun = (): string => taskCommand('upgrade:k8s')

/** The kube-proxy DaemonSet's image tag, undefined when there is none (cluster.proxy.disabled). */
async function kubeProxyTag(run: Run, report: StepReporter): Promise<string | undefined> {
  const ds = await report.retry(() => run.kubectl.get('daemonset', 'kube-proxy', 'kube-system'))
  return tagOf(firstImage((ds?.spec as { template?: { spec?: unknown } } | undefined)?.template?.spec))
}

/** Every version the node runs, read from Talos (its version, its typed specs) and Kubernetes (the Node, the mirror pods). */
async function readNode(run: Run, node: ClusterNode, report: StepReporter): Promise<NodeRead> {
  const controlPlane = node.role === 'controlplane'
  // every read at once (each with its own retries): the pre-check waits for the slowest, not their sum
  const [talos, kube, images, service, pods, configs] = await Promise.all([
    report.retry(async () => {
      const answer = (await run.talosctl.versions([node], node)).get(node.address)
      if (!answer || answer.error) throw answer?.error ?? new NodeError('unknown', 'talosctl version printed no Tag for the node', rerun())
      return answer.value
    }),
    report.retry(() => run.kubectl.get('node', kubeNodeName(node))),
    report.retry(() => run.talosctl.kubernetesImages(node)),
    report.retry(() => run.talosctl.serviceStatus(node, 'kubelet')),
    controlPlane ? report.retry(() => mirrorPods(run, node)) : undefined,
    controlPlane ? report.retry(() => run.talosctl.machineConfigs(node)) : undefined,
  ])
  const kubelet = (kube?.status as { nodeInfo?: { kubeletVersion?: string } } | undefined)?.nodeInfo?.kubeletVersion
  const specs = images ?? new Map<string, { image: string; version: string }>()
  // upgrade-k8s's kubelet step starts from the kubelet's Service resource, absent while it is not running
  const kubeletDown =
    service.state === 'Running' && service.health !== 'Fail'
      ? undefined
      : `${service.state}${service.health === 'Fail' ? ', unhealthy' : ''}${service.lastEvent ? `: ${service.lastEvent}` : ''}`
  const components = new Map<string, ComponentRead>()
  let pending = false
  if (controlPlane) {
    for (const component of CONTROL_PLANE_COMPONENTS) {
      const pod = pods?.get(component)
      const spec = specs.get(component)
      const ready = pod !== undefined && condition(pod, 'Ready')?.status === 'True'
      const podTag = tagOf(podImage(pod))
      const configTag = tagOf(spec?.image)
      const podVersion = pod?.metadata.annotations?.['talos.dev/config-version']
      components.set(component, {
        ...(podTag ? { pod: podTag } : {}),
        podReady: ready,
        ...(pod && !ready ? { podWhy: podWhy(pod).why } : {}),
        ...(podVersion ? { podConfigVersion: podVersion } : {}),
        ...(configTag ? { config: configTag } : {}),
        ...(spec ? { configVersion: spec.version } : {}),
      })
    }
    pending = configs?.persistent !== undefined && !isDeepStrictEqual(configs.persistent, configs.active)
  }
  const kubeletSpec = tagOf(specs.get('kubelet')?.image)
  return {
    talos,
    ...(kubelet ? { kubelet } : {}),
    nodeReady: kube !== undefined && condition(kube, 'Ready')?.status === 'True',
    ...(kubeletDown ? { kubeletDown } : {}),
    ...(kubeletSpec ? { kubeletSpec } : {}),
    components,
    pending,
  }
}

/** `kubelet v1.34.1 (spec v1.34.1); kube-apiserver v1.34.1 (config v1.34.1); …` */
function versionsText(read: NodeRead): string {
  const parts = [`Talos ${read.talos}`, `kubelet ${read.kubelet ?? 'no Node'}${read.kubeletSpec ? ` (spec ${read.kubeletSpec})` : ''}`]
  for (const [component, c] of read.components)
    parts.push(
      `${component} ${c.pod ?? 'no mirror pod'}${c.config ? ` (config ${c.config})` : ''}${c.pod && !c.podReady ? ' not Ready' : ''}`,
    )
  return parts.join('; ')
}

/**
 * The API server the run reads through and upgrade-k8s talks to: `--endpoint` when given; else the
 * cluster endpoint when it answers; else (a VIP down) the first control plane whose own API server
 * answers, which upgrade-k8s then gets as `--endpoint` (its kubeconfig names the endpoint). Every
 * kubectl call of the run goes there from then on (the versions, the final check too).
 */
async function chooseApi(run: Run): Promise<string> {
  const plan = planOf(run)
  const given = run.options.k8s?.endpoint
  const use = (server: string): void => {
    plan.endpoint = server
    run.kubectl = run.kubectl.through(server)
    setHintKubeServer(server)
  }
  if (given) {
    use(given)
    return `${given} (--endpoint)`
  }
  if (await run.kubectl.readyz(run.inventory.endpoint).catch(() => false)) return `the endpoint ${run.inventory.endpoint}`
  const first = bootstrapNode(run)
  for (const cp of [first, ...controlPlanes(run.inventory).filter((n) => n !== first)]) {
    const server = apiUrl(cp.address)
    if (!(await run.kubectl.readyz(server).catch(() => false))) continue
    use(server)
    const line = `the endpoint ${run.inventory.endpoint} does not answer: reading through ${cp.name}'s own API server, and upgrade-k8s gets --endpoint ${server}`
    output.info(line)
    return line
  }
  throw new NodeError(
    'unreachable',
    `neither the endpoint ${run.inventory.endpoint} nor any control plane's own API server answers /readyz: nothing was changed`,
    `bring a control plane's API server back (\`${talosctlCommand(first, 'get staticpodstatus')}\`, \`${talosctlCommand(first, 'service etcd')}\`), then run: ${rerun()}`,
  )
}

async function precheckNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  report.progress('reading its Talos and Kubernetes versions')
  const read = await readNode(run, node, report)
  planOf(run).byNode.set(node.name, read)
  return { status: 'ok', detail: versionsText(read) }
}

/** Every Kubernetes version the pre-check read (each tag that parses). */
function allVersions(plan: K8sPlan): Version[] {
  const tags: Array<string | undefined> = [plan.kubeProxy]
  for (const read of plan.byNode.values()) {
    tags.push(read.kubelet, read.kubeletSpec)
    for (const c of read.components.values()) tags.push(c.pod, c.config)
  }
  return tags.flatMap((t) => {
    const v = t ? parseVersion(t) : undefined
    return v ? [v] : []
  })
}

/** The Talos minors whose range holds Kubernetes `to` (the table of lib/input/versions.ts). */
function talosFor(to: Version): string[] {
  return TALOS_COMPATIBILITY.filter((row) => kubernetesSupported(to, parseVersion(`${row.minor}.0`) as Version) === undefined).map(
    (row) => row.minor,
  )
}

/** `TO=v1.34.x`, then `TO=v1.35.x`: the minors between `from` and `to`, one at a time. */
function stepsBetween(from: Version, to: Version): string {
  const steps: string[] = []
  for (let minor = from.minor + 1; minor <= to.minor; minor++) steps.push(`TO=v${to.major}.${minor}.x`)
  return steps.join(', then ')
}

/** The client's version as the path tables know it; undefined for a talosctl that prints none. */
async function clientVersion(run: Run): Promise<Version | undefined> {
  return parseVersion(await run.talosctl.clientVersion())
}

/**
 * The pre-check's verdict: the table of versions (printed, DRY_RUN too) and every refusal, each with
 * its fix. Refused: nothing is changed and the upgrade does not start.
 */
async function decide(run: Run, report: StepReporter): Promise<string> {
  const plan = planOf(run)
  const to = parseVersion(targetTag(run)) as Version
  const proxyTag = await kubeProxyTag(run, report)
  if (proxyTag) plan.kubeProxy = proxyTag
  const versions = allVersions(plan)
  const lowest = versions.reduce<Version | undefined>((low, v) => (!low || compareCore(v, low) < 0 ? v : low), undefined)
  const highest = versions.reduce<Version | undefined>((high, v) => (!high || compareCore(v, high) > 0 ? v : high), undefined)
  if (lowest) plan.from = `v${versionText(lowest)}`

  const lines = [`PLAN (upgrade:k8s to ${targetTag(run)}${plan.from ? `, from ${plan.from}: the lowest version read` : ''})`]
  for (const node of run.inventory.nodes) {
    const read = plan.byNode.get(node.name)
    if (read) lines.push(`${node.name} (${node.address}, ${node.role}): ${versionsText(read)}`)
  }
  lines.push(`kube-proxy DaemonSet: ${plan.kubeProxy ?? 'none'}`)
  output.info(lines.join('\n'))

  const skew: string[] = []
  const unfit: string[] = []
  const fixes = new Set<string>()
  for (const node of run.inventory.nodes)
    if (!plan.byNode.has(node.name)) unfit.push(`${node.name}: its versions could not be read (see its failure above)`)
  // a kubelet not running: upgrade-k8s would patch the control planes, then fail at that node's kubelet
  // (pkg/cluster/kubernetes/kubelet.go: "unexpected event type: Destroyed"), a cluster left half done
  for (const node of run.inventory.nodes) {
    const down = plan.byNode.get(node.name)?.kubeletDown
    if (!down) continue
    unfit.push(`${node.name}: its kubelet is not running and healthy (${down})`)
    fixes.add(
      `bring the kubelet on ${node.name} back (\`${talosctlCommand(node, 'service kubelet')}\`, \`${talosctlCommand(node, 'logs kubelet')}\`)`,
    )
  }
  // a stale pod: the mirror pod runs another image than its config names (a change not settled yet)
  for (const node of controlPlanes(run.inventory)) {
    const read = plan.byNode.get(node.name)
    if (!read) continue
    for (const [component, c] of read.components) {
      const pod = `${component}-${kubeNodeName(node)}`
      if (c.pod === undefined) unfit.push(`${pod}: no mirror pod`)
      else if (c.config !== undefined && c.pod !== c.config) {
        unfit.push(`${pod} runs ${c.pod}, its config says ${c.config}`)
        fixes.add(
          `wait until ${pod} runs its config's image (\`${kubectlCommand(`-n kube-system get pod ${pod}`)}\`, \`${talosctlCommand(node, 'get staticpodstatus')}\`)`,
        )
      }
      if (component === 'kube-apiserver' && c.pod !== undefined && !c.podReady) {
        unfit.push(`${pod} is not Ready (${c.podWhy ?? 'not Ready'})`)
        fixes.add(
          `bring ${pod} back to Ready (\`${talosctlCommand(node, 'get staticpodstatus')}\`, \`${talosctlCommand(node, `logs -k kube-system/${pod}`)}\`)`,
        )
      }
    }
    if (read.pending) {
      unfit.push(
        `${node.name} has a staged or try config pending (its next boot loads another config; upgrade-k8s's apply would overwrite it)`,
      )
      fixes.add(
        `let ${node.name} take its pending config first (reboot it through ${taskCommand('cluster:apply', { NODES: node.name })}, or apply the active one again)`,
      )
    }
  }
  if (lowest && compareCore(to, lowest) !== 0) {
    const client = await clientVersion(run)
    const path = client ? kubernetesPath(lowest, to, client) : undefined
    if (!client) skew.push('talosctl prints no version this tool can read, so its Kubernetes path limit is unknown')
    else if (path && /talosctl v\S+ upgrades Kubernetes to/.test(path.text)) {
      skew.push(path.text)
      fixes.add('use talosctl v1.13 or newer (TALOSCTL=<path> or on PATH)')
    } else if (path && to.minor > lowest.minor + 1 && to.major === lowest.major) {
      skew.push(`${path.text}: Kubernetes goes one minor at a time: ${stepsBetween(lowest, to)}`)
      fixes.add(`upgrade one minor at a time: ${stepsBetween(lowest, to)}`)
    } else if (path) skew.push(path.text)
  }
  if (highest && compareCore(to, highest) < 0) {
    skew.push(`v${versionText(highest)} already runs: Kubernetes is never downgraded (TO ${targetTag(run)} is older)`)
    fixes.add(`pick TO at v${versionText(highest)} or newer`)
  }
  for (const node of run.inventory.nodes) {
    const read = plan.byNode.get(node.name)
    const talos = read ? parseVersion(read.talos) : undefined
    const refused = talos ? kubernetesSupported(to, talos) : undefined
    if (!refused) continue
    skew.push(`${node.name}: ${refused.text}`)
    const minors = talosFor(to).filter((m) => talos && compareCore(parseVersion(`${m}.0`) as Version, talos) > 0)
    fixes.add(
      minors.length > 0
        ? `upgrade Talos first (Talos ${minors.join(' or ')} runs Kubernetes ${versionText(to)}): ${taskCommand('upgrade:talos', { TALOS_VERSION: `v${minors[0] ?? ''}.x` })}`
        : `pick a TO inside the Talos range of every node`,
    )
  }
  if (skew.length > 0 || unfit.length > 0) {
    throw new NodeError(
      skew.length > 0 ? 'version-skew' : 'k8s-upgrade',
      `the upgrade is refused, nothing was changed: ${[...skew, ...unfit].join('; ')}`,
      `${[...fixes].join('; ') || 'fix what the message names'}, then run: ${rerun()}`,
    )
  }
  plan.passed = true
  const at = [...plan.byNode.values()].every(
    (r) => r.kubelet === targetTag(run) && [...r.components.values()].every((c) => c.pod === targetTag(run)),
  )
  return `${at ? `every node and component already runs ${targetTag(run)}` : `${plan.from ?? 'the cluster'} -> ${targetTag(run)}`}${run.options.planOnly ? ' (DRY_RUN: nothing changed)' : ''}`
}

/** upgrade-k8s's cluster-wide lines shown as they are (docs/day2-design.md 1.6) */
const CLUSTER_LINE =
  /^(automatically detected the lowest Kubernetes version \S+|discovered (?:controlplane|worker) nodes \[.*\]|checking for removed Kubernetes .*|updating manifests|waiting for all manifests to be applied)$/

/**
 * upgrade-k8s's lines (docs/day2-design.md 1.6) as per-node progress: `cp-2: kube-apiserver
 * v1.34.1 -> 1.35.0: waiting for kube-apiserver pod update`. Only the lines it knows go out: the
 * manifest diffs upgrade-k8s prints carry secrets (the bootstrap token). Keeps the last component and
 * node seen, for a failure's message.
 */
export class K8sProgress {
  component?: string
  node?: string
  private change?: string

  private readonly nameOf: (address: string) => string
  constructor(nameOf: (address: string) => string) {
    this.nameOf = nameOf
  }

  /** the progress line for `line`, or undefined for a line that is not shown */
  line(raw: string): string | undefined {
    const line = raw.trim()
    const updating = /^updating "?([\w-]+)"? to version "([^"]+)"$/.exec(line)
    if (updating) {
      this.component = updating[1]
      this.change = `-> ${updating[2]}`
      this.node = undefined
      return `${this.component} ${this.change}`
    }
    if (CLUSTER_LINE.test(line)) {
      if (/manifests/.test(line)) [this.component, this.node] = ['manifests', undefined]
      return line
    }
    const manifest = /^> processing manifest (\S+)$/.exec(line)
    if (manifest) return `manifests: ${manifest[1]}`
    if (/^< (?:applied successfully|no changes)$/.test(line)) return `manifests: ${line.slice(2)}`
    const change = /^> update ([\w-]+): (\S+) -> (\S+)$/.exec(line)
    if (change) {
      this.change = `${change[2]} -> ${change[3]}`
      return undefined
    }
    const about = /^[<>] "([^"]+)": (.*)$/.exec(line)
    if (!about?.[1] || about[2] === undefined) return undefined
    this.node = this.nameOf(about[1])
    const what = about[2].replace(/^(kube-[\w-]+): /, '')
    return `${this.node}: ${this.component ?? 'pre-check'}${this.change && this.component ? ` ${this.change}` : ''}: ${what}`
  }

  /** the last component and node seen, for a failure's message */
  where(): string {
    return this.component ? `${this.component}${this.node ? ` on ${this.node}` : ''}` : 'before its first component'
  }
}

/** The control plane the call goes through: the bootstrap node when its API server is Ready, else another. */
function viaNode(run: Run): ClusterNode {
  const plan = planOf(run)
  const ready = (cp: ClusterNode): boolean => plan.byNode.get(cp.name)?.components.get('kube-apiserver')?.podReady === true
  const first = bootstrapNode(run)
  return ready(first) ? first : (controlPlanes(run.inventory).find(ready) ?? first)
}

async function upgrade(run: Run, report: StepReporter): Promise<string> {
  const via = viaNode(run)
  const endpoint = planOf(run).endpoint
  const progress = new K8sProgress((address) => run.inventory.nodes.find((n) => n.address === address)?.name ?? address)
  const to = versionText(parseVersion(targetTag(run)) as Version)
  report.progress(`talosctl upgrade-k8s --to ${to} through ${via.name}${endpoint ? ` (--endpoint ${endpoint})` : ''}`)
  try {
    await run.talosctl.upgradeK8s(
      via,
      to,
      endpoint,
      (line) => {
        const text = progress.line(line)
        if (text) report.progress(text)
      },
      { timeoutMs: run.settings.k8sUpgradeTimeoutMs, stallTimeoutMs: run.settings.stallTimeoutMs },
    )
  } catch (err) {
    if (!(err instanceof NodeError)) throw err
    // the node it stopped at: its kubelet and static pods are where the hint looks
    const at = run.inventory.nodes.find((n) => n.name === progress.node) ?? via
    const hint =
      err.kind === 'version-skew'
        ? `nothing was changed: pick a TO the path and every node's Talos allow, then run: ${rerun()}`
        : hintFor('k8s-upgrade', at)
    // upgrade-k8s's kubelet step starts from the kubelet's Service resource, which exists only while it runs
    // (pkg/cluster/kubernetes/kubelet.go: "unexpected event type: Destroyed", "kubelet is not healthy")
    const kubeletDown = /unexpected event type: Destroyed|kubelet is not healthy/.test(err.message)
      ? `: the kubelet on ${at.name} is not running and healthy (\`${talosctlCommand(at, 'service kubelet')}\`)`
      : ''
    throw new NodeError(err.kind, `${err.message} (at ${progress.where()})${kubeletDown}`, hint)
  }
  return `talosctl upgrade-k8s --to ${to} through ${via.name}${endpoint ? ` with --endpoint ${endpoint}` : ''}: done`
}

/** Node and components at TO and Ready, else what is not yet. */
async function atTarget(run: Run, node: ClusterNode): Promise<PollAnswer<NodeRead>> {
  const want = targetTag(run)
  const waiting: string[] = []
  // read at once: done only when each read shows TO (a pod at TO also carries its config's version)
  const [kube, images, pods] = await Promise.all([
    run.kubectl.get('node', kubeNodeName(node)),
    run.talosctl.kubernetesImages(node),
    node.role === 'controlplane' ? mirrorPods(run, node) : undefined,
  ])
  const kubelet = (kube?.status as { nodeInfo?: { kubeletVersion?: string } } | undefined)?.nodeInfo?.kubeletVersion
  if (kubelet !== want) waiting.push(`kubelet ${kubelet ?? 'no Node'}`)
  else if (!kube || condition(kube, 'Ready')?.status !== 'True') waiting.push('Node not Ready')
  const specs = images ?? new Map<string, { image: string; version: string }>()
  const spec = tagOf(specs.get('kubelet')?.image)
  if (spec !== want) waiting.push(`KubeletSpec ${spec ?? 'none'}`)
  const components = new Map<string, ComponentRead>()
  if (pods)
    for (const component of CONTROL_PLANE_COMPONENTS) {
      const pod = pods.get(component)
      const tag = tagOf(podImage(pod))
      const config = specs.get(component)
      const ready = pod !== undefined && condition(pod, 'Ready')?.status === 'True'
      const version = pod?.metadata.annotations?.['talos.dev/config-version']
      components.set(component, {
        ...(tag ? { pod: tag } : {}),
        podReady: ready,
        ...(tagOf(config?.image) ? { config: tagOf(config?.image) } : {}),
      })
      if (tagOf(config?.image) !== want) waiting.push(`${component} config ${tagOf(config?.image) ?? 'none'}`)
      else if (tag !== want) waiting.push(`${component} pod ${tag ?? 'none'}`)
      else if (config && version !== config.version)
        waiting.push(`${component} pod at config version ${version ?? 'none'}, expected ${config.version}`)
      else if (!ready) waiting.push(`${component} ${pod ? podWhy(pod).why : 'no mirror pod'}`)
    }
  if (waiting.length > 0) return { done: false, state: `not at ${want} yet: ${waiting.join('; ')}` }
  const before = planOf(run).byNode.get(node.name)
  return {
    done: true,
    value: {
      talos: before?.talos ?? '',
      ...(kubelet ? { kubelet } : {}),
      nodeReady: true,
      ...(spec ? { kubeletSpec: spec } : {}),
      components,
      pending: false,
    },
  }
}

async function checkNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const before = planOf(run).byNode.get(node.name)
  let after: NodeRead
  try {
    after = await report.poll(() => atTarget(run, node), run.settings.readyTimeoutMs)
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    throw new NodeError(
      'k8s-upgrade',
      `${err.lastState} (${Math.round(err.waitedMs / 1000)}s after talosctl upgrade-k8s ended)`,
      `see the node (\`${kubectlCommand(`describe node ${kubeNodeName(node)}`)}\`, \`${talosctlCommand(node, 'service kubelet')}\`${node.role === 'controlplane' ? `, \`${talosctlCommand(node, 'get staticpodstatus')}\`` : ''}), fix what the message names; what is at ${targetTag(run)} already is skipped, so run again: ${rerun()}`,
    )
  }
  const change = (from: string | undefined, to: string | undefined): string =>
    from === to ? `${to ?? '?'}` : `${from ?? '?'} -> ${to ?? '?'}`
  const parts = [`kubelet ${change(before?.kubelet, after.kubelet)}`]
  for (const [component, c] of after.components) parts.push(`${component} ${change(before?.components.get(component)?.pod, c.pod)}`)
  parts.push(`Talos ${before?.talos ?? '?'}`)
  return { status: 'ok', detail: `at ${targetTag(run)}, Ready: ${parts.join('; ')}` }
}

/** kube-proxy at TO when it runs, and the reminder: the generated configs must now carry TO. */
async function finish(run: Run, report: StepReporter): Promise<string> {
  const want = targetTag(run)
  const notes: string[] = []
  if (planOf(run).kubeProxy !== undefined) {
    const tag = await kubeProxyTag(run, report)
    if (tag !== want)
      throw new NodeError(
        'k8s-upgrade',
        `the kube-proxy DaemonSet runs ${tag ?? 'no image'}, not ${want}, after talosctl upgrade-k8s`,
        `see it (\`${kubectlCommand('-n kube-system get daemonset kube-proxy -o wide')}\`), then run again: ${rerun()}`,
      )
    notes.push(`kube-proxy ${want}`)
  }
  const line = `the generated configs must now carry kubernetesVersion ${want} (talconfig.yaml / topf.yaml: ${run.inventory.source}), or the next cluster:apply reverts it`
  output.info(line)
  return [...notes, line].join('; ')
}

/** A step that changes the cluster or checks the change: only once the pre-check passed, never in DRY_RUN. */
const afterPrecheck = (run: Run): true | string | { skip: string } =>
  !acts(run) ? { skip: 'DRY_RUN: nothing changed' } : planOf(run).passed ? true : 'the pre-check did not pass: nothing was changed'

export const upgradeK8s: Phase = {
  name: 'upgrade-k8s',
  title: 'Upgrade Kubernetes (talosctl upgrade-k8s)',
  check: (run) => {
    const to = run.options.k8s?.to
    if (!to) throw new InputError('upgrade:k8s needs a target: TO (the Kubernetes version, like v1.35.0)', { fix: 'write TO=v1.35.0' })
    if (!parseVersion(to) || !/^v?\d+\.\d+\.\d+$/.test(to.trim()))
      throw new InputError(`TO ${JSON.stringify(to)} is not a Kubernetes version like v1.35.0`, {
        fix: 'write TO=v1.35.0 (major.minor.patch)',
      })
    if (run.nodes.length !== run.inventory.nodes.length)
      throw new InputError(
        'upgrade:k8s upgrades every node of the cluster (talosctl upgrade-k8s has no node selection): NODES is not taken',
        {
          fix: 'leave NODES unset',
        },
      )
    // every hint naming upgrade:k8s repeats this run's target and the endpoint it was given
    const endpoint = run.options.k8s?.endpoint
    setRerunArgs('upgrade:k8s', { TO: to }, endpoint ? [`--endpoint=${endpoint}`] : [])
    return Promise.resolve()
  },
  steps: () => [
    {
      kind: 'cluster',
      name: 'api',
      title: 'The Kubernetes API: the endpoint, else a control plane’s own',
      blocks: () => true,
      run: chooseApi,
    },
    {
      kind: 'node',
      title: 'Versions per node and component (read only)',
      readOnly: true,
      would: 'would read its Talos and Kubernetes versions',
      run: precheckNode,
    },
    {
      kind: 'cluster',
      name: 'pre-check',
      title: 'The pre-check: the path, every node’s Talos range, the control planes fit',
      blocks: () => true,
      run: decide,
    },
    {
      kind: 'cluster',
      name: 'upgrade-k8s',
      title: 'talosctl upgrade-k8s through one control plane',
      blocks: () => true,
      ready: afterPrecheck,
      run: upgrade,
    },
    {
      kind: 'node',
      title: 'Every component and Node at TO',
      readOnly: true,
      would: 'would check its kubelet (and control plane components) at TO',
      applies: (_node, run) => acts(run) && planOf(run).passed === true,
      run: checkNode,
    },
    {
      kind: 'cluster',
      name: 'configs',
      title: 'kube-proxy at TO; the generated configs must carry TO',
      ready: afterPrecheck,
      run: finish,
    },
    versionsStep(),
  ],
}
