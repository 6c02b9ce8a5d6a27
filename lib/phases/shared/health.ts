// The checks of `talosctl health` (siderolabs/talos pkg/cluster/check/default.go, etcd.go,
// kubernetes.go, diagnostics.go, nodes.go), in its order, plus what the product adds (the Nodes at
// the inventory's addresses). Each check reads through the tool wrappers (batched: one talosctl
// process per read through a control plane, one kubectl list) and answers per node. wait-ready runs
// each as its own step until it passes; bootstrap:status shows each once.
import { NodeError, type ErrorKind } from '../../core/errors.ts'
import { hintFor, hintForCordoned, hintForStaticPod, kubectlCommand, talosctlCommand, taskCommand } from '../../cli/hints.ts'
import { kubeNodeName, type ClusterNode } from '../../core/model.ts'
import { condition, type KubeObject, type Kubectl } from '../../tools/kubectl.ts'
import type { EtcdMember, MachineStatus, NodeAnswer, ServiceStatus, Talosctl } from '../../tools/talosctl.ts'
import { SharedReading } from '../../wait/shared-reading.ts'
import { isMemberOf } from './etcd-members.ts'

/** Talos's control plane static pods (machined controllers/k8s/control_plane_static_pod.go). */
export const CONTROL_PLANE_COMPONENTS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const

/** how long a prefetched reading may serve the first check that asks for it */
const PREFETCH_FRESH_MS = 5_000

/** One node's result in a check: ok, or what is wrong with it. */
export interface NodeCheck {
  node: string
  ok: boolean
  text: string
}

/** A failure a check found: the component, the node, its own reason and a hint that runs. */
export interface CheckFailure {
  node?: string
  kind: ErrorKind
  message: string
  hint: string
  /** waiting cannot clear it (an image reference not found, a container that cannot be created) */
  permanent?: boolean
}

export interface CheckResult {
  results: NodeCheck[]
  failures: CheckFailure[]
  /** the check does not apply here (why) */
  skip?: string
}

export interface HealthCheck {
  /** the step's name in the report */
  name: string
  /** `talosctl health`'s wording of it, or the product's own */
  title: string
  run: (h: HealthReads) => Promise<CheckResult>
}

/** What the checks need: the tools, the inventory's nodes, a control plane to read through. */
export interface HealthContext {
  talosctl: Talosctl
  kubectl: Kubectl
  /** the nodes checked one by one (a run's selection) */
  nodes: ClusterNode[]
  /** the inventory's control planes: etcd and the control plane are checked whole whatever the selection */
  controlPlanes: ClusterNode[]
  /** the Nodes checked: every one in the cluster, or (a selection) only the selected nodes' */
  allNodes: boolean
  /** the nodes that failed in an earlier phase of this run (named with their own cause: not checked again) */
  failedBefore?: { has(name: string): boolean }
  /** a control plane that answers (the bootstrap node in a run) */
  via: () => ClusterNode | undefined
  /** how long one reading serves every check that asks (a poll round) */
  maxAgeMs: number
  /** the configs disable Talos's CoreDNS and nothing in the repository installs one */
  coreDnsAbsentByConfig?: boolean
}

/** The readings of one round, shared by every check: each tool read at most once per round. */
export class HealthReads {
  /** the control planes checked: the inventory's, less those that failed in an earlier phase of this run */
  readonly cps: ClusterNode[]
  private readonly readings = new Map<string, SharedReading<unknown>>()
  private readonly prefetched = new Map<string, { at: number; value: Promise<unknown> }>()
  private prefetching = false

  readonly ctx: HealthContext
  constructor(ctx: HealthContext) {
    this.ctx = ctx
    this.cps = ctx.controlPlanes.filter((n) => !ctx.failedBefore?.has(n.name))
  }

  private shared<T>(key: string, read: () => Promise<T>): Promise<T> {
    // a prefetched reading serves its first check when it is recent (a check that waited long reads again)
    const pre = this.prefetched.get(key)
    this.prefetched.delete(key)
    if (pre && performance.now() - pre.at < PREFETCH_FRESH_MS) return pre.value as Promise<T>
    let r = this.readings.get(key)
    if (!r) {
      r = new SharedReading<unknown>(read, this.ctx.maxAgeMs)
      this.readings.set(key, r)
    }
    const value = r.get() as Promise<T>
    if (this.prefetching) this.prefetched.set(key, { at: performance.now(), value })
    return value
  }

  /**
   * Every reading the checks make, started at once (each a batched process or one list): the checks
   * then run one after the other on what answered, instead of one round trip each.
   */
  prefetch(): void {
    const reads: Array<() => Promise<unknown>> = [
      () => this.services(this.cps, 'etcd'),
      () => this.etcdMembers(),
      () => this.machines(),
      () => this.memory(),
      () => this.resources(this.ctx.nodes, 'volumestatus'),
      () => this.resources(this.ctx.nodes, 'platformmetadata'),
      () => this.resources(this.ctx.nodes, 'diagnostics'),
      () => this.services(this.ctx.nodes, 'kubelet'),
      () => this.kubeNodes(),
      () => this.resources(this.cps, 'staticpodstatus'),
      () => this.systemPods(),
      () => this.systemWarnings(),
      () => this.kubeProxy(),
      () => this.coreDnsDeployments(),
    ]
    this.prefetching = true
    try {
      // a failed reading is read again by the check that needs it
      for (const read of reads) read().catch(() => undefined)
    } finally {
      this.prefetching = false
    }
  }

  via(): ClusterNode {
    const via = this.ctx.via() ?? this.cps[0]
    if (!via) throw new NodeError('unknown', 'the inventory has no control plane', taskCommand('bootstrap:preflight'))
    return via
  }

