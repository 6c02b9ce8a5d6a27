// Flux's controllers as the simulator runs them: the source, kustomize and helm controllers and
// flux-operator's FluxInstance reconciler, reduced to the status they write (the Ready and
// Reconciling conditions of fluxcd/pkg/apis/meta, the controllers' reasons and messages) and the
// objects they create. One set of rules for both Kubernetes sides: sim/kube's controllers (the
// model) and the Flux controller on the real API server (sim/flux-controller.js, SIM_KUBE=real).
//
// The host gives synchronous reads of what it last saw and takes the writes:
//   get(kind, namespace, name) -> object | null; list(kind) -> objects (none while the kind is not served)
//   served(kind) -> boolean (its CRD established)
//   writeStatus(kind, object, status): the status subresource; writeSpec(kind, object, spec)
//   create(object): created when missing (a FluxInstance's CRDs, namespace, controllers and sync;
//   a Kustomization's children)
//   after(simSeconds, fn) -> cancel: fn on the simulated clock (the host reconciles again after it)
//   now() -> RFC 3339 time; faults: { has(node, kind), message(kind), reason?(kind) }; flux: the scenario's `flux`
import { createHash, randomBytes } from 'node:crypto'
import { isDeepStrictEqual } from 'node:util'
import { fluxObjects } from './flux/manifests.js'
import { setCondition } from './kube-rules.js'

