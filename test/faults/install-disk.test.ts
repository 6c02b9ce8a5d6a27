// Preflight shows the disk each node in maintenance installs to, and warns before anything is wiped
// (issue 28, item 6): a USB stick, a small disk, a selector matching several disks. 127.226.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { nodeIn } from '../e2e/harness.js'
import { FAST, ROW_TIMEOUT, withCluster } from './helpers.js'

const STICK = { dev: '/dev/sda', size: '16GB', model: 'SanDisk Ultra', transport: 'usb' }
const NVME = { dev: '/dev/nvme0n1', size: '1TB', model: 'Samsung 990', transport: 'nvme' }

describe.concurrent('install disk in preflight', () => {
  it(
    'a 16 GB USB stick as the install disk: shown with size, model, transport, and warned about',
    () =>
      withCluster(
        '127.226.1',
        { workers: 1, vip: false, nodeOverrides: { 'wrkr-1': { disks: [STICK, NVME], installDisk: '/dev/sda' } } },
        async (cluster) => {
          const result = await cluster.task('bootstrap:preflight', {}, FAST)
          expect(result.code, result.stderr).toBe(0)
          const report = cluster.report()
          expect(nodeIn(report, 'preflight', 'cp-1').detail).toBe('maintenance, installs to /dev/sda (100 GB, QEMU HARDDISK, virtio)')
          const detail = nodeIn(report, 'preflight', 'wrkr-1').detail ?? ''
          expect(detail).toMatch(/^maintenance, installs to \/dev\/sda \(16 GB, SanDisk Ultra, usb\); warning: /)
          expect(detail).toContain('a USB disk')
          expect(detail).toContain('only 16 GB')
          expect(result.stderr).toMatch(
            /wrkr-1: the install disk is a USB disk .* it will be wiped: check install disk \/dev\/sda in \S+e2e-wrkr-1\.yaml/,
          )
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    'a selector matching several disks: every match listed, the first named as the one Talos installs to',
    () =>
      withCluster(
        '127.226.2',
        {
          workers: 1,
          vip: false,
          nodeOverrides: {
            'wrkr-1': {
              disks: [
                { dev: '/dev/sda', size: '200GB', model: 'QEMU HARDDISK' },
                { dev: '/dev/sdb', size: '500GB', model: 'QEMU HARDDISK' },
              ],
              installDiskSelector: { size: '>= 100GB' },
            },
          },
        },
        async (cluster) => {
          const result = await cluster.task('bootstrap:preflight', {}, FAST)
          expect(result.code, result.stderr).toBe(0)
          const detail = nodeIn(cluster.report(), 'preflight', 'wrkr-1').detail ?? ''
          expect(detail).toContain('installs to /dev/sda (200 GB, QEMU HARDDISK, virtio)')
          expect(detail).toContain(
            'the selector matches 2 disks (/dev/sda (200 GB, QEMU HARDDISK, virtio), /dev/sdb (500 GB, QEMU HARDDISK, virtio)): Talos installs to the first',
          )
          expect(result.stderr).toContain('wrkr-1: the selector matches 2 disks')
        },
      ),
    ROW_TIMEOUT,
  )
})
