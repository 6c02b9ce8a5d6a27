import { existsSync } from 'node:fs'
import { partOfCluster, selectionText, wholeClusterCommand } from './shared/selection.ts'
import { join, resolve } from 'node:path'
import { parseAllDocuments, stringify } from 'yaml'
import { NodeError } from '../core/errors.ts'
import { formatDuration } from '../core/duration.ts'
import { fluxHint, kubectlCommand, taskCommand } from '../cli/hints.ts'
import { InputError } from '../core/errors.ts'
import type { ClusterStep, Phase, StepReporter } from '../engine/phase.ts'
import { PollTimeout, type PollAnswer } from '../wait/poll.ts'
import type { Run } from '../engine/run.ts'
import { fluxRoot, type FluxSettings } from '../input/settings.ts'
import { condition, type KubeObject, type Kubectl } from '../tools/kubectl.ts'
import { isSopsEncrypted } from '../tools/sops.ts'
import { waitForGates } from './shared/gates.ts'
import { loadReleasePlan, releasePlan, releaseSteps } from './shared/releases.ts'
import { readRegularFile } from '../core/files.ts'

/** Every failure of this phase is recovered by running it again (rendered when the hint is made). */
const AGAIN = 'bootstrap:flux'
const again = (): string => taskCommand(AGAIN)
const KS = 'kustomizations.kustomize.toolkit.fluxcd.io'
const HR = 'helmreleases.helm.toolkit.fluxcd.io'
const GIT = 'gitrepositories.source.toolkit.fluxcd.io'

/** The Secret manifests to apply, decrypted in check() and kept in memory only (never on disk). */
const manifestsOf = new WeakMap<Run, Array<{ file: string; text: string }>>()

function fluxSettings(run: Run): FluxSettings {
  const flux = run.settings.flux
  if (!flux)
    throw new NodeError(
      'flux',
      'no flux section in bootstrap.yaml',
      `add flux: {mode, kustomization, git} to bootstrap.yaml (docs/settings.md), then run: ${taskCommand('bootstrap:flux')}`,
    )
  return flux
}

/** kubectl whose failures in this phase say to run this phase again. */
const kube = (run: Run): Kubectl => run.kubectl.withRecovery(AGAIN)

/** true when Flux may go in; else why not (a node failed an earlier phase of this run, or the cluster check found one not ready). */
function fluxMayGoIn(run: Run): true | string {
  if (run.facts.cluster.fluxBlocked) return run.facts.cluster.fluxBlocked
  if (run.failed.size > 0)
    return `the cluster is not ready: ${[...run.failed].map(([node, phase]) => `${node} failed in ${phase}`).join(', ')}`
  return true
}

// ---- input ----------------------------------------------------------------------------

/** Every flux.secrets file, decrypted with sops when encrypted; exit 2 naming the file when it cannot be. */
async function readSecrets(run: Run, flux: FluxSettings): Promise<Array<{ file: string; text: string }>> {
  const out: Array<{ file: string; text: string }> = []
  const ageKey = flux.sopsAgeKeyFile ? resolve(run.inventory.clusterDir, flux.sopsAgeKeyFile) : undefined
  for (const file of flux.secrets) {
    const path = resolve(run.inventory.clusterDir, file)
    const raw = readRegularFile(path)
    if (!isSopsEncrypted(path, raw)) {
      out.push({ file, text: raw })
      continue
    }
    if (!run.sops.available())
      throw new InputError(`${file} is SOPS-encrypted and sops is not on PATH`, {
        file: path,
        fix: 'install sops 3.x (or set SOPS to its path); the file is decrypted in memory only',
      })
    if (!ageKey)
      throw new InputError(`${file} is SOPS-encrypted but flux.sopsAgeKeyFile is not set`, {
        file: path,
        fix: 'set flux.sopsAgeKeyFile in bootstrap.yaml to the age identity the file is encrypted to',
      })
    const result = await run.sops.decrypt(path, ageKey)
    if (!result.ok)
      throw new InputError(`sops cannot decrypt ${file}: ${result.reason}`, {
        file: path,
        fix: `check that ${flux.sopsAgeKeyFile ?? ''} holds the age identity the file is encrypted to`,
      })
    // the plaintext values must never reach the output either
    // (short ones too, and each line of a multi-line one: the plaintext path learns them the same way)
    for (const value of secretValues(result.text)) {
      run.redactor.add(value, true)
      for (const line of value.split('\n')) if (line !== value) run.redactor.add(line, line.trim().length >= 4)
    }
    out.push({ file, text: result.text })
  }
  return out
}

