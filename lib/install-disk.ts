import { readFileSync } from 'node:fs'
import { parseAllDocuments } from 'yaml'
import type { ClusterNode } from './inventory.js'
import type { Disk } from './tools/talosctl.js'

export interface InstallTarget {
  disk?: string
  selector?: Record<string, unknown>
}

/** The install disk or selector the node's machine config asks for (falls back to the inventory). */
export function installTarget(node: ClusterNode): InstallTarget {
  try {
    for (const doc of parseAllDocuments(readFileSync(node.configFile, 'utf8'))) {
      const config = doc.toJS() as { machine?: { install?: { disk?: unknown; diskSelector?: unknown } } } | null
      const install = config?.machine?.install
      if (!install) continue
      const target: InstallTarget = {}
      if (typeof install.disk === 'string' && install.disk) target.disk = install.disk
      if (install.diskSelector && typeof install.diskSelector === 'object') target.selector = install.diskSelector as Record<string, unknown>
      if (target.disk || target.selector) return target
    }
  } catch {
    // validation reports unreadable configs
  }
  return { ...(node.installDisk ? { disk: node.installDisk } : {}), ...(node.installDiskSelector ? { selector: node.installDiskSelector } : {}) }
}

const SIZE_UNITS: Record<string, number> = { '': 1, B: 1, KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12, KIB: 1024, MIB: 1024 ** 2, GIB: 1024 ** 3, TIB: 1024 ** 4 }

function parseSize(text: string): number | undefined {
  const m = /^\s*([\d.]+)\s*([a-zA-Z]*)\s*$/.exec(text)
  if (!m) return undefined
  const unit = SIZE_UNITS[(m[2] ?? '').toUpperCase()]
  return unit === undefined ? undefined : Number(m[1]) * unit
}

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
      // an exact size matches within 1% (vendors round)
      return Math.abs(size - bound) <= bound * 0.01
  }
}

function glob(pattern: string, value: string): boolean {
  const regex = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`)
  return regex.test(value)
}

function diskType(disk: Disk): string {
  if (disk.cdrom) return 'cd'
  if (disk.transport === 'nvme') return 'nvme'
  if (disk.id.startsWith('mmcblk')) return 'sd'
  return disk.rotational ? 'hdd' : 'ssd'
}

/** Talos' diskSelector fields (size, model, serial, wwid, type, busPath, modalias) against one disk. */
export function selectorMatches(selector: Record<string, unknown>, disk: Disk): boolean {
  if (disk.readonly || disk.cdrom) return false
  for (const [key, raw] of Object.entries(selector)) {
    const value = String(raw)
    switch (key) {
      case 'size':
        if (!sizeMatches(value, disk.sizeBytes)) return false
        break
      case 'model':
      case 'serial':
      case 'wwid':
        if (!glob(value, disk[key])) return false
        break
      case 'type':
        if (diskType(disk) !== value) return false
        break
      case 'name':
        if (!glob(value, disk.devPath)) return false
        break
      default:
        // fields we cannot check here (busPath, modalias, uuid) are left to the node
        break
    }
  }
  return true
}

/** Which disk the node would install to; undefined when nothing matches. */
export function findInstallDisk(target: InstallTarget, disks: Disk[]): Disk | undefined {
  if (target.disk) return disks.find((d) => d.devPath === target.disk || `/dev/${d.id}` === target.disk)
  if (target.selector) return disks.find((d) => selectorMatches(target.selector as Record<string, unknown>, d))
  return undefined
}

export function describeTarget(target: InstallTarget): string {
  if (target.disk) return `install disk ${target.disk}`
  if (target.selector) return `install disk selector ${JSON.stringify(target.selector)}`
  return 'no install disk'
}
