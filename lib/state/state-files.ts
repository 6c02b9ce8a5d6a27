// What a run writes under CLUSTER_DIR/.bootstrap: never through a symbolic link (a planted link would
// make the tool append to or overwrite a file elsewhere), and only in a directory it can write.
import { accessSync, closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs'
import { dirname, isAbsolute, relative, sep } from 'node:path'
import { InputError } from '../core/errors.js'
import { stateDir } from './paths.js'

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

/** Every directory from the state directory down to `dir` (itself included) exists and is not a link. */
export function ensureStateDir(clusterDir: string, dir = stateDir(clusterDir)): void {
  const root = stateDir(clusterDir)
  const rel = relative(root, dir)
  // a report named by path elsewhere (bootstrap:report RUN=<file>): its own directory, as it is
  if (rel.startsWith('..') || isAbsolute(rel)) return refuseSymlink(dir)
  const parts = rel.split(sep).filter(Boolean)
  let current = root
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

/** Before a run touches any node: the state directory and the files it will write are plain, writable paths. */
export function checkStateFiles(clusterDir: string, files: string[], dirs: string[] = []): void {
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
  }
  const dir = stateDir(clusterDir)
  try {
    accessSync(dir, constants.W_OK)
  } catch (err) {
    throw unwritable(dir, err) ?? err
  }
}

/** Writes a whole file atomically (a temporary file renamed over it), refusing links on the way. */
export function writeStateFile(clusterDir: string, path: string, text: string, mode = 0o644): void {
  ensureStateDir(clusterDir, dirname(path))
  refuseSymlink(path)
  const tmp = `${path}.${process.pid}.tmp`
  rmSync(tmp, { force: true })
  let fd: number
  try {
    // O_EXCL|O_NOFOLLOW: a link planted at the temporary name is not followed either
    fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode)
  } catch (err) {
    throw unwritable(tmp, err) ?? err
  }
  try {
    writeSync(fd, text)
  } finally {
    closeSync(fd)
  }
  renameSync(tmp, path)
}

/** Appends a line (the command log), never through a link: O_NOFOLLOW makes a link fail with ELOOP. */
export function appendStateFile(path: string, text: string): void {
  // O_NONBLOCK: a FIFO put there would otherwise hold the open until someone reads it
  const fd = openSync(
    path,
    constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
    0o644,
  )
  try {
    if (!fstatSync(fd).isFile()) throw new InputError('is not a regular file', { file: path, fix: 'move it away; the tool recreates it' })
    writeSync(fd, text)
  } finally {
    closeSync(fd)
  }
}

/**
 * The command log's writer: appends each line, never through a link. The log is a convenience: a
 * full disk must not fail the run (a link planted during the run is refused by O_NOFOLLOW; one there
 * at the start is refused as bad input).
 */
export function commandLog(path: string): (line: string) => void {
  return (line) => {
    try {
      appendStateFile(path, line)
    } catch {
      // see above
    }
  }
}

/** A file name made from a value read back from a file (a report's command): letters, digits, dot, dash, underscore. */
export function safeName(value: string): string {
  const cleaned = value.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_')
  return cleaned.slice(0, 100) || '_'
}
