import { existsSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { errorMessage, NodeError } from '../core/errors.ts'
import { mergeKubeconfig } from '../state/kubeconfig.ts'
import { stateDir } from '../state/paths.ts'
import { handedStateDir } from '../state/state-files.ts'
import { hintFor, talosctlCommand, taskCommand } from '../cli/hints.ts'
import type { NodeOutcome, Phase, StepLeft, StepReporter } from '../engine/phase.ts'
import { isSelected, selectionText, wholeClusterCommand } from './shared/selection.ts'
import { PollTimeout } from '../wait/poll.ts'
import { formatDuration } from '../core/duration.ts'
import type { Run } from '../engine/run.ts'
import { SharedReading } from '../wait/shared-reading.ts'
import type { EtcdMember, NodeAnswer, ServiceStatus } from '../tools/talosctl.ts'
import { controlPlanes, type ClusterNode } from '../core/model.ts'
import { bootstrapNode, NOT_BOOTSTRAPPED } from './shared/bootstrap-node.ts'
import { INSTALLING_SINCE_EARLIER_RUN, installingSinceEarlierRun, pointKubeconfig, waitForEndpoint } from './shared/endpoint.ts'
import { describeElsewhere, isMemberOf, namedElsewhere } from './shared/etcd-members.ts'

/**
 * etcd runs on some control plane already: the cluster was bootstrapped (never bootstrap twice).
 * Every control plane is asked now, all at once, even one seen waiting earlier in this run: another
 * run may have bootstrapped it since, and Talos accepts a bootstrap on any control plane whose etcd
 * data directory is empty, joining ones included (a second etcd cluster).
 */
async function etcdRunningSomewhere(run: Run, report: StepReporter): Promise<ClusterNode | undefined> {
  const cps = controlPlanes(run.inventory)
  const errors = new Map<string, NodeError>()
  // one batched read through the bootstrap node; a node it could not tell about (the endpoint
  // down, or no etcd registered there yet) is asked alone
  const batched =
    cps.length > 1 ? await run.talosctl.serviceStatuses(cps, bootstrapNode(run), 'etcd') : new Map<string, NodeAnswer<ServiceStatus>>()
  const states = await Promise.all(
    cps.map(async (cp) => {
      try {
        const answer = batched.get(cp.address)
        if (answer?.error) throw answer.error
        const etcd =
          answer?.value ?? (await run.talosctl.serviceStatus(cp, 'etcd').catch((err: unknown) => whenInstalled(cp, run, report, err)))
        run.facts.of(cp.name).etcd = etcd.state
        return afterBootstrapRequest(etcd) ? `${etcd.state} (bootstrap requested)` : etcd.state
      } catch (err) {
        if (!(err instanceof NodeError)) throw err
        // a control plane that does not answer cannot tell; the others can
        delete run.facts.of(cp.name).etcd
        errors.set(cp.name, err)
        return 'unknown'
      }
    }),
  )
  report.progress(cps.map((cp, i) => `etcd on ${cp.name}: ${states[i]}`).join(', '))
  // nobody can tell whether etcd runs: never read as "not bootstrapped" (transient: retried)
  if (errors.size === cps.length) {
    const why = cps.map((cp) => `${cp.name} (${errors.get(cp.name)?.kind ?? 'unknown'}: ${errors.get(cp.name)?.message ?? ''})`).join('; ')
    throw new NodeError(
      'unreachable',
      `no control plane answered whether etcd runs: ${why}`,
      `bring a control plane back (${taskCommand('bootstrap:status')} shows them), then run: ${taskCommand('bootstrap:etcd')}`,
    )
  }
  return cps.find((_, i) => states[i] === 'Running' || states[i]?.endsWith('(bootstrap requested)'))
}

/**
 * A control plane silent since it took its config in an earlier run (installing, or rebooting into
 * its first configured boot) answers once it has booted: its etcd is read then, within verify's
 * timeout, as verify would wait for it; never guessed. Any other failure is the caller's.
 */
async function whenInstalled(cp: ClusterNode, run: Run, report: StepReporter, err: unknown): Promise<ServiceStatus> {
  if (!(err instanceof NodeError && err.transient && installingSinceEarlierRun(cp, run))) throw err
  try {
    return await report.poll(async () => {
      try {
        return { done: true, value: await run.talosctl.serviceStatus(cp, 'etcd') }
      } catch (again) {
        if (again instanceof NodeError && again.transient) return { done: false, state: `${cp.name}: ${INSTALLING_SINCE_EARLIER_RUN}` }
        throw again
      }
    }, run.settings.verifyTimeoutMs)
  } catch (waited) {
    throw waited instanceof PollTimeout ? err : waited
  }
}

/**
 * The etcd service as it reads once a bootstrap was accepted on that node: Talos's BootstrapEtcd
 * (internal/app/machined/pkg/system/services/etcd.go) stops the waiting service (`Finished`,
 * "Bootstrap requested") and starts it again, so for seconds it reads `Finished`, then `Preparing`,
 * before `Running`. A waiting control plane never reads `Finished`, and its events hold no request.
 */
function afterBootstrapRequest(etcd: ServiceStatus): boolean {
  return etcd.state === 'Finished' || etcd.events.some((e) => /Bootstrap requested/i.test(e))
}

async function bootstrapEtcd(run: Run, report: StepReporter): Promise<string | StepLeft> {
  if (!run.options.dryRun) {
    const running = await report.retry(() => etcdRunningSomewhere(run, report))
    run.facts.cluster.bootstrapped = running !== undefined
    if (running) return alreadyBootstrapped(run, running)
    // recovering a node never bootstraps the cluster: there is nothing to rejoin yet
    if (run.options.recover) return 'cluster not bootstrapped yet: nothing to rejoin'
    // bootstrapped before and some control plane cannot say: it may hold the running etcd, and a
    // second bootstrap would split etcd in two. (Every one answering "waiting": a fresh start.)
    const before = controlPlanes(run.inventory).find((cp) => run.journal.done(cp.name, 'bootstrap'))
    const silent = controlPlanes(run.inventory).filter((cp) => !['Preparing', 'Waiting'].includes(run.facts.of(cp.name).etcd ?? ''))
    if (before && silent.length > 0) {
      throw new NodeError(
        'etcd-join',
        `etcd was bootstrapped by an earlier run (${before.name} joined) and ${silent.map((cp) => cp.name).join(', ')} cannot tell whether etcd runs there: not bootstrapping again`,
        `bring the control planes back (${taskCommand('bootstrap:status')} shows which; if etcd is lost, restore it from a snapshot with talosctl bootstrap --recover-from), then run: ${taskCommand('bootstrap:etcd')}`,
      )
    }
  }
  const node = bootstrapNode(run)
  // the bootstrap changes the whole cluster: sent only when its control plane was asked for
  if (!isSelected(run, node))
    return {
      notRun: `etcd is not bootstrapped, and its bootstrap control plane ${node.name} is not among the selected nodes (${selectionText(run)}): a bootstrap is sent only to a selected control plane (run it for every node, or with ${node.name} in NODES)`,
      next: wholeClusterCommand(run),
    }
  report.progress(`talosctl bootstrap on ${node.name}`)
  let running: ClusterNode | undefined
  let calls = 0
  const attempts = (): Promise<unknown> =>
    report.retry(
      async () => {
        // asked again before every call after the first: another run may have bootstrapped a control plane meanwhile
        if (calls++ > 0 && !run.options.dryRun && (running = await etcdRunningSomewhere(run, report))) return
        await run.talosctl.bootstrap(node)
      },
      // "not available yet" is asked again every poll interval below, not after a growing backoff:
      // the boot's end is on the critical path
      { retries: (e) => e.kind !== 'not-ready-yet' },
    )
  // "bootstrap is not available yet" is a booting control plane, not a failure: a slow boot may
  // outlast the retries, so only bootstrapTimeout ends that wait
  let notYet: NodeError | undefined
  // "time is not in sync yet": a node syncs its clock within seconds of booting; one that does not
  // (time servers blocked or intercepted) never will, so it is failed after a short grace, not the whole timeout
  const grace = Math.min(TIME_SYNC_GRACE_MS, run.settings.bootstrapTimeoutMs / 4)
  let unsyncedSince: number | undefined
  try {
    // any other failure (the retries spent) ends the wait at once, as it did without it
    const failed = await report.poll(async (elapsed) => {
      try {
        await attempts()
        return { done: true, value: undefined }
      } catch (err) {
        if (!(err instanceof NodeError) || err.kind !== 'not-ready-yet') return { done: true, value: err }
        notYet = err
        if (!TIME_NOT_SYNCED.test(err.message)) {
          unsyncedSince = undefined
          return { done: false, state: err.message }
        }
        unsyncedSince ??= elapsed
        if (elapsed - unsyncedSince < grace) return { done: false, state: `waiting for time sync on ${node.name} (${err.message})` }
        return { done: true, value: await timeNotSynced(run, node, elapsed - unsyncedSince, err) }
      }
    }, run.settings.bootstrapTimeoutMs)
    if (failed !== undefined) throw failed
  } catch (err) {
    if (err instanceof PollTimeout && notYet) throw notYet
    // AlreadyExists: etcd's data directory is not empty, so it was bootstrapped (or joined) before
    if (err instanceof NodeError && /etcd data directory is not empty/.test(err.message)) {
      run.facts.cluster.bootstrapped = true
      return `already bootstrapped (${node.name})`
    }
    throw err
  }
  run.facts.cluster.bootstrapped = true
  return running ? alreadyBootstrapped(run, running) : `bootstrapped on ${node.name}`
}

/** etcd runs on `running`: never bootstrap elsewhere (Talos would start a second etcd cluster there). */
function alreadyBootstrapped(run: Run, running: ClusterNode): string {
  const chosen = bootstrapNode(run)
  return chosen.name === running.name || !run.settings.bootstrapNode
    ? `already bootstrapped (etcd running on ${running.name})`
    : `already bootstrapped (etcd running on ${running.name}); not bootstrapping ${chosen.name}: it would start a second etcd cluster`
}

/** Every control plane an etcd member (not a learner), read through the bootstrap node once per poll. */
function memberReading(run: Run): SharedReading<EtcdMember[]> {
  return new SharedReading(async () => run.talosctl.etcdMembers(bootstrapNode(run)), run.settings.pollIntervalMs / 2)
}

/**
 * What says etcd membership is moving: every member, learner or voter, started or not. Talos adds
 * and promotes learners one at a time (machined services/etcd.go: promoteMember, retried for up to
 * 10 min each; about 2 min each in the field), so a later control plane waits for those before it.
 */
const membership = (list: EtcdMember[]): string =>
  list
    .map((m) => `${m.id}:${m.isLearner ? 'learner' : 'voter'}:${m.hostname ? 'started' : 'not started'}`)
    .sort()
    .join(',')

function joinStep(members: SharedReading<EtcdMember[]>) {
  return async (node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> => {
    // the wait ends when membership has not moved for bootstrapTimeout (a learner promoted, a member
    // added or started is progress), never before; bounded by one bootstrapTimeout per control plane
    const budget = run.settings.bootstrapTimeoutMs
    const bound = budget * Math.max(1, controlPlanes(run.inventory).length)
    let seen: string | undefined
    let movedAt = 0
    let lastState = 'not an etcd member yet'
    try {
      const detail = await report.poll(async (elapsed) => {
        if (elapsed - movedAt >= budget) throw new PollTimeout(lastState, elapsed)
        // a member list that cannot be read now (transient) is "not yet": the poller's rule
        const list = await members.get()
        const now = membership(list)
        if (seen !== undefined && now !== seen) movedAt = elapsed
        seen = now
        // after a reset: a new, started voter, and the old ID gone (a stale one is not a rejoin)
        const old = run.facts.of(node.name).replacedEtcdMember
        const mine = list.filter((m) => m.id !== old && isMemberOf(node, m))
        const elsewhere = namedElsewhere(node, list)
        // its name at another address: the inventory is wrong, or another machine carries the name
        if (mine.length === 0 && elsewhere)
          throw new NodeError(
            'etcd-join',
            `${describeElsewhere(node, elsewhere)}: not counted as ${node.name}'s member`,
            `correct ${node.name}'s address in the inventory (talconfig.yaml / nodes.yaml) to where it runs, then run: ${taskCommand('bootstrap:node', { NODE: node.name })}`,
          )
        const member = mine.find((m) => !m.isLearner && m.hostname) ?? mine[0]
        const stale = old !== undefined && list.some((m) => m.id === old)
        if (member && !member.isLearner && member.hostname && !stale)
          return { done: true, value: `etcd member ${member.id}${old ? ` (was ${old})` : ''}` }
        if (stale)
          return {
            done: false,
            state: `the old etcd member ${old} is still listed${member ? `; new member ${member.id}${member.isLearner ? ' (learner)' : ''}` : ''}`,
          }
        const learners = list.filter((m) => m.isLearner && !isMemberOf(node, m)).length
        lastState = member
          ? member.isLearner
            ? 'etcd learner, not promoted yet'
            : 'etcd member not started yet'
          : `not an etcd member yet (${list.length} members${learners > 0 ? `, ${learners} other learner${learners > 1 ? 's' : ''} being promoted first` : ''})`
        return { done: false, state: lastState }
      }, bound)
      return { status: 'ok', detail }
    } catch (err) {
      if (!(err instanceof PollTimeout)) throw err
      let etcdState = ''
      try {
        const etcd = await run.talosctl.serviceStatus(node, 'etcd')
        etcdState = `; etcd service ${etcd.state}${etcd.lastEvent ? ` (${etcd.lastEvent})` : ''}`
      } catch {
        // the timeout itself is the finding
      }
      throw new NodeError(
        'etcd-join',
        `did not join etcd within ${Math.round(err.waitedMs / 1000)}s: ${err.lastState}${etcdState}; no progress in etcd membership for the last ${formatDuration(Math.min(budget, err.waitedMs - movedAt))}`,
        hintFor('etcd-join', node),
      )
    }
  }
}

const TIME_NOT_SYNCED = /time is not in sync yet/
/** how long a bootstrap answered "time is not in sync yet" is waited for (at most a quarter of bootstrapTimeout) */
const TIME_SYNC_GRACE_MS = 60_000

/** The bootstrap node's clock did not sync within the grace: its TimeStatus says why, if it answers. */
async function timeNotSynced(run: Run, node: ClusterNode, waitedMs: number, err: NodeError): Promise<NodeError> {
  const synced = await run.talosctl.timeSynced(node).catch(() => undefined)
  const status = synced === undefined ? '' : `; its TimeStatus says synced: ${synced}`
  return new NodeError(
    'time-sync',
    `${node.name}'s time is not in sync after ${formatDuration(waitedMs)}: etcd cannot be bootstrapped (talosctl bootstrap: ${err.message})${status}`,
    hintFor('time-sync', node),
  )
}

/**
 * Writes this cluster's kubeconfig (0600) from the bootstrap node: fetched into .bootstrap/, then
 * merged into the kubeconfig file (only this cluster's cluster, context and user entries change;
 * other clusters in it stay as they are). While the endpoint is a VIP that does not answer yet, it
 * points at the bootstrap node's own address; wait-ready switches it back.
 */
async function writeKubeconfig(run: Run, report: StepReporter): Promise<string> {
  // a recovery, or a run whose selection leaves out the bootstrap node, keeps the operator's
  // kubeconfig; only where it points may change
  if ((run.options.recover || !isSelected(run, bootstrapNode(run))) && existsSync(run.kubeconfig)) return pointKubeconfig(run)
  const node = bootstrapNode(run)
  const state = stateDir(run.inventory.clusterDir)
  const fetched = join(state, 'kubeconfig.fetched')
  // talosctl writes the admin credentials there: through the handle of the checked state directory,
  // never through a link put in place of .bootstrap during the run
  const at = run.options.dryRun ? fetched : join(handedStateDir(run.inventory.clusterDir, state), 'kubeconfig.fetched')
  await report.retry(() => run.talosctl.kubeconfig(node, at))
  if (run.options.dryRun) return run.kubeconfig
  if (!existsSync(at)) {
    throw new NodeError(
      'unknown',
      `talosctl kubeconfig on ${node.name} exited 0 but wrote no file at ${fetched}`,
      `run it by hand to see why: ${talosctlCommand(node, `kubeconfig ${fetched}`)}; then run: ${taskCommand('bootstrap:etcd')}`,
    )
  }
  try {
    mergeKubeconfig(run.kubeconfig, readFileSync(at, 'utf8'))
  } catch (err) {
    throw new NodeError(
      'config-invalid',
      `cannot merge this cluster's kubeconfig into ${run.kubeconfig}: ${errorMessage(err)}`,
      `fix or move ${run.kubeconfig} (or point kubeconfig at another file), then run: ${taskCommand('bootstrap:etcd')}`,
    )
  } finally {
    rmSync(at, { force: true })
  }
  return pointKubeconfig(run)
}

/** The etcd phase: bootstrap etcd once, write the kubeconfig, every control plane joins (report name: bootstrap). */
export const etcd: Phase = {
  name: 'bootstrap',
  title: 'Bootstrap etcd and write the kubeconfig',
  steps: (run) => {
    const members = memberReading(run)
    const isCp = (n: ClusterNode): boolean => n.role === 'controlplane'
    return [
      {
        kind: 'cluster',
        name: 'etcd-bootstrap',
        title: 'Bootstrap etcd (once, on one control plane)',
        would: (r) => `would bootstrap etcd on ${bootstrapNode(r).name} unless it runs already`,
        // recovering a node: it cannot rejoin while nobody can say whether etcd runs
        blocks: (n, r) => isCp(n) || r.options.recover,
        ready: (r) => {
          const node = bootstrapNode(r)
          return r.failed.has(node.name) ? `the bootstrap control plane ${node.name} failed in ${r.failed.get(node.name)}` : true
        },
        run: bootstrapEtcd,
      },
      // before the joins: it needs only the bootstrap node, and the joins take etcd's time anyway
      {
        kind: 'cluster',
        name: 'kubeconfig',
        title: 'Write the kubeconfig',
        would: (r) => `would write ${r.kubeconfig}`,
        ready: (r) => {
          if (r.facts.cluster.bootstrapped === false) return NOT_BOOTSTRAPPED
          if (r.facts.cluster.bootstrapped === undefined && !r.options.dryRun) return 'the etcd bootstrap step did not complete'
          return r.failed.has(bootstrapNode(r).name) ? `the bootstrap control plane ${bootstrapNode(r).name} failed` : true
        },
        run: writeKubeconfig,
      },
      // a VIP endpoint that never comes up keeps the other control planes out of etcd (discovery off): named here, not as their joins
      {
        kind: 'cluster',
        name: 'endpoint',
        title: "The endpoint's VIP answers",
        would: (r) => `would wait for ${r.inventory.endpoint} to answer`,
        blocks: (n, r) => isCp(n) && n.name !== bootstrapNode(r).name && n.discovery !== true,
        ready: (r) => {
          if (!r.inventory.vip) return { skip: 'the endpoint is a control plane address' }
          // not run (nothing to wait for); the control planes keep the etcd-bootstrap step's own cause
          if (r.facts.cluster.bootstrapped !== true && !r.options.dryRun) return 'etcd was not bootstrapped'
          // /readyz is asked with the kubeconfig: without one (its step failed) the wait could only run
          // out and name the VIP for what the kubeconfig lacks
          if (!r.options.dryRun && !existsSync(r.kubeconfig))
            return `no kubeconfig at ${r.kubeconfig} to ask the endpoint with (the kubeconfig step writes it)`
          return true
        },
        run: waitForEndpoint,
      },
      // only once etcd was bootstrapped (or found running): when the bootstrap step could not run,
      // the control planes stay not-run with its cause instead of polling a node that failed
      {
        kind: 'node',
        title: 'Control planes join etcd',
        would: 'would wait until it is an etcd member',
        applies: (n, r) => isCp(n) && r.facts.cluster.bootstrapped === true,
        run: joinStep(members),
      },
    ]
  },
}
