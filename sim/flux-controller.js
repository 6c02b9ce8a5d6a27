// Flux's controllers on the real API server (SIM_KUBE=real, started with the kubelets by
// sim/kube-real.js): the status the source, kustomize and helm controllers and flux-operator write,
// by the rules sim/kube's controllers follow (sim/flux-rules.js), written through the API. Their
// Deployments' pods are the real controller-manager's, bound by the real scheduler and run by the
// simulator's kubelets as any pod is; a kind's objects are reconciled only while its controller's
// Deployment is available, as sim/kube's were.
// One loop every TICK_MS (and at once when a reconciliation's timer ends) reads what the rules need
// with the admin's credentials: the groups the API serves, the Flux objects of the served kinds, the
// Deployments and the Secrets a Kustomization decrypts with; then the rules run on that picture
// (seeing their own writes at once) and their writes go out in order, each awaited before the next
// loop reads again.
import { FLUX_KINDS, createFluxRules } from './flux-rules.js'

const TICK_MS = 250
const isoNow = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z')
const cond = (status, type) => (status?.conditions ?? []).find((c) => c.type === type)
const keyOf = (ns, name) => `${ns ?? ''}/${name}`

export class FluxControllers {
  /** ctx = the Simulator (clock, faults, scenario, log); kube = sim/kube-real.js RealKube (its admin client, createIfMissing) */
  constructor(ctx, kube) {
    this.ctx = ctx
    this.kube = kube
    this.seen = new Map() // kind -> Map(namespace/name -> object), as last read (and written since)
    this.due = [] // reconciliations whose simulated time is up, run on the next loop
    this.writes = Promise.resolve()
    this.timer = null
    this.busy = false
    this.again = false
    this.rules = createFluxRules({
      get: (kind, ns, name) => this.seen.get(kind)?.get(keyOf(ns, name)) ?? null,
      list: (kind) => [...(this.seen.get(kind)?.values() ?? [])],
      served: (kind) => this.seen.has(kind),
      writeStatus: (kind, o, status) => this.write(kind, o, { status }, 'status'),
      writeSpec: (kind, o, spec) => this.write(kind, o, { spec }),
      create: (o) => {
        if (this.seen.get(o.kind)?.has(keyOf(o.metadata.namespace, o.metadata.name))) return
        this.queue(() => this.kube.createIfMissing(o))
      },
      after: (simSeconds, fn) =>
        ctx.clock.after(simSeconds, () => {
          this.due.push(fn)
          this.tick()
        }),
      now: isoNow,
      // the simulator's faults exist once it starts (after this constructor)
      faults: { has: (node, kind) => ctx.faults.has(node, kind), message: (kind) => ctx.faults.message(kind) },
      flux: ctx.scenario.flux,
    })
  }

  /** with the kubelets, once the API server is ready (sim/kube-real.js startAll) */
  start() {
    this.timer ??= setInterval(() => this.tick(), TICK_MS)
    this.tick()
  }
  stop() {
    this.rules.stop()
    clearInterval(this.timer)
    this.timer = null
  }

  queue(fn) {
    this.writes = this.writes.then(fn).catch((e) => this.ctx.log(`flux controllers: ${e.message}`))
  }

  /** a merge patch of the object (or its status subresource); the picture takes it at once */
  write(kind, o, patch, subresource) {
    const ns = o.metadata.namespace
    const ready = cond(patch.status, 'Ready')
    if (ready) this.ctx.log(`flux: ${kind} ${ns}/${o.metadata.name} Ready=${ready.status} ${ready.reason}`)
    this.seen.get(kind)?.set(keyOf(ns, o.metadata.name), { ...o, ...patch })
    const { group, version, plural } = FLUX_KINDS[kind]
    const path = `/apis/${group}/${version}/namespaces/${ns}/${plural}/${o.metadata.name}${subresource ? `/${subresource}` : ''}`
    this.queue(async () => {
      const r = await this.kube.admin.request('PATCH', path, patch, { contentType: 'application/merge-patch+json' })
      if (r.status >= 300 && r.status !== 404)
        this.ctx.log(`flux controllers: ${kind} ${ns}/${o.metadata.name}: ${r.body?.message ?? r.status}`)
    })
  }

  async tick() {
    if (!this.timer || this.kube.stopping) return
    if (this.busy) {
      this.again = true
      return
    }
    this.busy = true
    try {
      do {
        this.again = false
        await this.read()
        for (const fn of this.due.splice(0)) fn()
        this.rules.reconcile()
        await this.writes
      } while (this.again && this.timer && !this.kube.stopping)
    } catch (e) {
      this.ctx.log(`flux controllers: ${e.message}`)
    } finally {
      this.busy = false
    }
  }

  /** the served Flux kinds' objects, the Deployments and the decryption Secrets (nothing more before Flux's CRDs exist) */
  async read() {
    const admin = this.kube.admin
    const groups = await admin.call('GET', '/apis')
    const servedVersions = new Set((groups.groups ?? []).flatMap((g) => (g.versions ?? []).map((v) => v.groupVersion)))
    const seen = new Map()
    const listed = async (path) => {
      const r = await admin.request('GET', path)
      // 404: the CRD not established (yet); just after, its watch cache answers 429 `storage is
      // (re)initializing` (apiserver cacher.go): read again next time
      if (r.status === 404 || r.status === 429) return null
      if (r.status >= 300) throw new Error(`GET ${path}: ${r.body?.message ?? r.status}`)
      return r.body.items ?? []
    }
    const take = (kind, items) => seen.set(kind, new Map(items.map((o) => [keyOf(o.metadata.namespace, o.metadata.name), o])))
    await Promise.all(
      Object.entries(FLUX_KINDS)
        .filter(([, k]) => servedVersions.has(`${k.group}/${k.version}`))
        .map(async ([kind, k]) => {
          const items = await listed(`/apis/${k.group}/${k.version}/${k.plural}`)
          if (items) take(kind, items)
        }),
    )
    if (seen.size) {
      take('Deployment', (await listed('/apis/apps/v1/deployments')) ?? [])
      const refs = new Set(
        [...(seen.get('Kustomization')?.values() ?? [])]
          .filter((k) => k.spec?.decryption?.secretRef?.name)
          .map((k) => keyOf(k.metadata.namespace, k.spec.decryption.secretRef.name)),
      )
      const secrets = await Promise.all(
        [...refs].map(async (ref) => {
          const [ns, name] = ref.split('/')
          const r = await admin.request('GET', `/api/v1/namespaces/${ns}/secrets/${name}`)
          return r.status === 200 ? r.body : null
        }),
      )
      take(
        'Secret',
        secrets.filter((s) => s),
      )
    }
    this.seen = seen
  }
}