/** Every value of every Secret's data (decoded too) and stringData, in every document. */
function secretValues(text: string): string[] {
  const values: string[] = []
  for (const doc of parseAllDocuments(text)) {
    const obj = doc.toJS() as { data?: Record<string, unknown>; stringData?: Record<string, unknown> } | null
    for (const v of Object.values(obj?.stringData ?? {})) values.push(String(v))
    for (const v of Object.values(obj?.data ?? {})) values.push(String(v), Buffer.from(String(v), 'base64').toString('utf8'))
  }
  return values.filter((v) => v.length > 0)
}

/** The namespaces the manifests name (created first: a Secret in a missing namespace is refused). */
/** A DNS-1123 label: what a namespace name must be (and never a flag or a second YAML document). */
const DNS1123_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/

/** The namespaces the manifests name; one that is not a DNS-1123 label fails the step, naming its file. */
function namespacesOf(manifests: ReadonlyArray<{ file: string; text: string }>): string[] {
  const names = new Set<string>()
  for (const { file, text } of manifests) {
    for (const doc of parseAllDocuments(text)) {
      const ns = (doc.toJS() as { metadata?: { namespace?: unknown } } | null)?.metadata?.namespace
      if (ns === undefined || ns === null || ns === '') continue
      if (typeof ns !== 'string' || !DNS1123_LABEL.test(ns))
        throw new NodeError(
          'config-invalid',
          `${file}: metadata.namespace ${JSON.stringify(ns)} is not a namespace name (a DNS-1123 label: lower-case letters, digits and dashes)`,
          `correct the namespace in ${file}, then run: ${again()}`,
        )
      names.add(ns)
    }
  }
  return [...names]
}

/** Manifests as objects, serialized by the YAML library: no value can become a key or a document of its own. */
function manifestList(items: object[]): string {
  return items.map((item) => stringify(item)).join('---\n')
}

const namespaceObject = (name: string): object => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } })

// ---- steps ----------------------------------------------------------------------------

/** Every node Ready, the CNI DaemonSet ready and the readiness gates met, read now (bootstrap:flux alone starts here). */
async function clusterReady(run: Run, report: StepReporter): Promise<string> {
  if (run.options.dryRun) return 'dry run'
  const kubectl = kube(run)
  const cni = run.settings.cni
  try {
    return await report.poll(
      // a transient API error is "not yet" (the poller's rule); the deadline decides
      async (): Promise<PollAnswer<string>> => {
        const nodes = await kubectl.list('nodes')
        const notReady = nodes
          .filter((n) => condition(n, 'Ready')?.status !== 'True')
          .map((n) => `${n.metadata.name} NotReady (${condition(n, 'Ready')?.message ?? 'no Ready condition'})`)
        const missing = run.nodes.filter((n) => !nodes.some((k) => k.metadata.name === n.name)).map((n) => `${n.name} not registered`)
        const problems = [...missing, ...notReady]
        if (cni) {
          const ds = await kubectl.get('daemonsets', cni.daemonset, cni.namespace)
          const st = ds?.status as { desiredNumberScheduled?: number; numberReady?: number } | undefined
          if (!ds) problems.push(`CNI DaemonSet ${cni.namespace}/${cni.daemonset} not found`)
          else if ((st?.numberReady ?? 0) < (st?.desiredNumberScheduled ?? 1))
            problems.push(`CNI ${cni.daemonset}: ${st?.numberReady ?? 0}/${st?.desiredNumberScheduled ?? '?'} pods ready`)
        }
        for (const gate of run.settings.readinessGates) {
          const pods = await kubectl.list('pods', { namespace: gate.namespace, selector: gate.selector })
          if (pods.length === 0 || pods.some((p) => condition(p, 'Ready')?.status !== 'True'))
            problems.push(`readiness gate ${gate.name} not met`)
        }
        const why = problems.join('; ')
        return problems.length
          ? { done: false, state: why }
          : { done: true, value: `${nodes.length} node(s) Ready${cni ? `, ${cni.daemonset} ready` : ''}` }
      },
      // a check, not a wait: wait-ready is the phase that waits
      Math.max(3 * run.settings.pollIntervalMs, 15_000),
    )
  } catch (err) {
    if (err instanceof PollTimeout) {
      run.facts.cluster.fluxBlocked = `the cluster is not ready: ${err.lastState}`
      throw new NodeError(
        'node-not-ready',
        `the cluster is not ready for Flux: ${err.lastState}`,
        `make every node Ready first (${taskCommand('bootstrap:wait-ready')}), then run: ${again()}`,
      )
    }
    throw err
  }
}

