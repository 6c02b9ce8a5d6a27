import { NodeError } from '../core/errors.ts'
import { hintFor } from '../cli/hints.ts'
import type { ClusterNode } from '../core/model.ts'
import type { NodeOutcome, Phase, StepReporter } from '../engine/phase.ts'
import type { Run } from '../engine/run.ts'
import { appliedAndWaiting, INSTALLING_SINCE_EARLIER_RUN, installingSinceEarlierRun } from './shared/endpoint.ts'

async function applyNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const facts = run.facts.of(node.name)
  if (!facts.state || facts.state === 'unreachable') {
    report.progress('probing')
    const installing = installingSinceEarlierRun(node, run)
    try {
      facts.state = (await report.retry(() => run.talosctl.probe(node), installing ? { retries: () => false } : undefined)).state
    } catch (err) {
      // applied before, its API waiting for the control plane: configured (--reapply must wait for the bootstrap)
      const waits = err instanceof NodeError && err.transient ? await appliedAndWaiting(node, run) : undefined
      // or still installing (rebooting) after an earlier run's apply, as preflight concludes when it runs
      const why = waits ?? (err instanceof NodeError && err.transient && installing ? INSTALLING_SINCE_EARLIER_RUN : undefined)
      if (!why) throw err
      const error = new NodeError(
        'configured',
        `the node took its config before and is not answering yet: ${why}`,
        hintFor('configured', node),
      )
      return { status: 'skipped', detail: 'already configured', error }
    }
  }
  if (facts.state === 'configured') {
    if (!run.options.reapply) {
      const error = new NodeError('configured', 'the node already has a config; not applied again', hintFor('configured', node))
      return { status: 'skipped', detail: 'already configured', error }
    }
    report.progress('applying over the authenticated API')
    const value = await report.retry(() => run.talosctl.applySecure(node))
    facts.applied = true
    // Talos reboots to apply this change: verify must see it go down and come back, not a `running` from before
    if (value.reboots) facts.rebootAfterApply = true
    return { status: 'ok', detail: value.reboots ? 're-applied; the node reboots to apply it' : 're-applied' }
  }
  report.progress('applying config (insecure, maintenance mode)')
  let outcome: { taken: string } | { elsewhere: string }
  try {
    outcome = await report.retry(async () => {
      // marked before it leaves: a run killed with the call in flight leaves a node that may have taken it
      run.journal.sending(node.name, 'apply')
      const answer = await run.talosctl.applyInsecure(node).catch(async (err: unknown) => {
        // the request never left: the node stopped listening since it answered in maintenance
        const elsewhere = err instanceof NodeError && err.transient && !run.signal.aborted ? await silentSince(node, run) : undefined
        if (elsewhere) return { elsewhere }
        throw err
      })
      if (answer === 'accepted') return { taken: 'config accepted' }
      if ('elsewhere' in answer) return answer
      return { taken: await afterLostAnswer(node, run, answer.answerLost) }
    })
  } catch (err) {
    // the outcome is known (refused, never sent, still in maintenance) unless the run stopped mid-call
    if (!run.signal.aborted) run.journal.settled(node.name, 'apply')
    // configured between the probe and the apply (another run, a retried call that did land)
    if (err instanceof NodeError && err.kind === 'configured' && !run.options.reapply) {
      facts.state = 'configured'
      return { status: 'skipped', detail: 'already configured', error: err }
    }
    throw err
  }
  facts.state = 'configured'
  if ('elsewhere' in outcome) {
    run.journal.settled(node.name, 'apply')
    facts.tookConfigElsewhere = outcome.elsewhere
    return {
      status: 'skipped',
      detail: outcome.elsewhere,
      error: new NodeError('configured', outcome.elsewhere, hintFor('configured', node)),
    }
  }
  run.journal.settled(node.name, 'apply', 'ok')
  facts.applied = true
  return { status: 'ok', detail: outcome.taken }
}

/**
 * A node that answered in maintenance and now refuses the apply's connection, its maintenance API
 * silent too: it took a config from someone else (a concurrent run, another operator) and installs,
 * since only an accepted config stops the maintenance service. Verify waits for it (a node that went
 * down instead comes back in maintenance, and verify names that). Undefined when it still answers.
 */
async function silentSince(node: ClusterNode, run: Run): Promise<string | undefined> {
  return (await lookAgain(node, run)) === 'silent'
    ? 'answered in maintenance, then stopped listening before the apply of this run reached it: another run or operator applied a config and it is installing; not applied again, verify waits for it'
    : undefined
}

/**
 * An apply whose answer was lost (EOF, a timeout) may have been taken: the node is asked before the
 * config is sent again. A node that took a config leaves the maintenance API at once (v1.12 stops
 * the maintenance service, v1.13 moves apid to mTLS: `certificate required`), so an answer as
 * configured, or silence right after the call, means it took it; the same config sent again would
 * be refused while it installs. Still in maintenance: it did not, and the lost answer is retried.
 */
async function afterLostAnswer(node: ClusterNode, run: Run, lost: NodeError): Promise<string> {
  const seen = await lookAgain(node, run)
  if (seen === 'maintenance') throw lost
  const how = seen === 'configured' ? 'then answered as configured' : 'then stopped answering on its maintenance API'
  return `config accepted (its answer was lost: ${lost.message}; the node ${how}, so it took the config: not sent again)`
}

/** One insecure probe after a failed apply: maintenance, configured, or silent (refused, no answer). */
function lookAgain(node: ClusterNode, run: Run): Promise<'maintenance' | 'configured' | 'silent'> {
  return run.talosctl.probe(node).then(
    (probe) => probe.state,
    (err: unknown) => {
      if (err instanceof NodeError && err.transient && !run.signal.aborted) return 'silent' as const
      throw err
    },
  )
}

export const apply: Phase = {
  name: 'apply',
  title: 'Apply machine configs',
  steps: () => [{ kind: 'node', title: 'Apply configs', would: 'would apply its machine config', run: applyNode }],
}
