// The bootstrap helmfile's releases (cluster-template: cilium, coredns, spegel, cert-manager,
// flux-operator, flux-instance), installed one by one in `needs` order: the CNI and what it needs
// in wait-ready, the rest before the Flux handover. helmfile renders and syncs (lib/tools/helmfile.ts);
// this file orders, names failures and waits for each release's own workloads.
import { readFileSync } from 'node:fs'
import { relative } from 'node:path'
import { InputError, NodeError } from '../../core/errors.ts'
import { kubectlCommand, taskCommand } from '../../cli/hints.ts'
import { findBootstrapHelmfile, type BootstrapHelmfile } from '../../input/bootstrap-helmfile.ts'
import type { OtherInstallers } from '../../input/cni-compat.ts'
import type { CniSettings } from '../../input/settings.ts'
import type { ClusterStep, StepReporter } from '../../engine/phase.ts'
import type { Run } from '../../engine/run.ts'
import type { ReleaseStatus } from '../../tools/helm.ts'
import { HelmfileRenderError, type HelmfileRelease } from '../../tools/helmfile.ts'
import { condition, type KubeObject } from '../../tools/kubectl.ts'
import { PollTimeout, type PollAnswer } from '../../wait/poll.ts'
import { formatDuration } from '../../core/duration.ts'

/** charts that are a CNI (the last path element of the chart), with the DaemonSet of their agent */
const CNI_CHARTS: Record<string, string> = {
  cilium: 'cilium',
  flannel: 'kube-flannel-ds',
  'kube-router': 'kube-router',
  antrea: 'antrea-agent',
}

export interface ReleasePlan {
  helmfile: BootstrapHelmfile
  /** the CNI's release, and every release it needs, in order: wait-ready installs them */
  beforeCni: HelmfileRelease[]
  /** the other releases, in order: installed before the Flux handover */
  afterCni: HelmfileRelease[]
  cni?: HelmfileRelease
  /** a release whose chart is flux-instance: Flux comes from the helmfile */
  fluxInstance?: HelmfileRelease
}

const chartName = (r: HelmfileRelease): string => r.chart.replace(/\/+$/, '').split('/').pop() ?? r.chart
const key = (r: HelmfileRelease): string => `${r.namespace}/${r.name}`
const plans = new WeakMap<Run, ReleasePlan | undefined>()
/** the first release of this run that failed: the releases after it are not run */
const failedRelease = new WeakMap<Run, string>()

/** The plan read in a phase's check (the helmfile rendered once per run); undefined without a helmfile. */
export function releasePlan(run: Run): ReleasePlan | undefined {
  return plans.get(run)
}

/**
 * Renders the bootstrap helmfile (when the repository has one) and orders its releases: a rendering
 * error or a `needs` naming no release is bad input (exit 2, naming the file). Without a cni section
 * in bootstrap.yaml the helmfile's CNI release stands for it (its chart, release, values).
 */
export async function loadReleasePlan(run: Run): Promise<ReleasePlan | undefined> {
  if (plans.has(run)) return plans.get(run)
  const helmfile = findBootstrapHelmfile(run.inventory.clusterDir)
  if (!helmfile) {
    plans.set(run, undefined)
    return undefined
  }
  let releases: HelmfileRelease[]
  try {
    releases = await run.helmfile.releases(helmfile.apps)
  } catch (err) {
    if (!(err instanceof HelmfileRenderError)) throw err
    throw new InputError(`helmfile could not render the bootstrap releases: ${err.message}`, {
      file: helmfile.apps,
      fix: `correct the helmfile (\`helmfile --file ${helmfile.apps} build\` shows the same)`,
    })
  }
  const ordered = inNeedsOrder(
    releases.filter((r) => r.installed),
    helmfile.apps,
  )
  const cni = ordered.find((r) => CNI_CHARTS[chartName(r)] !== undefined)
  const needed = new Set<string>()
  const want = (k: string): void => {
    if (needed.has(k)) return
    needed.add(k)
    for (const n of ordered.find((r) => key(r) === k)?.needs ?? []) want(n)
  }
  if (cni) want(key(cni))
  const plan: ReleasePlan = {
    helmfile,
    beforeCni: ordered.filter((r) => needed.has(key(r))),
    afterCni: ordered.filter((r) => !needed.has(key(r))),
    ...(cni ? { cni } : {}),
  }
  const fluxInstance = ordered.find((r) => chartName(r) === 'flux-instance')
  if (fluxInstance) plan.fluxInstance = fluxInstance
  if (cni && !run.settings.cni) run.settings.cni = cniSettingsOf(cni)
  plans.set(run, plan)
  return plan
}

