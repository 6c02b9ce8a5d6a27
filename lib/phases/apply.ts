import { NodeError } from '../core/errors.js'
import { hintFor } from '../cli/hints.js'
import type { ClusterNode } from '../core/model.js'
import type { NodeOutcome, Phase, StepReporter } from '../engine/phase.js'
import type { Run } from '../engine/run.js'
import { appliedAndWaiting } from './shared/endpoint.js'

async function applyNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const facts = run.facts.of(node.name)
  if (!facts.state || facts.state === 'unreachable') {
    report.progress('probing')
    try {
      facts.state = (await report.retry(() => run.talosctl.probe(node))).state
    } catch (err) {
      // applied before, its API waiting for the control plane: configured (--reapply must wait for the bootstrap)
      const waits = err instanceof NodeError && err.transient ? await appliedAndWaiting(node, run) : undefined
      if (!waits) throw err
      const error = new NodeError(
        'configured',
        `the node took its config before and is not answering yet: ${waits}`,
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
  try {
    await report.retry(() => run.talosctl.applyInsecure(node))
  } catch (err) {
    // configured between the probe and the apply (another run, a retried call that did land)
    if (err instanceof NodeError && err.kind === 'configured' && !run.options.reapply) {
      facts.state = 'configured'
      return { status: 'skipped', detail: 'already configured', error: err }
    }
    throw err
  }
  facts.applied = true
  facts.state = 'configured'
  return { status: 'ok', detail: 'config accepted' }
}

export const apply: Phase = {
  name: 'apply',
  title: 'Apply machine configs',
  steps: () => [{ kind: 'node', title: 'Apply configs', would: 'would apply its machine config', run: applyNode }],
}