/** the kinds the rules read and write, where the API serves them */
export const FLUX_KINDS = {
  GitRepository: { group: 'source.toolkit.fluxcd.io', version: 'v1', plural: 'gitrepositories' },
  HelmRepository: { group: 'source.toolkit.fluxcd.io', version: 'v1', plural: 'helmrepositories' },
  OCIRepository: { group: 'source.toolkit.fluxcd.io', version: 'v1', plural: 'ocirepositories' },
  Kustomization: { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', plural: 'kustomizations' },
  HelmRelease: { group: 'helm.toolkit.fluxcd.io', version: 'v2', plural: 'helmreleases' },
  FluxInstance: { group: 'fluxcd.controlplane.io', version: 'v1', plural: 'fluxinstances' },
}

const FLUX_RECONCILE = 3 // simulated seconds from a change to its reconciliation's end
const RECHECK = 60 // how often a failing Kustomization looks again

export const DEFAULT_FLUX_MESSAGE =
  "kustomize build failed: accumulating resources: accumulation err='accumulating resources from './apps': open /tmp/kustomization-1820734512/apps: no such file or directory'"

const cond = (o, type) => (o?.status?.conditions || []).find((c) => c.type === type)

export function createFluxRules(host) {
  const { get, list, served, writeStatus, writeSpec, create, after, now, faults, flux = {} } = host
  const timers = new Map() // key -> cancel
  const shas = new Map() // uid -> revision sha (stable per source object)
  let stopped = false

  function timer(key, simSeconds, fn) {
    if (timers.has(key) || stopped) return
    timers.set(
      key,
      after(simSeconds, () => {
        timers.delete(key)
        if (!stopped) fn()
      }),
    )
  }
  /** on the timer, the object as the host sees it then */
  const later = (key, simSeconds, kind, o, fn) =>
    timer(key, simSeconds, () => {
      const fresh = get(kind, o.metadata.namespace, o.metadata.name)
      if (fresh) fn(fresh)
    })

  const controllerUp = (name) => {
    const d = get('Deployment', 'flux-system', name)
    return Boolean(d && (d.status?.availableReplicas || 0) >= 1)
  }
  const requested = (o) => o.metadata.annotations?.['reconcile.fluxcd.io/requestedAt']
  const needs = (o) => {
    const ready = cond(o, 'Ready')
    return (
      !ready ||
      ready.status === 'Unknown' ||
      ready.observedGeneration !== o.metadata.generation ||
      (requested(o) && requested(o) !== o.status?.lastHandledReconcileAt)
    )
  }
  const revisionSha = (o) => {
    if (!shas.has(o.metadata.uid)) shas.set(o.metadata.uid, randomBytes(20).toString('hex'))
    return shas.get(o.metadata.uid)
  }

  /** the end of a reconciliation: Ready as given, Reconciling gone, the request handled (fluxcd/pkg/apis/meta) */
  function fluxStatus(kind, o, patch, ready) {
    const status = { ...(o.status || {}), ...patch, observedGeneration: o.metadata.generation }
    if (requested(o)) status.lastHandledReconcileAt = requested(o)
    let cs = (o.status?.conditions || []).filter((c) => c.type !== 'Reconciling')
    cs = setCondition(cs, { type: 'Ready', observedGeneration: o.metadata.generation, ...ready }, now())
    status.conditions = cs.map((c) => ({
      type: c.type,
      status: c.status,
      observedGeneration: c.observedGeneration,
      lastTransitionTime: c.lastTransitionTime,
      reason: c.reason,
      message: c.message,
    }))
    if (!isDeepStrictEqual(o.status, status)) writeStatus(kind, o, status)
  }

  /** its start: Reconciling True and Ready Unknown, reason Progressing */
  function progressing(kind, o) {
    if (cond(o, 'Reconciling')?.status === 'True') return
    const c = { observedGeneration: o.metadata.generation, reason: 'Progressing', message: 'reconciliation in progress' }
    let cs = setCondition(o.status?.conditions, { type: 'Reconciling', status: 'True', ...c }, now())
    cs = setCondition(cs, { type: 'Ready', status: 'Unknown', ...c }, now())
    writeStatus(kind, o, { ...(o.status || {}), conditions: cs })
  }

  /** each object of `kind` that needs it is reconciled by `finish(fresh)` after FLUX_RECONCILE, while its controller runs */
  function fluxKind(kind, controller, finish, { alwaysCheck } = {}) {
    if (!served(kind) || !controllerUp(controller)) return
    for (const o of list(kind)) {
      if (o.spec?.suspend) continue
      if (!needs(o) && !alwaysCheck?.(o)) continue
      const key = `flux:${o.metadata.uid}:${o.metadata.generation}:${requested(o) || ''}`
      if (timers.has(key)) continue
      progressing(kind, o)
      later(key, FLUX_RECONCILE, kind, o, finish)
    }
  }

  // ---- source-controller ----
  function gitRepoDone(o) {
    const branch = o.spec?.ref?.name || o.spec?.ref?.branch || (o.spec?.ref?.tag ? undefined : 'master')
    const rev = o.spec?.ref?.tag ? `${o.spec.ref.tag}@sha1:${revisionSha(o)}` : `${branch}@sha1:${revisionSha(o)}`
    const artifact = {
      revision: rev,
      digest: `sha256:${createHash('sha256').update(rev).digest('hex')}`,
      path: `gitrepository/${o.metadata.namespace}/${o.metadata.name}/${revisionSha(o)}.tar.gz`,
      url: `http://source-controller.flux-system.svc.cluster.local./gitrepository/${o.metadata.namespace}/${o.metadata.name}/${revisionSha(o)}.tar.gz`,
      lastUpdateTime: now(),
      size: 12345,
    }
    fluxStatus('GitRepository', o, { artifact }, { status: 'True', reason: 'Succeeded', message: `stored artifact for revision '${rev}'` })
  }

  function helmRepoDone(kind, o) {
    const rev = `sha256:${createHash('sha256').update(o.metadata.uid).digest('hex')}`
    fluxStatus(
      kind,
      o,
      { artifact: { revision: rev, digest: rev, lastUpdateTime: now() } },
      { status: 'True', reason: 'Succeeded', message: `stored artifact: revision '${rev}'` },
    )
  }

  // ---- kustomize-controller ----
  function sourceOf(k) {
    const ref = k.spec?.sourceRef || {}
    const kind = ref.kind === 'OCIRepository' ? 'OCIRepository' : 'GitRepository'
    return { ref, src: get(kind, ref.namespace || k.metadata.namespace, ref.name || '') }
  }

  /** a failed Kustomization looks again every RECHECK */
  function failKs(k, srcRev, reason, message) {
    fluxStatus('Kustomization', k, { lastAttemptedRevision: srcRev }, { status: 'False', reason, message })
    later(`flux-retry:${k.metadata.uid}`, RECHECK, 'Kustomization', k, kustomizationDone)
  }

  function kustomizationDone(k) {
    const { ref, src } = sourceOf(k)
    const srcRev = src?.status?.artifact?.revision
    if (!src || cond(src, 'Ready')?.status !== 'True' || !srcRev) {
      const what = `${ref.kind || 'GitRepository'}/${ref.namespace || k.metadata.namespace}/${ref.name || ''}`
      return fluxStatus(
        'Kustomization',
        k,
        {},
        {
          status: 'False',
          reason: 'ArtifactFailed',
          message: src ? `Source artifact not found, retrying in 30s` : `Source '${what}' not found`,
        },
      )
    }
    for (const dep of k.spec?.dependsOn || []) {
      const other = get('Kustomization', dep.namespace || k.metadata.namespace, dep.name)
      if (!other || cond(other, 'Ready')?.status !== 'True')
        return fluxStatus(
          'Kustomization',
          k,
          {},
          {
            status: 'False',
            reason: 'DependencyNotReady',
            message: `dependency '${dep.namespace || k.metadata.namespace}/${dep.name}' is not ready`,
          },
        )
    }
    const entry = repoEntry(k)
    // decryption (kustomize-controller internal/decryptor/decryptor.go ImportKeys, DecryptResource)
    const decryptionError = entry?.decryption ? decrypt(k) : null
    if (decryptionError) return failKs(k, srcRev, 'BuildFailed', decryptionError)
    if (entry?.fail) return failKs(k, srcRev, 'BuildFailed', entry.fail)
    // Cluster-wide fault: faults.has(null, 'flux'); the message (and optional reason) come from the scenario.
    if (faults?.has(null, 'flux'))
      return failKs(k, srcRev, faults.reason?.('flux') || 'BuildFailed', faults.message?.('flux') || DEFAULT_FLUX_MESSAGE)
    applyChildren(k)
    // spec.wait: Ready only once what it applied is Ready (kustomization_controller.go checkHealth)
    if (k.spec?.wait) {
      const kids = childrenOf(k).map((c) => get(c.kind === 'HelmRelease' ? 'HelmRelease' : 'Kustomization', c.namespace, c.name))
      const failed = kids.find((o) => o && cond(o, 'Ready')?.status === 'False' && cond(o, 'Ready')?.reason !== 'DependencyNotReady')
      if (failed) {
        const what = `${failed.kind}/${failed.metadata.namespace}/${failed.metadata.name}`
        return failKs(
          k,
          srcRev,
          'HealthCheckFailed',
          `health check failed after ${RECHECK}s: timeout waiting for: [${what} status: 'Failed']`,
        )
      }
      if (!kids.every((o) => o && cond(o, 'Ready')?.status === 'True'))
        return later(`flux-health:${k.metadata.uid}`, FLUX_RECONCILE, 'Kustomization', k, kustomizationDone)
    }
    fluxStatus(
      'Kustomization',
      k,
      { lastAppliedRevision: srcRev, lastAttemptedRevision: srcRev },
      { status: 'True', reason: 'ReconciliationSucceeded', message: `Applied revision: ${srcRev}` },
    )
  }

  // ---- the Git repository's content (scenario flux.repository) ----
  // Each entry is a Kustomization or HelmRelease that its parent Kustomization applies (the root,
  // flux-system/flux-system, by default); cluster-template's shape is a root applying
  // `cluster-apps` with wait: false, which applies the apps.
  const repo = (flux.repository || []).map((e) => ({ namespace: 'flux-system', parent: 'flux-system/flux-system', ...e }))
  const repoEntry = (o) => repo.find((e) => e.kind === o.kind && e.name === o.metadata.name && e.namespace === o.metadata.namespace)
  const childrenOf = (k) => repo.filter((e) => e.parent === `${k.metadata.namespace}/${k.metadata.name}`)

  function applyChildren(k) {
    for (const e of childrenOf(k)) {
      const kind = e.kind === 'HelmRelease' ? 'HelmRelease' : 'Kustomization'
      if (!served(kind) || get(kind, e.namespace, e.name)) continue
      const labels = { 'kustomize.toolkit.fluxcd.io/name': k.metadata.name, 'kustomize.toolkit.fluxcd.io/namespace': k.metadata.namespace }
      const spec =
        kind === 'HelmRelease'
          ? { interval: '1h', chart: { spec: { chart: e.name, sourceRef: { kind: 'HelmRepository', name: e.name } } } }
          : {
              interval: '1h',
              path: `./${e.name}`,
              prune: true,
              wait: Boolean(e.wait),
              sourceRef: { kind: 'GitRepository', name: 'flux-system', namespace: 'flux-system' },
              ...(e.decryption ? { decryption: { provider: 'sops', secretRef: { name: 'sops-age' } } } : {}),
            }
      const { group, version } = FLUX_KINDS[kind]
      create({ apiVersion: `${group}/${version}`, kind, metadata: { name: e.name, namespace: e.namespace, labels }, spec })
    }
  }

  // The sops-age Secret must hold the age identity the repository's secrets are encrypted to.
  function decrypt(k) {
    const ref = k.spec?.decryption?.secretRef?.name
    if (!ref)
      return `Secret/${k.metadata.namespace}/cluster-secrets is SOPS encrypted, configuring decryption is required for this secret to be reconciled`
    const secret = get('Secret', k.metadata.namespace, ref)
    if (!secret) return `secrets "${ref}" not found`
    const keys = Object.entries(secret.data || {})
      .filter(([name]) => name.endsWith('.agekey'))
      .map(([, v]) => Buffer.from(v, 'base64').toString('utf8'))
    if (
      flux.ageKey &&
      keys.some((t) =>
        t
          .split('\n')
          .map((l) => l.trim())
          .includes(flux.ageKey),
      )
    )
      return null
    return `decryption failed for 'Secret.v1.[noGrp]/cluster-secrets': failed to decrypt and format '${k.metadata.namespace}/cluster-secrets' Secret data: Error getting data key: 0 successful groups required, got 0`
  }

  // ---- helm-controller ----
  function helmReleaseDone(h) {
    const entry = repoEntry(h)
    if (entry?.fail) return fluxStatus('HelmRelease', h, {}, { status: 'False', reason: 'InstallFailed', message: entry.fail })
    const chart = h.spec?.chart?.spec?.chart || h.spec?.chartRef?.name || h.metadata.name
    const version = h.spec?.chart?.spec?.version || '1.0.0'
    const release = `${h.spec?.targetNamespace || h.metadata.namespace}/${h.spec?.releaseName || h.metadata.name}`
    fluxStatus(
      'HelmRelease',
      h,
      { lastAttemptedRevision: version },
      {
        status: 'True',
        reason: 'InstallSucceeded',
        message: `Helm install succeeded for release ${release}.v1 with chart ${chart}@${version}`,
      },
    )
  }

  // A Kustomization also re-runs when its source moved on (or was not ready last time).
  const ksStale = (k) => {
    const { src } = sourceOf(k)
    const rev = src?.status?.artifact?.revision
    const ready = cond(k, 'Ready')
    return Boolean(rev && rev !== k.status?.lastAppliedRevision && ready?.reason !== 'BuildFailed' && !faults?.has(null, 'flux'))
  }

  // ---- flux-operator: a FluxInstance installs Flux and its sync (controlplaneio-fluxcd/flux-operator) ----
  function fluxInstanceDone(fi) {
    const ns = fi.metadata.namespace
    const spec = fi.spec || {}
    const managed = {
      'app.kubernetes.io/managed-by': 'flux-operator',
      'fluxcd.controlplane.io/name': fi.metadata.name,
      'fluxcd.controlplane.io/namespace': ns,
    }
    for (const o of fluxObjects({
      namespace: ns,
      registry: spec.distribution?.registry,
      components: spec.components?.length ? spec.components : undefined,
      extraLabels: managed,
    }))
      create(o)
    const sync = spec.sync
    if (sync) {
      // the sync is applied once Flux's CRDs are established (flux-operator applies in stages)
      if (!served('GitRepository') || !served('Kustomization'))
        return later(`flux-crds:${fi.metadata.uid}`, FLUX_RECONCILE, 'FluxInstance', fi, fluxInstanceDone)
      const name = sync.name || ns
      const gitSpec = {
        interval: '1m0s',
        ref: /^refs\//.test(sync.ref || '') ? { name: sync.ref } : { branch: sync.ref || 'main' },
        url: sync.url,
        ...(sync.pullSecret ? { secretRef: { name: sync.pullSecret } } : {}),
      }
      const ksSpec = { interval: '10m0s', path: sync.path || './', prune: true, sourceRef: { kind: 'GitRepository', name } }
      for (const [kind, want] of [
        ['GitRepository', gitSpec],
        ['Kustomization', ksSpec],
      ]) {
        const live = get(kind, ns, name)
        const { group, version } = FLUX_KINDS[kind]
        if (!live) create({ apiVersion: `${group}/${version}`, kind, metadata: { name, namespace: ns, labels: managed }, spec: want })
        else if (!isDeepStrictEqual(live.spec, { ...live.spec, ...want })) writeSpec(kind, live, { ...live.spec, ...want })
      }
    }
    const rev = `${spec.distribution?.version || '2.x'}@sha256:${createHash('sha256').update(JSON.stringify(spec)).digest('hex')}`
    fluxStatus(
      'FluxInstance',
      fi,
      { lastAppliedRevision: rev, lastAttemptedRevision: rev },
      { status: 'True', reason: 'ReconciliationSucceeded', message: `Reconciliation finished in ${FLUX_RECONCILE}s` },
    )
  }

  /** one pass over every Flux object (idempotent: writes only what changed) */
  function reconcile() {
    if (stopped) return
    const operatorUp = list('Deployment').some((d) => d.metadata.name === 'flux-operator' && (d.status?.availableReplicas || 0) >= 1)
    if (served('FluxInstance') && operatorUp)
      for (const fi of list('FluxInstance')) {
        if (!needs(fi)) continue
        const key = `flux:${fi.metadata.uid}:${fi.metadata.generation}`
        if (timers.has(key)) continue
        progressing('FluxInstance', fi)
        later(key, FLUX_RECONCILE, 'FluxInstance', fi, fluxInstanceDone)
      }
    fluxKind('GitRepository', 'source-controller', gitRepoDone)
    fluxKind('HelmRepository', 'source-controller', (o) => helmRepoDone('HelmRepository', o))
    fluxKind('OCIRepository', 'source-controller', (o) => helmRepoDone('OCIRepository', o))
    fluxKind('Kustomization', 'kustomize-controller', kustomizationDone, { alwaysCheck: ksStale })
    fluxKind('HelmRelease', 'helm-controller', helmReleaseDone)
  }

  return {
    reconcile,
    stop() {
      stopped = true
      for (const c of timers.values()) c()
      timers.clear()
    },
  }
}