  /** the via node first (read too when not asked for): a batched `get` resolves its type through the first node */
  private ordered(nodes: ClusterNode[]): ClusterNode[] {
    const via = this.via()
    return [via, ...nodes.filter((n) => n.address !== via.address)]
  }

  services(nodes: ClusterNode[], id: string): Promise<Map<string, NodeAnswer<ServiceStatus>>> {
    return this.shared(`service:${id}:${nodes.length}`, () => this.ctx.talosctl.serviceStatuses(nodes, this.via(), id))
  }
  machines(): Promise<Map<string, NodeAnswer<MachineStatus>>> {
    return this.shared('machinestatus', () => this.ctx.talosctl.machineStatuses(this.ordered(this.ctx.nodes), this.via()))
  }
  /** each node's MemTotal (kB) */
  memory(): Promise<Map<string, NodeAnswer<number>>> {
    return this.shared('memory', () => this.ctx.talosctl.memoryTotals(this.ctx.nodes, this.via()))
  }
  etcdMembers(): Promise<Map<string, NodeAnswer<EtcdMember[]>>> {
    return this.shared('etcd-members', () => this.ctx.talosctl.etcdMemberLists(this.cps))
  }
  resources(nodes: ClusterNode[], type: string): Promise<Map<string, NodeAnswer<unknown[]>>> {
    return this.shared(`get:${type}:${nodes.length}`, () => this.ctx.talosctl.resources(this.ordered(nodes), this.via(), type))
  }
  kubeNodes(): Promise<KubeObject[]> {
    return this.shared('nodes', () => this.ctx.kubectl.list('nodes'))
  }
  /** the Nodes the cluster-wide checks look at: all, or the selected nodes' */
  async checkedNodes(): Promise<KubeObject[]> {
    const nodes = await this.kubeNodes()
    return this.ctx.allNodes ? nodes : nodes.filter((k) => this.ctx.nodes.some((n) => kubeNodeName(n) === k.metadata.name))
  }
  systemPods(): Promise<KubeObject[]> {
    return this.shared('kube-system-pods', () => this.ctx.kubectl.list('pods', { namespace: 'kube-system' }))
  }
  /** the Warning events of kube-system (FailedScheduling, Failed pulls, Unhealthy probes), newest last */
  systemWarnings(): Promise<KubeObject[]> {
    return this.shared('kube-system-warnings', () =>
      this.ctx.kubectl.list('events', { namespace: 'kube-system', fieldSelector: 'type=Warning' }).catch(() => []),
    )
  }
  /** the kubelets' serving CSRs (signer kubernetes.io/kubelet-serving: a field the API selects on) */
  servingCsrs(): Promise<KubeObject[]> {
    return this.shared('serving-csrs', () =>
      this.ctx.kubectl.list('certificatesigningrequests', { fieldSelector: 'spec.signerName=kubernetes.io/kubelet-serving' }),
    )
  }
  kubeProxy(): Promise<KubeObject | undefined> {
    return this.shared('kube-proxy', () => this.ctx.kubectl.get('daemonset', 'kube-proxy', 'kube-system'))
  }
  coreDnsDeployments(): Promise<KubeObject[]> {
    return this.shared('coredns', () => this.ctx.kubectl.list('deployments', { namespace: 'kube-system', selector: 'k8s-app=kube-dns' }))
  }
}

// ---- pods: why one is not ready ----

interface ContainerState {
  name?: string
  ready?: boolean
  restartCount?: number
  state?: {
    waiting?: { reason?: string; message?: string }
    running?: Record<string, unknown>
    terminated?: { reason?: string; message?: string; exitCode?: number }
  }
  lastState?: { terminated?: { reason?: string; message?: string; exitCode?: number } }
}

/** waiting reasons no wait clears: an image reference the registry does not have, a container that cannot be created */
const PERMANENT_WAIT = /^(?:CreateContainerError|InvalidImageName|ErrImageNeverPull)$/
const IMAGE_MISSING = /not found|manifest unknown|name unknown|repository does not exist/i

/** the last non-empty line of a (termination) message, bounded */
const lastLine = (text: string | undefined): string =>
  (text ?? '')
    .trim()
    .split('\n')
    .filter((l) => l.trim())
    .pop()
    ?.slice(0, 400) ?? ''

/**
 * Why a pod is not ready, in its own words: the scheduler's (PodScheduled=False, or not bound with
 * no scheduler's word at all), a container's waiting or terminated reason and message (init
 * containers first), the last Warning event about it (a failed probe, a failed pull); `permanent`
 * when waiting cannot clear it.
 */
