// helm install / upgrade / status / list / uninstall / get values against the simulated API.
import { connect, KubeError } from '../lib-kubeclient.js'
import { HelmError, HELM_VERSION } from './main.js'
import { locateChart } from './charts.js'
import { mergeValues, mergeMaps, stableStringify } from './values.js'
import { listReleases, createRelease, updateRelease, deleteRelease, pruneHistory, formatANSIC, formatGoTime } from './releases.js'
import { waitForResources } from './ready.js'

const MANAGED_BY = 'app.kubernetes.io/managed-by'
const REL_NAME = 'meta.helm.sh/release-name'
const REL_NS = 'meta.helm.sh/release-namespace'

/** Connect, and check reachability as helm's IsReachable does (GET /version). */
async function kube(ctx) {
  if (!ctx.client) {
    try {
      ctx.client = await connect({ kubeconfig: ctx.flags.kubeconfig, context: ctx.flags['kube-context'], userAgent: `Helm/${HELM_VERSION.slice(1)}` })
    } catch (e) {
      throw new HelmError(e.transport ? `Kubernetes cluster unreachable: ${e.message}` : e.message)
    }
    const client = ctx.client
    ctx.record = (outcome) => client.recordCall({ tool: 'helm', call: 'helm', command: ctx.command.split(' ')[0], args: ctx.argv, outcome })
    ctx.namespace = ctx.flags.namespace || client.cfg.namespace || 'default'
  }
  try {
    ctx.serverVersion = await ctx.client.version()
  } catch (e) {
    throw new HelmError(`Kubernetes cluster unreachable: ${e.message}`)
  }
  return ctx.client
}

const latest = (revs) => revs[revs.length - 1]


async function renderManifest(rendered) {
  const { stringify } = await import('yaml')
  return rendered.map((r) => `---\n# Source: ${r.source}\n${stringify(r.obj)}`).join('')
}

/** Add what helm's setMetadataVisitor adds to every object of a release. */
function ownObjects(rendered, rel) {
  return rendered.map(({ source, obj }) => {
    const o = structuredClone(obj)
    o.metadata.namespace = o.metadata.namespace || rel.namespace
    o.metadata.labels = { ...(o.metadata.labels || {}), [MANAGED_BY]: 'Helm' }
    o.metadata.annotations = { ...(o.metadata.annotations || {}), [REL_NAME]: rel.name, [REL_NS]: rel.namespace }
    return { source, obj: o }
  })
}

function chartMeta(chart) {
  return {
    metadata: { name: chart.name, version: chart.version, description: chart.description, apiVersion: 'v2', appVersion: chart.appVersion, type: 'application' },
    lock: null,
    templates: [],
    values: chart.defaults,
    schema: null,
    files: [],
  }
}

function notesFor(chart) {
  if (chart.name !== 'cilium') return ''
  const minor = chart.version.split('.').slice(0, 2).join('.')
  return `You have successfully installed Cilium.\n\nYour release version is ${chart.version}.\n\nFor any further help, visit https://docs.cilium.io/en/v${minor}/gettinghelp\n`
}

function printRelease(ctx, rel, { showDescription = false } = {}) {
  const fmt = ctx.flags.output || 'table'
  if (fmt === 'json') return ctx.out(JSON.stringify(rel) + '\n')
  if (fmt === 'yaml') return import('yaml').then(({ stringify }) => ctx.out(stringify(rel, { sortMapEntries: true })))
  let s = `NAME: ${rel.name}\n`
  if (rel.info.last_deployed) s += `LAST DEPLOYED: ${formatANSIC(rel.info.last_deployed)}\n`
  s += `NAMESPACE: ${rel.namespace}\nSTATUS: ${rel.info.status}\nREVISION: ${rel.version}\n`
  if (showDescription) s += `DESCRIPTION: ${rel.info.description}\n`
  s += 'TEST SUITE: None\n'
  if (!ctx.flags['hide-notes'] && rel.info.notes) s += `NOTES:\n${rel.info.notes.trim()}\n`
  ctx.out(s)
}

