// flux check / install / bootstrap git / get / reconcile / version against the simulated API.
import crypto from 'node:crypto'
import fs from 'node:fs'
import { connect } from '../lib-kubeclient.js'
import { FluxError, FLUX_VERSION } from './main.js'
import { fluxObjects } from './manifests.js'

const NS_DEFAULT = 'flux-system'
const PART_OF = 'app.kubernetes.io/part-of'
const POLL = () => Number(process.env.SIM_FLUX_POLL_MS || 250)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function kube(ctx) {
  if (!ctx.client) {
    ctx.client = await connect({ kubeconfig: ctx.flags.kubeconfig, context: ctx.flags.context, userAgent: `flux/${FLUX_VERSION}` })
    const client = ctx.client
    ctx.record = (outcome) => client.recordCall({ tool: 'flux', call: 'flux', command: ctx.command.split(' ')[0], args: ctx.argv, outcome })
  }
  return ctx.client
}
const ns = (ctx) => ctx.flags.namespace || NS_DEFAULT

/** The objects `flux install` applies (sim/flux/manifests.js), for this command's flags. */
function manifests(ctx, components, extraLabels = {}) {
  return fluxObjects({
    namespace: ns(ctx),
    registry: ctx.flags.registry,
    components,
    tolerationKeys: ctx.flags['toleration-keys'],
    extraLabels,
  })
}

const subject = (o) => `${o.kind}/${o.metadata.namespace ? o.metadata.namespace + '/' : ''}${o.metadata.name}`

/** Apply objects (create or merge-patch); returns the ssa ChangeSet text flux prints. */
async function apply(client, objs) {
  const lines = []
  for (const o of objs) {
    const live = await client.getOrNull(o.kind, o.metadata.namespace, o.metadata.name)
    if (!live) {
      try {
        await client.create(o)
      } catch (e) {
        if (e.code === 404 && !e.status?.details?.name) continue // a type the simulated API does not serve
        throw e
      }
      lines.push(`${subject(o)} created`)
    } else {
      const same =
        JSON.stringify(live.spec) === JSON.stringify({ ...live.spec, ...o.spec }) &&
        Object.entries(o.metadata.labels || {}).every(([k, v]) => live.metadata.labels?.[k] === v)
      if (!same)
        await client.patch(o.kind, o.metadata.namespace, o.metadata.name, {
          metadata: { labels: o.metadata.labels, annotations: o.metadata.annotations },
          spec: o.spec,
          data: o.data,
        })
      lines.push(`${subject(o)} ${same ? 'unchanged' : 'configured'}`)
    }
  }
  return lines.join('\n')
}

const deploymentReady = (d) => {
  const want = d?.spec?.replicas ?? 1
  const st = d?.status || {}
  return (
    Boolean(d) &&
    (st.observedGeneration === undefined || st.observedGeneration >= d.metadata.generation) &&
    (st.readyReplicas || 0) >= want &&
    (st.availableReplicas || 0) >= want &&
    (st.updatedReplicas ?? want) >= want
  )
}

/** flux's status checker: poll the controllers' Deployments until ready or the deadline. */
async function assess(ctx, components, deadline) {
  const client = await kube(ctx)
  let live = []
  for (;;) {
    live = await Promise.all(components.map((c) => client.getOrNull('Deployment', ns(ctx), c)))
    if (live.every(deploymentReady) || Date.now() + POLL() > deadline) break
    await sleep(POLL())
  }
  let ok = true
  components.forEach((c, i) => {
    if (deploymentReady(live[i])) ctx.log.success(`${c}: deployment ready`)
    else {
      ok = false
      ctx.log.failure(`${c}: deployment ${live[i] ? 'not ready' : 'not found'}`)
    }
  })
  return ok
}

const componentsOf = (ctx) => [...ctx.flags.components, ...(ctx.flags['components-extra'] || [])]

