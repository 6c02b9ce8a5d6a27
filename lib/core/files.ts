// Reading a file that must be a regular file: a FIFO, a socket or a device in place of an input or
// a state file would block the read (and with it every signal but SIGKILL) or never end. The file is
// opened without blocking and checked on the open descriptor, so a swap after a check cannot slip in.
import { closeSync, constants, fstatSync, openSync, readFileSync, type Stats } from 'node:fs'

function kindOf(stat: Stats): string {
  if (stat.isFIFO()) return 'a FIFO'
  if (stat.isSocket()) return 'a socket'
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return 'a device'
  if (stat.isDirectory()) return 'a directory'
  return 'not a regular file'
}

/** An error like fs's own (code ENOTREG, or EISDIR for a directory), whose message says what the path is. */
function notRegular(path: string, stat: Stats): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`${path} is ${kindOf(stat)}, not a regular file`)
  err.code = stat.isDirectory() ? 'EISDIR' : 'ENOTREG'
  err.path = path
  return err
}

/** The text of `path`, a regular file; throws ENOENT, EACCES, … as fs does, ENOTREG for a FIFO, socket or device. */
export function readRegularFile(path: string): string
export function readRegularFile(path: string, encoding: null): Buffer
export function readRegularFile(path: string, encoding: 'utf8' | null = 'utf8'): string | Buffer {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK)
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile()) throw notRegular(path, stat)
    return encoding === null ? readFileSync(fd) : readFileSync(fd, encoding)
  } finally {
    closeSync(fd)
  }
}

/** What fs says about a path that cannot be read as an input: its code, with a word for ENOTREG. */
export function readErrorCode(err: unknown): string {
  const e = err as NodeJS.ErrnoException
  if (e.code === 'ENOTREG') return `ENOTREG: ${e.message.replace(/^.* is (.*), not a regular file$/, '$1')}, not a regular file`
  return e.code ?? 'error'
}