/** Namespaces, then the Secrets Flux needs (SOPS age key, git credentials), server-side applied from memory. */
async function applySecrets(run: Run, report: StepReporter): Promise<string> {
  const flux = fluxSettings(run)
  const manifests = [...(manifestsOf.get(run) ?? [])]
  if (manifests.length === 0 && !flux.sopsAgeKeyFile) return 'no secrets to apply'
  const { namespace } = fluxRoot(flux)
  if (flux.sopsAgeKeyFile) {
    const key = readRegularFile(resolve(run.inventory.clusterDir, flux.sopsAgeKeyFile), null)
    manifests.push({
      file: 'sops-age',
      text: manifestList([
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'sops-age', namespace },
          type: 'Opaque',
          data: { 'age.agekey': key.toString('base64') },
        },
      ]),
    })
  }
  const kubectl = kube(run)
  const namespaces = [...new Set([namespace, ...namespacesOf(manifests)])]
  report.progress(`namespaces ${namespaces.join(', ')}`)
  await kubectl.applyServerSide(manifestList(namespaces.map(namespaceObject)))
  for (const { file, text } of manifests) {
    report.progress(`kubectl apply --server-side (${file})`)
    try {
      await kubectl.applyServerSide(text)
    } catch (err) {
      if (err instanceof NodeError) throw new NodeError(err.kind, `${file}: ${err.message}`, err.hint)
      throw err
    }
  }
  return `${manifests.length} secret manifest(s) applied server-side, namespaces ${namespaces.join(', ')}`
}

/** ssh://user@host/path as flux writes it into the GitRepository (cmd/flux/bootstrap_git.go). */
function syncUrl(url: string): string {
  const m = /^(?:[a-z][a-z0-9+.-]*:\/\/)?(?:([^@/]+)@)?([^/]+)(\/.*)?$/i.exec(url)
  if (!m) return url
  return `ssh://${m[1] ?? 'git'}@${m[2]}${(m[3] ?? '').replace(/\/$/, '')}`
}
const normalizePath = (p: string): string => `./${(p.length > 2 ? p.replace(/\/$/, '') : p).replace(/^\.\//, '')}`