/** Does an existing object belong to this release (helm's checkOwnership)? */
function ownershipError(live, rel) {
  const errs = []
  const labels = live.metadata?.labels || {}
  const ann = live.metadata?.annotations || {}
  if (labels[MANAGED_BY] !== 'Helm') errs.push(labels[MANAGED_BY] === undefined ? `label validation error: missing key "${MANAGED_BY}": must be set to "Helm"` : `label validation error: key "${MANAGED_BY}" must equal "Helm": current value is "${labels[MANAGED_BY]}"`)
  for (const [k, want] of [[REL_NAME, rel.name], [REL_NS, rel.namespace]]) {
    if (ann[k] === undefined) errs.push(`annotation validation error: missing key "${k}": must be set to "${want}"`)
    else if (ann[k] !== want) errs.push(`annotation validation error: key "${k}" must equal "${want}": current value is "${ann[k]}"`)
  }
  return errs.length ? `invalid ownership metadata; ${errs.join('; ')}` : null
}

/** Create an object; a type the simulated API does not serve is skipped (see the report). */
async function createObject(client, obj) {
  try {
    await client.create(obj)
  } catch (e) {
    if (e.code === 404 && !e.status?.details?.name && !/namespaces ".*" not found/.test(e.message)) return
    if (e.code === 409) {
      await client.patch(obj.kind, obj.metadata.namespace, obj.metadata.name, obj)
      return
    }
    throw e
  }
}