export async function check(ctx) {
  ctx.log.action('checking prerequisites')
  const client = await kube(ctx)
  let failed = false
  try {
    const v = await client.version()
    const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(v.gitVersion || '')
    if (!m) {
      ctx.log.failure("Kubernetes version can't be determined")
      failed = true
    } else if (Number(m[1]) < 1 || (Number(m[1]) === 1 && Number(m[2]) < 33)) {
      ctx.log.failure(`Kubernetes version ${v.gitVersion} does not match >=1.33.0-0`)
      failed = true
    } else ctx.log.success(`Kubernetes ${m[1]}.${m[2]}.${m[3]} >=1.33.0-0`)
  } catch (e) {
    ctx.log.failure(`Kubernetes API call failed: ${e.message}`)
    failed = true
  }
  if (ctx.flags.pre) {
    if (failed) {
      await ctx.record('error: prerequisites checks failed')
      return 1
    }
    ctx.log.success('prerequisites checks passed')
    await ctx.record('ok')
    return 0
  }
  ctx.log.action('checking version in cluster')
  const crd = await client.getOrNull('CustomResourceDefinition', undefined, 'gitrepositories.source.toolkit.fluxcd.io').catch(() => null)
  if (!crd) {
    ctx.log.failure('checking failed: customresourcedefinitions.apiextensions.k8s.io "gitrepositories.source.toolkit.fluxcd.io" not found')
    failed = true
  } else {
    ctx.log.success(`distribution: flux-${crd.metadata.labels?.['app.kubernetes.io/version'] || ''}`)
    ctx.log.success(`bootstrapped: ${Boolean(crd.metadata.labels?.['kustomize.toolkit.fluxcd.io/name'])}`)
  }
  ctx.log.action('checking controllers')
  const deps = await client.list('Deployment', ns(ctx), { labelSelector: `${PART_OF}=flux` }).catch(() => [])
  if (!deps.length) {
    ctx.log.failure(`no controllers found in the '${ns(ctx)}' namespace with the label selector '${PART_OF}=flux'`)
    failed = true
  } else {
    if (
      !(await assess(
        ctx,
        deps.map((d) => d.metadata.name),
        Date.now() + ctx.flags.timeout,
      ))
    )
      failed = true
    for (const d of deps) for (const c of d.spec?.template?.spec?.containers || []) ctx.log.action(c.image)
  }
  ctx.log.action('checking crds')
  const crds = await client.list('CustomResourceDefinition', undefined, { labelSelector: `${PART_OF}=flux` }).catch(() => [])
  if (!crds.length) {
    ctx.log.failure(`no crds found with the label selector '${PART_OF}=flux'`)
    failed = true
  }
  for (const c of crds) {
    const versions = c.status?.storedVersions?.length
      ? c.status.storedVersions
      : (c.spec?.versions || []).filter((v) => v.storage).map((v) => v.name)
    ctx.log.success(`${c.metadata.name}/${versions[versions.length - 1]}`)
  }
  if (failed) {
    ctx.log.failure('check failed')
    await ctx.record('error: check failed')
    return 1
  }
  ctx.log.success('all checks passed')
  await ctx.record('ok')
  return 0
}

async function installComponents(ctx, { print, extraLabels } = {}) {
  const client = await kube(ctx)
  const objs = manifests(ctx, componentsOf(ctx), extraLabels)
  const out = await apply(client, objs)
  if (print) ctx.out(out + '\n')
  // the CRDs are applied in the first stage and waited for (fluxcd/pkg/ssa ApplyAllStaged, WaitForSet):
  // a real API server serves a CRD's kind only once it is Established
  const crds = objs.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name)
  const deadline = Date.now() + ctx.flags.timeout
  for (;;) {
    const live = await Promise.all(crds.map((name) => client.getOrNull('CustomResourceDefinition', undefined, name)))
    const waiting = crds.filter((_, i) => condition(live[i], 'Established')?.status !== 'True')
    if (!waiting.length) return
    if (Date.now() + POLL() > deadline)
      throw new Error(`timeout waiting for: [${waiting.map((n) => `CustomResourceDefinition/${n} status: 'InProgress'`).join(', ')}]`)
    await sleep(POLL())
  }
}

