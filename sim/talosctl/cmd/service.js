// talosctl service / services
import { io } from '../../cli-io.js'
import { withClient } from '../session.js'
import { warn } from '../errors.js'
import { table, goDurationSeconds } from '../format.js'

const health = (h) => (!h || h.unknown ? '?' : h.healthy ? 'OK' : 'Fail')
const ago = (ts) => goDurationSeconds(Date.now() - Date.parse(ts))

export async function service({ positional, g }) {
  const id = positional[0] ?? ''
  const action = positional[1] ?? 'status'
  const s = await withClient(g)
  if (action === 'status') return id === '' ? list(s) : info(s, id)
  if (!['start', 'stop', 'restart'].includes(action)) throw new Error(`unsupported service action: ${JSON.stringify(action)}`)
  let good, err
  try {
    ({ good, err } = await s.multi('machine.ServiceAction', { id, action }))
  } catch (e) { throw new Error(`error starting service: ${e.message}`) }
  if (err) {
    if (!good.length) throw new Error(`error starting service: ${err.message}`)
    warn(err.message)
  }
  io().stdout.write(table([['NODE', 'RESPONSE'], ...good.map((m) => [s.nodeOf(m), m.data.response])]))
}

async function fetchServices(s) {
  let good, err
  try {
    ({ good, err } = await s.multi('machine.ServiceList', {}))
  } catch (e) { throw new Error(`error listing services: ${e.message}`) }
  if (err) {
    if (!good.length) throw new Error(`error listing services: ${err.message}`)
    warn(err.message)
  }
  return good
}

async function list(s) {
  const good = await fetchServices(s)
  const rows = [['NODE', 'SERVICE', 'STATE', 'HEALTH', 'LAST CHANGE', 'LAST EVENT']]
  for (const m of good) {
    const svcs = [...(m.data.services ?? [])].sort((a, b) => (a.id < b.id ? -1 : 1))
    for (const sv of svcs) {
      const last = sv.events?.length ? sv.events[sv.events.length - 1] : null
      rows.push([s.nodeOf(m), sv.id, sv.state, health(sv.health), last ? `${ago(last.ts)} ago` : ' ago', last ? last.msg : '<none>'])
    }
  }
  io().stdout.write(table(rows))
}

async function info(s, id) {
  const good = await fetchServices(s)
  const found = []
  for (const m of good) for (const sv of m.data.services ?? []) if (sv.id === id) found.push({ node: s.nodeOf(m), sv })
  if (!found.length) throw new Error(`service ${JSON.stringify(id)} is not registered on any nodes`)
  let outText = ''
  for (const { node, sv } of found) {
    const rows = [['NODE', node], ['ID', sv.id], ['STATE', sv.state], ['HEALTH', health(sv.health)]]
    if (sv.health?.lastMessage) rows.push(['LAST HEALTH MESSAGE', sv.health.lastMessage])
    const events = [...(sv.events ?? [])].reverse()
    events.forEach((e, i) => rows.push([i === 0 ? 'EVENTS' : '', `[${e.state}]: ${e.msg} (${ago(e.ts)} ago)`]))
    outText += table(rows)
  }
  io().stdout.write(outText)
}
