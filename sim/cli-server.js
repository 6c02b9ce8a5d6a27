// Runs simulated talosctl commands inside the simulator for the thin client
// sim/cli-client.bash, so a call costs a bash start instead of a node start (~0.15 s of CPU each,
// several times what the real Go binaries take: enough to make a benchmark measure node start-ups
// rather than the bootstrap). The same code as the node processes (sim/<tool>/cli.js) runs, with
// the client's arguments, environment, working directory and output (cli-io.js); the product sees
// the same texts and exit codes.
//
// Protocol, on a loopback TCP connection (bash can open one: /dev/tcp):
//   client → server: NUL-terminated fields: tool ("talosctl"), cwd, argc, argv…, then env
//                    entries ("K=V") up to an empty field; afterwards each byte "c" is a signal
//                    (talosctl's SIGINT/SIGTERM handling).
//   server → client: frames "out <n>\n<n bytes>" and "err <n>\n<n bytes>", then "exit <code>\n".
// A client that goes away (killed) cancels its run: calls in flight fail, waits stop.
import net from 'node:net'
import { cancelCalls, newRun, withRun } from './cli-io.js'

const TOOLS = {
  async talosctl(argv) {
    const { main } = await import('./talosctl/main.js')
    return main(argv)
  },
}

/** talosctl's first signal (pkg/cli/context.go): 'exit' when the run must end now */
async function interrupt(run) {
  const { interrupt } = await import('./talosctl/main.js')
  return withRun(run, interrupt)
}

/** Reads the request's fields as they arrive; resolves once the env terminator is seen. */
function readRequest(socket, onSignal) {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0)
    let request
    const fields = []
    socket.on('data', (chunk) => {
      if (request) {
        for (const b of chunk) if (b === 0x63) onSignal()
        return
      }
      buf = Buffer.concat([buf, chunk])
      let nul
      while (!request && (nul = buf.indexOf(0)) >= 0) {
        fields.push(buf.subarray(0, nul).toString('utf8'))
        buf = buf.subarray(nul + 1)
        const argc = Number(fields[2])
        if (fields.length > 3 + argc && fields.at(-1) === '') request = parse(fields, argc)
      }
      if (request) {
        if (request instanceof Error) return reject(request)
        resolve(request)
        for (const b of buf) if (b === 0x63) onSignal()
      }
    })
    socket.on('end', () => { if (!request) reject(new Error('request ended early')) })
  })
}

function parse(fields, argc) {
  if (!Object.hasOwn(TOOLS, fields[0]) || !Number.isInteger(argc) || argc < 0) return new Error(`bad request: ${fields.slice(0, 3).join(' ')}`)
  const argv = fields.slice(3, 3 + argc)
  const env = {}
  for (const kv of fields.slice(3 + argc, -1)) {
    const eq = kv.indexOf('=')
    if (eq > 0) env[kv.slice(0, eq)] = kv.slice(eq + 1)
  }
  return { tool: fields[0], cwd: fields[1], argv, env }
}

/** runs started and not finished yet (a killed client's run must end too) */
const active = new Set()
export const inflightRuns = () => active.size

function serve(socket) {
  let open = true
  let finished = false
  const send = (text) => { if (open) socket.write(text) }
  const stream = (name) => ({
    write(data, cb) {
      const bytes = Buffer.isBuffer(data) ? data : Buffer.from(String(data), 'utf8')
      if (bytes.length) send(Buffer.concat([Buffer.from(`${name} ${bytes.length}\n`), bytes]))
      if (typeof cb === 'function') queueMicrotask(cb)
      return true
    },
  })
  let run
  const finish = (code) => {
    if (finished) return
    finished = true
    active.delete(socket)
    if (open) socket.end(`exit ${code}\n`)
  }
  const onSignal = () => { if (run) interrupt(run).then((what) => { if (what === 'exit') finish(1) }) }
  socket.on('error', () => {})
  socket.on('close', () => {
    open = false
    // the client is gone (killed): nobody waits for this run any more
    if (run && !finished) {
      run.cancelled.abort()
      cancelCalls(run)
    }
  })
  readRequest(socket, onSignal).then(
    (req) => {
      run = newRun({ ...req, stdout: stream('out'), stderr: stream('err') })
      active.add(socket)
      return withRun(run, () => TOOLS[req.tool](req.argv, run)).then(finish)
    },
    (e) => { send(`err ${Buffer.byteLength(e.message) + 1}\n${e.message}\n`); finish(1) },
  ).catch((e) => {
    const text = `simulated CLI crashed: ${e?.stack ?? e}\n`
    send(`err ${Buffer.byteLength(text)}\n${text}`)
    finish(1)
  })
}

/** Listens on 127.0.0.1 (an ephemeral port); resolves { address: "127.0.0.1:<port>", close() }. */
export function startCliServer() {
  const server = net.createServer(serve)
  const sockets = new Set()
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)) })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      resolve({
        address: `127.0.0.1:${port}`,
        close: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(() => r()) }),
      })
    })
  })
}
