#!/usr/bin/env node
// `node sim/cli.js up|down|status|calls|critical-path|add-fault|clear-fault` (the Taskfile's sim:* tasks call this).
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { join, resolve, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { loadScenario, ScenarioError } from './scenario.js'
import { criticalPathSeconds } from './critical-path.js'
import { realTools, ToolsMissingError } from './writer.js'

const here = dirname(fileURLToPath(import.meta.url))
const USAGE = `usage: node sim/cli.js <command> [flags]
  up --scenario <file> [--dir .sim] [--speed N]   start the simulator in the background (replaces a running one)
  down [--dir .sim]                                stop it (fine when nothing runs)
  status [--dir .sim]                              each node's stage, readiness and listener (JSON lines)
  calls [--dir .sim]                               the calls the nodes received (JSON lines)
  critical-path [--scenario <file>] [--dir .sim]   the scenario's critical path in real seconds
  add-fault --node <name> --kind <kind> [--on <call>] [--times N] [--dir .sim]   a fault starts now; the fields
            its kind takes (sim/README.md): [--pod P] [--restarts] [--image I] [--message M] [--address A] [--ms N] [--chart C]
  clear-fault --node <name> --kind <kind> [--dir .sim]
`
process.stdout.on('error', (e) => {
  if (e.code === 'EPIPE') process.exit(0)
  throw e
})
const die = (msg, code = 1) => {
  process.stderr.write(`${msg}\n`)
  process.exit(code)
}

let parsed
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      scenario: { type: 'string' },
      dir: { type: 'string', default: process.env.SIM_DIR ?? '.sim' },
      speed: { type: 'string' },
      node: { type: 'string' },
      kind: { type: 'string' },
      on: { type: 'string' },
      times: { type: 'string' },
      pod: { type: 'string' },
      restarts: { type: 'boolean' },
      image: { type: 'string' },
      message: { type: 'string' },
      address: { type: 'string' },
      ms: { type: 'string' },
      chart: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  })
} catch (e) {
  die(`${e.message}\n\n${USAGE}`, 2)
}
const { values, positionals } = parsed
const cmd = positionals[0]
const dir = resolve(values.dir)
const pidFile = join(dir, 'sim.pid')