export function podWhy(pod: KubeObject, warnings: KubeObject[] = []): { why: string; permanent: boolean } {
  const status = (pod.status ?? {}) as { initContainerStatuses?: ContainerState[]; containerStatuses?: ContainerState[] }
  const parts: string[] = [`${pod.status?.phase ?? 'Unknown'}`]
  let permanent = false
  const scheduled = condition(pod, 'PodScheduled')
  if (!pod.spec?.nodeName) {
    if (scheduled?.status === 'False')
      parts.push(`not scheduled: ${scheduled.reason ?? 'Unschedulable'}: ${scheduled.message ?? ''}`.trim())
    else parts.push('not bound to a node and no scheduler has said why (is kube-scheduler running?)')
  }
  const containers: Array<[string, ContainerState]> = [
    ...(status.initContainerStatuses ?? []).map((c): [string, ContainerState] => ['init container', c]),
    ...(status.containerStatuses ?? []).map((c): [string, ContainerState] => ['container', c]),
  ]
  for (const [what, c] of containers) {
    if (c.ready || (what === 'init container' && c.state?.terminated?.exitCode === 0)) continue
    const waiting = c.state?.waiting
    const terminated = c.state?.terminated ?? c.lastState?.terminated
    const bits: string[] = []
    if (waiting?.reason) bits.push(`${waiting.reason}${waiting.message ? `: ${lastLine(waiting.message)}` : ''}`)
    if (terminated?.reason || terminated?.message)
      bits.push(`last exit ${terminated.reason ?? ''}${terminated.message ? `: ${lastLine(terminated.message)}` : ''}`.trim())
    if (c.restartCount) bits.push(`${c.restartCount} restarts`)
    if (bits.length === 0) bits.push(c.state?.running ? 'running, not ready' : 'not started')
    parts.push(`${what} ${c.name ?? '?'} ${bits.join('; ')}`)
    if (waiting?.reason && PERMANENT_WAIT.test(waiting.reason)) permanent = true
    if (waiting?.reason && /ImagePullBackOff|ErrImagePull/.test(waiting.reason) && IMAGE_MISSING.test(waiting.message ?? ''))
      permanent = true
  }
  // its newest Warning event; a FailedScheduling one is stale once the pod is bound
  const when = (e: KubeObject): string => {
    const x = e as { lastTimestamp?: string; eventTime?: string; metadata: { creationTimestamp?: string } }
    return x.lastTimestamp ?? x.eventTime ?? x.metadata.creationTimestamp ?? ''
  }
  const event = warnings
    .filter((e) => (e as { involvedObject?: { name?: string } }).involvedObject?.name === pod.metadata.name)
    .map((e) => e as KubeObject & { reason?: string; message?: string })
    .filter((e) => !(e.reason === 'FailedScheduling' && pod.spec?.nodeName))
    .sort((a, b) => when(a).localeCompare(when(b)))
    .at(-1)
  if (event?.message && !parts.some((p) => p.includes(lastLine(event.message))))
    parts.push(`event ${event.reason ?? ''}: ${lastLine(event.message)}`)
  if (parts.length === 1) {
    const ready = condition(pod, 'Ready')
    parts.push(ready?.message ?? ready?.reason ?? 'not ready')
  }
  return { why: parts.join(', '), permanent }
}

// ---- the checks ----

const ok = (node: string, text = 'ok'): NodeCheck => ({ node, ok: true, text })

/** a failure for each node a check found wrong, made by `make` with its inventory node */
function failuresOf(results: NodeCheck[], nodes: ClusterNode[], make: (r: NodeCheck, node: ClusterNode) => CheckFailure): CheckFailure[] {
  return results.filter((r) => !r.ok).map((r) => make(r, nodes.find((n) => n.name === r.node) as ClusterNode))
}
const bad = (node: string, text: string): NodeCheck => ({ node, ok: false, text })

/** a node's answer in a batched read: its value, or what stands for it in the results */
function answerOf<T>(answers: Map<string, NodeAnswer<T>>, node: ClusterNode): { value?: T; text?: string } {
  const a = answers.get(node.address)
  if (!a) return { text: 'not readable (no answer in the batch)' }
  if (a.error) return { text: `${a.error.kind}: ${a.error.message}` }
  return { value: a.value }
}

function serviceCheck(
  name: string,
  title: string,
  service: string,
  kind: ErrorKind,
  which: (h: HealthReads) => ClusterNode[],
): HealthCheck {
  return {
    name,
    title,
    run: async (h) => {
      const nodes = which(h)
      const answers = await h.services(nodes, service)
      const results = nodes.map((n) => {
        const { value, text } = answerOf(answers, n)
        if (!value) return bad(n.name, text ?? '?')
        const state = `${value.state}, health ${value.health}${value.lastEvent ? ` (${value.lastEvent})` : ''}`
        return value.state === 'Running' && value.health === 'OK' ? ok(n.name, 'Running, healthy') : bad(n.name, state)
      })
      return {
        results,
        failures: failuresOf(results, nodes, (r, node) => ({
          node: r.node,
          kind,
          message: `${service} on ${r.node} is not healthy: ${r.text}`,
          hint: hintFor(kind, node),
        })),
      }
    },
  }
}

const sortedIds = (members: EtcdMember[]): string =>
  members
    .map((m) => m.id)
    .sort()
    .join(',')

