import { randomBytes } from 'node:crypto'
import { closeSync, constants, linkSync, openSync, readFileSync, readlinkSync, rmSync, statSync, writeSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { InputError } from '../core/errors.ts'
import { stateDir } from './paths.ts'
import { ensureStateDir, refuseSymlink } from './state-files.ts'
import { readRegularFile } from '../core/files.ts'

/**
 * What identifies a process beyond its pid (pids are reused, and mean nothing in another PID
 * namespace or on another host): its start time and command line from /proc, the host name, the
 * boot id (/proc/sys/kernel/random/boot_id: a reboot ends every run) and the PID namespace.
 */
interface Identity {
  pid: number
  /** start time in clock ticks since boot (/proc/<pid>/stat field 22); undefined where /proc is absent */
  start?: string
  command?: string
  host?: string
  boot?: string
  pidns?: string
}

function bootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined
  } catch {
    return undefined
  }
}

function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid')
  } catch {
    return undefined
  }
}

function procStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // the command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
  } catch {
    return undefined
  }
}

function procCommand(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ') || undefined
  } catch {
    return undefined
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** The lock file: the pid on the first line (docs/design.md), then `start:` and `command:` lines. */
function parseLock(text: string): Identity | undefined {
  const [first = '', ...rest] = text.split('\n')
  const pid = Number(first.trim())
  if (!Number.isSafeInteger(pid) || pid <= 0) return undefined
  const field = (name: string): string | undefined => rest.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2)
  const identity: Identity = { pid }
  for (const name of ['start', 'command', 'host', 'boot', 'pidns'] as const) {
    const value = field(name)
    if (value) identity[name] = value
  }
  return identity
}

/** Where the holder runs when this process cannot look at it: another host or another PID namespace. */
function elsewhere(holder: Identity): string | undefined {
  if (holder.host && holder.host !== hostname()) return `on host ${holder.host}`
  const boot = bootId()
  // another boot of this machine is over whatever its namespace: checked by gone()
  if (holder.boot && boot && holder.boot !== boot) return undefined
  const ns = pidNamespace()
  if (holder.pidns && ns && holder.pidns !== ns) return `in another PID namespace (${holder.pidns}, a container)`
  return undefined
}

/** Why the holder no longer holds the lock, or undefined when it is still running. */
function goneReason(holder: Identity): string | undefined {
  const boot = bootId()
  if (holder.boot && boot && holder.boot !== boot && (!holder.host || holder.host === hostname()))
    return `the machine rebooted since (boot id ${holder.boot})`
  if (!alive(holder.pid)) return `pid ${holder.pid} is gone`
  const start = procStart(holder.pid)
  if (holder.start && start && start !== holder.start)
    return `pid ${holder.pid} now belongs to another process (${procCommand(holder.pid) ?? 'unknown'})`
  // a lock without a start time (older format): the pid must at least run one of our scripts
  const command = procCommand(holder.pid)
  if (!holder.start && command !== undefined && !/scripts\/[\w-]+\.ts/.test(command))
    return `pid ${holder.pid} now belongs to another process (${command})`
  return undefined
}