export async function install(ctx) {
  const deadline = Date.now() + ctx.flags.timeout
  if (ctx.flags.export) {
    const { stringify } = await import('yaml')
    ctx.out(
      manifests(ctx, componentsOf(ctx))
        .map((o) => `---\n${stringify(o)}`)
        .join(''),
    )
    return 0
  }
  ctx.log.generate('generating manifests')
  ctx.log.success('manifests build completed')
  ctx.log.action(`installing components in ${ns(ctx)} namespace`)
  const client = await kube(ctx)
  const crd = await client.getOrNull('CustomResourceDefinition', undefined, 'gitrepositories.source.toolkit.fluxcd.io').catch((e) => {
    throw new FluxError(`cluster info unavailable: ${e.message}`)
  })
  if (crd?.metadata?.labels?.['kustomize.toolkit.fluxcd.io/name']) {
    throw new FluxError(
      `this cluster has already been bootstrapped with Flux ${crd.metadata.labels['app.kubernetes.io/version'] || ''}! Please use 'flux bootstrap' to upgrade`,
    )
  }
  try {
    await installComponents(ctx, { print: true })
  } catch (e) {
    throw new FluxError(`install failed: ${e.message}`)
  }
  ctx.log.waiting('verifying installation')
  if (!(await assess(ctx, componentsOf(ctx), deadline))) throw new FluxError('install failed')
  ctx.log.success('install finished')
  await ctx.record('ok')
  return 0
}

/** The public key (authorized_keys form) of a private key file: OpenSSH or PEM. */
function publicKeyOf(text) {
  const m = /-----BEGIN OPENSSH PRIVATE KEY-----([^-]+)-----END OPENSSH PRIVATE KEY-----/.exec(text)
  if (m) {
    const b = Buffer.from(m[1].replace(/\s+/g, ''), 'base64')
    let off = 'openssh-key-v1\0'.length
    const str = () => {
      const n = b.readUInt32BE(off)
      const s = b.subarray(off + 4, off + 4 + n)
      off += 4 + n
      return s
    }
    str() // cipher
    str() // kdf
    str() // kdf options
    off += 4 // number of keys
    const blob = str()
    const type = blob.subarray(4, 4 + blob.readUInt32BE(0)).toString()
    return `${type} ${blob.toString('base64')}`
  }
  const key = crypto.createPublicKey(text)
  const jwk = key.export({ format: 'jwk' })
  const s = (x) => {
    const buf = Buffer.isBuffer(x) ? x : Buffer.from(x)
    const l = Buffer.alloc(4)
    l.writeUInt32BE(buf.length)
    return Buffer.concat([l, buf])
  }
  if (jwk.kty === 'OKP') return `ssh-ed25519 ${Buffer.concat([s('ssh-ed25519'), s(Buffer.from(jwk.x, 'base64url'))]).toString('base64')}`
  if (jwk.kty === 'EC') {
    const curve = { 'P-256': 'nistp256', 'P-384': 'nistp384', 'P-521': 'nistp521' }[jwk.crv]
    const point = Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x, 'base64url'), Buffer.from(jwk.y, 'base64url')])
    return `ecdsa-sha2-${curve} ${Buffer.concat([s(`ecdsa-sha2-${curve}`), s(curve), s(point)]).toString('base64')}`
  }
  const mpint = (x) => {
    let buf = Buffer.from(x, 'base64url')
    if (buf[0] & 0x80) buf = Buffer.concat([Buffer.from([0]), buf])
    return s(buf)
  }
  return `ssh-rsa ${Buffer.concat([s('ssh-rsa'), mpint(jwk.e), mpint(jwk.n)]).toString('base64')}`
}

/**
 * Go's net/url.Parse as flux calls it: the scheme, user, host and path, or its error text
 * (`parse "<url>": first path segment in URL cannot contain colon`, `missing protocol scheme`, ...).
 */