export const HEALTH_CHECKS: HealthCheck[] = [
  serviceCheck('etcd-healthy', 'etcd to be healthy', 'etcd', 'etcd', (h) => h.cps),
  {
    name: 'etcd-members-consistent',
    title: 'etcd members to be consistent across nodes',
    run: async (h) => {
      const lists = await h.etcdMembers()
      const first = h.cps.map((cp) => answerOf(lists, cp).value).find((v) => v !== undefined)
      const results = h.cps.map((cp) => {
        const { value, text } = answerOf(lists, cp)
        if (!value) return bad(cp.name, text ?? '?')
        const names = value.map((m) => m.hostname || m.id).join(', ')
        return first && sortedIds(value) === sortedIds(first)
          ? ok(cp.name, `${value.length} members`)
          : bad(cp.name, `its list differs: ${names}`)
      })
      return {
        results,
        failures: failuresOf(results, h.cps, (r, cp) => ({
          node: r.node,
          kind: 'etcd',
          message: `etcd member list on ${r.node} is not the others': ${r.text}`,
          hint: hintFor('etcd', cp),
        })),
      }
    },
  },
  {
    name: 'etcd-members-control-planes',
    title: 'etcd members to be control plane nodes',
    run: async (h) => {
      const lists = await h.etcdMembers()
      const members = h.cps.map((cp) => answerOf(lists, cp).value).find((v) => v !== undefined)
      if (!members) return { results: h.cps.map((cp) => bad(cp.name, 'no member list read')), failures: [] }
      const results = h.cps.map((cp) => {
        const m = members.find((x) => isMemberOf(cp, x))
        if (!m) return bad(cp.name, 'not an etcd member')
        return m.isLearner ? bad(cp.name, `a learner (member ${m.id}), not promoted`) : ok(cp.name, `member ${m.id}`)
      })
      const extra = members.filter((m) => !h.ctx.controlPlanes.some((cp) => isMemberOf(cp, m)))
      const failures: CheckFailure[] = results
        .filter((r) => !r.ok)
        .map((r) => ({
          node: r.node,
          kind: 'etcd',
          message: `${r.node}: ${r.text}`,
          hint: hintFor('etcd-join', h.cps.find((c) => c.name === r.node) as ClusterNode),
        }))
      for (const m of extra)
        failures.push({
          kind: 'etcd',
          message: `etcd member ${m.id} (${m.hostname || '?'} at ${m.peerUrls.join(', ')}) is no control plane of the inventory`,
          hint: `if it is a machine that left, remove it: \`${talosctlCommand(h.via(), `etcd remove-member ${m.id}`)}\`, then run: ${taskCommand('bootstrap:wait-ready')}`,
        })
      return { results, failures }
    },
  },
  {
    name: 'apid-ready',
    title: 'apid to be ready',
    run: async (h) => {
      const answers = await h.machines()
      const results = h.ctx.nodes.map((n) => {
        const { value, text } = answerOf(answers, n)
        return value ? ok(n.name, 'answers') : bad(n.name, text ?? '?')
      })
      return {
        results,
        failures: failuresOf(results, h.ctx.nodes, (r, node) => ({
          node: r.node,
          kind: 'unreachable',
          message: `apid on ${r.node} does not answer: ${r.text}`,
          hint: hintFor('unreachable', node),
        })),
      }
    },
  },
  minimumCheck(
    'memory-sizes',
    'all nodes memory sizes',
    (h) => h.memory(),
    (kB, node) => ({ what: '', mib: Math.floor(kB / 1024), minimum: MEMORY_MINIMUM_MIB[node.role] }),
    (node, m) => ({
      message: `${node.name} (${node.address}) does not meet memory requirements: expected at least ${m.minimum} MiB for a ${roleText(node)}, actual ${m.mib} MiB (MemTotal)`,
      hint: memoryHint(node),
    }),
  ),
  minimumCheck(
    'disk-sizes',
    'all nodes disk sizes',
    (h) => h.resources(h.ctx.nodes, 'volumestatus'),
    (volumes) => {
      const ephemeral = ephemeralOf(volumes)
      if (!ephemeral) return 'no EPHEMERAL volume yet'
      return {
        what: `EPHEMERAL ${ephemeral.location} `,
        mib: Math.floor(ephemeral.size / MiB),
        minimum: EPHEMERAL_MINIMUM_MIB,
        location: ephemeral.location,
        on: ephemeral.parentLocation,
      }
    },
    (node, m) => ({
      message: `the ephemeral partition ${m.location} of ${node.name} (${node.address}) is too small: expected at least ${m.minimum} MiB, actual ${m.mib} MiB (on ${m.on || 'its system disk'})`,
      hint: diskHint(node, m.on ?? ''),
    }),
  ),
  {
    name: 'diagnostics',
    title: 'no diagnostics',
    run: async (h) => {
      const answers = await h.resources(h.ctx.nodes, 'diagnostics')
      const results = h.ctx.nodes.map((n) => {
        const { value, text } = answerOf(answers, n)
        if (!value) return bad(n.name, text ?? '?')
        const found = value.map((d) => {
          const doc = d as { metadata?: { id?: string }; spec?: { message?: string; details?: string[] } }
          return `${doc.metadata?.id ?? '?'}: ${doc.spec?.message ?? ''}${doc.spec?.details?.length ? ` (${doc.spec.details.join('; ')})` : ''}`
        })
        return found.length ? bad(n.name, found.join('; ')) : ok(n.name, 'none')
      })
      // a kubelet-csr diagnostic: the node's pending serving CSRs as the API lists them (the diagnostic's own list otherwise)
      const csrs = results.some((r) => !r.ok && /kubelet-csr/.test(r.text)) ? await h.servingCsrs().catch(() => undefined) : undefined
      return {
        results,
        failures: failuresOf(results, h.ctx.nodes, (r, node) => ({
          node: r.node,
          kind: 'diagnostics',
          message: `Talos diagnostics on ${r.node}: ${r.text}`,
          hint: diagnosticHint(node, r.text, csrs && pendingServingCsrs(csrs, node)),
        })),
      }
    },
  },
  serviceCheck('kubelet-healthy', 'kubelet to be healthy', 'kubelet', 'kubelet', (h) => h.ctx.nodes),
  {
    name: 'boot-sequence',
    title: 'all nodes to finish boot sequence',
    run: async (h) => {
      const answers = await h.machines()
      const results = h.ctx.nodes.map((n) => {
        const { value, text } = answerOf(answers, n)
        if (!value) return bad(n.name, text ?? '?')
        return value.stage === 'running' ? ok(n.name, 'running') : bad(n.name, `stage ${value.stage}`)
      })
      return {
        results,
        failures: failuresOf(results, h.ctx.nodes, (r, node) => ({
          node: r.node,
          kind: 'stuck',
          message: `${r.node} has not finished booting: ${r.text}`,
          hint: hintFor('stuck', node),
        })),
      }
    },
  },
  {
    name: 'nodes-report',
    title: 'all k8s nodes to report',
    run: async (h) => {
      const nodes = await h.kubeNodes()
      const results = h.ctx.nodes.map((n) =>
        nodes.some((k) => k.metadata.name === kubeNodeName(n)) ? ok(n.name, 'registered') : bad(n.name, 'no Node registered'),
      )
      const kcm = results.some((r) => !r.ok) ? await controllerManagerCause(h) : undefined
      return {
        results,
        failures: failuresOf(results, h.ctx.nodes, (r, node) =>
          kcm
            ? { ...kcm, node: r.node, message: `${r.node} registered no Node: ${kcm.message}` }
            : { node: r.node, kind: 'kubelet', message: `${r.node}: no Node registered`, hint: hintFor('kubelet', node) },
        ),
      }
    },
  },
  {
    name: 'static-pods',
    title: 'all control plane static pods to be running',
    run: async (h) => {
      const answers = await h.resources(h.cps, 'staticpodstatus')
      const results: NodeCheck[] = []
      const failures: CheckFailure[] = []
      for (const cp of h.cps) {
        const { value, text } = answerOf(answers, cp)
        if (!value) {
          results.push(bad(cp.name, text ?? '?'))
          continue
        }
        const wrong: string[] = []
        for (const component of CONTROL_PLANE_COMPONENTS) {
          const id = `kube-system/${component}-${kubeNodeName(cp)}`
          const doc = value.find((d) => (d as { metadata?: { id?: string } }).metadata?.id === id) as
            { spec?: KubeObject['status'] & { containerStatuses?: ContainerState[] } } | undefined
          if (!doc) {
            wrong.push(`${component} missing`)
            failures.push({
              node: cp.name,
              kind: 'control-plane',
              message: `${component} on ${cp.name}: no static pod ${id} (the kubelet runs none)`,
              hint: hintForStaticPod(cp, component),
            })
            continue
          }
          const pod: KubeObject = {
            metadata: { name: `${component}-${kubeNodeName(cp)}` },
            spec: { nodeName: kubeNodeName(cp) },
            status: doc.spec ?? {},
          }
          if (doc.spec?.phase === 'Running' && condition(pod, 'Ready')?.status === 'True') continue
          const why = podWhy(pod)
          wrong.push(`${component} ${why.why}`)
          failures.push({
            node: cp.name,
            kind: 'control-plane',
            message: `${component} on ${cp.name} is not running: ${why.why}`,
            hint: hintForStaticPod(cp, component),
            permanent: why.permanent,
          })
        }
        results.push(
          wrong.length ? bad(cp.name, wrong.join('; ')) : ok(cp.name, 'kube-apiserver, kube-controller-manager, kube-scheduler running'),
        )
      }
      return { results, failures }
    },
  },
  {
    name: 'control-plane-components',
    title: 'all control plane components to be ready',
    run: async (h) => {
      const [pods, warnings] = await Promise.all([h.systemPods(), h.systemWarnings()])
      const results: NodeCheck[] = []
      const failures: CheckFailure[] = []
      for (const cp of h.cps) {
        const wrong: string[] = []
        for (const component of CONTROL_PLANE_COMPONENTS) {
          const name = `${component}-${kubeNodeName(cp)}`
          const pod = pods.find((p) => p.metadata.name === name)
          if (!pod) {
            wrong.push(`${component}: no mirror pod ${name}`)
            failures.push({
              node: cp.name,
              kind: 'control-plane',
              message: `${component} on ${cp.name}: no mirror pod kube-system/${name}`,
              hint: hintForStaticPod(cp, component),
            })
          } else if (condition(pod, 'Ready')?.status !== 'True') {
            const why = podWhy(pod, warnings)
            wrong.push(`${component}: ${why.why}`)
            failures.push({
              node: cp.name,
              kind: 'control-plane',
              message: `${component} on ${cp.name} is not Ready: ${why.why}`,
              hint: hintForStaticPod(cp, component),
              permanent: why.permanent,
            })
          }
        }
        results.push(wrong.length ? bad(cp.name, wrong.join('; ')) : ok(cp.name, 'Ready'))
      }
      // one of each per control plane, no more (talosctl's K8sFullControlPlaneAssertion)
      for (const component of CONTROL_PLANE_COMPONENTS) {
        const count = pods.filter(
          (p) => p.metadata.labels?.['k8s-app'] === component && p.metadata.labels['tier'] === 'control-plane',
        ).length
        if (count > h.cps.length)
          failures.push({
            kind: 'control-plane',
            message: `${count} ${component} pods for ${h.cps.length} control planes (a control plane the inventory does not name?)`,
            hint: `see them with \`${kubectlCommand(`-n kube-system get pods -o wide -l k8s-app=${component}`)}\`, then run: ${taskCommand('bootstrap:wait-ready')}`,
          })
      }
      return { results, failures }
    },
  },
  {
    name: 'nodes-ready',
    title: 'all k8s nodes to report ready',
    run: async (h) => {
      const nodes = await h.checkedNodes()
      // every Node, the inventory's or not
      const results = nodes.map((k) => {
        const ready = condition(k, 'Ready')
        return ready?.status === 'True'
          ? ok(k.metadata.name, 'Ready')
          : bad(k.metadata.name, `NotReady: ${ready?.message ?? ready?.reason ?? 'no Ready condition'}`)
      })
      return {
        results,
        failures: results
          .filter((r) => !r.ok)
          .map((r) => ({
            node: inventoryName(h, r.node),
            kind: 'node-not-ready',
            message: `Node ${r.node} is not Ready: ${r.text}`,
            hint: `see why with \`${kubectlCommand(`describe node ${r.node}`)}\`, then run: ${taskCommand('bootstrap:wait-ready')}`,
          })),
      }
    },
  },
  {
    name: 'node-addresses',
    title: 'Nodes at the addresses the inventory names',
    run: async (h) => {
      const nodes = await h.kubeNodes()
      const results = h.ctx.nodes.map((n) => {
        const k = nodes.find((x) => x.metadata.name === kubeNodeName(n))
        if (!k) return bad(n.name, 'no Node registered')
        const internal = ((k.status?.addresses ?? []) as Array<{ type: string; address: string }>)
          .filter((a) => a.type === 'InternalIP')
          .map((a) => a.address)
        const mine = n.addresses ?? [n.address]
        return internal.some((a) => mine.includes(a))
          ? ok(n.name, `InternalIP ${internal.join(', ')}`)
          : bad(n.name, `InternalIP ${internal.join(', ') || 'none'}, not ${n.address}`)
      })
      return {
        results,
        failures: failuresOf(results, h.ctx.nodes, (r, node) => ({
          node: r.node,
          kind: 'node-not-ready',
          message: `Node ${kubeNodeName(node)} registered at another address than the inventory's: ${r.text}`,
          hint: `the kubelet chose another of the node's addresses: set machine.kubelet.nodeIP.validSubnets in ${node.configFile} to a subnet holding ${node.address} (or fix the inventory's address), apply it (${taskCommand('bootstrap:apply', { NODES: node.name }, ['--reapply'])}); check with \`${kubectlCommand(`get node ${kubeNodeName(node)} -o wide`)}\`, then run: ${taskCommand('bootstrap:wait-ready')}`,
        })),
      }
    },
  },
  {
    name: 'kube-proxy',
    title: 'kube-proxy to report ready',
    run: async (h) => {
      const ds = await h.kubeProxy()
      if (!ds) return { results: [], failures: [], skip: 'no kube-proxy DaemonSet (cluster.proxy.disabled)' }
      return podsPerNode(h, 'kube-proxy', (p) => p.metadata.labels?.['k8s-app'] === 'kube-proxy')
    },
  },
  {
    name: 'coredns',
    title: 'coredns to report ready',
    run: async (h) => {
      const deployments = await h.coreDnsDeployments()
      if (deployments.length === 0) {
        if (h.ctx.coreDnsAbsentByConfig)
          return { results: [], failures: [], skip: 'cluster.coreDNS.disabled and nothing installed CoreDNS' }
        return {
          results: [],
          failures: [
            {
              kind: 'addon',
              message: 'no CoreDNS Deployment (k8s-app=kube-dns) in kube-system',
              hint: `see what runs with \`${kubectlCommand('-n kube-system get deployments')}\`, then run: ${taskCommand('bootstrap:wait-ready')}`,
            },
          ],
        }
      }
      const [pods, warnings] = await Promise.all([h.systemPods(), h.systemWarnings()])
      const dns = pods.filter((p) => p.metadata.labels?.['k8s-app'] === 'kube-dns')
      const wanted = deployments.reduce((n, d) => n + Number((d.spec as { replicas?: number } | undefined)?.replicas ?? 1), 0)
      const ready = dns.filter((p) => condition(p, 'Ready')?.status === 'True')
      const results = dns.map((p) =>
        condition(p, 'Ready')?.status === 'True'
          ? ok(p.metadata.name, `Ready on ${p.spec?.nodeName ?? '?'}`)
          : bad(p.metadata.name, podWhy(p, warnings).why),
      )
      if (ready.length >= wanted) return { results, failures: [] }
      const failures: CheckFailure[] = dns
        .filter((p) => condition(p, 'Ready')?.status !== 'True')
        .map((p): CheckFailure => {
          const why = podWhy(p, warnings)
          return {
            node: inventoryName(h, p.spec?.nodeName),
            kind: 'addon',
            message: `CoreDNS ${ready.length}/${wanted} ready: pod ${p.metadata.name}${p.spec?.nodeName ? ` on ${p.spec.nodeName}` : ''} ${why.why}`,
            hint: podHint(p),
            permanent: why.permanent,
          }
        })
      if (failures.length === 0)
        failures.push({
          node: undefined,
          kind: 'addon',
          message: `CoreDNS ${ready.length}/${wanted} ready: ${wanted - dns.length} pods not created`,
          hint: podHint(undefined),
        })
      return { results, failures }
    },
  },
  {
    name: 'nodes-schedulable',
    title: 'all k8s nodes to report schedulable',
    run: async (h) => {
      const nodes = await h.checkedNodes()
      const results = nodes.map((k) => {
        if (k.spec?.['unschedulable'] !== true) return ok(k.metadata.name, 'schedulable')
        const byTalos = k.metadata.annotations?.['talos.dev/cordoned'] !== undefined
        return bad(
          k.metadata.name,
          byTalos
            ? 'cordoned by Talos (talos.dev/cordoned)'
            : `cordoned (spec.unschedulable)${cordonedBy(k)}, not by Talos: Talos will not uncordon it`,
        )
      })
      return {
        results,
        failures: results
          .filter((r) => !r.ok)
          .map((r) => {
            const node = h.ctx.nodes.find((n) => kubeNodeName(n) === r.node)
            const byTalos = r.text.startsWith('cordoned by Talos')
            return {
              node: node?.name,
              kind: 'node-not-ready' as const,
              message: `Node ${r.node} is not schedulable: ${r.text}`,
              hint: node
                ? hintForCordoned({ ...node, kubeName: kubeNodeName(node) }, byTalos).replace(
                    /run: task .*$/,
                    `run: ${taskCommand('bootstrap:wait-ready')}`,
                  )
                : `uncordon it if it should take pods: \`${kubectlCommand(`uncordon ${r.node}`)}\`, then run: ${taskCommand('bootstrap:wait-ready')}`,
            }
          }),
      }
    },
  },
]

