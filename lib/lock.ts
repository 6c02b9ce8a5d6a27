import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { InputError } from './errors.js'
import { stateDir } from './report.js'

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Takes `.bootstrap/lock` for this process. A live holder refuses the run (exit 2, naming its pid);
 * a lock left by a dead process is taken over with a warning. Returns the release function.
 */
export function acquireLock(clusterDir: string, warn: (msg: string) => void): () => void {
  const dir = stateDir(clusterDir)
  mkdirSync(dir, { recursive: true })
  const path = join(dir, 'lock')
  for (let tries = 0; tries < 2; tries++) {
    try {
      writeFileSync(path, `${process.pid}\n`, { flag: 'wx' })
      return () => rmSync(path, { force: true })
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    const holder = Number.parseInt(readFileSync(path, 'utf8'), 10)
    if (Number.isInteger(holder) && holder !== process.pid && alive(holder)) {
      throw new InputError(`another run holds the lock (pid ${holder})`, {
        file: path,
        fix: `wait for pid ${holder} to finish, or stop it (kill -INT ${holder})`,
      })
    }
    warn(`taking over a stale lock ${path} left by pid ${Number.isInteger(holder) ? holder : '?'}, which is gone`)
    rmSync(path, { force: true })
  }
  throw new InputError('could not take the lock', { file: path, fix: 'remove the lock file if no run is active' })
}
