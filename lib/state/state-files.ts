// What a run writes under CLUSTER_DIR/.bootstrap: never through a symbolic link (a planted link would
// make the tool append to or overwrite a file elsewhere), and only in a directory it can write.
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readlinkSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs'
import { basename, dirname, isAbsolute, relative, sep } from 'node:path'
import { InputError } from '../core/errors.ts'
import { stateDir } from './paths.ts'

function symlinkError(path: string): InputError {
  return new InputError('is a symbolic link: refusing to write through it', {
    file: path,
    fix: `remove the link (rm ${path}); the tool recreates the file`,
  })
}

/** Errors of the file system that are the operator's to fix (a read-only or foreign directory). */
function unwritable(path: string, err: unknown): InputError | undefined {
  const code = (err as NodeJS.ErrnoException).code
  if (code === 'ELOOP') return symlinkError(path)
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') {
    return new InputError(`cannot write here (${code})`, {
      file: path,
      fix: 'make the cluster directory writable for this user, or copy it to a writable place and point CLUSTER_DIR at the copy',
    })
  }
  if (code === 'ENOTDIR' || code === 'EISDIR' || code === 'EEXIST') {
    return new InputError(`cannot write here (${code}: a file stands where a directory is expected, or a directory where a file is)`, {
      file: path,
      fix: `move ${path} away`,
    })
  }
  return undefined
}

/** Throws InputError when `path` is a symbolic link (a missing path is fine). */
export function refuseSymlink(path: string): void {
  let isLink = false
  try {
    isLink = lstatSync(path).isSymbolicLink()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw unwritable(path, err) ?? err
  }
  if (isLink) throw symlinkError(path)
}

// Every directory of the state directory is opened once (O_DIRECTORY|O_NOFOLLOW) and its files are
// reached through that handle (/proc/self/fd/<fd>/<name>): `.bootstrap` swapped for a link in the
// middle of a run is never written through, the run keeps writing into the directory it checked.
const PROC_FD = '/proc/self/fd'
const handles = new Map<string, number>()
let procFd: boolean | undefined

function haveProcFd(): boolean {
  procFd ??= existsSync(PROC_FD)
  return procFd
}

/** The handle of `path` (a directory), opened without following a link; through `parent`'s handle when given. */
function openDir(path: string, parent: number | undefined): number {
  const at = parent === undefined ? path : `${PROC_FD}/${parent}/${basename(path)}`
  try {
    mkdirSync(at)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw unwritable(path, err) ?? err
  }
  try {
    return openSync(at, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    // O_NOFOLLOW|O_DIRECTORY on a link: ELOOP or ENOTDIR depending on the kernel; say which
    if (code === 'ELOOP' || (code === 'ENOTDIR' && lstatSync(at).isSymbolicLink())) throw symlinkError(path)
    throw unwritable(path, err) ?? err
  }
}

/**
 * The handle of a directory of the state directory (itself or one under it), each opened once and
 * never through a link. A handle whose directory was removed since is opened again (and checked
 * again): a link put in its place is refused.
 */
function stateDirHandle(clusterDir: string, dir: string): number {
  const root = stateDir(clusterDir)
  const parts = relative(root, dir).split(sep).filter(Boolean)
  let current = root
  let parent: number | undefined
  for (const part of ['', ...parts]) {
    if (part) current = `${current}${sep}${part}`
    let fd = handles.get(current)
    if (fd !== undefined && fstatSync(fd).nlink === 0) {
      closeSync(fd)
      handles.delete(current)
      fd = undefined
    }
    if (fd === undefined) {
      fd = openDir(current, parent)
      handles.set(current, fd)
    }
    parent = fd
  }
  return parent as number
}

/** Whether `dir` lies in the state directory (a report named by path elsewhere does not). */
function inStateDir(clusterDir: string, dir: string): boolean {
  const rel = relative(stateDir(clusterDir), dir)
  return !rel.startsWith('..') && !isAbsolute(rel)
}

/** Where the system calls reach `path`: through its directory's handle inside the state directory, as it is elsewhere. */
function reach(clusterDir: string, path: string): string {
  const dir = dirname(path)
  if (!inStateDir(clusterDir, dir)) {
    refuseSymlink(dir)
    return path
  }
  if (!haveProcFd()) {
    ensureStateDirByPath(clusterDir, dir)
    return path
  }
  return `${PROC_FD}/${stateDirHandle(clusterDir, dir)}/${basename(path)}`
}

/** Without /proc: every directory from the state directory down to `dir` exists and is not a link, checked by path. */
function ensureStateDirByPath(clusterDir: string, dir: string): void {
  const parts = relative(stateDir(clusterDir), dir).split(sep).filter(Boolean)
  let current = stateDir(clusterDir)
  for (const part of ['', ...parts]) {
    if (part) current = `${current}${sep}${part}`
    refuseSymlink(current)
    try {
      mkdirSync(current)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'EEXIST' && lstatSync(current).isDirectory()) continue
      throw unwritable(current, err) ?? err
    }
  }
}

/** Every directory from the state directory down to `dir` (itself included) exists and is not a link. */
export function ensureStateDir(clusterDir: string, dir = stateDir(clusterDir)): void {
  // a report named by path elsewhere (bootstrap:report RUN=<file>): its own directory, as it is
  if (!inStateDir(clusterDir, dir)) return refuseSymlink(dir)
  if (haveProcFd()) stateDirHandle(clusterDir, dir)
  else ensureStateDirByPath(clusterDir, dir)
}

/**
 * A directory of the state directory (created if missing) as another process reaches it through this
 * process's handle, `/proc/<pid>/fd/<fd>`: a tool given it (kubectl's --cache-dir) writes into the
 * directory this run checked, never through a link put in its place. The plain path without /proc.
 */