function goParseURL(raw) {
  const fail = (why) => {
    throw new FluxError(`parse ${JSON.stringify(raw)}: ${why}`)
  }
  if ([...raw].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)) fail('net/url: invalid control character in URL')
  let rest = raw
  let scheme = ''
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(raw)
  if (m) {
    scheme = m[1].toLowerCase()
    rest = raw.slice(m[0].length)
  } else if (raw.startsWith(':')) fail('missing protocol scheme')
  if (!scheme) {
    const colon = rest.indexOf(':')
    const slash = rest.indexOf('/')
    if (colon >= 0 && (slash < 0 || colon < slash)) fail('first path segment in URL cannot contain colon')
    return { scheme: '', user: '', host: '', path: rest }
  }
  if (!rest.startsWith('//')) return { scheme, user: '', host: '', path: rest }
  rest = rest.slice(2)
  const end = rest.search(/[/?#]/)
  const authority = end < 0 ? rest : rest.slice(0, end)
  const path = end < 0 ? '' : rest.slice(end).replace(/[?#].*$/, '')
  const at = authority.lastIndexOf('@')
  const user = at >= 0 ? authority.slice(0, at).split(':')[0] : ''
  const host = at >= 0 ? authority.slice(at + 1) : authority
  const port = /^(?:\[[^\]]*\]|[^:]*)(:.*)?$/.exec(host)?.[1]
  if (port && !/^:\d*$/.test(port)) fail(`invalid port ${JSON.stringify(port)} after host`)
  return { scheme, user, host, path }
}

/** promptui's confirm prompt, answered from stdin: true (y), false (anything else), null (EOF, promptui's ^D). */
function confirm(ctx, label) {
  ctx.out(`${label}? [y/N] `)
  return new Promise((resolve) => {
    let buf = ''
    const done = (ok) => {
      ctx.stdin.removeAllListeners('data')
      ctx.stdin.removeAllListeners('end')
      ctx.stdin.pause()
      resolve(ok)
    }
    ctx.stdin.setEncoding('utf8')
    ctx.stdin.on('data', (d) => {
      buf += d
      if (buf.includes('\n')) done(/^y(es)?$/i.test(buf.split('\n')[0].trim()))
    })
    ctx.stdin.on('end', () => done(buf.trim() ? /^y(es)?$/i.test(buf.trim()) : null))
    ctx.stdin.on('error', () => done(false))
    ctx.stdin.resume()
  })
}

const condition = (o, type) => (o?.status?.conditions || []).find((c) => c.type === type)

async function waitReconciled(ctx, kind, name, deadline) {
  const client = await kube(ctx)
  let obj = null
  for (;;) {
    obj = await client.getOrNull(kind, ns(ctx), name)
    const ready = condition(obj, 'Ready')
    const current = obj && (obj.status?.observedGeneration === undefined || obj.status.observedGeneration === obj.metadata.generation)
    if (obj?.spec?.suspend) return `${kind} '${ns(ctx)}/${name}' is suspended`
    if (current && ready?.status === 'True') return null
    // objectReconciled (pkg/bootstrap/bootstrap.go): Ready=False at the current generation ends the wait
    if (current && ready?.status === 'False') return ready.message
    if (Date.now() + POLL() > deadline) break
    await sleep(POLL())
  }
  const ready = condition(obj, 'Ready')
  if (ready && ready.status !== 'True')
    return `${kind === 'Kustomization' ? 'kustomization' : 'gitrepository'} '${ns(ctx)}/${name}' not ready: '${ready.message}'`
  return 'context deadline exceeded'
}

export async function bootstrapGit(ctx) {
  const f = ctx.flags
  const deadline = Date.now() + f.timeout
  if (f['with-bearer-token']) f['token-auth'] = true
  if (!f.password && process.env.GIT_PASSWORD) f.password = process.env.GIT_PASSWORD
  if (f['token-auth'] && !f.password) {
    ctx.out('Please enter your Git repository password: ')
    const pw = await new Promise((resolve) => {
      let buf = ''
      ctx.stdin.setEncoding('utf8')
      ctx.stdin.on('data', (d) => (buf += d))
      ctx.stdin.on('end', () => resolve(buf.includes('\n') || buf ? buf : null))
      ctx.stdin.resume()
    })
    if (pw === null) throw new FluxError('could not read token: EOF')
    f.password = pw.replace(/[\r\n]+$/, '')
  }
  const url = goParseURL(f.url)
  const client = await kube(ctx)
  const n = ns(ctx)
  const branch = f.branch
  // cmd/flux/bootstrap.go confirmBootstrap, cluster_info.go: Flux installed by another tool
  // (the GitRepository CRD labelled app.kubernetes.io/managed-by) asks before overriding it
  if (!f.force) {
    const crd = await client.getOrNull('CustomResourceDefinition', undefined, 'gitrepositories.source.toolkit.fluxcd.io').catch((e) => {
      throw new FluxError(`cluster info unavailable: ${e.message}`)
    })
    const managedBy = crd?.metadata?.labels?.['app.kubernetes.io/managed-by']
    if (crd && managedBy && managedBy !== 'flux') {
      ctx.err(`Flux ${crd.metadata.labels['app.kubernetes.io/version'] || ''} has been installed on this cluster with ${managedBy}!\n`)
      const answer = await confirm(ctx, `Are you sure you want to override the ${managedBy} installation? Y/N`)
      if (answer === null) throw new FluxError('^D')
      if (!answer) throw new FluxError('bootstrap cancelled')
    }
  }
  if (!['ssh', 'https', 'http'].includes(url.scheme))
    throw new FluxError(`failed to create authentication options for ${f.url}: scheme ${JSON.stringify(url.scheme)} is not supported`)
  if (url.scheme === 'http' && !f['allow-insecure-http'])
    throw new FluxError(
      `failed to create authentication options for ${f.url}: scheme http is insecure, pass --allow-insecure-http=true to allow it`,
    )
  // the Git server is not real: the scenario's flux.git says how it answers (GET /sim/v1/git)
  const gitServer = await client.call('GET', '/sim/v1/git').catch(() => ({}))
  if (url.scheme === 'ssh' && f['private-key-file'] && gitServer.hostKeyScan === 'refused') {
    // getAuthOpts -> sourcesecret.ScanHostKey (pkg/manifestgen/sourcesecret/sourcesecret.go)
    const hostPort = /:\d+$/.test(url.host) ? url.host : `${url.host}:22`
    throw new FluxError(
      `failed to create authentication options for ${f.url}: SSH key scan for host ${hostPort} failed, error: dial tcp ${hostPort}: connect: connection refused`,
    )
  }
  let pub = null
  let identity = null
  if (!f['token-auth']) {
    if (f['private-key-file']) {
      try {
        identity = fs.readFileSync(f['private-key-file'], 'utf8')
      } catch {
        throw new FluxError(`failed to open private key file: open ${f['private-key-file']}: no such file or directory`)
      }
    } else {
      // flux generates an ECDSA P-384 deploy key by default
      identity = crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey.export({ format: 'pem', type: 'pkcs8' })
    }
    pub = publicKeyOf(identity)
    // bootstrap_git.go: the sync URL is ssh:// whatever the scheme given, with the user set
    if (!url.user || f.username !== 'git') url.user = f.username
    url.scheme = 'ssh'
  } else {
    url.user = ''
    if (url.scheme !== 'https' && url.scheme !== 'http') url.host = url.host.replace(/:\d+$/, '')
    if (!f['allow-insecure-http']) url.scheme = 'https'
  }
  const repoURL = `${url.scheme}://${url.user ? `${url.user}@` : ''}${url.host}${url.path}`
  // mustInstallManifests (bootstrap.go): the root has applied a revision already
  const existing = await client.getOrNull('Kustomization', n, n).catch(() => null)
  const path = f.path ? `./${f.path.replace(/^\.\//, '')}` : './'
  // kustomizationPathDiffers (bootstrap.go), checked before the sync manifests are written
  const normalize = (p) => `./${(p.length > 2 ? p.replace(/\/$/, '') : p).replace(/^\.\//, '')}`
  const pathDiffers = existing && normalize(existing.spec?.path || '') !== normalize(f.path || '')
  // flux's lines for generating a set of manifests and committing it (a rerun finds them up to date)
  const commitManifests = (what) => {
    ctx.log.action(`generating ${what} manifests`)
    ctx.log.success(`generated ${what} manifests`)
    if (existing) return ctx.log.success(`${what} manifests are up to date`)
    ctx.log.success(`committed ${what} manifests to "${branch}" ("${crypto.randomBytes(20).toString('hex')}")`)
    ctx.log.action(`pushing ${what} manifests to "${f.url}"`)
  }

  ctx.log.action(`cloning branch "${branch}" from Git repository "${f.url}"`)
  if (gitServer.deployKey === 'refused' && !f['token-auth']) {
    // bootstrap_plain_git.go: retry(1, 2s, clone) then `failed to clone repository: …` (go-git's ssh error)
    const err = `unable to clone '${f.url}': ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey], no supported methods remain`
    ctx.log.warning(` clone failure: ${err}`)
    await sleep(Math.min(2000, POLL()))
    ctx.log.warning(` clone failure: ${err}`)
    throw new FluxError(`failed to clone repository: ${err}`)
  }
  ctx.log.success('cloned repository')
  commitManifests('component')
  if (!existing?.status?.lastAppliedRevision) {
    ctx.log.action(`installing components in "${n}" namespace`)
    await installComponents(ctx, { extraLabels: { 'kustomize.toolkit.fluxcd.io/name': n, 'kustomize.toolkit.fluxcd.io/namespace': n } })
    ctx.log.success('installed components')
  }
  ctx.log.success('reconciled components')

  const secretName = f['secret-name']
  ctx.log.action(`determining if source secret "${n}/${secretName}" exists`)
  const secretExists = Boolean(await client.getOrNull('Secret', n, secretName))
  // ReconcileSourceSecret: an existing Secret is kept unless a key or credentials were given
  const custom = Boolean(f['private-key-file']) || Boolean(f['token-auth'] && f.username + f.password)
  if (secretExists && !custom) ctx.log.success('source secret up to date')
  else await writeSourceSecret()
  async function writeSourceSecret() {
    ctx.log.action('generating source secret')
    const data = {}
    if (f['token-auth']) {
      if (f['with-bearer-token']) data.bearerToken = f.password
      else Object.assign(data, { username: f.username, password: f.password })
    } else {
      ctx.log.success(`public key: ${pub}`)
      if (!f.silent && !(await confirm(ctx, 'Please give the key access to your repository'))) throw new FluxError('aborting')
      // flux scans the Git host's keys here; the simulator has no Git server, so it records a fixed key
      const host = url.port ? `[${url.hostname}]:${url.port}` : url.hostname
      Object.assign(data, {
        identity,
        'identity.pub': `${pub}\n`,
        known_hosts: `${host} ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEmKSENjQEezOmxkZMy7opKgwFB9nkt5YRrYMjNuG5N87uRgg6CLrbo5wAdT/y6v0mKV0U2w0WZ2YB/++Tpockg=\n`,
      })
    }
    ctx.log.action(`applying source secret "${n}/${secretName}"`)
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secretName, namespace: n },
      type: 'Opaque',
      data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
    }
    if (secretExists) await client.patch('Secret', n, secretName, { data: secret.data })
    else await client.create(secret)
    ctx.log.success('reconciled source secret')
  }

  if (pathDiffers)
    throw new FluxError(
      `sync path configuration (${JSON.stringify(path)}) would overwrite path (${JSON.stringify(existing.spec.path)}) of existing Kustomization`,
    )
  commitManifests('sync')
  ctx.log.action('applying sync manifests')
  await apply(client, [
    {
      apiVersion: 'source.toolkit.fluxcd.io/v1',
      kind: 'GitRepository',
      metadata: { name: n, namespace: n },
      spec: { interval: '1m0s', ref: { branch }, secretRef: { name: secretName }, url: repoURL },
    },
    {
      apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
      kind: 'Kustomization',
      metadata: { name: n, namespace: n },
      spec: { interval: '10m0s', path, prune: true, sourceRef: { kind: 'GitRepository', name: n } },
    },
  ])
  ctx.log.success('reconciled sync configuration')

  const errs = []
  for (const [kind, label] of [
    ['GitRepository', 'GitRepository'],
    ['Kustomization', 'Kustomization'],
  ]) {
    ctx.log.waiting(`waiting for ${label} "${n}/${n}" to be reconciled`)
    const err = await waitReconciled(ctx, kind, n, deadline)
    if (err) {
      ctx.log.failure(err)
      errs.push(`error while waiting for ${label} to be ready: '${err}'`)
    } else ctx.log.success(`${label} reconciled successfully`)
  }
  ctx.log.action('confirming components are healthy')
  if (!(await assess(ctx, componentsOf(ctx), Math.max(deadline, Date.now() + POLL()))))
    errs.push('timed out waiting for all resources to be ready')
  else ctx.log.success('all components are healthy')
  if (errs.length) {
    const agg = errs.length === 1 ? errs[0] : `[${errs.join(', ')}]`
    throw new FluxError(`bootstrap failed with ${errs.length} health check failure(s): ${agg}`)
  }
  await ctx.record('ok')
  return 0
}

