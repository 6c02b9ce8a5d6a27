// The background simulator `cli.js up` starts: runs one scenario until SIGTERM.
// Writes <dir>/sim.ready (JSON) once every node is in maintenance, and answers JSON-line
// requests on the unix socket <dir>/sim.sock ({op: 'status' | 'addFault' | 'clearFault' | 'criticalPath'}).
import net from 'node:net'
import { writeFileSync, renameSync, rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { startSimulator } from './index.js'

const { values } = parseArgs({
  options: { scenario: { type: 'string' }, dir: { type: 'string', default: '.sim' }, speed: { type: 'string' } },
})
const dir = resolve(values.dir)
const log = (m) => process.stdout.write(`${new Date().toISOString()} ${m}\n`)

let sim
let control
async function shutdown(code = 0) {
  log('stopping')
  control?.close()
  await sim?.stop().catch(() => {})
  for (const f of ['sim.ready', 'sim.sock']) rmSync(join(dir, f), { force: true })
  process.exit(code)
}
// one bad request must not take the whole simulated cluster down: log and keep serving
process.on('uncaughtException', (e) => log(`uncaught: ${e.stack}`))
process.on('unhandledRejection', (e) => log(`unhandled rejection: ${e?.stack ?? e}`))
process.on('SIGTERM', () => shutdown(0))
process.on('SIGINT', () => shutdown(0))

try {
  log(`starting scenario ${values.scenario} in ${dir}`)
  sim = await startSimulator({ scenario: values.scenario, dir, speed: values.speed, log })
} catch (e) {
  log(`failed to start: ${e.message}`)
  writeFileSync(join(dir, 'sim.failed'), `${e.message}\n`)
  await sim?.stop?.()
  process.exit(1)
}

const sock = join(dir, 'sim.sock')
rmSync(sock, { force: true })
control = net.createServer((c) => {
  let buf = ''
  c.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 1)
      let reply
      try {
        const req = JSON.parse(line)
        if (req.op === 'status') reply = { ok: true, nodes: sim.allNodes().map((n) => sim.node(n.name)) }
        else if (req.op === 'addFault') {
          sim.addFault(req.fault)
          reply = { ok: true }
        } else if (req.op === 'clearFault') {
          sim.clearFault(req.node ?? null, req.kind)
          reply = { ok: true }
        } else if (req.op === 'criticalPath') reply = { ok: true, seconds: sim.criticalPathSeconds() }
        else reply = { ok: false, error: `unknown op ${req.op}` }
      } catch (e) {
        reply = { ok: false, error: e.message }
      }
      c.write(`${JSON.stringify(reply)}\n`)
    }
  })
  c.on('error', () => {})
})
control.listen(sock)
// written whole, then renamed: `cli.js up` reads it as soon as it exists
writeFileSync(
  join(dir, 'sim.ready.tmp'),
  `${JSON.stringify({ pid: process.pid, nodes: sim.allNodes().length, criticalPathSeconds: sim.criticalPathSeconds(), env: join(dir, 'env') })}\n`,
)
renameSync(join(dir, 'sim.ready.tmp'), join(dir, 'sim.ready'))
log(`ready: ${sim.allNodes().length} nodes in maintenance; critical path ${sim.criticalPathSeconds().toFixed(2)}s`)