const MiB = 1024 * 1024

/**
 * The minimum MemTotal per machine type (siderolabs/talos pkg/minimal/limits.go Memory: 1848 MiB on a
 * control plane, 1 GiB on a worker, each less 150 MiB for the kernel), as `talosctl health` holds them.
 */
const MEMORY_MINIMUM_MIB: Record<ClusterNode['role'], number> = { controlplane: 1848 - 150, worker: 1024 - 150 }

/**
 * The smallest EPHEMERAL (pkg/cluster/check/nodes.go AllNodesDiskSizes): minimal.DiskSize() (6 GiB)
 * less the UKI EFI partition (2101 MiB), STATE (100 MiB), META (1 MiB) and 10 MiB of GPT overhead.
 */
const EPHEMERAL_MINIMUM_MIB = 6 * 1024 - (2101 + 100 + 1 + 10)

const roleText = (node: ClusterNode): string => (node.role === 'controlplane' ? 'control plane' : 'worker')

/** a node's platform (its PlatformMetadata: `container` for Talos in a container, `metal`, a cloud's name) */
function platformOf(docs: unknown[] | undefined): string | undefined {
  return (docs?.[0] as { spec?: { platform?: string } } | undefined)?.spec?.platform
}

/** a node's VolumeStatus EPHEMERAL among its volumes (pkg/machinery/resources/block/volume_status.go) */
function ephemeralOf(volumes: unknown[]): { location: string; parentLocation: string; size: number } | undefined {
  const doc = volumes.find((v) => (v as { metadata?: { id?: string } }).metadata?.id === 'EPHEMERAL') as
    { spec?: { location?: string; parentLocation?: string; size?: number | string } } | undefined
  if (!doc?.spec?.size) return undefined
  return { location: doc.spec.location ?? '?', parentLocation: doc.spec.parentLocation ?? '', size: Number(doc.spec.size) }
}