export function handedStateDir(clusterDir: string, dir: string): string {
  if (!inStateDir(clusterDir, dir) || !haveProcFd()) {
    ensureStateDir(clusterDir, dir)
    return dir
  }
  return `/proc/${process.pid}/fd/${stateDirHandle(clusterDir, dir)}`
}

/**
 * Every directory this process opened on the way to `dir` is still what its path names (not moved,
 * removed or replaced by a link): a tool that may outlive the run is given the plain path only then.
 */
export function openedDirUnchanged(dir: string): boolean {
  for (const [path, fd] of handles) {
    if (dir !== path && !dir.startsWith(`${path}${sep}`)) continue
    try {
      const now = lstatSync(path)
      const opened = fstatSync(fd)
      if (!now.isDirectory() || now.ino !== opened.ino || now.dev !== opened.dev) return false
    } catch {
      return false
    }
  }
  return true
}

/** Where the state directory this run opened is now (it may have been moved since), or undefined when it is gone. */
export function openedStateDir(clusterDir: string): string | undefined {
  const root = stateDir(clusterDir)
  const fd = handles.get(root)
  if (fd === undefined || !haveProcFd()) return root
  try {
    const now = readlinkSync(`${PROC_FD}/${fd}`)
    return now.endsWith(' (deleted)') ? undefined : now
  } catch {
    return undefined
  }
}

function hardLinkError(path: string, links: number): InputError {
  return new InputError(`has ${links} hard links: the tool would write into a file that is also elsewhere`, {
    file: path,
    fix: `remove it (rm ${path}); the tool recreates the file`,
  })
}

/**
 * Before a run touches any node: the state directory and the files it will write are plain, writable
 * paths, each with one name (`linked`: the files allowed a second one).
 */
export function checkStateFiles(clusterDir: string, files: string[], dirs: string[] = [], linked: string[] = []): void {
  ensureStateDir(clusterDir)
  for (const path of [...files, ...dirs]) {
    refuseSymlink(path)
    const wantDir = dirs.includes(path)
    let stat
    try {
      stat = lstatSync(path)
    } catch {
      continue // absent: created when written
    }
    if (wantDir ? !stat.isDirectory() : !stat.isFile()) {
      throw new InputError(`is not a ${wantDir ? 'directory' : 'regular file'}`, { file: path, fix: `move it away; the tool recreates it` })
    }
    // a hard link to a file elsewhere (another user's log, a file outside the cluster directory)
    if (!wantDir && !linked.includes(path) && stat.nlink > 1) throw hardLinkError(path, stat.nlink)
  }
  // the directories opened now, once: one swapped for a link later is not followed
  for (const dir of dirs) ensureStateDir(clusterDir, dir)
  const dir = stateDir(clusterDir)
  try {
    accessSync(dir, constants.W_OK)
  } catch (err) {
    throw unwritable(dir, err) ?? err
  }
}

/** Writes a whole file atomically (a temporary file renamed over it), refusing links on the way. */
export function writeStateFile(clusterDir: string, path: string, text: string, mode = 0o644): void {
  const at = reach(clusterDir, path)
  refuseSymlinkAt(path, at)
  const tmp = `${at}.${process.pid}.tmp`
  rmSync(tmp, { force: true })
  let fd: number
  try {
    // O_EXCL|O_NOFOLLOW: a link planted at the temporary name is not followed either
    fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode)
  } catch (err) {
    throw unwritable(`${path}.${process.pid}.tmp`, err) ?? err
  }
  try {
    writeSync(fd, text)
  } finally {
    closeSync(fd)
  }
  renameSync(tmp, at)
}

/** refuseSymlink for a path reached at `at` (through a directory handle), named as `path`. */
function refuseSymlinkAt(path: string, at: string): void {
  try {
    if (lstatSync(at).isSymbolicLink()) throw symlinkError(path)
  } catch (err) {
    if (err instanceof InputError) throw err
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw unwritable(path, err) ?? err
  }
}

/** Appends a line (the command log), never through a link (O_NOFOLLOW: ELOOP) nor into a file linked elsewhere. */
export function appendStateFile(clusterDir: string, path: string, text: string): void {
  // O_NONBLOCK: a FIFO put there would otherwise hold the open until someone reads it
  let fd: number
  try {
    fd = openSync(
      reach(clusterDir, path),
      constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
      0o644,
    )
  } catch (err) {
    throw unwritable(path, err) ?? err
  }
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile()) throw new InputError('is not a regular file', { file: path, fix: 'move it away; the tool recreates it' })
    if (stat.nlink > 1) throw hardLinkError(path, stat.nlink)
    writeSync(fd, text)
  } finally {
    closeSync(fd)
  }
}

/**
 * The command log's writer: appends each line, never through a link nor into a hard-linked file. The
 * log is a convenience: a full disk or a file planted during the run must not fail the run; the first
 * line that cannot be written is said once through `warn`, and the run goes on without its log.
 */
export function commandLog(clusterDir: string, path: string, warn: (message: string) => void = () => undefined): (line: string) => void {
  let failed = false
  return (line) => {
    if (failed) return
    try {
      appendStateFile(clusterDir, path, line)
    } catch (err) {
      failed = true
      const why = err instanceof InputError ? err.format() : `${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`
      warn(`the command log is not written from here on: ${why}`)
    }
  }
}

/** A file name made from a value read back from a file (a report's command): letters, digits, dot, dash, underscore. */
export function safeName(value: string): string {
  const cleaned = value.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_')
  return cleaned.slice(0, 100) || '_'
}