/** What differs between the live GitRepository / root Kustomization / deploy key Secret and the settings. */
async function driftOf(run: Run, flux: FluxSettings, root: KubeObject): Promise<string[]> {
  const git = flux.git
  if (!git) return []
  const kubectl = kube(run)
  const ref = (root.spec?.sourceRef ?? {}) as { name?: string; namespace?: string }
  const source = await kubectl.get(GIT, ref.name ?? '', ref.namespace ?? root.metadata.namespace)
  const drift: string[] = []
  const liveUrl = String(source?.spec?.url ?? '')
  if (source && syncUrl(liveUrl) !== syncUrl(git.url)) drift.push(`git.url (live ${liveUrl}, settings ${git.url})`)
  const liveBranch = String((source?.spec?.ref as { branch?: string } | undefined)?.branch ?? '')
  if (source && liveBranch !== git.branch) drift.push(`git.branch (live ${liveBranch}, settings ${git.branch})`)
  const livePath = String(root.spec?.path ?? '')
  if (normalizePath(livePath) !== normalizePath(git.path)) drift.push(`git.path (live ${livePath}, settings ${git.path})`)
  const secretName = (source?.spec?.secretRef as { name?: string } | undefined)?.name
  if (git.privateKeyFile && secretName) {
    const secret = await kubectl.get('secrets', secretName, source?.metadata.namespace)
    const identity = (secret as { data?: Record<string, string> } | undefined)?.data?.identity
    const want = readRegularFile(resolve(run.inventory.clusterDir, git.privateKeyFile)).trim()
    if (identity !== undefined && Buffer.from(identity, 'base64').toString('utf8').trim() !== want)
      drift.push(`git.privateKeyFile (the ${secretName} Secret holds another key)`)
  }
  return drift
}

/**
 * flux-operator mode (cluster-template since 2025): the deploy key Secret, the flux-operator chart,
 * then a FluxInstance whose sync is flux.git; waits for the FluxInstance Ready.
 */
async function installOperator(run: Run, flux: FluxSettings, report: StepReporter): Promise<string> {
  const git = flux.git
  const op = flux.operator
  if (!git?.privateKeyFile || !op)
    throw new NodeError(
      'flux',
      'flux.mode operator needs flux.git with privateKeyFile',
      `fix bootstrap.yaml (docs/settings.md), then run: ${again()}`,
    )
  const kubectl = kube(run)
  const { namespace, name } = fluxRoot(flux)
  const b64 = (file: string): string => readRegularFile(resolve(run.inventory.clusterDir, file), null).toString('base64')
  report.progress(`deploy key Secret ${namespace}/${name}`)
  await kubectl.applyServerSide(
    manifestList([
      namespaceObject(namespace),
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace },
        type: 'Opaque',
        data: { identity: b64(git.privateKeyFile), ...(git.knownHostsFile ? { known_hosts: b64(git.knownHostsFile) } : {}) },
      },
    ]),
  )
  report.progress(`helm upgrade --install flux-operator ${op.chart}`)
  await run.helm.installChart(
    {
      release: 'flux-operator',
      chart: op.chart,
      namespace,
      ...(op.version ? { version: op.version } : {}),
      ...(op.repo ? { repo: op.repo } : {}),
      ...(op.caFile ? { caFile: op.caFile } : {}),
    },
    run.settings.fluxTimeoutMs,
    again(),
  )
  const instance = {
    apiVersion: 'fluxcd.controlplane.io/v1',
    kind: 'FluxInstance',
    // flux-operator accepts one FluxInstance per cluster, named flux
    metadata: { name: 'flux', namespace },
    spec: {
      distribution: { version: op.fluxVersion, registry: 'ghcr.io/fluxcd' },
      components: ['source-controller', 'kustomize-controller', 'helm-controller', 'notification-controller'],
      sync: { kind: 'GitRepository', name, url: git.url, ref: `refs/heads/${git.branch}`, path: git.path, pullSecret: name },
    },
  }
  report.progress('FluxInstance flux')
  await kubectl.applyServerSide(JSON.stringify(instance))
  if (run.options.dryRun) return 'dry run'
  try {
    return await report.poll(async (): Promise<PollAnswer<string>> => {
      const fi = await kubectl.get('fluxinstances.fluxcd.controlplane.io', 'flux', namespace)
      const ready = condition(fi, 'Ready')
      const current = fi?.status?.observedGeneration === fi?.metadata.generation
      if (current && ready?.status === 'True')
        return {
          done: true,
          value: `flux-operator installed; FluxInstance flux Ready (${ready.message ?? ''}), syncing ${git.url} ${git.branch} ${git.path}`,
        }
      if (current && ready?.status === 'False')
        throw new NodeError(
          'flux',
          `FluxInstance ${namespace}/flux: ${ready.reason ?? ''}: ${ready.message ?? ''}`,
          `see \`${kubectlCommand(`-n ${namespace} describe fluxinstance flux`)}\` and the flux-operator logs, then run: ${again()}`,
        )
      return { done: false, state: `FluxInstance flux: ${ready?.message ?? 'not reconciled yet'}` }
    }, run.settings.fluxTimeoutMs)
  } catch (err) {
    if (err instanceof PollTimeout)
      throw new NodeError(
        'flux',
        `FluxInstance flux not Ready within ${formatDuration(err.waitedMs)}: ${err.lastState}`,
        `see the flux-operator logs (\`${kubectlCommand(`-n ${namespace} logs deploy/flux-operator`)}\`), then run: ${again()}`,
      )
    throw err
  }
}