/** a node short of memory: more RAM (Talos's minimum and recommendation for its type), then wait-ready */
function memoryHint(node: ClusterNode): string {
  const ram = node.role === 'controlplane' ? 'at least 1848 MiB of RAM (4 GiB recommended)' : 'at least 1 GiB of RAM (2 GiB recommended)'
  return `give ${node.name} more memory: a ${roleText(node)} needs ${ram}, and MemTotal is the RAM less what the kernel keeps; add memory to the machine (or its VM) and boot it again, check with \`${talosctlCommand(node, 'memory')}\`, then run: ${taskCommand('bootstrap:wait-ready')}`
}

/** an install disk too small for EPHEMERAL: Talos on a larger disk (a reinstall), then the node again */
function diskHint(node: ClusterNode, disk: string): string {
  return `Talos needs an install disk of at least 6 GiB (EPHEMERAL gets what its own partitions leave${disk ? ` on ${disk}` : ''}): list ${node.name}'s disks (\`${talosctlCommand(node, 'get disks')}\`), set machine.install.disk (or machine.install.diskSelector) in ${node.configFile} to a larger one (or lift a VolumeConfig EPHEMERAL maxSize that limits it), then wipe and reinstall the node: ${taskCommand('bootstrap:node', { NODE: node.name, RESET: 'true' }, ['--yes'])}`
}

