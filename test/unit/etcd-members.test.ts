// talosctl etcd members as the real CLI prints it (cmd/talosctl/cmd/talos/etcd.go: text/tabwriter,
// padding 3): a learner that has not started has an empty HOSTNAME and CLIENT URLS
// (internal/pkg/etcd/etcd.go MemberAddAsLearner), and the parser must still read every column.
import { describe, expect, it } from 'vitest'
import { parseEtcdMembers } from '../../lib/tools/talosctl.js'

const WITH_NODE = [
  'NODE        ID                 HOSTNAME   PEER URLS                CLIENT URLS              LEARNER',
  '127.0.0.1   768ba6e12b845997   cp-1       https://127.0.0.1:2380   https://127.0.0.1:2379   false',
  '127.0.0.1   61dee3edd94c0972              https://127.0.0.2:2380                            true',
  '127.0.0.1   0a1b2c3d4e5f6071   cp-3       https://127.0.0.3:2380   https://127.0.0.3:2379   true',
  '',
].join('\n')

const WITHOUT_NODE = [
  'ID                 HOSTNAME   PEER URLS                CLIENT URLS   LEARNER',
  '61dee3edd94c0972              https://127.0.0.2:2380                 true',
  '',
].join('\n')

describe('parseEtcdMembers', () => {
  it('reads empty cells of a learner that has not started, and the learner flag of every row', () => {
    expect(parseEtcdMembers(WITH_NODE)).toEqual([
      { id: '768ba6e12b845997', hostname: 'cp-1', peerUrls: ['https://127.0.0.1:2380'], isLearner: false },
      { id: '61dee3edd94c0972', hostname: '', peerUrls: ['https://127.0.0.2:2380'], isLearner: true },
      { id: '0a1b2c3d4e5f6071', hostname: 'cp-3', peerUrls: ['https://127.0.0.3:2380'], isLearner: true },
    ])
  })

  it('without the NODE column', () => {
    expect(parseEtcdMembers(WITHOUT_NODE)).toEqual([
      { id: '61dee3edd94c0972', hostname: '', peerUrls: ['https://127.0.0.2:2380'], isLearner: true },
    ])
  })

  it('no output, no members', () => {
    expect(parseEtcdMembers('')).toEqual([])
  })
})
