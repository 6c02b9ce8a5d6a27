// talosctl etcd members | status | remove-member | leave
import { io } from '../../cli-io.js'
import { withClient } from '../session.js'
import { warn } from '../errors.js'
import { table, humanBytes } from '../format.js'

// member IDs arrive as a uint64: a decimal string, or the node's 16-hex-digit form
const hex16 = (id) => (/^[0-9a-f]{16}$/.test(String(id)) ? String(id) : BigInt.asUintN(64, BigInt(id)).toString(16).padStart(16, '0'))

async function multi(s, method, body, prefix) {
  let good, err
  try {
    ({ good, err } = await s.multi(method, body))
  } catch (e) { throw new Error(`${prefix}: ${e.message}`) }
  if (err) {
    if (!good.length) throw new Error(`${prefix}: ${err.message}`)
    warn(err.message)
  }
  return good
}

export async function members({ g }) {
  const s = await withClient(g)
  const good = await multi(s, 'machine.EtcdMemberList', { queryLocal: true }, 'error getting members')
  const rows = []
  let node = ''
  let withNode = false
  good.forEach((m, i) => {
    if (m.node) node = m.node
    const list = m.data.members ?? []
    list.forEach((mb, j) => {
      if (i === 0 && j === 0) {
        withNode = node !== ''
        rows.push([...(withNode ? ['NODE'] : []), 'ID', 'HOSTNAME', 'PEER URLS', 'CLIENT URLS', 'LEARNER'])
      }
      const r = [hex16(mb.id), mb.hostname, (mb.peerUrls ?? []).join(','), (mb.clientUrls ?? []).join(','), String(!!mb.isLearner)]
      rows.push(withNode ? [node, ...r] : r)
    })
  })
  io().stdout.write(table(rows))
}

export async function status({ g }) {
  const s = await withClient(g)
  const good = await multi(s, 'machine.EtcdStatus', {}, 'error getting status')
  const rows = []
  let node = ''
  let withNode = false
  good.forEach((m, i) => {
    if (m.node) node = m.node
    if (i === 0) {
      withNode = node !== ''
      rows.push([...(withNode ? ['NODE'] : []), 'MEMBER', 'DB SIZE', 'IN USE', 'LEADER', 'RAFT INDEX', 'RAFT TERM', 'RAFT APPLIED INDEX', 'LEARNER', 'PROTOCOL', 'STORAGE', 'ERRORS'])
    }
    const d = m.data
    const ratio = d.dbSize > 0 ? (d.dbSizeInUse / d.dbSize) * 100 : 0
    const r = [hex16(d.memberId), humanBytes(d.dbSize), `${humanBytes(d.dbSizeInUse)} (${ratio.toFixed(2)}%)`, hex16(d.leader),
      String(d.raftIndex), String(d.raftTerm), String(d.raftAppliedIndex), String(!!d.isLearner), d.protocol ?? '', d.storage ?? '', (d.errors ?? []).join(', ')]
    rows.push(withNode ? [node, ...r] : r)
  })
  io().stdout.write(table(rows))
}

export async function removeMember({ positional, g }) {
  const s = await withClient(g)
  const raw = positional[0]
  if (!/^[0-9a-fA-F]{1,16}$/.test(raw)) throw new Error(`error parsing member ID: strconv.ParseUint: parsing ${JSON.stringify(raw)}: invalid syntax`)
  const { err } = await s.multi('machine.EtcdRemoveMemberByID', { memberId: raw.toLowerCase().padStart(16, '0') })
  if (err) throw err
}

export async function leave({ g }) {
  const s = await withClient(g)
  if (s.nodes.length > 1) throw new Error('command "etcd leave" is not supported with multiple nodes')
  const { err } = await s.multi('machine.EtcdLeaveCluster', {})
  if (err) throw err
}