/** one node's figure against Talos's minimum for it (MiB); `what` leads its text; a partition's location and its disk */
interface Measured {
  what: string
  mib: number
  minimum: number
  location?: string
  on?: string
}

/**
 * A figure of each node against Talos's minimum for it (`talosctl health`'s memory and disk sizes):
 * a node below it fails at once (no wait adds memory or grows a disk), kind hardware; a figure not
 * there yet (`measure` says why) is waited for; a node in a container is not checked (nodes.go
 * getNonContainerNodes).
 */
function minimumCheck<T>(
  name: string,
  title: string,
  read: (h: HealthReads) => Promise<Map<string, NodeAnswer<T>>>,
  measure: (value: T, node: ClusterNode) => Measured | string,
  tooSmall: (node: ClusterNode, m: Measured) => { message: string; hint: string },
): HealthCheck {
  return {
    name,
    title,
    run: async (h) => {
      const [answers, platforms] = await Promise.all([read(h), h.resources(h.ctx.nodes, 'platformmetadata').catch(() => undefined)])
      const measured = new Map<string, Measured | string>()
      const results = h.ctx.nodes.map((n) => {
        // talosctl health leaves out nodes in a container (their Version's platform mode): so does this
        if (platforms && platformOf(answerOf(platforms, n).value) === 'container') return ok(n.name, 'skipped: a container')
        const { value, text } = answerOf(answers, n)
        if (value === undefined) return bad(n.name, text ?? '?')
        const m = measure(value, n)
        measured.set(n.name, m)
        if (typeof m === 'string') return bad(n.name, m)
        return m.mib >= m.minimum
          ? ok(n.name, `${m.what}${m.mib} MiB (minimum ${m.minimum} MiB)`)
          : bad(n.name, `${m.what}${m.mib} MiB, less than ${m.minimum} MiB`)
      })
      return {
        results,
        failures: failuresOf(results, h.ctx.nodes, (r, node): CheckFailure => {
          const m = measured.get(node.name)
          if (m === undefined)
            return {
              node: r.node,
              kind: 'unreachable',
              message: `${title}: ${r.node} not readable: ${r.text}`,
              hint: hintFor('unreachable', node),
            }
          if (typeof m === 'string')
            return { node: r.node, kind: 'stuck', message: `${title}: ${r.node}: ${m}`, hint: hintFor('stuck', node) }
          return { node: r.node, kind: 'hardware', ...tooSmall(node, m), permanent: true }
        }),
      }
    },
  }
}

/** who set spec.unschedulable, by the Node's managed fields (kubectl cordon: kubectl-cordon) */
function cordonedBy(node: KubeObject): string {
  const fields =
    (node.metadata as { managedFields?: Array<{ manager?: string; fieldsV1?: { 'f:spec'?: Record<string, unknown> } }> }).managedFields ??
    []
  const manager = fields
    .filter((f) => f.fieldsV1?.['f:spec']?.['f:unschedulable'] !== undefined)
    .map((f) => f.manager)
    .at(-1)
  return manager ? ` by ${manager}` : ''
}

/** the inventory name of a Kubernetes node name (the same unless kubeName differs) */
function inventoryName(h: HealthReads, kubeName: string | undefined): string | undefined {
  if (!kubeName) return undefined
  return h.ctx.nodes.find((n) => kubeNodeName(n) === kubeName)?.name ?? kubeName
}

