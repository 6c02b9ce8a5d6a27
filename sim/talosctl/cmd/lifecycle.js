// talosctl reboot / reset (--wait=false: one RPC; --wait: a plain non-TTY tracker)
import { io } from '../../cli-io.js'
import { withClient, withMaintenance, versionCheck } from '../session.js'
import { filterMessages } from '../errors.js'
import { formatDuration } from '../flags.js'

async function act(s, method, body, prefix) {
  let reply
  try { reply = await s.rpc(method, body) } catch (e) { throw new Error(`${prefix}: ${e.message}`) }
  const { err } = filterMessages(reply.messages ?? [])
  if (err) throw new Error(`${prefix}: ${err.message}`)
}

// Simple tracker: issue the action per node, then poll MachineStatus until the node is back (or gone, for reset).
async function track(ctx, s, method, body, done) {
  ctx.state.suppressErrors = true
  const line = (node, msg) => io().stderr.write(`${JSON.stringify(node)}: ${msg}\n`)
  const deadline = Date.now() + ctx.flag('timeout')
  let failed = false
  await Promise.all(s.nodes.map(async (node) => {
    line(node, 'waiting for actor ID')
    try {
      const reply = await s.rpc(method, body, { nodes: [node] })
      const { err } = filterMessages(reply.messages ?? [])
      if (err) throw err
    } catch (e) { line(node, e.message); failed = true; return }
    line(node, `actor ID: ${body.actorId ?? '00000000-0000-0000-0000-000000000000'}`)
    let sawDown = false
    let last = ''
    for (;;) {
      if (Date.now() > deadline) { line(node, `timeout waiting for node: context deadline exceeded (${formatDuration(ctx.flag('timeout'))})`); failed = true; return }
      let msg
      try {
        const r = await s.rpc('resources.Get', { type: 'MachineStatuses.runtime.talos.dev', id: 'machine' }, { nodes: [node] })
        const m = r.messages?.[0]
        if (m?.error) throw new Error(m.error.message)
        const spec = m.data.resources[0].spec
        msg = `stage: ${spec.stage.toUpperCase().replace(' ', '_')} ready: ${spec.status.ready} unmetCond: ${JSON.stringify(spec.status.unmetConditions ?? [])}`
        if (done(spec, sawDown)) { if (msg !== last) line(node, msg); line(node, 'post check passed'); return }
      } catch (e) {
        if (e.code === 'Canceled') throw e
        sawDown = true
        msg = 'unavailable, retrying...'
        if (done(null, sawDown)) { line(node, 'events check condition met'); return }
        if (ctx.maintenanceCheck && await maintenanceUp(node)) { line(node, 'post check passed'); return }
      }
      if (msg !== last) { line(node, msg); last = msg }
      await new Promise((r) => setTimeout(r, 250))
    }
  }))
  if (failed) throw new Error('failed')
}

// reset --reboot post check: the node answers the maintenance API again (insecure Disks call)
async function maintenanceUp(node) {
  try {
    const m = withMaintenance({ nodes: [node] })
    const r = await m.rpc('resources.Get', { type: 'disks' })
    return !r.messages?.[0]?.error
  } catch { return false }
}

export async function reboot(ctx) {
  const { flag, g } = ctx
  const wait = flag('wait') || flag('debug')
  const mode = flag('mode')
  if (!['default', 'powercycle', 'force'].includes(mode)) throw new Error(`invalid reboot mode: ${JSON.stringify(mode)}`)
  const s = await withClient(g)
  await versionCheck(s)
  if (!wait) return act(s, 'machine.Reboot', { mode }, 'error executing reboot')
  return track(ctx, s, 'machine.Reboot', { mode }, (spec, sawDown) => sawDown && spec && spec.stage === 'running' && spec.status.ready)
}

export async function reset(ctx) {
  const { flag, g } = ctx
  const wait = flag('wait') || flag('debug')
  if (wait && flag('insecure')) throw new Error('cannot use --wait and --insecure together')
  const body = {
    graceful: flag('graceful'), reboot: flag('reboot'), wipeMode: flag('wipe-mode'),
    userDisksToWipe: flag('user-disks-to-wipe') ?? [], systemLabelsToWipe: flag('system-labels-to-wipe') ?? [],
  }
  const s = flag('insecure') ? withMaintenance(g) : await withClient(g)
  if (!wait) {
    await versionCheck(s)
    return act(s, 'machine.Reset', body, 'error executing reset')
  }
  await versionCheck(s)
  const rebootToo = flag('reboot')
  ctx.maintenanceCheck = rebootToo
  return track(ctx, s, 'machine.Reset', body, (spec, sawDown) => !rebootToo && sawDown)
}