/**
 * The install, again while the Kubernetes API does not answer (refused, 503, timed out: the retry
 * policy's transient kinds); a failure that stays is the install's, and the wait after it is not run.
 */
async function installFluxRetried(run: Run, report: StepReporter): Promise<string> {
  try {
    return await report.retry(() => installFlux(run, report))
  } catch (err) {
    run.facts.cluster.fluxInstallFailed = true
    throw err
  }
}

async function installFlux(run: Run, report: StepReporter): Promise<string> {
  const flux = fluxSettings(run)
  if (flux.mode === 'existing') return 'installed by another tool (flux.mode: existing): Secrets applied, waiting for the handover'
  if (flux.mode === 'operator') return installOperator(run, flux, report)
  const git = flux.git
  if (!git?.privateKeyFile)
    throw new NodeError(
      'flux',
      'flux.mode bootstrap needs flux.git with privateKeyFile',
      `fix bootstrap.yaml (docs/settings.md), then run: ${again()}`,
    )
  const kubectl = kube(run)
  let drift: string[] = []
  if (!run.options.dryRun) {
    // cmd/flux/cluster_info.go: CRDs labelled managed-by another tool mean flux bootstrap asks
    // whether to override that installation, a question a non-interactive run cannot answer
    const crd = await kubectl.get('customresourcedefinitions', GIT)
    const managedBy = crd?.metadata.labels?.['app.kubernetes.io/managed-by']
    if (managedBy && managedBy !== 'flux') {
      const version = crd?.metadata.labels?.['app.kubernetes.io/version'] ?? ''
      throw new NodeError(
        'flux',
        `Flux ${version} is installed on this cluster by ${managedBy}: flux bootstrap would ask to override that installation, which a non-interactive run cannot answer`,
        `leave Flux to ${managedBy}: set flux.mode: existing in bootstrap.yaml (Secrets and the handover wait only), or uninstall it; then run: ${again()}`,
      )
    }
    const { namespace, name } = fluxRoot(flux)
    const root = crd ? await kubectl.get(KS, name, namespace) : undefined
    if (root) {
      drift = await driftOf(run, flux, root)
      if (drift.length === 0 && condition(root, 'Ready')?.status === 'True')
        return `already installed, ${flux.kustomization} Ready; repository, branch, path and key as in the settings`
      if (drift.length) report.progress(`settings changed: ${drift.join('; ')}`)
    }
  }
  report.progress(`flux bootstrap git ${git.url}`)
  try {
    await run.flux.bootstrap(git, resolve(run.inventory.clusterDir, git.privateKeyFile), run.settings.fluxTimeoutMs)
  } catch (err) {
    if (err instanceof NodeError && drift.length) {
      const pathChange = /would overwrite path/.test(err.message)
      const hint = pathChange
        ? `flux never moves an existing root Kustomization to another path: set flux.git.path back, or move the manifests in Git and delete the root Kustomization deliberately; then run: ${again()}`
        : err.hint
      throw new NodeError(err.kind, `settings changed since Flux was bootstrapped (${drift.join('; ')}): ${err.message}`, hint)
    }
    throw err
  }
  return drift.length ? `bootstrapped again from ${git.url}: ${drift.join('; ')}` : `bootstrapped from ${git.url}`
}

// Ready=False reasons that are a step on the way, not an answer (the controller retries by design)
const WAITING_REASONS = new Set(['DependencyNotReady', 'ArtifactFailed', 'Progressing', 'ProgressingWithRetry'])

