// The install disk selector decides as Talos's InstallConfig.DiskMatchExpression does
// (pkg/machinery/config/types/v1alpha1/v1alpha1_provider.go; size parsed by go-humanize, glob by
// ryanuber/go-glob), on `talosctl get disks -o json` as a real node prints it: empty fields omitted
// (pkg/machinery/resources/block/disk.go omitempty), loop devices listed.
import { describe, expect, it } from 'vitest'
import { findInstallDisk, selectorMatches } from '../../lib/input/install-disk.js'
import { parseDisks, type Disk } from '../../lib/tools/talosctl.js'

// the shapes of a real `get disks -o json`: loop0 has no transport, sda no serial/wwid/rotational
const GET_DISKS = [
  {
    node: '',
    metadata: { id: 'loop0' },
    spec: {
      dev_path: '/dev/loop0',
      size: 75763712,
      pretty_size: '76 MB',
      io_size: 512,
      sector_size: 512,
      readonly: true,
      cdrom: false,
      sub_system: '/sys/class/block',
    },
  },
  {
    node: '',
    metadata: { id: 'mmcblk0' },
    spec: {
      dev_path: '/dev/mmcblk0',
      size: 31914983424,
      pretty_size: '32 GB',
      io_size: 512,
      sector_size: 512,
      readonly: false,
      cdrom: false,
      serial: '0x1b2c3d4e',
      transport: 'mmc',
      sub_system: '/sys/class/block',
    },
  },
  {
    node: '',
    metadata: { id: 'sda' },
    spec: {
      dev_path: '/dev/sda',
      size: 100000000000,
      pretty_size: '100 GB',
      io_size: 512,
      sector_size: 512,
      readonly: false,
      cdrom: false,
      model: 'QEMU HARDDISK',
      transport: 'virtio',
      bus_path: '/pci0000:00/0000:00:05.0/virtio2',
      sub_system: '/sys/class/block',
    },
  },
  {
    node: '',
    metadata: { id: 'sdb' },
    spec: {
      dev_path: '/dev/sdb',
      size: 101000000000,
      pretty_size: '101 GB',
      io_size: 512,
      sector_size: 512,
      readonly: false,
      cdrom: false,
      model: 'QEMU HARDDISK',
      transport: 'virtio',
      rotational: true,
      sub_system: '/sys/class/block',
    },
  },
]
  .map((d) => JSON.stringify(d))
  .join('\n')

const disks = async (): Promise<Disk[]> => parseDisks(GET_DISKS)

describe('install disk selector', () => {
  it('size without an operator is exact: 100GB matches 100000000000 bytes, not 101 GB (no tolerance)', async () => {
    const all = await disks()
    expect(findInstallDisk({ selector: { size: '100GB' } }, all)?.devPath).toBe('/dev/sda')
    expect(findInstallDisk({ selector: { size: '101GB', type: 'ssd' } }, all)).toBeUndefined()
    expect(findInstallDisk({ selector: { size: '>= 101GB' } }, all)?.devPath).toBe('/dev/sdb')
    expect(findInstallDisk({ selector: { size: '99GB' } }, all)).toBeUndefined()
  })

  it('type sd means transport mmc; hdd rotational, ssd not; a disk without transport never matches', async () => {
    const all = await disks()
    expect(findInstallDisk({ selector: { type: 'sd' } }, all)?.devPath).toBe('/dev/mmcblk0')
    expect(findInstallDisk({ selector: { type: 'hdd' } }, all)?.devPath).toBe('/dev/sdb')
    expect(all.filter((d) => selectorMatches({ type: 'ssd' }, d)).map((d) => d.devPath)).toEqual(['/dev/mmcblk0', '/dev/sda'])
    expect(all.filter((d) => selectorMatches({ size: '< 1GB' }, d))).toEqual([]) // loop0: readonly, no transport
  })

  it('globs: only * is special; name is not supported; an empty serial does not match a pattern', async () => {
    const all = await disks()
    expect(findInstallDisk({ selector: { model: 'QEMU*' } }, all)?.devPath).toBe('/dev/sda')
    expect(findInstallDisk({ selector: { model: 'QEMU?HARDDISK' } }, all)).toBeUndefined()
    expect(findInstallDisk({ selector: { busPath: '/pci0000:00/*' } }, all)?.devPath).toBe('/dev/sda')
    expect(findInstallDisk({ selector: { name: '/dev/sda' } }, all)).toBeUndefined()
    expect(findInstallDisk({ selector: { serial: '0x*' } }, all)?.devPath).toBe('/dev/mmcblk0')
  })

  it('with both a selector and a disk, the selector wins (Talos ignores install.disk then)', async () => {
    const all = await disks()
    // talosctl gen config writes /dev/sda; a selector patch then picks the NVMe disk
    expect(findInstallDisk({ disk: '/dev/sda', selector: { size: '>= 101GB' } }, all)?.devPath).toBe('/dev/sdb')
    expect(findInstallDisk({ disk: '/dev/sdz', selector: { size: '100GB' } }, all)?.devPath).toBe('/dev/sda')
    expect(findInstallDisk({ disk: '/dev/sda', selector: { size: '5TB' } }, all)).toBeUndefined()
  })
})