/** olekukonko/tablewriter as flux configures it (no borders, tab padding). */
function table(header, rows, noHeader = false) {
  const cols = header.length
  const widths = Array.from({ length: cols }, (_, i) => Math.max([...header[i]].length, ...rows.map((r) => [...r[i]].length)))
  const pad = (s, i) => s + ' '.repeat(widths[i] - [...s].length)
  let out = ''
  if (!noHeader) out += header.map((h, i) => pad(h, i) + (i === cols - 1 ? ' ' : '\t')).join('') + '\n'
  for (const r of rows) out += r.map((c, i) => pad(c, i) + '\t').join('') + '\n'
  return out
}
const truncateHex = (s) => (s || '').replace(/\b[a-f0-9]{40,128}\b/g, (h) => h.slice(0, 8))
const readyOf = (o) => {
  const c = condition(o, 'Ready')
  return c ? [c.status, c.message || ''] : ['False', 'waiting to be reconciled']
}

async function getList(ctx, kind, label, args, row, headers) {
  const client = await kube(ctx)
  const all = ctx.flags['all-namespaces']
  let items = await client.list(kind, all ? undefined : ns(ctx), {
    labelSelector: ctx.flags['label-selector'] || undefined,
    fieldSelector: args[0] ? `metadata.name=${args[0]}` : undefined,
  })
  if (!items.length) {
    const where = all ? 'any' : `"${ns(ctx)}"`
    throw new FluxError(
      args[0] ? `${label} object '${args[0]}' not found in ${where} namespace` : `no ${label} objects found in ${where} namespace`,
    )
  }
  const sel = ctx.flags['status-selector']
  if (sel) {
    const neg = sel.includes('!=')
    const [t, s] = sel.split(neg ? '!=' : '=')
    items = items.filter((o) => {
      const c = (o.status?.conditions || []).find((x) => x.type.toLowerCase() === t.toLowerCase())
      const m = Boolean(c && c.status.toLowerCase() === String(s).toLowerCase())
      return neg ? !m : m
    })
  }
  const hdr = [...(all ? ['NAMESPACE'] : []), ...headers]
  const rows = items.map((o) => [...(all ? [o.metadata.namespace] : []), o.metadata.name, ...row(o)])
  // tablewriter sizes columns by the header even when it is not printed
  ctx.out(table(hdr, rows, ctx.flags['no-header']))
  await ctx.record('ok')
  return 0
}

