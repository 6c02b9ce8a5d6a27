// A process that takes the cluster directory's lock at an agreed moment (argv: cluster dir, start
// time in ms since the epoch, hold ms) and prints `acquired` or `refused: <message>`: the lock race.
import { acquireLock } from '../../lib/state/lock.js'
import { InputError } from '../../lib/core/errors.js'

const [dir = '', at = '0', hold = '0'] = process.argv.slice(2)
const wait = Number(at) - Date.now()
if (wait > 0) await new Promise((r) => setTimeout(r, wait))
try {
  const release = acquireLock(dir, () => undefined)
  process.stdout.write('acquired\n')
  await new Promise((r) => setTimeout(r, Number(hold)))
  release()
} catch (err) {
  process.stdout.write(`refused: ${err instanceof InputError ? err.format() : String(err)}\n`)
}