async function applyObjects(client, objects, previous = []) {
  const key = (o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`
  const prev = new Map(previous.map((o) => [key(o), o]))
  for (const o of objects) {
    const old = prev.get(key(o))
    if (old && stableStringify(old) === stableStringify(o)) continue // nothing changed: helm sends no patch
    if (old) {
      try {
        await client.patch(o.kind, o.metadata.namespace, o.metadata.name, o)
        continue
      } catch (e) {
        if (e.code !== 404) throw e
      }
    }
    await createObject(client, o)
  }
  const now = new Set(objects.map(key))
  for (const o of previous) if (!now.has(key(o))) await client.delete(o.kind, o.metadata.namespace, o.metadata.name)
}

async function deleteObjects(client, objects) {
  for (const o of [...objects].reverse()) await client.delete(o.kind, o.metadata.namespace, o.metadata.name)
}

function wrapKube(e) {
  if (e instanceof KubeError && e.transport) return new HelmError(e.message)
  return e
}

/** helm install / the --install path of upgrade. Returns the release. */
async function runInstall(ctx, name, chartRef, { replace = false } = {}) {
  const f = ctx.flags
  const chart = locateChart(chartRef, { repo: f.repo, version: f.version })
  const vals = await mergeValues({ files: f.values, sets: f.set, setStrings: f['set-string'] })
  const client = await kube(ctx)
  const ns = ctx.namespace
  const history = await listReleases(client, ns, name)
  if (!replace && history.some((r) => r.info.status !== 'uninstalled' && r.info.status !== 'failed')) {
    throw new HelmError('INSTALLATION FAILED: cannot re-use a name that is still in use')
  }
  const now = new Date().toISOString()
  const version = history.length ? latest(history).version + 1 : 1
  const rel = {
    name,
    info: { first_deployed: now, last_deployed: now, deleted: '', description: 'Initial install underway', status: 'pending-install', notes: notesFor(chart) },
    chart: chartMeta(chart),
    config: vals,
    manifest: '',
    version,
    namespace: ns,
  }
  const objects = ownObjects(chart.render(rel, vals), rel)
  rel.manifest = await renderManifest(objects)
  try {
    if (f['create-namespace']) {
      try {
        await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { name: ns } } })
      } catch (e) {
        if (e.code !== 409) throw e
      }
    }
    if (!f['take-ownership']) {
      for (const { obj } of objects) {
        const live = await client.getOrNull(obj.kind, obj.metadata.namespace, obj.metadata.name)
        const why = live && ownershipError(live, rel)
        if (why) throw new HelmError(`INSTALLATION FAILED: Unable to continue with install: ${obj.kind} "${obj.metadata.name}" in namespace "${obj.metadata.namespace}" exists and cannot be imported into the current release: ${why}`)
      }
    }
    try {
      await createRelease(client, rel)
    } catch (e) {
      if (e.transport) throw e
      throw new HelmError(`INSTALLATION FAILED: create: failed to create: ${e.message}`)
    }
  } catch (e) {
    throw wrapKube(e)
  }
  try {
    await applyObjects(client, objects.map((o) => o.obj))
    if (f.wait || f.atomic) await waitForResources(client, objects.map((o) => o.obj), Date.now() + f.timeout)
  } catch (e) {
    const cause = e.message
    rel.info.status = 'failed'
    rel.info.description = `Release "${name}" failed: ${cause}`
    await updateRelease(client, rel).catch(() => {})
    if (f.atomic) {
      await deleteObjects(client, objects.map((o) => o.obj)).catch(() => {})
      await deleteRelease(client, rel).catch(() => {})
      throw new HelmError(`INSTALLATION FAILED: release ${name} failed, and has been uninstalled due to atomic being set: ${cause}`)
    }
    throw new HelmError(`INSTALLATION FAILED: ${cause}`)
  }
  rel.info.status = 'deployed'
  rel.info.description = f.description || 'Install complete'
  await updateRelease(client, rel)
  return rel
}

export async function install(ctx, args) {
  let name = args[0]
  let chartRef = args[1]
  if (ctx.flags['generate-name']) {
    chartRef = args[0]
    name = `${chartRef.split('/').pop()}-${Math.floor(Date.now() / 1000)}`
  } else if (args.length < 2) {
    throw new HelmError('must either provide a name or specify --generate-name')
  }
  const rel = await runInstall(ctx, name, chartRef, { replace: ctx.flags.replace })
  await printRelease(ctx, rel)
  await ctx.record('ok')
  return 0
}

export async function upgrade(ctx, name, chartRef) {
  const f = ctx.flags
  const table = (f.output || 'table') === 'table'
  if (f.install) {
    const client = await kube(ctx)
    const history = await listReleases(client, ctx.namespace, name).catch((e) => {
      throw wrapKube(e)
    })
    if (!history.length || history.every((r) => r.info.status === 'uninstalled')) {
      if (table) ctx.out(`Release "${name}" does not exist. Installing it now.\n`)
      const rel = await runInstall(ctx, name, chartRef, { replace: history.length > 0 })
      await printRelease(ctx, rel)
      await ctx.record('ok')
      return 0
    }
  }
  const chart = locateChart(chartRef, { repo: f.repo, version: f.version })
  const newVals = await mergeValues({ files: f.values, sets: f.set, setStrings: f['set-string'] })
  const client = await kube(ctx)
  const ns = ctx.namespace
  const history = await listReleases(client, ns, name)
  if (!history.length) throw new HelmError(`UPGRADE FAILED: "${name}" has no deployed releases`)
  const last = latest(history)
  if (last.info.status.startsWith('pending-')) throw new HelmError('UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress')
  let current = [...history].reverse().find((r) => r.info.status === 'deployed')
  if (!current) {
    if (last.info.status === 'failed' || last.info.status === 'superseded') current = last
    else throw new HelmError(`UPGRADE FAILED: "${name}" has no deployed releases`)
  }
  // helm's reuseValues rules
  let vals = newVals
  if (f['reset-values']) vals = newVals
  else if (f['reuse-values']) vals = mergeMaps(current.config || {}, newVals)
  else if (f['reset-then-reuse-values']) vals = mergeMaps(current.config || {}, newVals)
  else if (Object.keys(newVals).length === 0 && current.config && Object.keys(current.config).length) vals = current.config

  const now = new Date().toISOString()
  const rel = {
    name,
    info: { first_deployed: current.info.first_deployed, last_deployed: now, deleted: '', description: 'Preparing upgrade', status: 'pending-upgrade', notes: notesFor(chart) },
    chart: chartMeta(chart),
    config: vals,
    manifest: '',
    version: last.version + 1,
    namespace: ns,
  }
  const objects = ownObjects(chart.render(rel, vals), rel).map((o) => o.obj)
  rel.manifest = await renderManifest(ownObjects(chart.render(rel, vals), rel))
  const previous = await previousObjects(current)
  const unchanged =
    current.manifest === rel.manifest && current.chart?.metadata?.version === chart.version && stableStringify(current.config || {}) === stableStringify(vals || {})
  try {
    await createRelease(client, rel)
  } catch (e) {
    throw new HelmError(`UPGRADE FAILED: ${e.message}`)
  }
  try {
    if (!unchanged || current.info.status !== 'deployed') await applyObjects(client, objects, previous)
    if (f.wait || f.atomic) await waitForResources(client, objects, Date.now() + f.timeout)
  } catch (e) {
    const cause = e.message
    rel.info.status = 'failed'
    rel.info.description = `Upgrade "${name}" failed: ${cause}`
    await updateRelease(client, rel).catch(() => {})
    if (f.atomic) {
      await applyObjects(client, previous, objects).catch(() => {})
      throw new HelmError(`UPGRADE FAILED: release ${name} failed, and has been rolled back due to atomic being set: ${cause}`)
    }
    throw new HelmError(`UPGRADE FAILED: ${cause}`)
  }
  if (current.info.status === 'deployed') {
    current.info.status = 'superseded'
    current.info.description = current.info.description || 'Install complete'
    await updateRelease(client, current)
  }
  rel.info.status = 'deployed'
  rel.info.description = f.description || 'Upgrade complete'
  await updateRelease(client, rel)
  await pruneHistory(client, [...history, rel], f['history-max'])
  if (table) ctx.out(`Release "${name}" has been upgraded. Happy Helming!\n`)
  await printRelease(ctx, rel)
  await ctx.record(unchanged ? 'unchanged' : 'ok')
  return 0
}

/** The objects a stored release's manifest holds. */
async function previousObjects(rel) {
  if (!rel?.manifest) return []
  const { parseAllDocuments } = await import('yaml')
  return parseAllDocuments(rel.manifest)
    .map((d) => d.toJS())
    .filter((o) => o && o.kind)
}

async function findRelease(ctx, name, revision) {
  const client = await kube(ctx)
  const history = await listReleases(client, ctx.namespace, name)
  const rel = revision ? history.find((r) => r.version === revision) : latest(history)
  if (!rel) throw new HelmError('release: not found')
  return rel
}

export async function status(ctx, name) {
  const rel = await findRelease(ctx, name, ctx.flags.revision)
  await printRelease(ctx, rel, { showDescription: ctx.flags['show-desc'] })
  await ctx.record('ok')
  return 0
}

export async function getValues(ctx, name) {
  const rel = await findRelease(ctx, name, ctx.flags.revision)
  const vals = ctx.flags.all ? mergeMaps(rel.chart?.values || {}, rel.config || {}) : rel.config && Object.keys(rel.config).length ? rel.config : null
  const fmt = ctx.flags.output || 'table'
  if (fmt === 'json') ctx.out(JSON.stringify(vals) + '\n')
  else {
    const { stringify } = await import('yaml')
    const y = vals === null ? 'null\n' : stringify(vals, { sortMapEntries: true })
    ctx.out(fmt === 'yaml' ? y : `${ctx.flags.all ? 'COMPUTED VALUES:' : 'USER-SUPPLIED VALUES:'}\n${y}`)
  }
  await ctx.record('ok')
  return 0
}

export async function list(ctx) {
  const f = ctx.flags
  const client = await kube(ctx)
  const all = await listReleases(client, f['all-namespaces'] ? null : ctx.namespace)
  // the latest revision of each release, then the state mask (deployed+failed by default)
  const byName = new Map()
  for (const r of all) {
    const k = `${r.namespace}/${r.name}`
    if (!byName.has(k) || byName.get(k).version < r.version) byName.set(k, r)
  }
  let mask = ['deployed', 'failed']
  const chosen = ['uninstalled', 'superseded', 'uninstalling', 'deployed', 'failed'].filter((s) => f[s])
  if (f.pending) chosen.push('pending-install', 'pending-upgrade', 'pending-rollback')
  if (chosen.length) mask = chosen
  let rels = [...byName.values()]
  if (!f.all) rels = rels.filter((r) => mask.includes(r.info.status))
  if (f.filter) {
    const re = new RegExp(f.filter)
    rels = rels.filter((r) => re.test(r.name))
  }
  rels.sort((a, b) => (f.date ? new Date(a.info.last_deployed) - new Date(b.info.last_deployed) : a.name.localeCompare(b.name)))
  if (f.reverse) rels.reverse()
  rels = rels.slice(f.offset, f.offset + (f.max || rels.length))
  const rows = rels.map((r) => ({
    name: r.name,
    namespace: r.namespace,
    revision: String(r.version),
    updated: r.info.last_deployed ? formatGoTime(r.info.last_deployed) : '-',
    status: r.info.status,
    chart: `${r.chart?.metadata?.name}-${r.chart?.metadata?.version}`,
    app_version: r.chart?.metadata?.appVersion || '',
  }))
  const fmt = f.output || 'table'
  if (f.short) {
    const names = rows.map((r) => r.name)
    if (fmt === 'json') ctx.out(JSON.stringify(names) + '\n')
    else if (fmt === 'yaml') ctx.out(names.map((n) => `- ${n}\n`).join('') || '[]\n')
    else ctx.out(names.map((n) => n + '\n').join(''))
  } else if (fmt === 'json') ctx.out(JSON.stringify(rows) + '\n')
  else if (fmt === 'yaml') {
    const { stringify } = await import('yaml')
    ctx.out(rows.length ? stringify(rows, { sortMapEntries: true }) : '[]\n')
  } else ctx.out(uitable([...(f['no-headers'] ? [] : [['NAME', 'NAMESPACE', 'REVISION', 'UPDATED', 'STATUS', 'CHART', 'APP VERSION']]), ...rows.map((r) => [r.name, r.namespace, r.revision, r.updated, r.status, r.chart, r.app_version])]))
  await ctx.record('ok')
  return 0
}

/** gosuri/uitable as helm uses it: every cell padded to its column's width, joined by a tab. */
function uitable(rows) {
  if (!rows.length) return '\n'
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => [...r[i]].length)))
  return rows.map((r) => r.map((c, i) => c + ' '.repeat(widths[i] - [...c].length)).join('\t')).join('\n') + '\n'
}

export async function uninstall(ctx, names) {
  const client = await kube(ctx)
  for (const name of names) {
    const history = await listReleases(client, ctx.namespace, name)
    if (!history.length) {
      if (ctx.flags['ignore-not-found']) continue
      throw new HelmError(`uninstall: Release not loaded: ${name}: release: not found`)
    }
    const rel = latest(history)
    await deleteObjects(client, await previousObjects(rel))
    if (ctx.flags['keep-history']) {
      rel.info.status = 'uninstalled'
      rel.info.deleted = new Date().toISOString()
      rel.info.description = 'Uninstallation complete'
      await updateRelease(client, rel)
    } else {
      for (const r of history) await deleteRelease(client, r)
    }
    ctx.out(`release "${name}" uninstalled\n`)
  }
  await ctx.record('ok')
  return 0
}