export function getKustomizations(ctx, args) {
  return getList(
    ctx,
    'Kustomization',
    'Kustomization',
    args,
    (o) => {
      const [st, msg] = readyOf(o)
      return [truncateHex(o.status?.lastAppliedRevision || ''), o.spec?.suspend ? 'True' : 'False', st, truncateHex(msg)]
    },
    ['NAME', 'REVISION', 'SUSPENDED', 'READY', 'MESSAGE'],
  )
}

export function getGitRepositories(ctx, args) {
  return getList(
    ctx,
    'GitRepository',
    'GitRepository',
    args,
    (o) => {
      const [st, msg] = readyOf(o)
      return [truncateHex(o.status?.artifact?.revision || ''), o.spec?.suspend ? 'True' : 'False', st, truncateHex(msg)]
    },
    ['NAME', 'REVISION', 'SUSPENDED', 'READY', 'MESSAGE'],
  )
}

/** Annotate, then wait until the controller handled the request (reconcile.go). */
async function reconcileOne(ctx, kind, name, namespace, deadline, { quoteMessage }) {
  const client = await kube(ctx)
  const obj = await client.get(kind, namespace, name)
  if (obj.spec?.suspend) throw new FluxError('resource is suspended')
  const lastHandled = obj.status?.lastHandledReconcileAt
  ctx.log.action(`annotating ${kind} ${name} in ${namespace} namespace`)
  await client.patch(kind, namespace, name, { metadata: { annotations: { 'reconcile.fluxcd.io/requestedAt': new Date().toISOString() } } })
  ctx.log.success(`${kind} annotated`)
  ctx.log.waiting(`waiting for ${kind} reconciliation`)
  let o
  for (;;) {
    o = await client.get(kind, namespace, name)
    if (o.status?.lastHandledReconcileAt !== lastHandled) {
      const stalled = condition(o, 'Stalled')
      if (stalled?.status === 'True') throw new FluxError(stalled.message)
      const progressing = condition(o, 'Reconciling')?.status === 'True' || (o.status?.observedGeneration ?? 0) !== o.metadata.generation
      if (!progressing) break
    }
    if (Date.now() + POLL() > deadline) {
      await sleep(Math.max(0, deadline - Date.now()))
      throw new FluxError('context deadline exceeded')
    }
    await sleep(POLL())
  }
  const ready = condition(o, 'Ready')
  if (!ready) throw new FluxError("status can't be determined")
  if (ready.status !== 'True')
    throw new FluxError(
      quoteMessage ? `${kind} reconciliation failed: '${ready.message}'` : `${kind} reconciliation failed: ${ready.message}`,
    )
  return o
}