function describe(o: KubeObject): string {
  const ready = condition(o, 'Ready')
  const kind = (o as { kind?: string }).kind
  return `${kind ? `${kind} ` : ''}${o.metadata.namespace ?? ''}/${o.metadata.name}: ${ready ? `${ready.reason ?? ready.status}: ${ready.message ?? ''}` : 'not reconciled yet'}`
}

/**
 * Handed over: every Kustomization and HelmRelease Ready at its current generation (or only the
 * root, flux.handover: root). The first Ready=False (at the current generation) or Stalled ends the
 * wait with its message, as flux's own wait does (pkg/bootstrap/bootstrap.go objectReconciled).
 */
async function waitHandover(run: Run, report: StepReporter): Promise<string> {
  const flux = fluxSettings(run)
  const kubectl = kube(run)
  const { namespace, name } = fluxRoot(flux)
  let pending: KubeObject[] = []
  try {
    return await report.poll(async (): Promise<PollAnswer<string>> => {
      if (run.options.dryRun) return { done: true, value: 'dry run' }
      // a transient API error is "not yet" (the poller's rule); the deadline decides
      const ks = await kubectl.listServed(KS, { allNamespaces: true })
      const hrs = ks && flux.handover === 'all' ? await kubectl.listServed(HR, { allNamespaces: true }) : []
      // the API serves no Kustomization kind: Flux's CRDs are not installed (yet)
      if (!ks) return { done: false, state: "Flux's CRDs are not installed (the API serves no Kustomization kind)" }
      const root = ks.find((k) => k.metadata.name === name && k.metadata.namespace === namespace)
      if (!root) return { done: false, state: `${flux.kustomization} not created yet` }
      if (root.spec?.suspend)
        throw new NodeError(
          'flux',
          `${flux.kustomization} is suspended`,
          `resume it (flux resume kustomization ${name} -n ${namespace}), then run: ${again()}`,
        )
      const watched = flux.handover === 'root' ? [root] : [...ks, ...(hrs ?? [])].filter((o) => !o.spec?.suspend)
      const current = (o: KubeObject): boolean =>
        o.status?.observedGeneration === undefined || o.status.observedGeneration === o.metadata.generation
      const failed = watched.filter((o) => {
        const ready = condition(o, 'Ready')
        return (
          current(o) &&
          (condition(o, 'Stalled')?.status === 'True' || (ready?.status === 'False' && !WAITING_REASONS.has(ready.reason ?? '')))
        )
      })
      if (failed.length) run.facts.cluster.fluxNotHandedOver = true
      if (failed.length) throw new NodeError('flux', `not handed over: ${failed.map(describe).join('; ')}`, fluxHint())
      pending = watched.filter((o) => !(current(o) && condition(o, 'Ready')?.status === 'True'))
      if (pending.length === 0) {
        const counts =
          flux.handover === 'root' ? `${flux.kustomization}` : `${ks.length} Kustomization(s), ${hrs?.length ?? 0} HelmRelease(s)`
        return {
          done: true,
          value: `handed over: ${counts} Ready (${String(root.status?.lastAppliedRevision ?? condition(root, 'Ready')?.message ?? '')})`,
        }
      }
      return { done: false, state: pending.map(describe).join('; ') }
    }, run.settings.fluxTimeoutMs)
  } catch (err) {
    run.facts.cluster.fluxNotHandedOver = true
    if (err instanceof PollTimeout)
      throw new NodeError(
        'flux',
        `not handed over within ${formatDuration(err.waitedMs)}: ${pending.length ? pending.map(describe).join('; ') : err.lastState}`,
        fluxHint(),
      )
    throw err
  }
}