/**
 * What the bootstrap helmfile installs besides the CNI, for the add-on check of the configs
 * (lib/input/cni-compat.ts): its CoreDNS release stands for the CoreDNS a config disables. Its CNI
 * release already stands for a missing cni: section.
 */
export function helmfileInstallers(run: Run): OtherInstallers | undefined {
  const plan = plans.get(run)
  if (!plan) return undefined
  const coredns = [...plan.beforeCni, ...plan.afterCni].find((r) => chartName(r) === 'coredns')
  return coredns
    ? { installers: [{ addon: 'coredns', source: `release ${coredns.namespace}/${coredns.name} in ${plan.helmfile.apps}` }], looked: [] }
    : { installers: [], looked: [`no coredns release in ${plan.helmfile.apps}`] }
}

/** The CNI release as the CNI settings the node waits read (its DaemonSet, namespace, values). */
function cniSettingsOf(r: HelmfileRelease): CniSettings {
  return {
    chart: r.chart,
    release: r.name,
    namespace: r.namespace,
    daemonset: CNI_CHARTS[chartName(r)] ?? r.name,
    ...(r.version ? { version: r.version } : {}),
    values: r.values,
  }
}

/** the first line of `file` that mentions `text` (the needs entry as written), if any */
function lineMentioning(file: string, text: string): number | undefined {
  const index = readFileSync(file, 'utf8')
    .split('\n')
    .findIndex((l) => l.includes(text))
  return index >= 0 ? index + 1 : undefined
}

/** Kahn's order, ties kept in file order; a need naming no release is bad input. */
function inNeedsOrder(releases: HelmfileRelease[], file: string): HelmfileRelease[] {
  const byKey = new Map(releases.map((r) => [key(r), r]))
  for (const r of releases)
    for (const n of r.needs) {
      if (byKey.has(n)) continue
      const line = lineMentioning(file, n)
      throw new InputError(`release ${key(r)} needs ${n}, which is no release of this helmfile`, {
        file,
        ...(line ? { line } : {}),
        fix: `correct the needs of ${r.name} (as namespace/name of a release of this file)`,
      })
    }
  const done = new Set<string>()
  const out: HelmfileRelease[] = []
  while (out.length < releases.length) {
    const next = releases.find((r) => !done.has(key(r)) && r.needs.every((n) => done.has(n)))
    if (!next)
      throw new InputError(
        `the needs of ${releases
          .filter((r) => !done.has(key(r)))
          .map(key)
          .join(', ')} form a circle`,
        { file, fix: 'remove the need that closes the circle' },
      )
    done.add(key(next))
    out.push(next)
  }
  return out
}

/** `chart version` as a dry run and the progress say it */
export const chartOf = (r: HelmfileRelease): string => `${r.chart}${r.version ? ` ${r.version}` : ''}`