function podHint(pod: KubeObject | undefined): string {
  const ns = pod?.metadata.namespace ?? 'kube-system'
  const see = pod
    ? `\`${kubectlCommand(`-n ${ns} describe pod ${pod.metadata.name}`)}\``
    : `\`${kubectlCommand(`-n ${ns} get pods -o wide`)}\``
  return `see why with ${see}, fix what it names (an image the registry lacks, a scheduler or a taint that keeps it off every node), then run: ${taskCommand('bootstrap:wait-ready')}`
}

/** a DaemonSet's pods: one Ready on each Node */
async function podsPerNode(h: HealthReads, what: string, selects: (p: KubeObject) => boolean): Promise<CheckResult> {
  const [pods, nodes, warnings] = await Promise.all([h.systemPods(), h.checkedNodes(), h.systemWarnings()])
  const mine = pods.filter(selects)
  const results = nodes.map((k) => {
    const pod = mine.find((p) => p.spec?.nodeName === k.metadata.name)
    if (!pod) return bad(k.metadata.name, `no ${what} pod on it`)
    return condition(pod, 'Ready')?.status === 'True'
      ? ok(k.metadata.name, 'Ready')
      : bad(k.metadata.name, `${pod.metadata.name} ${podWhy(pod, warnings).why}`)
  })
  const unbound = mine.filter((p) => !p.spec?.nodeName)
  const failures: CheckFailure[] = results
    .filter((r) => !r.ok)
    .map((r) => {
      const pod = mine.find((p) => p.spec?.nodeName === r.node) ?? unbound[0]
      const why = pod ? podWhy(pod, warnings) : undefined
      return {
        node: inventoryName(h, r.node),
        kind: 'addon',
        message: `${what} on ${r.node}: ${pod && !pod.spec?.nodeName ? `${pod.metadata.name} ${why?.why ?? ''}` : r.text}`,
        hint: podHint(pod),
        ...(why?.permanent ? { permanent: true } : {}),
      }
    })
  return { results, failures }
}

/**
 * A node's kubelet serving CSRs nobody approved or denied, by name: signer kubernetes.io/kubelet-serving,
 * requested as system:node:<node> (what Talos's kubelet-csr diagnostic lists, kubelet_csr_not_approved.go)
 */
function pendingServingCsrs(csrs: KubeObject[], node: ClusterNode): string[] {
  return csrs
    .filter((c) => {
      const spec = c.spec as { signerName?: string; username?: string } | undefined
      const decided = (c.status?.conditions ?? []).some((x) => x.type === 'Approved' || x.type === 'Denied')
      return spec?.signerName === 'kubernetes.io/kubelet-serving' && spec.username === `system:node:${kubeNodeName(node)}` && !decided
    })
    .map((c) => c.metadata.name)
    .sort()
}

/**
 * kubelet-csr: the node's serving CSRs wait for an approver, named as the API lists them (`listed`),
 * else as the diagnostic does; address-overlap and the rest: read them
 */
function diagnosticHint(node: ClusterNode, text: string, listed: string[] | undefined): string {
  if (/kubelet-csr/.test(text)) {
    // the diagnostic names the pending CSRs (`pending CSRs: csr-a, csr-b`)
    const pending = listed?.length ? listed : (/pending CSRs: ([\w.-]+(?:, [\w.-]+)*)/.exec(text)?.[1]?.split(', ') ?? [])
    const see = `\`${kubectlCommand(`get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving`)}\``
    const approve = pending.length
      ? `approve ${node.name}'s: \`${kubectlCommand(`certificate approve ${pending.join(' ')}`)}\``
      : `approve ${node.name}'s (requested by system:node:${kubeNodeName(node)}) by name`
    return `the kubelet's serving certificate CSR is not approved (rotate-server-certificates without an approver): see them (${see}), ${approve}, or install an approver (kubelet-serving-cert-approver); then run: ${taskCommand('bootstrap:wait-ready')}`
  }
  return hintFor('diagnostics', node)
}

/**
 * No kube-controller-manager runs on any control plane (its StaticPodStatus): it approves and
 * signs the kubelets' CSRs, so no Node registers while it is down; the cause, named.
 */
export async function controllerManagerCause(h: HealthReads): Promise<CheckFailure | undefined> {
  return componentDown(h, 'kube-controller-manager', "it approves and signs the kubelets' certificates: no Node registers without it")
}

/** No kube-scheduler runs on any control plane: pods are never bound. */
export async function schedulerCause(h: HealthReads): Promise<CheckFailure | undefined> {
  return componentDown(h, 'kube-scheduler', 'it binds pods to nodes: every new pod stays Pending, unbound')
}

async function componentDown(h: HealthReads, component: string, effect: string): Promise<CheckFailure | undefined> {
  const answers = await h.resources(h.cps, 'staticpodstatus').catch(() => undefined)
  if (!answers) return undefined
  const states: string[] = []
  for (const cp of h.cps) {
    const value = answers.get(cp.address)?.value
    if (!value) return undefined
    const doc = value.find((d) => (d as { metadata?: { id?: string } }).metadata?.id === `kube-system/${component}-${kubeNodeName(cp)}`) as
      { spec?: KubeObject['status'] } | undefined
    const pod: KubeObject = {
      metadata: { name: `${component}-${kubeNodeName(cp)}` },
      spec: { nodeName: kubeNodeName(cp) },
      status: doc?.spec ?? {},
    }
    if (doc && doc.spec?.phase === 'Running' && condition(pod, 'Ready')?.status === 'True') return undefined
    states.push(`${cp.name}: ${doc ? podWhy(pod).why : 'no static pod'}`)
  }
  const cp = h.cps[0]
  if (!cp) return undefined
  return {
    node: cp.name,
    kind: 'control-plane',
    message: `${component} runs on no control plane (${states.join('; ')}); ${effect}`,
    hint: hintForStaticPod(cp, component),
  }
}