export const flux: Phase = {
  name: 'flux',
  title: 'Hand over to Flux',
  check: async (run) => {
    // a FluxInstance from the bootstrap helmfile is Flux installed by another tool: only the handover is waited for
    const plan = await loadReleasePlan(run)
    if (!run.settings.flux && plan?.fluxInstance) {
      const ns = plan.fluxInstance.namespace
      run.settings.flux = { mode: 'existing', kustomization: `${ns}/${ns}`, handover: 'all', readinessGates: [], secrets: [] }
    }
    const settings = run.settings.flux
    const bootstrapYaml = join(run.inventory.clusterDir, 'bootstrap.yaml')
    if (!settings)
      throw new InputError('no flux section in bootstrap.yaml', {
        file: bootstrapYaml,
        fix: 'add flux: {mode, kustomization, git} (docs/settings.md)',
      })
    for (const file of [
      ...settings.secrets,
      ...(settings.git?.privateKeyFile ? [settings.git.privateKeyFile] : []),
      ...(settings.git?.knownHostsFile ? [settings.git.knownHostsFile] : []),
      ...(settings.sopsAgeKeyFile ? [settings.sopsAgeKeyFile] : []),
    ]) {
      const path = resolve(run.inventory.clusterDir, file)
      if (!existsSync(path))
        throw new InputError(`${file} named in flux settings not found`, { file: bootstrapYaml, fix: `create ${path} or fix the path` })
    }
    manifestsOf.set(run, await readSecrets(run, settings))
  },
  steps: (run) => {
    const after =
      (also?: (run: Run) => true | string): ClusterStep['ready'] =>
      (run) => {
        // Flux is the whole cluster's: installed or checked only when every node was asked for
        if (partOfCluster(run))
          return {
            skip: `Flux is the whole cluster's and ${selectionText(run)} selects part of it`,
            next: wholeClusterCommand(run, 'bootstrap:flux'),
          }
        const why = fluxMayGoIn(run)
        if (why !== true) return why
        return also ? also(run) : true
      }
    // a failed install already names the cause; waiting on would only say it again
    const installed = (run: Run): true | string => (run.facts.cluster.fluxInstallFailed ? 'the flux install failed' : true)
    return [
      {
        kind: 'cluster',
        name: 'flux-cluster-ready',
        title: 'Nodes Ready, CNI ready',
        would: 'would check every node Ready and the CNI',
        ready: after(),
        run: clusterReady,
      },
      {
        kind: 'cluster',
        name: 'flux-secrets',
        title: 'Namespaces and Secrets before Flux (server-side)',
        would: 'would apply the namespaces and Secrets Flux needs (server-side)',
        ready: after(),
        // server-side apply is idempotent: an API that does not answer for a while is retried
        run: (run, report) => report.retry(() => applySecrets(run, report)),
      },
      // the bootstrap helmfile's releases after the CNI (CoreDNS, cert-manager, flux-operator, the FluxInstance...)
      ...releaseSteps(run, releasePlan(run)?.afterCni ?? [], 'bootstrap:flux', after()),
      {
        kind: 'cluster',
        name: 'flux-install',
        title: 'Install Flux (bootstrap or flux-operator)',
        would: (r) =>
          `would ${r.settings.flux?.mode === 'operator' ? 'install flux-operator and a FluxInstance' : r.settings.flux?.mode === 'existing' ? 'leave the installed Flux as it is' : 'bootstrap Flux'}`,
        // a bootstrap helmfile's release that failed before it counts as a failed install
        ready: after(installed),
        run: installFluxRetried,
      },
      {
        kind: 'cluster',
        name: 'flux-kustomization',
        title: 'Every Kustomization and HelmRelease Ready',
        would: 'would wait for every Kustomization and HelmRelease to be Ready',
        ready: after(installed),
        run: waitHandover,
      },
      {
        kind: 'cluster',
        name: 'flux-readiness-gates',
        title: 'Readiness gates after Flux',
        would: 'would wait for the readiness gates after Flux',
        ready: after((run) =>
          run.facts.cluster.fluxInstallFailed
            ? 'the flux install failed'
            : run.facts.cluster.fluxNotHandedOver
              ? 'Flux has not handed over'
              : true,
        ),
        run: (run, report) => waitForGates(run, fluxSettings(run).readinessGates, report, AGAIN),
      },
    ]
  },
}
