// talosconfig resolution and client construction errors, as pkg/machinery/client/config does.
import { io, local } from '../cli-io.js'
import fs from 'node:fs'
import path from 'node:path'
import os from 'node:os'

export function defaultPath() {
  if (io().env.TALOSCONFIG) return io().env.TALOSCONFIG
  const home = io().env.TALOS_HOME || path.join(io().env.HOME || os.homedir(), '.talos')
  return path.join(home, 'config')
}

/** Open (creating an empty one when missing, as talosctl does) and parse the config. */
export async function openConfig(flagValue) {
  const p = flagValue || defaultPath()
  if (!fs.existsSync(local(p))) {
    fs.mkdirSync(path.dirname(local(p)), { recursive: true, mode: 0o700 })
    fs.writeFileSync(local(p), 'context: ""\ncontexts: {}\n', { mode: 0o600 })
  }
  const text = fs.readFileSync(local(p), 'utf8')
  const { parse } = await import('yaml')
  let doc
  try {
    doc = parse(text) ?? {}
  } catch (e) {
    throw new Error(`failed to open config file ${JSON.stringify(flagValue ?? '')}: yaml: ${e.message.split('\n')[0]}`)
  }
  if (typeof doc !== 'object') throw new Error(`failed to open config file ${JSON.stringify(flagValue ?? '')}: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str into config.Config`)
  const cfg = { context: doc.context ?? '', contexts: doc.contexts ?? {} }
  // legacy `target:` is upgraded into endpoints
  for (const c of Object.values(cfg.contexts)) if (c && c.target && !c.endpoints) c.endpoints = [c.target]
  return { path: p, cfg }
}

function resolveContext(cfg, name) {
  if (name) {
    const c = cfg.contexts[name]
    if (!c) {
      if (Object.keys(cfg.contexts).length === 0 && !cfg.context) throw new Error('talos config file is empty')
      throw new Error(`context ${JSON.stringify(name)} not found in config`)
    }
    return c
  }
  if (!cfg.context && Object.keys(cfg.contexts).length === 0) throw new Error('talos config file is empty')
  const c = cfg.contexts[cfg.context]
  if (!c) throw new Error(`default context ${JSON.stringify(cfg.context)} not found in config`)
  return c
}

function decodePEM(b64, what) {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64.replace(/\s/g, ''))) {
    const bad = b64.search(/[^A-Za-z0-9+/=]/)
    throw new Error(`${what}: illegal base64 data at input byte ${bad}`)
  }
  return Buffer.from(b64, 'base64').toString('utf8')
}

/**
 * Build connection parameters for a secure call: endpoints, nodes, ca/cert/key PEMs.
 * Throws Error with the talosctl texts (error constructing client: ...).
 */
export async function secureClient(g) {
  const { cfg } = await openConfig(g.talosconfig)
  let endpoints = g.endpoints
  let ctx = null
  let ctxErr = null
  try { ctx = resolveContext(cfg, g.context) } catch (e) { ctxErr = e }
  if (!endpoints.length) {
    if (ctxErr || !ctx || !(ctx.endpoints ?? []).length) throw new Error('error constructing client: failed to determine endpoints')
    endpoints = ctx.endpoints
  }
  if (ctxErr) throw new Error(`error constructing client: failed to create client connection: failed to resolve configuration context: ${ctxErr.message}`)
  const creds = {}
  if (ctx.ca) {
    try { creds.ca = decodePEM(ctx.ca, 'error decoding CA') } catch (e) {
      throw new Error(`error constructing client: failed to create client connection: failed to get CA: ${e.message}`)
    }
  }
  if (ctx.crt && ctx.key) {
    try {
      creds.cert = decodePEM(ctx.crt, 'could not load client key pair')
      creds.key = decodePEM(ctx.key, 'could not load client key pair')
    } catch (e) {
      throw new Error(`error constructing client: failed to create client connection: failed to acquire credentials: ${e.message}`)
    }
  }
  const nodes = g.nodes.length ? g.nodes : (ctx.nodes ?? [])
  return { endpoints, nodes, creds }
}