/** One listr2 step per release: installed with helmfile, then its workloads waited for. */
export function releaseSteps(
  run: Run,
  releases: HelmfileRelease[],
  task: string,
  ready: ClusterStep['ready'],
  blocks?: ClusterStep['blocks'],
): ClusterStep[] {
  const plan = releasePlan(run)
  if (!plan) return []
  const steps: ClusterStep[] = []
  if (plan.helmfile.crds && task === 'bootstrap:wait-ready') {
    const crds = plan.helmfile.crds
    steps.push({
      kind: 'cluster',
      name: 'helmfile-crds',
      title: `CRDs of ${relative(run.inventory.clusterDir, crds) || crds} (server-side)`,
      would: `would apply the CRDs rendered from ${crds} (server-side)`,
      ...(ready ? { ready } : {}),
      ...(blocks ? { blocks } : {}),
      run: async (r, report) => {
        report.progress(`helmfile template ${crds}`)
        const manifests = await report.retry(() => r.helmfile.crds(crds, r.settings.readyTimeoutMs))
        if (!manifests.trim()) return 'no CRDs rendered'
        report.progress('kubectl apply --server-side')
        const applied = await report.retry(() => r.kubectl.applyServerSide(manifests))
        return `${applied.length} CRD(s) applied`
      },
    })
  }
  // a release whose needs failed cannot go in; neither can Flux over a release that failed
  const afterEarlier = (r: Run): true | string | { skip: string } => {
    const failed = failedRelease.get(r)
    return failed ? `release ${failed} failed` : (ready?.(r) ?? true)
  }
  for (const release of releases)
    steps.push({
      kind: 'cluster',
      name: `release ${key(release)}`,
      title: `Release ${key(release)} (${chartOf(release)})`,
      would: `would install ${key(release)}: ${chartOf(release)} (helmfile sync, then its workloads ready)`,
      ready: afterEarlier,
      ...(blocks ? { blocks } : {}),
      run: async (r, report) => {
        try {
          return await installRelease(r, report, plan.helmfile.apps, release, task)
        } catch (err) {
          failedRelease.set(r, key(release))
          if (task === 'bootstrap:flux') r.facts.cluster.fluxInstallFailed = true
          throw err
        }
      },
    })
  return steps
}

/** how long a pending release is given to settle: the helm of a killed run may still be finishing it */
const PENDING_SETTLE_MS = 60_000

/**
 * A release as helm lists it, once it is not pending: a pending release may be the work of a helm
 * still running (a killed run leaves the CNI's helm, and the helm a killed helmfile started, to
 * finish), so it is read again for a while; one still pending after that is left for the caller to
 * name (helm refuses it as busy).
 */
export async function settledRelease(run: Run, report: StepReporter, name: string, namespace: string): Promise<ReleaseStatus | undefined> {
  const read = () => report.retry(() => run.helm.release(name, namespace))
  const first = await read()
  if (!first?.status.startsWith('pending') || run.options.dryRun) return first
  report.progress(`${name} is ${first.status}: waiting for the helm that holds it to finish`)
  try {
    return await report.poll(
      async () => {
        const now = await read()
        return now?.status.startsWith('pending') ? { done: false, state: `${name} ${now.status}` } : { done: true, value: now }
      },
      Math.min(PENDING_SETTLE_MS, run.settings.readyTimeoutMs),
    )
  } catch (err) {
    if (err instanceof PollTimeout) return read()
    throw err
  }
}

async function installRelease(run: Run, report: StepReporter, file: string, release: HelmfileRelease, task: string): Promise<string> {
  const again = taskCommand(task)
  const where = `-n ${release.namespace} --kubeconfig ${run.kubeconfig}`
  const current = await settledRelease(run, report, release.name, release.namespace)
  const wanted = release.version ? `${chartName(release)}-${release.version.replace(/^v(?=\d)/, '')}` : undefined
  const deployed =
    current?.status === 'deployed' && (!wanted || current.chart === wanted || current.chart === `${chartName(release)}-${release.version}`)
  if (current?.status.startsWith('pending'))
    throw new NodeError(
      'release',
      `release ${key(release)} is ${current.status} (revision ${current.revision ?? '?'}) and stayed so for ${formatDuration(Math.min(PENDING_SETTLE_MS, run.settings.readyTimeoutMs))}: an earlier helm was interrupted`,
      current.revision === 1
        ? `uninstall it (\`helm uninstall ${release.name} ${where}\`), then run: ${again}`
        : `roll it back (\`helm rollback ${release.name} ${where}\`), then run: ${again}`,
    )
  if (!deployed) {
    report.progress(`helmfile sync ${key(release)} (${chartOf(release)})`)
    const recovery = `fix what is named above (\`helm status ${release.name} ${where}\`), then run: ${again}`
    try {
      await report.retry(() => run.helmfile.sync(file, release, run.settings.readyTimeoutMs, recovery))
    } catch (err) {
      if (!(err instanceof NodeError) || err.kind !== 'release') throw err
      const unready = await firstUnready(run, release).catch(() => undefined)
      throw new NodeError(
        'release',
        `release ${key(release)} (${chartOf(release)}) failed${unready ? `: ${unready.text}` : ''}; helm said: ${err.message}`,
        unready
          ? `see \`${kubectlCommand(`-n ${unready.namespace} describe ${unready.kind.toLowerCase()} ${unready.name}`)}\` and its pods' logs; ${recovery}`
          : recovery,
      )
    }
  }
  if (run.options.dryRun) return 'dry run'
  // helm's wait said ready, or the release was there: the workloads are read here as well
  try {
    await report.poll(async (): Promise<PollAnswer<true>> => {
      const unready = await firstUnready(run, release)
      return unready ? { done: false, state: unready.text } : { done: true, value: true }
    }, run.settings.readyTimeoutMs)
  } catch (err) {
    if (err instanceof PollTimeout)
      throw new NodeError(
        'release',
        `release ${key(release)} (${chartOf(release)}) not ready within ${formatDuration(err.waitedMs)}: ${err.lastState}`,
        `see \`${kubectlCommand(`-n ${release.namespace} get pods`)}\`, then run: ${again}`,
      )
    throw err
  }
  return `${chartOf(release)} ${deployed ? 'already deployed' : 'deployed'}, workloads ready`
}

