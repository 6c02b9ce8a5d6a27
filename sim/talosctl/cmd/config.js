// talosctl config endpoint|node|context|contexts|info: edit/read the talosconfig
import fs from 'node:fs'
import { io, local } from '../../cli-io.js'
import { openConfig } from '../talosconfig.js'
import { table } from '../format.js'

async function load(g) {
  const { path, cfg } = await openConfig(g.talosconfig)
  return { path, cfg }
}

async function save(path, cfg) {
  const YAML = await import('yaml')
  fs.writeFileSync(local(path), YAML.stringify(cfg, { indent: 4, indentSeq: true }), { mode: 0o600 })
}

function current(cfg, g) {
  const name = g.context || cfg.context
  const c = cfg.contexts[name]
  if (!c) throw new Error(`error getting context: context ${JSON.stringify(name)} is not defined`)
  return { name, c }
}

export async function endpoint({ positional, g }) {
  const { path, cfg } = await load(g)
  const { c } = current(cfg, g)
  c.endpoints = positional
  await save(path, cfg)
}

export async function node({ positional, g }) {
  const { path, cfg } = await load(g)
  const { c } = current(cfg, g)
  c.nodes = positional
  await save(path, cfg)
}

export async function context({ positional, g }) {
  const { path, cfg } = await load(g)
  if (!cfg.contexts[positional[0]]) throw new Error(`context ${positional[0]} is not defined`)
  cfg.context = positional[0]
  await save(path, cfg)
}

export async function contexts({ g }) {
  const { cfg } = await load(g)
  const rows = [['CURRENT', 'NAME', 'ENDPOINTS', 'NODES']]
  for (const name of Object.keys(cfg.contexts).sort()) {
    const c = cfg.contexts[name] ?? {}
    rows.push([name === cfg.context ? '*' : '', name, (c.endpoints ?? []).join(','), (c.nodes ?? []).join(',')])
  }
  io().stdout.write(table(rows))
}

export async function info({ g, flag }) {
  const { cfg } = await load(g)
  const { name, c } = current(cfg, g)
  const data = { context: name, nodes: c.nodes ?? [], endpoints: c.endpoints ?? [], roles: ['os:admin'] }
  if (flag('output') === 'json') { io().stdout.write(JSON.stringify(data, null, 2) + '\n'); return }
  if (flag('output') === 'yaml') { const YAML = await import('yaml'); io().stdout.write(YAML.stringify(data)); return }
  const none = (l) => (l.length ? l.join(', ') : 'not defined')
  io().stdout.write(`Current context:     ${name}\nNodes:               ${none(data.nodes)}\nEndpoints:           ${none(data.endpoints)}\nRoles:               os:admin\nCertificate expires: unknown\n`)
}