function describe(holder: Identity): string {
  return `pid ${holder.pid}${holder.host && holder.host !== hostname() ? ` on ${holder.host}` : ''}${holder.command ? `, ${holder.command}` : ''}`
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/** link(2): creates `path` only when it does not exist, atomically, never following a link. */
function linkNew(from: string, path: string): boolean {
  try {
    linkSync(from, path)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw err
  }
}

function readOrUndefined(path: string): string | undefined {
  try {
    return readRegularFile(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}

/**
 * Who holds the lock now, for the read-only commands (status): `pid 123, <command> (since <time>)`,
 * or undefined when nobody does (no lock, or its holder is gone). A holder on another host or in
 * another PID namespace cannot be looked at: it counts as running.
 */
export function lockHolder(clusterDir: string): string | undefined {
  const path = join(stateDir(clusterDir), 'lock')
  let text: string | undefined
  let since: Date
  try {
    text = readOrUndefined(path)
    since = statSync(path).mtime
  } catch {
    return undefined // unreadable: the run that writes it is the one to name it
  }
  const holder = text ? parseLock(text) : undefined
  if (!holder || (!elsewhere(holder) && goneReason(holder))) return undefined
  return `${describe(holder)} (since ${since.toISOString()})`
}

/** How long a takeover may take before its marker counts as left by a crash. */
const TAKEOVER_STALE_MS = 10_000

/**
 * Takes `.bootstrap/lock` for this process. A live holder refuses the run (exit 2, naming it); a lock
 * whose holder is gone, or whose pid now belongs to another process, is taken over with a warning.
 * Returns the release function.
 */
export function acquireLock(clusterDir: string, warn: (msg: string) => void): () => void {
  ensureStateDir(clusterDir)
  const path = join(stateDir(clusterDir), 'lock')
  const fields = [
    `start: ${procStart(process.pid) ?? ''}`,
    `command: ${procCommand(process.pid) ?? process.argv.join(' ')}`,
    `host: ${hostname()}`,
    `boot: ${bootId() ?? ''}`,
    `pidns: ${pidNamespace() ?? ''}`,
  ]
  const self = `${process.pid}\n${fields.join('\n')}\n`
  // the lock is written whole under a name of its own, then linked into place: it appears complete
  // or not at all, and link(2) fails when a lock is there
  const mine = `${path}.${process.pid}.${randomBytes(6).toString('hex')}`
  const fd = openSync(mine, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644)
  try {
    writeSync(fd, self)
  } finally {
    closeSync(fd)
  }
  const release = (): void => {
    // only our own lock: one taken over as stale is someone else's now
    if (readOrUndefined(path) === self) rmSync(path, { force: true })
  }
  try {
    for (let tries = 0; tries < 50; tries++) {
      refuseSymlink(path)
      if (linkNew(mine, path)) return release
      let text: string | undefined
      try {
        text = readOrUndefined(path)
      } catch (err) {
        throw new InputError(`cannot read the lock (${(err as NodeJS.ErrnoException).code ?? 'error'})`, {
          file: path,
          fix: `remove it if no run is active (rm ${path})`,
        })
      }
      // released between the two calls: try again
      if (text === undefined) continue
      const holder = parseLock(text)
      if (holder && holder.pid !== process.pid) {
        const where = elsewhere(holder)
        if (where)
          throw new InputError(`another run holds the lock (${describe(holder)}, ${where}): it cannot be checked from here`, {
            file: path,
            fix: `wait for that run to finish; if it is gone for good (its host or container stopped), remove the lock: rm ${path}`,
          })
      }
      const gone = holder ? (holder.pid === process.pid ? 'this process' : goneReason(holder)) : 'it names no pid'
      if (holder && !gone) {
        throw new InputError(`another run holds the lock (${describe(holder)})`, {
          file: path,
          fix: `wait for pid ${holder.pid} to finish, or stop it (kill -INT ${holder.pid})`,
        })
      }
      // stale: one process at a time replaces it, and only the lock it judged (see takeOver)
      const outcome = takeOver(path, mine, text)
      if (outcome === 'taken') {
        warn(`taking over a stale lock ${path} left by ${holder ? describe(holder) : 'an unknown process'}: ${gone ?? 'this process'}`)
        return release
      }
      if (outcome === 'busy') sleepSync(20 + Math.floor(Math.random() * 30))
    }
  } finally {
    rmSync(mine, { force: true })
  }
  throw new InputError('could not take the lock', { file: path, fix: 'remove the lock file if no run is active' })
}

/**
 * Replaces the stale lock `judged` with ours while holding `<lock>.takeover` (created with link(2)
 * too): the lock is removed only by its owner or by the one process in here, which removes it only
 * when it still reads as `judged`; a new lock can appear only where none is, by link(2). So two runs
 * racing over one stale lock end with one holder.
 */
function takeOver(path: string, mine: string, judged: string): 'taken' | 'changed' | 'busy' {
  const marker = `${path}.takeover`
  if (!linkNew(mine, marker)) {
    // a takeover left by a crash (its holder gone, long ago) is cleared; otherwise wait for it
    try {
      const holder = parseLock(readRegularFile(marker))
      const old = Date.now() - statSync(marker).mtimeMs > TAKEOVER_STALE_MS
      if (old && (!holder || goneReason(holder))) rmSync(marker, { force: true })
    } catch {
      // gone meanwhile: try again
    }
    return 'busy'
  }
  try {
    if (readOrUndefined(path) !== judged) return 'changed'
    rmSync(path, { force: true })
    return linkNew(mine, path) ? 'taken' : 'changed'
  } finally {
    rmSync(marker, { force: true })
  }
}
