// Issue 27, item 17: an install disk named by its path that is read-only (or a CD-ROM) on the node
// passed preflight and was applied; a selector never matches such a disk (Talos adds !disk.readonly
// && !disk.cdrom to every selector), but a path is taken as it is. Preflight now fails the node as
// disk-mismatch, before any config is applied. 127.237.12.0/24.
import { describe, expect, it } from 'vitest'
import { callsTo, nodeIn } from '../e2e/harness.js'
import { FAST, ROW_TIMEOUT, withCluster } from './helpers.js'

describe('install disk named by path', () => {
  it(
    'a read-only /dev/sdb as the install disk: wrkr-1 fails preflight as disk-mismatch naming it; nothing applied',
    () =>
      withCluster(
        '127.237.12',
        {
          workers: 1,
          vip: false,
          nodeOverrides: {
            'wrkr-1': {
              disks: [
                { dev: '/dev/sda', size: '100GB', model: 'QEMU HARDDISK' },
                { dev: '/dev/sdb', size: '200GB', model: 'WRITE PROTECTED', readonly: true },
              ],
              installDisk: '/dev/sdb',
            },
          },
        },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, FAST)
          expect(result.code, result.stderr).toBe(1)
          const wrkr = nodeIn(cluster.report(), 'preflight', 'wrkr-1')
          expect(wrkr.status).toBe('failed')
          expect(wrkr.error?.kind).toBe('disk-mismatch')
          expect(wrkr.error?.message).toBe(
            'install disk /dev/sdb is read-only on this node (/dev/sdb (200 GB, WRITE PROTECTED, virtio)): the install cannot write to it',
          )
          expect(wrkr.error?.hint).toMatch(/talosctl get disks --insecure .*-n 127\.237\.12\.21/)
          expect(callsTo(cluster.calls(), 'wrkr-1', 'apply')).toEqual([])
        },
      ),
    ROW_TIMEOUT,
  )
})