export async function reconcileKustomization(ctx, args) {
  if (!args.length) throw new FluxError('Kustomization name is required')
  const deadline = Date.now() + ctx.flags.timeout
  const client = await kube(ctx)
  const name = args[0]
  const k = await client.get('Kustomization', ns(ctx), name).catch((e) => {
    throw new FluxError(e.code === 404 ? `kustomizations.kustomize.toolkit.fluxcd.io "${name}" not found` : e.message)
  })
  if (k.spec?.suspend) throw new FluxError('resource is suspended')
  if (ctx.flags['with-source']) {
    const ref = k.spec?.sourceRef || {}
    if (ref.kind !== 'GitRepository') throw new FluxError(`cannot reconcile source of kind ${ref.kind}`)
    const src = await reconcileOne(ctx, 'GitRepository', ref.name, ref.namespace || ns(ctx), deadline, { quoteMessage: true })
    ctx.log.success(`fetched revision ${src.status?.artifact?.revision || ''}`)
  }
  const done = await reconcileOne(ctx, 'Kustomization', name, ns(ctx), deadline, { quoteMessage: false })
  ctx.log.success(`applied revision ${done.status?.lastAppliedRevision || ''}`)
  await ctx.record('ok')
  return 0
}

export async function reconcileGit(ctx, args) {
  if (!args.length) throw new FluxError('GitRepository name is required')
  const o = await reconcileOne(ctx, 'GitRepository', args[0], ns(ctx), Date.now() + ctx.flags.timeout, { quoteMessage: true })
  ctx.log.success(`fetched revision ${o.status?.artifact?.revision || ''}`)
  await ctx.record('ok')
  return 0
}

