// What a node reports of its memory and its EPHEMERAL volume, and the minimums `talosctl health` holds
// them to ("all nodes memory sizes", "all nodes disk sizes": siderolabs/talos pkg/cluster/check/nodes.go
// AllNodesMemorySizes reads the Memory API's meminfo, AllNodesDiskSizes the VolumeStatus EPHEMERAL;
// the minimums are pkg/minimal/limits.go's, the partition sizes pkg/machinery/imager/quirks/partitions.go's).
import { diskMatches } from './validate.js'

const MiB = 1024 ** 2
const GiB = 1024 * MiB

/**
 * Memory the kernel and the firmware keep for themselves: MemTotal is the machine's memory less this
 * (an approximation: Talos's minimums allow 150 MiB for it, pkg/minimal/limits.go).
 */
export const KERNEL_RESERVED = 100 * MiB

/** pkg/minimal Memory: the minimum MemTotal (bytes) per machine type */
export const MEMORY_MINIMUM = { controlplane: 1848 * MiB - 150 * MiB, worker: 1 * GiB - 150 * MiB }
/** pkg/minimal Memory: the recommended MemTotal (bytes) per machine type */
const MEMORY_RECOMMENDED = { controlplane: 4 * GiB - 150 * MiB, worker: 2 * GiB - 150 * MiB }
/** pkg/minimal DiskSize: what the boot's disk size check holds EPHEMERAL to */
const DISK_SIZE = 6 * GiB

/**
 * AllNodesDiskSizes: the smallest EPHEMERAL (bytes), minimal.DiskSize() (6 GiB) less the UKI EFI
 * partition (100 MiB EFI + 1 MiB BIOS + 2000 MiB BOOT), STATE (100 MiB), META (1 MiB) and 10 MiB of
 * GPT overhead
 */
export const EPHEMERAL_MINIMUM = 6 * GiB - (2101 * MiB + 100 * MiB + 1 * MiB + 10 * MiB)

/** the partitions before EPHEMERAL (GRUB: EFI 100 MiB, BIOS 1 MiB, BOOT 2000 MiB, META 1 MiB, STATE 100 MiB; UKI the same in all) */
const BEFORE_EPHEMERAL = 2202 * MiB
/** GPT: the first partition starts at 1 MiB; the backup header and table take the last 33 sectors */
const GPT_HEAD = 1 * MiB
const GPT_TAIL = 33 * 512

/** the node's /proc/meminfo as the Memory API answers it (kB) */
export function memInfo(node) {
  const total = Math.max(0, node.spec.memory - KERNEL_RESERVED)
  const kB = (bytes) => Math.floor(bytes / 1024)
  // an idle Talos node: a few hundred MiB in use, the rest free or cache
  const used = Math.min(total, 600 * MiB)
  const cached = Math.min(total - used, 400 * MiB)
  return {
    memtotal: kB(total),
    memfree: kB(total - used - cached),
    memavailable: kB(total - used),
    buffers: 0,
    cached: kB(cached),
    shmem: kB(Math.min(cached, 16 * MiB)),
  }
}

/** the disk Talos was installed on: the config's install disk, else the first disk its selector matches, else the first disk */
export function systemDisk(node) {
  const install = node.config?.machine?.install ?? {}
  const disks = node.disks.filter((d) => !d.cdrom)
  if (install.disk) return disks.find((d) => d.dev === install.disk) ?? disks[0]
  if (install.diskSelector) return disks.find((d) => diskMatches(install.diskSelector, d)) ?? disks[0]
  return disks[0]
}

/** `/dev/sda` partition 6 → `/dev/sda6`, `/dev/nvme0n1` → `/dev/nvme0n1p6` */
const partition = (dev, index) => `${dev}${/\d$/.test(dev) ? 'p' : ''}${index}`

/**
 * The VolumeStatus EPHEMERAL (controllers/block/volume_*.go) once the node boots from its install:
 * the rest of the system disk after the Talos partitions (the 6th partition with GRUB, the 4th with
 * UKI), ready and mounted at /var; none before the node runs from its disk.
 */
export function ephemeralVolume(node) {
  if (!node.installed || !node.configured || !['booting', 'running'].includes(node.stage)) return null
  const disk = systemDisk(node)
  if (!disk) return null
  const size = Math.max(0, Math.floor((disk.size - GPT_TAIL - GPT_HEAD - BEFORE_EPHEMERAL) / MiB) * MiB)
  const index = node.spec.secureBoot ? 4 : 6
  return {
    phase: 'ready',
    type: 'partition',
    location: partition(disk.dev, index),
    mountLocation: '/var',
    partitionIndex: index,
    parentLocation: disk.dev,
    size,
    prettySize: humanizeIBytes(size),
    filesystem: 'xfs',
    mountSpec: { targetPath: '/var', selinuxLabel: 'system_u:object_r:var_t:s0', fileMode: 0o755, uid: 0, gid: 0 },
  }
}

/** go-humanize IBytes: `3.8 GiB`, `12 GiB`, `512 B` */
export function humanizeIBytes(bytes) {
  if (bytes < 10) return `${bytes} B`
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB']
  const e = Math.floor(Math.log(bytes) / Math.log(1024))
  const val = Math.floor((bytes / 1024 ** e) * 10 + 0.5) / 10
  return `${val < 10 ? val.toFixed(1) : val.toFixed(0)} ${units[e]}`
}

/**
 * The boot sequence's memorySizeCheck and diskSizeCheck (v1alpha1_sequencer_tasks.go MemorySizeCheck,
 * DiskSizeCheck): console lines only, the boot goes on whatever they find
 */
export function bootSizeChecks(node) {
  const mib = (b) => Math.floor(b / MiB)
  const total = memInfo(node).memtotal * 1024
  const minimum = MEMORY_MINIMUM[node.role] ?? MEMORY_MINIMUM.worker
  const recommended = MEMORY_RECOMMENDED[node.role] ?? MEMORY_RECOMMENDED.worker
  const memory =
    total < minimum
      ? [
          'WARNING: memory size is less than recommended',
          'WARNING: Talos may not work properly',
          `WARNING: minimum memory size is ${mib(minimum)} MiB`,
          `WARNING: recommended memory size is ${mib(recommended)} MiB`,
          `WARNING: current total memory size is ${mib(total)} MiB`,
        ]
      : total < recommended
        ? [`NOTE: recommended memory size is ${mib(recommended)} MiB`, `NOTE: current total memory size is ${mib(total)} MiB`]
        : ['memory size is OK', `memory size is ${mib(total)} MiB`]
  const ephemeral = ephemeralVolume(node)
  const disk = !ephemeral
    ? []
    : ephemeral.size < DISK_SIZE
      ? [
          'WARNING: disk size is less than recommended',
          'WARNING: Talos may not work properly',
          `WARNING: minimum recommended disk size is ${mib(DISK_SIZE)} MiB`,
          `WARNING: current total disk size is ${mib(ephemeral.size)} MiB`,
        ]
      : ['disk size is OK', `disk size is ${mib(ephemeral.size)} MiB`]
  return [...memory.map((l) => `task memorySizeCheck (1/1): ${l}`), ...disk.map((l) => `task diskSizeCheck (1/1): ${l}`)]
}