const WORKLOADS = new Set(['Deployment', 'DaemonSet', 'StatefulSet'])

interface Unready {
  kind: string
  namespace: string
  name: string
  /** `Deployment ns/name: 0/1 ready; pod <name>: CrashLoopBackOff: <its last message>` */
  text: string
}

/** The release's first workload not ready, and why; undefined when every one is ready. */
async function firstUnready(run: Run, release: HelmfileRelease): Promise<Unready | undefined> {
  for (const o of await run.helm.manifestObjects(release.name, release.namespace)) {
    if (!WORKLOADS.has(o.kind)) continue
    const live = await run.kubectl.get(o.kind.toLowerCase(), o.name, o.namespace)
    if (!live) return { ...o, text: `${o.kind} ${o.namespace}/${o.name}: not found` }
    const status = live.status ?? {}
    const want = Number(o.kind === 'DaemonSet' ? status.desiredNumberScheduled : ((live.spec?.replicas as number | undefined) ?? 1))
    const have = Number((o.kind === 'DaemonSet' ? status.numberReady : status.readyReplicas) ?? 0)
    if (have >= want && want > 0) continue
    if (o.kind === 'DaemonSet' && want === 0) continue
    const selector = Object.entries((live.spec?.selector as { matchLabels?: Record<string, string> } | undefined)?.matchLabels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',')
    const pods = selector ? await run.kubectl.list('pods', { namespace: o.namespace, selector }) : []
    const why = pods.map(podTrouble).find(Boolean)
    return { ...o, text: `${o.kind} ${o.namespace}/${o.name}: ${have}/${want} ready${why ? `; ${why}` : ''}` }
  }
  return undefined
}

interface ContainerStatus {
  name: string
  state?: { waiting?: { reason?: string; message?: string } }
  lastState?: { terminated?: { reason?: string; message?: string; exitCode?: number } }
}

/** a pod's own reason for not running: its container's waiting reason and last message, or why it is not scheduled */
function podTrouble(pod: KubeObject): string | undefined {
  const scheduled = condition(pod, 'PodScheduled')
  if (scheduled?.status === 'False') return `pod ${pod.metadata.name}: ${scheduled.reason ?? 'Unschedulable'}: ${scheduled.message ?? ''}`
  for (const c of (pod.status?.containerStatuses as ContainerStatus[] | undefined) ?? []) {
    const waiting = c.state?.waiting
    if (!waiting || waiting.reason === 'ContainerCreating') continue
    const last = c.lastState?.terminated?.message ?? waiting.message ?? ''
    return `pod ${pod.metadata.name}: ${waiting.reason ?? 'waiting'}${last ? `: ${last.trim().split('\n').pop()}` : ''}`
  }
  return undefined
}
