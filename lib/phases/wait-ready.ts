import { existsSync } from 'node:fs'
import { stringify } from 'yaml'
import { NodeError, StepError, type ErrorKind } from '../core/errors.ts'
import { checkCni, readConfigNetwork } from '../input/cni-compat.ts'
import { formatDuration } from '../core/duration.ts'
import { apiHint, hintFor, hintForCniApi, hintForCordoned, hintForKubeletLog, hintForTalosCni, taskCommand } from '../cli/hints.ts'
import { kubeNodeName, type ClusterNode } from '../core/model.ts'
import type { ClusterStep, NodeOutcome, Phase, StepLeft, StepReporter } from '../engine/phase.ts'
import { partOfCluster, selectionText, wholeClusterCommand } from './shared/selection.ts'
import { lastErrorNote, PollTimeout, type PollAnswer } from '../wait/poll.ts'
import type { NodeFacts } from '../engine/facts.ts'
import type { Run } from '../engine/run.ts'
import type { NodeAnswer, ServiceStatus } from '../tools/talosctl.ts'
import { SharedReading } from '../wait/shared-reading.ts'
import { bootIdOf, condition, type KubeObject } from '../tools/kubectl.ts'
import { StatusReads } from '../wait/status-reads.ts'
import { bootstrapNode, NOT_BOOTSTRAPPED } from './shared/bootstrap-node.ts'
import { aimKubeconfig } from './shared/endpoint.ts'
import { waitForGates } from './shared/gates.ts'
import { completeVerification } from './shared/node-verification.ts'
import { checkExtensions } from './shared/extensions.ts'
import { helmfileInstallers, loadReleasePlan, releasePlan, releaseSteps, settledRelease } from './shared/releases.ts'
import {
  controllerManagerCause,
  HEALTH_CHECKS,
  podWhy,
  HealthReads,
  schedulerCause,
  type CheckFailure,
  type CheckResult,
  type HealthCheck,
} from './shared/health.ts'

/** One read per poll round, shared by every node step: the Nodes, the CNI pods, the kubelets. */
interface Readings {
  nodes: SharedReading<KubeObject[]>
  cniPods: SharedReading<KubeObject[]> | undefined
  kubelets: SharedReading<Map<string, NodeAnswer<ServiceStatus>>>
  /** pods of Talos's own flannel (a config whose CNI is not none), read as nodes turn Ready */
  talosFlannel: SharedReading<KubeObject[]> | undefined
  /** nodes whose kubelet runs and which registered: no longer asked */
  registered: Set<string>
  /** the control plane's own state, read when a node's wait runs out (a component that runs nowhere is the cause) */
  health: HealthReads
  /** every node's system extensions, one batched read for the phase (they change only with an upgrade) */
  extensions: SharedReading<Map<string, NodeAnswer<unknown[]>>>
}

function readings(run: Run): Readings {
  const age = run.settings.pollIntervalMs / 2
  const cni = run.settings.cni
  const registered = new Set<string>()
  // every node of the run still going whose kubelet has not been seen registered, through the
  // control plane the cluster was bootstrapped on (its API answers by now)
  const kubeletReader = (): Promise<Map<string, NodeAnswer<ServiceStatus>>> =>
    run.talosctl.serviceStatuses(
      run.nodes.filter((n) => !run.failed.has(n.name) && !registered.has(n.name)),
      bootstrapNode(run),
      'kubelet',
    )
  return {
    nodes: new SharedReading(() => run.kubectl.list('nodes'), age),
    cniPods: cni ? new SharedReading(cniPodReader(run), age) : undefined,
    kubelets: new SharedReading(kubeletReader, age),
    // Talos deploys kube-system/kube-flannel (k8s-app=flannel) when a control plane's config has a CNI
    talosFlannel:
      cni && cni.daemonset !== TALOS_FLANNEL
        ? new SharedReading(() => run.kubectl.list('pods', { namespace: 'kube-system', selector: 'k8s-app=flannel' }), age)
        : undefined,
    registered,
    health: healthReads(run),
    extensions: new SharedReading(() => {
      // through the bootstrap node, which resolves the type when it is one of them (it answers by now)
      const via = bootstrapNode(run)
      const going = run.nodes.filter((n) => !run.failed.has(n.name))
      return run.talosctl.resources(
        [...going.filter((n) => n.name === via.name), ...going.filter((n) => n.name !== via.name)],
        via,
        'extensions',
      )
    }, Number.POSITIVE_INFINITY),
  }
}