export async function version(ctx) {
  const fmt = ctx.flags.output
  if (fmt !== 'yaml' && fmt !== 'json') throw new FluxError(`--output must be json or yaml, not ${fmt}`)
  const info = { flux: FLUX_VERSION }
  if (!ctx.flags.client) {
    const client = await kube(ctx)
    const crd = await client.getOrNull('CustomResourceDefinition', undefined, 'gitrepositories.source.toolkit.fluxcd.io')
    if (crd) info.distribution = `flux-${crd.metadata.labels?.['app.kubernetes.io/version'] || ''}`
    const deps = await client.list('Deployment', ns(ctx), { labelSelector: `${PART_OF}=flux` })
    if (!deps.length) throw new FluxError(`no deployments found in ${ns(ctx)} namespace`)
    for (const d of deps.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) {
      for (const c of d.spec?.template?.spec?.containers || []) {
        const [, n, t] = /([^/:]+):([^/]+)$/.exec(c.image) || []
        if (n) info[n] = t
      }
    }
  }
  if (fmt === 'json') ctx.out(JSON.stringify(Object.fromEntries(Object.entries(info).sort()), null, 2) + '\n')
  else
    ctx.out(
      Object.entries(info)
        .map(([k, v]) => `${k}: ${v}`)
        .join('\n') + '\n',
    )
  if (ctx.record) await ctx.record('ok')
  return 0
}
