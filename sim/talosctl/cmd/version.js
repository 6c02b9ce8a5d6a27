// talosctl version
import { io } from '../../cli-io.js'
import { withClient, withMaintenance, clientVersion } from '../session.js'
import { warn } from '../errors.js'

const out = (s) => io().stdout.write(s)

function long(v) {
  return `\tTag:         ${v.tag}\n\tSHA:         ${v.sha}\n\tBuilt:       ${v.built ?? ''}\n\tGo version:  ${v.goVersion}\n\tOS/Arch:     ${v.os}/${v.arch}\n`
}

// the client's own build facts (v1.12.11 was built from 2e80771b with Go 1.25)
export function clientInfo() {
  const tag = clientVersion()
  return { tag, sha: io().env.SIM_TALOSCTL_SHA || '2e80771b', goVersion: /^v1\.1[3-9]/.test(tag) ? 'go1.26.2' : 'go1.25.9', os: 'linux', arch: 'amd64' }
}

export async function version({ flag, g }) {
  const json = flag('json')
  if (!json) {
    out('Client:\n')
    out(flag('short') ? `Talos ${clientVersion()}\n` : long(clientInfo()))
    if (flag('client')) return
    out('Server:\n')
  }
  const s = flag('insecure') ? withMaintenance(g) : await withClient(g)
  let good, err
  try {
    ({ good, err } = await s.multi('machine.Version', {}))
  } catch (e) {
    throw new Error(`error getting version: ${e.message}`)
  }
  if (err) {
    if (!good.length) throw new Error(`error getting version: ${err.message}`)
    warn(err.message)
  }
  for (const m of good) {
    const node = s.nodeOf(m)
    if (json) {
      out(JSON.stringify({ metadata: m.node ? { hostname: m.node } : undefined, version: { tag: m.data.tag, sha: m.data.sha, goVersion: m.data.goVersion, os: m.data.os, arch: m.data.arch }, features: { rbac: !!m.data.features?.rbac } }) + '\n')
      continue
    }
    out(`\tNODE:        ${node}\n`)
    out(long(m.data))
    out(`\tEnabled:     ${m.data.features?.rbac ? 'RBAC' : ''}\n`)
  }
}