// a zombie (exited, not yet reaped by whoever adopted the detached daemon) counts as stopped
const zombie = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z')
  } catch {
    return false
  }
}
const alive = (pid) => {
  try {
    process.kill(pid, 0)
    return !zombie(pid)
  } catch (e) {
    return e.code === 'EPERM'
  }
}
const readPid = () => {
  try {
    return Number(readFileSync(pidFile, 'utf8').trim()) || null
  } catch {
    return null
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function validate(file) {
  if (!file) die(`--scenario is required\n\n${USAGE}`, 2)
  if (!existsSync(file)) die(`${file}: no such file (fix: pass an existing scenario, e.g. sim/scenarios/demo.yaml)`, 2)
  try {
    return loadScenario(file)
  } catch (e) {
    if (e instanceof ScenarioError) die(e.message, 2)
    throw e
  }
}

async function down() {
  const pid = readPid()
  if (pid && alive(pid)) {
    process.kill(pid, 'SIGTERM')
    for (let i = 0; i < 200 && alive(pid); i++) await sleep(50)
    if (alive(pid)) process.kill(pid, 'SIGKILL')
    for (const f of ['sim.pid', 'sim.ready', 'sim.sock']) rmSync(join(dir, f), { force: true })
    return true
  }
  for (const f of ['sim.pid', 'sim.ready', 'sim.sock']) rmSync(join(dir, f), { force: true })
  return false
}

function control(req) {
  return new Promise((res, rej) => {
    const c = net.connect(join(dir, 'sim.sock'))
    let buf = ''
    c.on('connect', () => c.write(`${JSON.stringify(req)}\n`))
    c.on('data', (d) => {
      buf += d
      if (buf.includes('\n')) {
        c.end()
        res(JSON.parse(buf))
      }
    })
    c.on('error', () => rej(new Error(`the simulator is not running in ${dir} (start it: node sim/cli.js up --scenario <file>)`)))
  })
}

switch (cmd) {
  case 'up': {
    const scenarioFile = resolve(values.scenario ?? '')
    const s = validate(values.scenario)
    if (values.speed != null && !(Number(values.speed) > 0)) die(`--speed: "${values.speed}" must be a number > 0`, 2)
    // the real talosctl and helm are what the nodes serve: without them nothing starts (exit 3)
    try {
      realTools()
    } catch (e) {
      if (e instanceof ToolsMissingError) die(`simulator not started: ${e.message}`, e.exitCode)
      throw e
    }
    mkdirSync(dir, { recursive: true })
    if (await down()) process.stdout.write('stopped the previous simulator\n')
    rmSync(join(dir, 'sim.failed'), { force: true })
    const out = openSync(join(dir, 'sim.log'), 'w')
    const args = [join(here, 'daemon.js'), '--scenario', scenarioFile, '--dir', dir, ...(values.speed ? ['--speed', values.speed] : [])]
    const child = spawn(process.execPath, args, { detached: true, stdio: ['ignore', out, out] })
    writeFileSync(pidFile, `${child.pid}\n`)
    let exited = null
    child.on('exit', (code) => {
      exited = code
    })
    child.unref()
    const deadline = Date.now() + 120_000
    while (!existsSync(join(dir, 'sim.ready'))) {
      if (exited !== null || Date.now() > deadline) {
        const why = existsSync(join(dir, 'sim.failed'))
          ? readFileSync(join(dir, 'sim.failed'), 'utf8').trim()
          : `see ${join(dir, 'sim.log')}`
        if (exited === null) await down()
        rmSync(pidFile, { force: true })
        die(`simulator failed to start: ${why}`)
      }
      await sleep(25)
    }
    const ready = JSON.parse(readFileSync(join(dir, 'sim.ready'), 'utf8'))
    process.stdout.write(
      `simulator up: cluster "${s.cluster.name}", ${ready.nodes} nodes in maintenance (pid ${child.pid}, speed ${values.speed ?? s.speed})\n` +
        `  source ${join(dir, 'env')}   # PATH, TALOSCONFIG, KUBECONFIG, CLUSTER_DIR\n  cluster definition: ${join(dir, 'cluster')}\n`,
    )
    process.exit(0)
  }
  case 'down':
    process.stdout.write((await down()) ? 'simulator stopped\n' : 'simulator not running\n')
    break
  case 'status': {
    const r = await control({ op: 'status' }).catch((e) => die(e.message))
    for (const n of r.nodes) process.stdout.write(`${JSON.stringify(n)}\n`)
    break
  }
  case 'calls': {
    const f = join(dir, 'calls.jsonl')
    if (existsSync(f)) process.stdout.write(readFileSync(f, 'utf8'))
    break
  }
  case 'critical-path': {
    if (values.scenario) {
      const s = validate(values.scenario)
      process.stdout.write(`${criticalPathSeconds(s, Number(values.speed ?? s.speed)).toFixed(3)}\n`)
    } else {
      const r = await control({ op: 'criticalPath' }).catch((e) => die(e.message))
      process.stdout.write(`${r.seconds.toFixed(3)}\n`)
    }
    break
  }
  case 'add-fault': {
    if (!values.kind) die(`--kind is required\n\n${USAGE}`, 2)
    const times = values.times == null ? undefined : Number(values.times)
    if (times !== undefined && !(Number.isInteger(times) && times > 0))
      die(`--times must be a positive whole number, not "${values.times}"`, 2)
    const fault = {
      node: values.node ?? null,
      kind: values.kind,
      ...(values.on ? { on: values.on } : {}),
      ...(times ? { times } : {}),
      ...(values.ms != null ? { ms: Number(values.ms) } : {}),
      ...(values.restarts ? { restarts: true } : {}),
      ...Object.fromEntries(['pod', 'image', 'message', 'address', 'chart'].filter((k) => values[k] != null).map((k) => [k, values[k]])),
    }
    const r = await control({ op: 'addFault', fault }).catch((e) => die(e.message))
    if (!r.ok) die(r.error, 2)
    break
  }
  case 'clear-fault': {
    if (!values.kind) die(`--kind is required\n\n${USAGE}`, 2)
    const r = await control({ op: 'clearFault', node: values.node, kind: values.kind }).catch((e) => die(e.message))
    if (!r.ok) die(r.error)
    break
  }
  default:
    if (values.help) {
      process.stdout.write(USAGE)
      break
    }
    die(`${cmd ? `unknown command "${cmd}"` : 'no command given'}\n\n${USAGE}`, 2)
}