/**
 * A node's kubelet from the shared batched read, its own error there counted as its own read's;
 * a node the batch could not tell (the batch failed whole) is asked alone.
 */
async function kubeletOf(node: ClusterNode, run: Run, r: Readings): Promise<ServiceStatus | undefined> {
  const batched = (await r.kubelets.get().catch(() => undefined))?.get(node.address)
  const notYet = (err: unknown): undefined => {
    if (err instanceof NodeError && err.transient) return undefined
    throw err
  }
  if (batched) return batched.error ? notYet(batched.error) : batched.value
  return run.talosctl.serviceStatus(node, 'kubelet').catch(notYet)
}

/** Reads the pods of the CNI's DaemonSet, found through its own selector (read once, then kept). */
function cniPodReader(run: Run): () => Promise<KubeObject[]> {
  let selector: string | undefined
  return async () => {
    const cni = run.settings.cni
    if (!cni) return []
    if (!selector) {
      const ds = await run.kubectl.get('daemonset', cni.daemonset, cni.namespace)
      const labels = (ds?.spec as { selector?: { matchLabels?: Record<string, string> } } | undefined)?.selector?.matchLabels
      if (!labels) return []
      selector = Object.entries(labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(',')
    }
    return run.kubectl.list('pods', { namespace: cni.namespace, selector })
  }
}

async function waitForApi(run: Run, report: StepReporter): Promise<string> {
  return report
    .poll(async (): Promise<PollAnswer<string>> => {
      const aimed = run.options.dryRun ? { where: 'dry run', ready: false } : await aimKubeconfig(run)
      const where = aimed.where
      // the VIP's /readyz answered while choosing it: that is where the kubeconfig points now
      if (aimed.ready || (await run.kubectl.readyz())) return { done: true, value: `API ready (${where})` }
      return { done: false, state: `API not ready yet (${where})` }
    }, run.settings.readyTimeoutMs)
    .catch((err: unknown) => {
      if (err instanceof PollTimeout)
        throw new NodeError(
          'unreachable',
          `the Kubernetes API did not answer /readyz within ${formatDuration(run.settings.readyTimeoutMs)} (last: ${err.lastState})${lastErrorNote(err.lastError)}`,
          apiHint('bootstrap:wait-ready'),
        )
      throw err
    })
}

/** helm upgrade --install of the CNI; a release already deployed at the wanted version is left alone. */
async function installCni(run: Run, report: StepReporter): Promise<string | StepLeft> {
  const cni = run.settings.cni
  if (!cni) return 'no CNI in settings'
  const current = await settledRelease(run, report, cni.release, cni.namespace)
  // helm list names the chart as <name>-<version>; the name is the reference's last part (repo chart, path or OCI)
  const wanted = cni.version ? `${cni.chart.replace(/\/+$/, '').split('/').pop() ?? cni.chart}-${cni.version}` : undefined
  if (current?.status === 'deployed' && (!wanted || current.chart === wanted)) {
    return `${cni.release} already deployed (revision ${current.revision ?? '?'})`
  }
  // the CNI runs on every node: installed or upgraded only when every node was asked for
  if (partOfCluster(run)) {
    const next = wholeClusterCommand(run, 'bootstrap:wait-ready')
    const part = `the CNI runs on every node and ${selectionText(run)} selects part of the cluster`
    if (current?.status === 'deployed')
      return { skip: `${cni.release} deployed (${current.chart ?? '?'}), not upgraded to ${wanted ?? 'the settings'}: ${part}`, next }
    return { notRun: `${cni.release} is not installed${current ? ` (${current.status})` : ''}: ${part}`, next }
  }
  report.progress(`helm upgrade --install ${cni.release} ${cni.chart}`)
  // its pods are waited for per node by the next step; an API that does not answer for a while is retried
  const values = cni.values ? stringify(cni.values) : undefined
  const result = await report.retry(() => run.helm.upgradeInstall(cni, values, run.settings.readyTimeoutMs))
  return result.note ? `${cni.release} installed (${result.note})` : `${cni.release} installed`
}

type Stage = { kind: 'kubelet' | 'cni' | 'node-not-ready'; why: string; hint?: string; permanent?: boolean }

const TALOS_FLANNEL = 'kube-flannel'

interface ContainerStatus {
  restartCount?: number
  lastState?: { terminated?: { message?: string; reason?: string } }
}

/** Why a CNI pod is not ready: a restarting agent says it in its last log lines (its termination message). */
function cniPodWhy(pod: KubeObject, run: Run): Stage {
  const statuses = (pod.status?.containerStatuses ?? []) as ContainerStatus[]
  const crashed = statuses.find((c) => c.lastState?.terminated?.message)
  const notReady = `CNI pod ${pod.metadata.name} ${pod.status?.phase ?? ''} not ready`
  if (!crashed) {
    // its own reason: a waiting container's (an image pull the registry refuses), the scheduler's
    const own = podWhy(pod)
    return { kind: 'cni', why: `CNI pod ${pod.metadata.name} ${own.why}`, permanent: own.permanent }
  }
  const last = (crashed.lastState?.terminated?.message ?? '').trim().split('\n').pop() ?? ''
  const why = `${notReady}, restarting (${crashed.restartCount ?? 0} restarts): ${last.slice(0, 400)}`
  return {
    kind: 'cni',
    why,
    ...(/api-server|API server|k8s client/i.test(last)
      ? {
          hint: hintForCniApi({
            name: pod.metadata.name,
            namespace: pod.metadata.namespace ?? run.settings.cni?.namespace ?? 'kube-system',
          }),
        }
      : {}),
  }
}

/** machined's restart runner after the kubelet's process exited (runner/restart/restart.go) */
const KUBELET_RESTARTING = /going to restart/
/** polls that saw the kubelet restarting before its log is read and named */
const KUBELET_RESTARTS_TO_FAIL = 3

/** The last error line of the kubelet's own log (klog `E…` lines, `err=`, `failed`), or undefined. */
async function kubeletLogCause(node: ClusterNode, run: Run): Promise<string | undefined> {
  const lines = await run.talosctl.logs(node, 'kubelet').catch(() => [])
  const errors = lines.filter((l) => /^(?:\S+: )?E\d{4} |\berr=|\bfailed\b|\berror\b/i.test(l))
  return errors
    .at(-1)
    ?.replace(/^\S+: (?=E\d{4} )/, '')
    .trim()
}

/**
 * One node, in the order things happen to it: kubelet running and the Node registered, its CNI
 * pod ready, the Node Ready. A timeout names the stage it stopped at (kubelet, cni, node-not-ready).
 */
function nodeReadyStep(r: Readings) {
  return async (node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> => {
    // read while the kubelet and the CNI are waited for: off the critical path
    const extensions = run.options.dryRun ? Promise.resolve(undefined) : checkExtensions(node, run, report, r.extensions)
    extensions.catch(() => undefined) // awaited below; never an unhandled rejection meanwhile
    const ready = await waitForNodeReady(node, run, report, r)
    const note = await extensions
    if (note) run.warn(`${node.name}: ${note}: check ${node.configFile}`)
    return note ? { ...ready, detail: `${ready.detail ?? 'Ready'}; warning: ${note}` } : ready
  }
}

/** Kubelet running and registered, the CNI pod ready, the Node Ready (and not left cordoned). */
async function waitForNodeReady(node: ClusterNode, run: Run, report: StepReporter, r: Readings): Promise<NodeOutcome> {
  let stage: Stage = { kind: 'kubelet', why: 'not checked yet' }
  let registered = false
  let restartsSeen = 0
  const check = async (): Promise<PollAnswer<NodeOutcome>> => {
    // one round: kubelet (until it has registered), the Nodes and the CNI pods, read at once; once
    // registered, Talos's flannel too (what Ready then needs, without a read after it)
    const [kubelet, nodes, pods, early] = await Promise.all([
      registered ? undefined : kubeletOf(node, run, r),
      r.nodes.get(),
      r.cniPods?.get(),
      registered ? r.talosFlannel?.get().catch(() => undefined) : undefined,
    ])
    const self = nodes.find((n) => n.metadata.name === kubeNodeName(node))
    if (!registered) {
      const kubeletState = kubelet
        ? `kubelet ${kubelet.state}, health ${kubelet.health}${kubelet.lastEvent ? ` (${kubelet.lastEvent})` : ''}`
        : 'kubelet not readable'
      const stale = self !== undefined && fromBeforeReset(self, run.facts.of(node.name).kubeBeforeReset)
      registered = self !== undefined && !stale && kubelet?.state === 'Running' && kubelet.health !== 'Fail'
      if (registered) r.registered.add(node.name)
      if (!registered) {
        const nodeState = stale
          ? 'the Node object is from before the reset (its kubelet has not registered it again)'
          : self
            ? 'registered'
            : 'not registered'
        stage = { kind: 'kubelet', why: `${kubeletState}; ${nodeState}` }
        // a kubelet machined keeps restarting: its own log names why it exits
        if (kubelet && KUBELET_RESTARTING.test(kubelet.lastEvent) && ++restartsSeen >= KUBELET_RESTARTS_TO_FAIL) {
          const cause = await kubeletLogCause(node, run)
          if (cause) throw new NodeError('kubelet', `the kubelet keeps restarting; its log: ${cause}`, hintForKubeletLog(node))
        }
        return { done: false, state: stage.why }
      }
    }
    if (pods) {
      const pod = pods.find((p) => p.spec?.nodeName === kubeNodeName(node))
      if (condition(pod, 'Ready')?.status !== 'True') {
        stage = pod ? cniPodWhy(pod, run) : { kind: 'cni', why: 'no CNI pod scheduled on the node' }
        if (stage.permanent) throw new NodeError('cni', `not Ready: ${stage.why}`, stage.hint ?? hintFor('cni', node))
        return { done: false, state: stage.why }
      }
    }
    const ready = condition(self, 'Ready')
    if (ready?.status === 'True') {
      // a failed read is "not yet", as every read of a wait
      const flannelPods = r.talosFlannel ? (early ?? (await r.talosFlannel.get().catch(() => undefined))) : []
      if (!flannelPods) return { done: false, state: "Ready; looking for Talos's own CNI" }
      // a dry run's reads answer as a healthy cluster would: every pod list holds a pod per node
      const flannel = run.options.dryRun ? undefined : flannelPods.find((p) => p.spec?.nodeName === kubeNodeName(node))
      if (flannel && run.settings.cni) {
        throw new NodeError(
          'cni',
          `two CNIs on the node: Talos's own flannel (pod ${flannel.metadata.name}) runs next to ${run.settings.cni.chart}; the machine configs' cluster.network.cni.name is not none`,
          hintForTalosCni(node),
        )
      }
      const cordon = cordoned(self, node, run)
      if (cordon) {
        stage = cordon
        if (!cordon.byTalos && run.facts.of(node.name).resetInRun) throw new NodeError(cordon.kind, cordon.why, cordon.hint)
        if (cordon.byTalos) return { done: false, state: cordon.why }
        return { done: true, value: { status: 'ok', detail: 'kubelet running, Ready; cordoned (not by Talos)' } }
      }
      return { done: true, value: { status: 'ok', detail: 'kubelet running, Ready' } }
    }
    stage = { kind: 'node-not-ready', why: `NotReady: ${ready?.message ?? ready?.reason ?? 'no Ready condition'}` }
    return { done: false, state: stage.why }
  }
  try {
    return await report.poll(check, run.settings.readyTimeoutMs)
  } catch (err) {
    if (err instanceof PollTimeout && !run.options.dryRun) {
      // a kubelet that runs and registers nothing: no kube-controller-manager signs its certificate;
      // a CNI pod never bound: no kube-scheduler runs. Either is the cause, not the node.
      const waiting = stage.kind === 'kubelet' && /kubelet Running/.test(stage.why)
      const unbound = stage.kind === 'cni' && /no CNI pod scheduled|not bound to a node/.test(stage.why)
      const cause = waiting ? await controllerManagerCause(r.health) : unbound ? await schedulerCause(r.health) : undefined
      if (cause)
        throw new NodeError(cause.kind, `not Ready within ${formatDuration(err.waitedMs)}: ${stage.why}: ${cause.message}`, cause.hint)
    }
    if (err instanceof PollTimeout)
      throw new NodeError(
        stage.kind,
        `${'byTalos' in stage ? 'not in service' : 'not Ready'} within ${formatDuration(err.waitedMs)}: ${stage.why}`,
        stage.hint ?? hintFor(stage.kind, node),
      )
    throw err
  }
}

/**
 * A reset keeps the Node object: until its kubelet registers it again, it is the one from before
 * (the kubelet's boot ID, else when Ready last changed, as read before the reset).
 */
function fromBeforeReset(self: KubeObject, before: NodeFacts['kubeBeforeReset']): boolean {
  if (!before) return false
  if (before.bootId) return bootIdOf(self) === before.bootId
  return before.readySince !== undefined && condition(self, 'Ready')?.lastTransitionTime === before.readySince
}

const TALOS_CORDONED = 'talos.dev/cordoned'

/**
 * A Ready node that is still cordoned: Talos uncordons only a node it cordoned itself (its
 * annotation; machined controllers/k8s/node_apply.go ApplyCordoned), anyone else's cordon stays.
 */
function cordoned(self: KubeObject | undefined, node: ClusterNode, run: Run): (Stage & { byTalos: boolean; hint: string }) | undefined {
  if (run.options.dryRun || self?.spec?.unschedulable !== true) return undefined
  const byTalos = self.metadata.annotations?.[TALOS_CORDONED] !== undefined
  const hint = hintForCordoned({ ...node, kubeName: kubeNodeName(node) }, byTalos)
  const why = byTalos
    ? `Ready, still cordoned by Talos (${TALOS_CORDONED}): waiting for Talos to uncordon it`
    : `Ready but cordoned (spec.unschedulable), not by Talos (no ${TALOS_CORDONED} annotation): Talos will not uncordon it`
  return { kind: 'node-not-ready', why, hint, byTalos }
}

/** The checks of `talosctl health` (and the product's own) against the run's cluster, reads shared per poll round. */
function healthReads(run: Run): HealthReads {
  return new HealthReads({
    talosctl: run.talosctl,
    kubectl: run.kubectl,
    // a node that failed already in this run is named with its own cause: not checked again
    nodes: run.nodes.filter((n) => !run.failed.has(n.name)),
    controlPlanes: run.inventory.nodes.filter((n) => n.role === 'controlplane'),
    // a control plane that failed before wait-ready (never configured, never joined) is named already;
    // one that failed here (a component down) is still checked whole
    failedBefore: new Set([...run.failed].filter(([, phase]) => phase !== 'wait-ready').map(([name]) => name)),
    allNodes: !partOfCluster(run),
    via: () => bootstrapNode(run),
    maxAgeMs: run.settings.pollIntervalMs / 2,
    coreDnsAbsentByConfig: run.inventory.nodes.some(
      (n) => n.role === 'controlplane' && readConfigNetwork(n)?.coreDnsDisabled.value === true,
    ),
  })
}

/** per node, what the check found: each one named (a long list: the count of ok ones, the others named) */
function checkDetail(result: CheckResult): string {
  const okCount = result.results.filter((r) => r.ok).length
  if (result.results.length === 0) return 'no node left to check (each failed already in this run)'
  if (result.results.length <= 12) return result.results.map((r) => `${r.node}: ${r.text}`).join('; ')
  const wrong = result.results.filter((r) => !r.ok)
  return `${okCount}/${result.results.length} ok${wrong.length ? `; ${wrong.map((r) => `${r.node}: ${r.text}`).join('; ')}` : ''}`
}

/**
 * A check's failures as one error: every one's message; each node named gets its own kind, message
 * and hint (its failures only). The step's hint: the one hint they share, else each node's own.
 */
function checkError(failures: CheckFailure[], waited: string | undefined): StepError {
  const first = failures[0] as CheckFailure
  const within = (text: string): string => (waited ? `not healthy within ${waited}: ${text}` : text)
  const perNode = new Map<string, { kind: ErrorKind; message: string; hint: string }>()
  for (const node of unique(failures.flatMap((f) => (f.node ? [f.node] : [])))) {
    const own = failures.filter((f) => f.node === node)
    perNode.set(node, {
      kind: (own[0] as CheckFailure).kind,
      message: within(own.map((f) => f.message).join('; ')),
      hint: unique(own.map((f) => f.hint)).join('; also: '),
    })
  }
  const hints = unique(failures.map((f) => f.hint))
  const parts = [
    ...unique(failures.filter((f) => !f.node).map((f) => f.hint)),
    ...[...perNode].map(([node, own]) => `for ${node}: ${own.hint}`),
  ]
  return new StepError(
    first.kind,
    within(failures.map((f) => f.message).join('; ')),
    hints.length === 1 ? first.hint : joinHints(parts),
    perNode,
  )
}

/** a hint's last `then run: task …` (its own task, after the commands that fix the cause) */
const THEN_RUN = /[,;]? then run: (task (?:(?! then run: ).)*)$/

/** several hints as one: the task they all end with (`then run: task …`) said once, at the end */
function joinHints(hints: string[]): string {
  const tasks = unique(hints.map((h) => THEN_RUN.exec(h)?.[1]))
  const task = tasks.length === 1 ? tasks[0] : undefined
  if (!task) return hints.join(' | ')
  return `${hints.map((h) => h.replace(THEN_RUN, '')).join('; ')}; then run: ${task}`
}

function unique<T>(items: T[]): T[] {
  return [...new Set(items)]
}

/**
 * One step per check, in `talosctl health`'s order, each waited for until it passes, within the
 * phase's readyTimeout (from its start: after a wait that ran out, each check gets one look). A
 * failure names each node it found wrong (those nodes fail with it); a reason no wait clears, or
 * one that only concerns nodes that failed already, fails at once.
 */
function healthSteps(run: Run, apiReady: (r: Run) => true | string | { skip: string }): ClusterStep[] {
  let reads: HealthReads | undefined
  const deadline = performance.now() + run.settings.readyTimeoutMs
  const failedNodes = new Map<string, Set<string>>()
  const step = (check: HealthCheck): ClusterStep => ({
    kind: 'cluster',
    name: check.name,
    title: `Health: ${check.title}`,
    would: `would check: ${check.title}`,
    ready: apiReady,
    blocks: (node) => failedNodes.get(check.name)?.has(node.name) ?? false,
    run: async (r, report): Promise<string | StepLeft> => {
      // a dry run reads nothing it would have to make up (its reads answer as a healthy cluster would)
      if (r.options.dryRun) return `would check: ${check.title}`
      if (!reads) {
        reads = healthReads(r)
        reads.prefetch()
      }
      const h = reads
      let last: CheckResult | undefined
      const fail = (failures: CheckFailure[], waited?: string): NodeError => {
        failedNodes.set(check.name, new Set(failures.flatMap((f) => (f.node ? [f.node] : []))))
        const error = checkError(failures, waited)
        // Flux must not go in over a cluster that is not healthy: the nodes named fail (the flux steps
        // are not-run naming them); a failure of no node blocks Flux with its own cause
        if (failures.every((f) => f.node === undefined))
          r.facts.cluster.fluxBlocked ??= `the cluster is not ready: ${check.title}: ${error.message}`
        return error
      }
      try {
        const result = await report.poll(
          async (): Promise<PollAnswer<CheckResult>> => {
            last = await check.run(h)
            if (last.skip || last.failures.length === 0) return { done: true, value: last }
            const permanent = last.failures.filter((f) => f.permanent)
            if (permanent.length > 0) throw fail(permanent)
            // what is left wrong concerns nodes already failed (their own cause named): no wait helps
            if (last.failures.every((f) => f.node !== undefined && r.failed.has(f.node))) throw fail(last.failures)
            return { done: false, state: last.failures.map((f) => f.message).join('; ') }
          },
          // every node failed already: nothing can turn healthy by waiting, one look says what is wrong
          r.nodes.every((n) => r.failed.has(n.name)) ? 0 : Math.max(0, deadline - performance.now()),
        )
        if (result.skip) return { skip: result.skip }
        return checkDetail(result)
      } catch (err) {
        if (err instanceof PollTimeout && last && last.failures.length > 0)
          throw fail(last.failures, formatDuration(r.settings.readyTimeoutMs))
        if (err instanceof PollTimeout)
          throw new NodeError(
            'unknown',
            `${check.title}: not read within ${formatDuration(r.settings.readyTimeoutMs)}${lastErrorNote(err.lastError)}`,
            apiHint('bootstrap:wait-ready'),
          )
        throw err
      }
    },
  })
  return HEALTH_CHECKS.map(step)
}

/**
 * Every selected node failed in an earlier phase, each with its own cause and hint: this phase's
 * cluster-wide steps (the API wait, the CNI, the health checks, the gates) cannot change the outcome
 * nor say more about those nodes, so they are skipped (a recovery of one node whose cause persists
 * ran ~20 of them: 6-10 s, 32 tool calls in all). A node that failed here (its kubelet, its Ready)
 * keeps them: their one look names the cause behind it (a controller manager down, CoreDNS).
 */
function everySelectedFailedBefore(run: Run): { skip: string } | undefined {
  const before = (n: ClusterNode): boolean => (run.failed.get(n.name) ?? 'wait-ready') !== 'wait-ready'
  // only over a running cluster: otherwise the steps keep their own cause (not bootstrapped, no
  // kubeconfig, no control plane answering whether etcd runs)
  if (run.facts.cluster.bootstrapped !== true || run.nodes.length === 0 || !run.nodes.every(before)) return undefined
  // skipped, not "not run": the failures above are the outcome, not one more line per step
  return { skip: `every selected node failed already (${run.nodes.map((n) => `${n.name} in ${run.failed.get(n.name)}`).join(', ')})` }
}

async function readinessGates(run: Run, report: StepReporter): Promise<string> {
  try {
    return await waitForGates(run, run.settings.readinessGates, report, 'bootstrap:wait-ready')
  } catch (err) {
    // Flux must not go in over an unmet gate: its steps are not-run with this cause
    if (err instanceof NodeError) run.facts.cluster.fluxBlocked = `the cluster is not ready: ${err.message}`
    throw err
  }
}

export const waitReady: Phase = {
  name: 'wait-ready',
  title: 'Wait until Kubernetes is really ready',
  // the CNI it installs must fit the configs (also when run alone, without preflight); the
  // bootstrap helmfile, when the repository has one, is rendered first
  check: async (run) => {
    await loadReleasePlan(run)
    await checkCni(run, helmfileInstallers(run))
  },
  steps: (run) => {
    const r = readings(run)
    // the workers' reads go through the control plane etcd was bootstrapped on (it answers by now)
    const reads = new StatusReads(run, () => (run.facts.cluster.bootstrapped === true ? bootstrapNode(run) : undefined))
    const all = (): boolean => true
    const notBootstrapped = (r: Run): string | undefined => (r.facts.cluster.bootstrapped === false ? NOT_BOOTSTRAPPED : undefined)
    // without a kubeconfig (the bootstrap could not run) no later step can: they stay not-run with
    // the api step's cause instead of failing one by one on a missing file
    const apiReady = (r: Run): true | string | { skip: string } =>
      notBootstrapped(r) ??
      everySelectedFailedBefore(r) ??
      (r.options.dryRun || existsSync(r.kubeconfig)
        ? true
        : `no kubeconfig at ${r.kubeconfig} (the bootstrap phase writes it: ${taskCommand('bootstrap:etcd')})`)
    const bootstrapped = (_n: ClusterNode, r: Run): boolean => apiReady(r) === true
    return [
      {
        kind: 'cluster',
        name: 'api',
        title: 'Kubernetes API answers',
        would: 'would wait for /readyz',
        blocks: all,
        ready: apiReady,
        run: waitForApi,
      },
      // the CNI goes in as soon as the API answers: its pods follow the nodes as they register;
      // from the bootstrap helmfile: its CRDs, then the CNI's release and those it needs, one step each
      ...(releasePlan(run)
        ? releaseSteps(run, releasePlan(run)?.beforeCni ?? [], 'bootstrap:wait-ready', apiReady, all)
        : [
            {
              kind: 'cluster' as const,
              name: 'cni',
              title: 'Install the CNI (helm)',
              would: (r: Run) => `would install ${r.settings.cni?.release ?? 'the CNI'} with helm`,
              blocks: all,
              ready: apiReady,
              run: installCni,
            },
          ]),
      // workers verify left waiting for a control plane's trustd: answering and running, before their kubelet
      {
        kind: 'node',
        title: 'Workers that waited for the control plane answer on the authenticated API',
        readOnly: true,
        would: 'would wait until it answers on the authenticated API',
        applies: (n, r) => bootstrapped(n, r) && r.facts.of(n.name).awaitingControlPlane !== undefined,
        run: (node, r, report) => completeVerification(node, r, report, reads),
      },
      {
        kind: 'node',
        title: 'Kubelet running, CNI pod ready, node Ready',
        readOnly: true,
        would: 'would wait for its kubelet, CNI pod and Ready',
        applies: bootstrapped,
        run: nodeReadyStep(r),
      },
      // what `talosctl health` checks, in its order, then the product's own (in HEALTH_CHECKS)
      ...healthSteps(run, apiReady),
      {
        kind: 'cluster',
        name: 'readiness-gates',
        title: 'Readiness gates',
        would: 'would wait for the readiness gates',
        ready: apiReady,
        run: readinessGates,
      },
    ]
  },
}
