// bootstrap, health, dmesg: single-RPC commands
import { io } from '../../cli-io.js'
import { withClient } from '../session.js'
import { multiError, RpcError, fromWire } from '../errors.js'

const failIfMulti = (s, name) => {
  if (s.nodes.length > 1) throw new Error(`command ${JSON.stringify(name)} is not supported with multiple nodes`)
}

export async function bootstrap({ g, flag }) {
  const s = await withClient(g)
  failIfMulti(s, 'bootstrap')
  if (flag('recover-from')) throw new Error('bootstrap --recover-from is not supported by the simulator')
  let err
  try {
    ({ err } = await s.multi('machine.Bootstrap', { recoverEtcd: false, recoverSkipHashCheck: !!flag('recover-skip-hash-check') }))
  } catch (e) { err = e }
  if (err) throw new Error(`error executing bootstrap: ${err.message}`)
}

export async function health({ g, flag }) {
  if (!flag('server')) throw new Error('health --server=false is not supported by the simulator')
  const s = await withClient(g)
  failIfMulti(s, 'health')
  const cps = [...(flag('control-plane-nodes') ?? [])]
  if (flag('init-node')) cps.push(flag('init-node'))
  await s.rpc('cluster.HealthCheck', {
    waitTimeoutMs: flag('wait-timeout'), controlPlaneNodes: cps, workerNodes: flag('worker-nodes') ?? [], forceEndpoint: flag('k8s-endpoint'),
  }, {
    onLine: (msg) => {
      if (msg.error) {
        const e = fromWire(msg.error)
        throw new Error(`healthcheck error: ${msg.error.raw ? msg.error.message : e.message}`)
      }
      if (msg.line !== undefined) io().stderr.write(msg.line + '\n')
    },
  })
  if (flag('run-e2e')) throw new Error('health --run-e2e is not supported by the simulator')
}

export async function dmesg({ g, flag }) {
  const s = await withClient(g)
  let reply
  try {
    reply = await s.rpc('machine.Dmesg', { follow: !!flag('follow'), tail: !!flag('tail') })
  } catch (e) {
    throw new Error(`error getting dmesg: ${e.message}`)
  }
  const errs = []
  for (const m of reply.messages ?? []) {
    if (m.error) { errs.push(new Error(`${m.node}: ${fromWire(m.error).message}`)); continue }
    const node = s.nodeOf(m)
    for (const l of m.data?.lines ?? []) {
      io().stdout.write(`${node}: ${(l.facility + ':').padEnd(0)} ${String(l.priority).padStart(7)}: [${l.ts}]: ${l.text}\n`)
    }
  }
  if (errs.length) throw new Error(`error streaming results: ${multiError(errs).message}`)
}

export { RpcError }
