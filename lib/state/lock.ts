import { closeSync, constants, openSync, readFileSync, rmSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { InputError } from '../core/errors.js'
import { stateDir } from './paths.js'
import { ensureStateDir, refuseSymlink } from './state-files.js'

/** What identifies a process beyond its pid (pids are reused): its start time and command line, from /proc. */
interface Identity {
  pid: number
  /** start time in clock ticks since boot (/proc/<pid>/stat field 22); undefined where /proc is absent */
  start?: string
  command?: string
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
  const start = field('start')
  const command = field('command')
  return { pid, ...(start ? { start } : {}), ...(command ? { command } : {}) }
}

/** Why the holder no longer holds the lock, or undefined when it is still running. */
function goneReason(holder: Identity): string | undefined {
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
  return `pid ${holder.pid}${holder.command ? `, ${holder.command}` : ''}`
}

/**
 * Takes `.bootstrap/lock` for this process. A live holder refuses the run (exit 2, naming it); a lock
 * whose holder is gone, or whose pid now belongs to another process, is taken over with a warning.
 * Returns the release function.
 */
export function acquireLock(clusterDir: string, warn: (msg: string) => void): () => void {
  ensureStateDir(clusterDir)
  const path = join(stateDir(clusterDir), 'lock')
  const self = `${process.pid}\nstart: ${procStart(process.pid) ?? ''}\ncommand: ${procCommand(process.pid) ?? process.argv.join(' ')}\n`
  for (let tries = 0; tries < 2; tries++) {
    refuseSymlink(path)
    try {
      const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644)
      try {
        writeSync(fd, self)
      } finally {
        closeSync(fd)
      }
      return () => rmSync(path, { force: true })
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    let text = ''
    try {
      text = readFileSync(path, 'utf8')
    } catch (err) {
      // released between the two calls: try again
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOENT') continue
      throw new InputError(`cannot read the lock (${code ?? 'error'})`, {
        file: path,
        fix: `remove it if no run is active (rm -r ${path})`,
      })
    }
    const holder = parseLock(text)
    const gone = holder ? (holder.pid === process.pid ? undefined : goneReason(holder)) : 'it names no pid'
    if (holder && !gone && holder.pid !== process.pid) {
      throw new InputError(`another run holds the lock (${describe(holder)})`, {
        file: path,
        fix: `wait for pid ${holder.pid} to finish, or stop it (kill -INT ${holder.pid})`,
      })
    }
    warn(`taking over a stale lock ${path} left by ${holder ? describe(holder) : 'an unknown process'}: ${gone ?? 'this process'}`)
    rmSync(path, { force: true })
  }
  throw new InputError('could not take the lock', { file: path, fix: 'remove the lock file if no run is active' })
}
