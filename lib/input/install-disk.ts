import type { ClusterNode } from '../core/model.ts'
import type { Disk } from '../tools/talosctl.ts'
import { MachineConfig, type InstallTarget } from './machine-config.ts'

export type { InstallTarget } from './machine-config.ts'

/** The install disk or selector the node's machine config asks for (falls back to the inventory). */
export function installTarget(node: ClusterNode): InstallTarget {
  const fromConfig = MachineConfig.of(node.configFile).installTarget()
  if (fromConfig) return fromConfig
  return {
    ...(node.installDisk ? { disk: node.installDisk } : {}),
    ...(node.installDiskSelector ? { selector: node.installDiskSelector } : {}),
  }
}

// go-humanize ParseBytes (Talos parses the selector's size with it): SI and IEC units, case-insensitive
const SIZE_UNITS: Record<string, number> = {
  '': 1,
  B: 1,
  K: 1e3,
  KB: 1e3,
  M: 1e6,
  MB: 1e6,
  G: 1e9,
  GB: 1e9,
  T: 1e12,
  TB: 1e12,
  P: 1e15,
  PB: 1e15,
  KI: 1024,
  KIB: 1024,
  MI: 1024 ** 2,
  MIB: 1024 ** 2,
  GI: 1024 ** 3,
  GIB: 1024 ** 3,
  TI: 1024 ** 4,
  TIB: 1024 ** 4,
  PI: 1024 ** 5,
  PIB: 1024 ** 5,
}

function parseSize(text: string): number | undefined {
  const m = /^\s*([\d.]+)\s*([a-zA-Z]*)\s*$/.exec(text.replace(/,/g, ''))
  if (!m) return undefined
  const unit = SIZE_UNITS[(m[2] ?? '').toUpperCase()]
  return unit === undefined ? undefined : Math.trunc(Number(m[1]) * unit)
}

/** `disk.size <op> <uint>`: no operator means `==`, an exact comparison as Talos's CEL does. */
function sizeMatches(expr: string, size: number): boolean {
  const m = /^\s*(>=|<=|>|<|==)?\s*(.+)$/.exec(expr)
  const bound = m ? parseSize(m[2] ?? '') : undefined
  if (!m || bound === undefined) return false
  switch (m[1]) {
    case '>=':
      return size >= bound
    case '<=':
      return size <= bound
    case '>':
      return size > bound
    case '<':
      return size < bound
    default:
      return size === bound
  }
}

/** ryanuber/go-glob, the selector's glob: `*` matches any run of characters, nothing else is special. */
function glob(pattern: string, value: string): boolean {
  const regex = new RegExp(
    `^${pattern
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
    's',
  )
  return regex.test(value)
}

/**
 * Talos's diskSelector, as InstallConfig.DiskMatchExpression builds it (pkg/machinery/config/types/v1alpha1/
 * v1alpha1_provider.go): every field given must match, and always `disk.transport != ""`,
 * `!disk.readonly`, `!disk.cdrom`. `type: sd` means transport `mmc`; `name` is not supported (no disk).
 */
export function selectorMatches(selector: Record<string, unknown>, disk: Disk): boolean {
  if (disk.readonly || disk.cdrom || disk.transport === '') return false
  for (const [key, raw] of Object.entries(selector)) {
    const value = String(raw)
    switch (key) {
      case 'size':
        if (!sizeMatches(value, disk.sizeBytes)) return false
        break
      case 'model':
      case 'serial':
      case 'wwid':
      case 'uuid':
      case 'modalias':
      case 'busPath':
        if (value !== '' && !glob(value, disk[key])) return false
        break
      case 'type':
        if (value === 'nvme' && disk.transport !== 'nvme') return false
        if (value === 'sd' && disk.transport !== 'mmc') return false
        if (value === 'hdd' && !disk.rotational) return false
        if (value === 'ssd' && disk.rotational) return false
        if (!['nvme', 'sd', 'hdd', 'ssd', ''].includes(value)) return false // unsupported disk type
        break
      case 'name':
        if (value !== '') return false // "selector on name is not supported"
        break
      default:
        break
    }
  }
  return true
}

/** Every disk the target matches (a selector may match several: Talos installs to the first). */
export function matchingDisks(target: InstallTarget, disks: Disk[]): Disk[] {
  // the selector wins over the disk, as in findInstallDisk below
  if (target.selector) return disks.filter((d) => selectorMatches(target.selector as Record<string, unknown>, d))
  if (target.disk) return disks.filter((d) => d.devPath === target.disk || `/dev/${d.id}` === target.disk)
  return []
}

/** `/dev/sda (100 GB, QEMU HARDDISK, virtio)`: what an operator recognizes a disk by. */
export function describeDisk(disk: Disk): string {
  const what = [`${Math.round(disk.sizeBytes / 1e9)} GB`, disk.model, disk.transport].filter((x) => x).join(', ')
  return `${disk.devPath} (${what})`
}

/** Below this an install disk is worth a word (100 GB is Talos's recommendation). */
export const SMALL_DISK_BYTES = 32e9

/**
 * Talos's minimum disk (siderolabs/talos pkg/minimal/limits.go DiskSize): below it the EPHEMERAL
 * partition is too small for `talosctl health`'s disk size check, and wait-ready fails the node.
 */
export const MINIMUM_DISK_BYTES = 6 * 1024 ** 3

/** What is risky about installing to `disk` (a USB stick, a small disk), or nothing. */
export function diskRisks(disk: Disk): string[] {
  const risks: string[] = []
  if (disk.transport === 'usb') risks.push('a USB disk (removable: often the boot stick, not the disk meant for the system)')
  if (disk.sizeBytes > 0 && disk.sizeBytes < MINIMUM_DISK_BYTES)
    risks.push(
      `only ${Math.round(disk.sizeBytes / 1e9)} GB, under Talos's minimum of 6 GiB (its EPHEMERAL partition would be too small: wait-ready fails the node, as talosctl health does)`,
    )
  else if (disk.sizeBytes > 0 && disk.sizeBytes < SMALL_DISK_BYTES) risks.push(`only ${Math.round(disk.sizeBytes / 1e9)} GB`)
  return risks
}

/**
 * Which disk the node would install to; undefined when nothing matches. With both a selector and a
 * disk, the selector wins and the disk is not looked at, as in Talos (the install task in
 * internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer_tasks.go tries the match expression
 * first).
 */
export function findInstallDisk(target: InstallTarget, disks: Disk[]): Disk | undefined {
  if (target.selector) return disks.find((d) => selectorMatches(target.selector as Record<string, unknown>, d))
  if (target.disk) return disks.find((d) => d.devPath === target.disk || `/dev/${d.id}` === target.disk)
  return undefined
}

export function describeTarget(target: InstallTarget): string {
  if (target.selector) return `install disk selector ${JSON.stringify(target.selector)}`
  if (target.disk) return `install disk ${target.disk}`
  return 'no install disk'
}
