// The simulated kube-apiserver at the HTTP level: discovery negotiation, Status errors,
// write semantics, watch protocol (what the real kubectl needs: docs/design.md "helm, flux, kubectl"; sim/README.md).
// Addresses: 127.41.0.0/16.
import http from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createKube, createKubeServer, createRealtimeClock, type Kube } from '../../sim/kube/index.js'

type Res = { status: number; headers: http.IncomingHttpHeaders; text: string; json: any }

let base = ''
function call(
  method: string,
  path: string,
  { body, headers = {} }: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<Res> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body)
    const r = http.request(base + path, { method, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString()
        let json
        try {
          json = JSON.parse(text)
        } catch {
          json = undefined
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json })
      })
    })
    r.on('error', reject)
    r.end(data)
  })
}

// Open a watch, collect events until `count` arrived or `ms` passed (or the server ended it).
function watch(
  path: string,
  { count = Infinity, ms = 2000, headers = {} }: { count?: number; ms?: number; headers?: Record<string, string> } = {},
) {
  return new Promise<{ events: any[]; ended: boolean; status: number; contentType: string }>((resolve, reject) => {
    const events: any[] = []
    let buf = ''
    const r = http.get(base + path, { headers }, (res) => {
      const done = (ended: boolean) => {
        clearTimeout(t)
        r.destroy()
        resolve({ events, ended, status: res.statusCode ?? 0, contentType: String(res.headers['content-type']) })
      }
      const t = setTimeout(() => done(false), ms)
      res.on('data', (c) => {
        buf += c
        let i
        while ((i = buf.indexOf('\n')) >= 0) {
          events.push(JSON.parse(buf.slice(0, i)))
          buf = buf.slice(i + 1)
        }
        if (events.length >= count) done(false)
      })
      res.on('end', () => done(true))
    })
    r.on('error', reject)
  })
}

const V2 =
  'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json'
const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json'

describe('kube API protocol', () => {
  let kube: Kube
  let close: () => Promise<void>
  const calls: any[] = []
  beforeAll(async () => {
    kube = createKube({
      clock: createRealtimeClock({ speed: 1000 }),
      kubernetesVersion: 'v1.35.2',
      timings: { cni: 10 },
      record: (c) => calls.push(c),
      historyLimit: 50,
    })
    const s = await createKubeServer({ kube, host: '127.41.0.1', port: 0 })
    base = s.url
    close = s.close
  })
  afterAll(async () => {
    kube?.stop()
    await close?.()
  })

  it('fails health checks and answers 503 before bootstrap', async () => {
    const r = await call('GET', '/readyz')
    expect(r.status).toBe(500)
    expect(r.text).toContain('[-]etcd failed: reason withheld')
    expect((await call('GET', '/api/v1/nodes')).json).toMatchObject({ kind: 'Status', code: 503, reason: 'ServiceUnavailable' })
    kube.bootstrap()
    expect(kube.apiUp).toBe(true)
    const ok = await call('GET', '/livez')
    expect([ok.status, ok.text, ok.headers['content-type']]).toEqual([200, 'ok', 'text/plain; charset=utf-8'])
    expect((await call('GET', '/readyz?verbose')).text).toMatch(/\[\+\]etcd ok\n[\s\S]*readyz check passed\n$/)
  })

  it('serves /version from kubernetesVersion', async () => {
    expect((await call('GET', '/version')).json).toMatchObject({ major: '1', minor: '35', gitVersion: 'v1.35.2', platform: 'linux/amd64' })
  })

  it('negotiates aggregated discovery v2, v2beta1 and legacy on Accept', async () => {
    const v2 = await call('GET', '/apis', { headers: { accept: V2 } })
    expect(v2.headers['content-type']).toBe('application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList')
    expect(v2.json.apiVersion).toBe('apidiscovery.k8s.io/v2')
    const apps = v2.json.items.find((i: any) => i.metadata.name === 'apps')
    const ds = apps.versions[0].resources.find((r: any) => r.resource === 'daemonsets')
    expect(ds).toMatchObject({
      responseKind: { group: 'apps', version: 'v1', kind: 'DaemonSet' },
      scope: 'Namespaced',
      shortNames: ['ds'],
      singularResource: 'daemonset',
    })
    // Flux's groups are absent until its CRDs are created (sim/kube/resources.js; apiextensions-apiserver)
    expect(v2.json.items.find((i: any) => i.metadata.name === 'kustomize.toolkit.fluxcd.io')).toBeUndefined()
    const beta = await call('GET', '/api', {
      headers: { accept: 'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json' },
    })
    expect(beta.headers['content-type']).toBe('application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList')
    const core = beta.json.items[0]
    expect(core.metadata.name).toBe('')
    const short = Object.fromEntries(core.versions[0].resources.map((r: any) => [r.resource, r.shortNames]))
    expect(short).toMatchObject({ nodes: ['no'], pods: ['po'], namespaces: ['ns'], events: ['ev'] })
    const legacy = await call('GET', '/apis', { headers: { accept: 'application/json, */*' } })
    expect(legacy.json.kind).toBe('APIGroupList')
    expect(legacy.json.groups.find((g: any) => g.name === 'source.toolkit.fluxcd.io')).toBeUndefined()
    const list = await call('GET', '/apis/apps/v1')
    expect(list.json.resources.map((r: any) => r.name)).toEqual(expect.arrayContaining(['daemonsets', 'daemonsets/status', 'deployments']))
    expect((await call('GET', '/api')).json).toMatchObject({ kind: 'APIVersions', versions: ['v1'] })
  })

  it('serves OpenAPI v3 stubs with a patch operation per kind', async () => {
    const root = await call('GET', '/openapi/v3')
    const url = root.json.paths['api/v1'].serverRelativeURL
    expect(url).toMatch(/^\/openapi\/v3\/api\/v1\?hash=/)
    const doc = await call('GET', url)
    const patch = doc.json.paths['/api/v1/namespaces/{namespace}/secrets/{name}'].patch
    expect(patch['x-kubernetes-group-version-kind']).toEqual({ group: '', version: 'v1', kind: 'Secret' })
    expect(patch.parameters.map((p: any) => p.name)).toContain('fieldValidation')
    expect((await call('GET', '/openapi/v2')).status).toBe(404)
  })

  it('answers errors as Status objects', async () => {
    expect((await call('GET', '/nope')).json).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'the server could not find the requested resource',
      reason: 'NotFound',
      details: {},
      code: 404,
    })
    const nf = await call('GET', '/apis/apps/v1/namespaces/kube-system/deployments/nope')
    expect(nf.status).toBe(404)
    expect(nf.json).toMatchObject({
      message: 'deployments.apps "nope" not found',
      reason: 'NotFound',
      details: { name: 'nope', kind: 'deployments', group: 'apps' },
    })
    const nons = await call('POST', '/api/v1/namespaces/does-not-exist/secrets', { body: { metadata: { name: 'a' } } })
    expect(nons.json).toMatchObject({
      code: 404,
      message: 'namespaces "does-not-exist" not found',
      details: { name: 'does-not-exist', kind: 'namespaces' },
    })
  })

  it('creates, conflicts, patches and deletes with Kubernetes write semantics', async () => {
    const created = await call('POST', '/api/v1/namespaces/default/secrets', {
      body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's1' }, stringData: { a: 'b' } },
    })
    expect(created.status).toBe(201)
    expect(created.json).toMatchObject({ type: 'Opaque', data: { a: 'Yg==' }, metadata: { name: 's1', namespace: 'default' } })
    expect(created.json.stringData).toBeUndefined()
    const again = await call('POST', '/api/v1/namespaces/default/secrets', { body: { metadata: { name: 's1' } } })
    expect(again.json).toMatchObject({ code: 409, reason: 'AlreadyExists', message: 'secrets "s1" already exists' })
    const stale = await call('PUT', '/api/v1/namespaces/default/secrets/s1', {
      body: { ...created.json, metadata: { ...created.json.metadata, resourceVersion: '1' } },
    })
    expect(stale.json).toMatchObject({
      code: 409,
      reason: 'Conflict',
      message:
        'Operation cannot be fulfilled on secrets "s1": the object has been modified; please apply your changes to the latest version and try again',
    })
    const put = await call('PUT', '/api/v1/namespaces/default/secrets/s1', { body: { ...created.json, data: { a: 'Yw==' } } })
    expect(put.status).toBe(200)
    expect(Number(put.json.metadata.resourceVersion)).toBeGreaterThan(Number(created.json.metadata.resourceVersion))
    // A merge patch that nulls creationTimestamp must not lose system metadata (what `kubectl apply` of a --dry-run=client manifest sends).
    const mp = await call('PATCH', '/api/v1/namespaces/default/secrets/s1', {
      body: { metadata: { creationTimestamp: null, labels: { x: 'y' } } },
      headers: { 'content-type': 'application/strategic-merge-patch+json' },
    })
    expect(mp.json.metadata).toMatchObject({
      creationTimestamp: created.json.metadata.creationTimestamp,
      uid: created.json.metadata.uid,
      labels: { x: 'y' },
    })
    const jp = await call('PATCH', '/api/v1/namespaces/default/secrets/s1', {
      body: [{ op: 'remove', path: '/metadata/labels/x' }],
      headers: { 'content-type': 'application/json-patch+json' },
    })
    expect(jp.json.metadata.labels).toEqual({})
    const ssa = await call('PATCH', '/api/v1/namespaces/default/configmaps/c1?fieldManager=kubectl&force=false', {
      body: 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\ndata:\n  k: v\n',
      headers: { 'content-type': 'application/apply-patch+yaml' },
    })
    expect(ssa.status).toBe(201)
    // apply needs a field manager (apiserver's patch handler)
    const noManager = await call('PATCH', '/api/v1/namespaces/default/configmaps/c1', {
      body: { data: { k: 'w' } },
      headers: { 'content-type': 'application/apply-patch+yaml' },
    })
    expect(noManager.status).toBe(422)
    const ssa2 = await call('PATCH', '/api/v1/namespaces/default/configmaps/c1?fieldManager=kubectl', {
      body: { data: { k: 'w' } },
      headers: { 'content-type': 'application/apply-patch+yaml' },
    })
    expect([ssa2.status, ssa2.json.data.k]).toEqual([200, 'w'])
    const dry = await call('POST', '/api/v1/namespaces/default/configmaps?dryRun=All', { body: { metadata: { generateName: 'gen-' } } })
    expect(dry.status).toBe(201)
    expect(dry.json.metadata.name).toMatch(/^gen-[bcdfghjklmnpqrstvwxz2456789]{5}$/)
    expect((await call('GET', `/api/v1/namespaces/default/configmaps/${dry.json.metadata.name}`)).status).toBe(404)
    const del = await call('DELETE', '/api/v1/namespaces/default/secrets/s1')
    expect(del.status).toBe(200)
    expect((await call('DELETE', '/api/v1/namespaces/default/secrets/s1')).status).toBe(404)
    const writes = calls.filter((c) => c.call === 'kube')
    expect(writes.length).toBeGreaterThanOrEqual(9)
    expect(writes.some((c) => c.outcome === 'error: secrets "s1" already exists')).toBe(true)
  })

  it('bumps generation on spec changes only', async () => {
    const body = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: 'default' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'w', image: 'web:1' }] } },
      },
    }
    const d = await call('POST', '/apis/apps/v1/namespaces/default/deployments', { body })
    expect(d.json.metadata.generation).toBe(1)
    const label = await call('PATCH', '/apis/apps/v1/namespaces/default/deployments/web', {
      body: { metadata: { labels: { a: 'b' } } },
      headers: { 'content-type': 'application/merge-patch+json' },
    })
    expect(label.json.metadata.generation).toBe(1)
    const spec = await call('PATCH', '/apis/apps/v1/namespaces/default/deployments/web', {
      body: { spec: { replicas: 3 } },
      headers: { 'content-type': 'application/merge-patch+json' },
    })
    expect(spec.json.metadata.generation).toBe(2)
    const status = await call('PATCH', '/apis/apps/v1/namespaces/default/deployments/web/status', {
      body: { status: { replicas: 9 }, spec: { replicas: 7 } },
      headers: { 'content-type': 'application/merge-patch+json' },
    })
    expect([status.json.spec.replicas, status.json.metadata.generation]).toEqual([3, 2])
    // kubectl apply's strategic merge: containers merge by name, directives are not stored.
    const smp = await call('PATCH', '/apis/apps/v1/namespaces/default/deployments/web', {
      body: {
        spec: {
          template: {
            spec: {
              '$setElementOrder/containers': [{ name: 'side' }, { name: 'w' }],
              containers: [
                { name: 'side', image: 'side:1' },
                { name: 'w', image: 'web:2' },
              ],
            },
          },
        },
      },
      headers: { 'content-type': 'application/strategic-merge-patch+json' },
    })
    expect(smp.json.spec.template.spec).toEqual({
      containers: [
        { name: 'side', image: 'side:1' },
        { name: 'w', image: 'web:2' },
      ],
    })
    expect(smp.json.metadata.generation).toBe(3)
  })

  it('lists with selectors and serves Tables with object metadata', async () => {
    kube.registerNode({ name: 'n1', ip: '127.41.0.11', role: 'controlplane' })
    kube.registerNode({ name: 'n2', ip: '127.41.0.12', role: 'worker' })
    const l = await call('GET', '/api/v1/nodes?labelSelector=node-role.kubernetes.io%2Fcontrol-plane&limit=500')
    expect(l.json.kind).toBe('NodeList')
    expect(l.json.items.map((n: any) => n.metadata.name)).toEqual(['n1'])
    expect(l.json.items[0]).toMatchObject({ kind: 'Node', apiVersion: 'v1' })
    const notin = await call(
      'GET',
      '/api/v1/nodes?labelSelector=' + encodeURIComponent('kubernetes.io/hostname notin (n1),!node-role.kubernetes.io/control-plane'),
    )
    expect(notin.json.items.map((n: any) => n.metadata.name)).toEqual(['n2'])
    const t = await call('GET', '/api/v1/nodes?fieldSelector=metadata.name%3Dn2', { headers: { accept: TABLE } })
    expect(t.json.kind).toBe('Table')
    expect(t.json.columnDefinitions.map((c: any) => c.name)).toEqual([
      'Name',
      'Status',
      'Roles',
      'Age',
      'Version',
      'Internal-IP',
      'External-IP',
      'OS-Image',
      'Kernel-Version',
      'Container-Runtime',
    ])
    expect(t.json.rows).toHaveLength(1)
    expect(t.json.rows[0].cells.slice(0, 3)).toEqual(['n2', 'NotReady', '<none>'])
    expect(t.json.rows[0].object).toMatchObject({
      kind: 'PartialObjectMetadata',
      metadata: { name: 'n2', labels: { 'kubernetes.io/hostname': 'n2' } },
    })
    expect((await call('GET', '/api/v1/nodes?labelSelector=a+in+(b')).status).toBe(400)
  })

  it('watches: synthetic ADDED, typed MODIFIED, selector exits as DELETED, timeoutSeconds, 410', async () => {
    const first = await watch('/api/v1/namespaces?watch=true', { count: 4, ms: 1000 })
    expect(first.status).toBe(200)
    expect(first.events.map((e) => e.type)).toEqual(['ADDED', 'ADDED', 'ADDED', 'ADDED'])
    expect(first.events[0].object).toMatchObject({ kind: 'Namespace', apiVersion: 'v1' })
    const list = await call('GET', '/api/v1/namespaces/default/configmaps?labelSelector=w%3D1')
    const rv = list.json.metadata.resourceVersion
    const pending = watch(`/api/v1/namespaces/default/configmaps?labelSelector=w%3D1&resourceVersion=${rv}&timeoutSeconds=30&watch=true`, {
      count: 3,
      ms: 3000,
    })
    await new Promise((r) => setTimeout(r, 100))
    await call('POST', '/api/v1/namespaces/default/configmaps', { body: { metadata: { name: 'wc', labels: { w: '1' } } } })
    await call('PATCH', '/api/v1/namespaces/default/configmaps/wc', {
      body: { data: { a: 'b' } },
      headers: { 'content-type': 'application/merge-patch+json' },
    })
    await call('PATCH', '/api/v1/namespaces/default/configmaps/wc', {
      body: { metadata: { labels: { w: '2' } } },
      headers: { 'content-type': 'application/merge-patch+json' },
    })
    const got = await pending
    expect(got.events.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'DELETED'])
    expect(got.events[1].object).toMatchObject({ kind: 'ConfigMap', apiVersion: 'v1', data: { a: 'b' } })
    // History since a resourceVersion: the same three events replayed without any new write.
    const replay = await watch(`/api/v1/namespaces/default/configmaps?labelSelector=w%3D1&resourceVersion=${rv}&watch=true`, {
      count: 3,
      ms: 1000,
    })
    expect(replay.events.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'DELETED'])
    const started = Date.now()
    const timed = await watch(`/api/v1/nodes?resourceVersion=${kube.store.rv}&timeoutSeconds=1&watch=true`, { ms: 5000 })
    expect(timed.ended).toBe(true)
    expect(Date.now() - started).toBeGreaterThanOrEqual(900)
    // Push the history (50 writes here) past rv: resuming from it is 410 Expired.
    for (let i = 0; i < 60; i++) await call('POST', '/api/v1/namespaces/default/configmaps', { body: { metadata: { name: `bulk-${i}` } } })
    const gone = await watch(`/api/v1/namespaces/default/configmaps?resourceVersion=${rv}&watch=true`, { ms: 1000 })
    expect(gone.ended).toBe(true)
    expect(gone.events).toHaveLength(1)
    expect(gone.events[0]).toMatchObject({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } })
    expect(gone.events[0].object.message).toMatch(/^too old resource version: \d+ \(\d+\)$/)
  })

  it('removeNode takes the node and its pods away; a re-registered node starts NotReady again', async () => {
    const until = async (fn: () => boolean, ms = 3000) => {
      const end = Date.now() + ms
      while (!fn()) {
        if (Date.now() > end) throw new Error('condition not reached')
        await new Promise((r) => setTimeout(r, 10))
      }
    }
    const ds = {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'cni', namespace: 'kube-system', annotations: { 'sim.talos-bootstrap.dev/cni': 'true' } },
      spec: {
        selector: { matchLabels: { app: 'cni' } },
        template: {
          metadata: { labels: { app: 'cni' } },
          spec: { hostNetwork: true, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'agent', image: 'cni:1' }] },
        },
      },
    }
    expect((await call('POST', '/apis/apps/v1/namespaces/kube-system/daemonsets', { body: ds })).status).toBe(201)
    await until(() => kube.nodeReady('n1') && kube.nodeReady('n2'))
    // Without a toleration for the control-plane taint a DaemonSet skips control planes.
    const plain = {
      ...ds,
      metadata: { name: 'plain', namespace: 'kube-system' },
      spec: {
        selector: { matchLabels: { app: 'plain' } },
        template: { metadata: { labels: { app: 'plain' } }, spec: { containers: [{ name: 'p', image: 'p:1' }] } },
      },
    }
    expect((await call('POST', '/apis/apps/v1/namespaces/kube-system/daemonsets', { body: plain })).status).toBe(201)
    const dsDef = kube.registry.get('apps', 'v1', 'daemonsets')!
    await until(() => kube.store.get(dsDef, 'kube-system', 'plain')?.status?.numberReady === 1)
    expect(kube.store.get(dsDef, 'kube-system', 'plain')!.status).toMatchObject({ desiredNumberScheduled: 1, currentNumberScheduled: 1 })
    expect(kube.store.get(dsDef, 'kube-system', 'cni')!.status).toMatchObject({ desiredNumberScheduled: 2, numberReady: 2 })
    const pods = () =>
      kube.store
        .list(kube.registry.get('', 'v1', 'pods')!, 'kube-system')
        .filter((p) => p.spec.nodeName === 'n2' && p.metadata.labels?.app === 'cni')
    expect(pods().length).toBe(1)
    // A reboot: Unknown while the kubelet is away, NotReady until the CNI pod restarted, then Ready.
    const nodes = kube.registry.get('', 'v1', 'nodes')!
    const readyOf = (n: string) => kube.store.get(nodes, undefined, n)!.status.conditions.find((c: any) => c.type === 'Ready')
    kube.nodeLost('n2')
    expect(readyOf('n2')).toMatchObject({ status: 'Unknown', reason: 'NodeStatusUnknown', message: 'Kubelet stopped posting node status.' })
    await new Promise((r) => setTimeout(r, 50))
    expect(kube.nodeReady('n2')).toBe(false)
    kube.registerNode({ name: 'n2', ip: '127.41.0.12', role: 'worker' })
    expect(readyOf('n2')).toMatchObject({ status: 'False', reason: 'KubeletNotReady' })
    await until(() => kube.nodeReady('n2'))
    expect(pods()[0]!.status.containerStatuses[0].restartCount).toBe(1)
    kube.removeNode('n2')
    expect(kube.nodeReady('n2')).toBe(false)
    expect((await call('GET', '/api/v1/nodes/n2')).status).toBe(404)
    await until(() => pods().length === 0)
    kube.registerNode({ name: 'n2', ip: '127.41.0.12', role: 'worker' })
    expect(kube.nodeReady('n2')).toBe(false)
    await until(() => kube.nodeReady('n2'))
    expect(pods().length).toBe(1)
  })

  it('serves CRDs it is given and records /sim/v1/calls', async () => {
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'widgets.example.sim' },
      spec: {
        group: 'example.sim',
        scope: 'Namespaced',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget', shortNames: ['wd'] },
        versions: [{ name: 'v1', served: true, storage: true, subresources: { status: {} } }],
      },
    }
    const made = await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: crd })
    expect(made.status).toBe(201)
    expect(made.json.status.conditions.find((x: any) => x.type === 'Established')).toMatchObject({ status: 'True' })
    const disc = await call('GET', '/apis', { headers: { accept: V2 } })
    expect(disc.json.items.find((i: any) => i.metadata.name === 'example.sim').versions[0].resources[0]).toMatchObject({
      resource: 'widgets',
      shortNames: ['wd'],
    })
    const w = await call('POST', '/apis/example.sim/v1/namespaces/default/widgets', {
      body: { apiVersion: 'example.sim/v1', kind: 'Widget', metadata: { name: 'w1' }, spec: { size: 1 } },
    })
    expect(w.json).toMatchObject({ kind: 'Widget', metadata: { generation: 1 } })
    const before = calls.length
    expect((await call('POST', '/sim/v1/calls', { body: { tool: 'helm', call: 'helm', command: 'upgrade', outcome: 'ok' } })).status).toBe(
      201,
    )
    expect(calls.slice(before)).toEqual([{ tool: 'helm', call: 'helm', command: 'upgrade', outcome: 'ok' }])
  })
  // managedFields and server-side apply (k8s.io/apimachinery/pkg/util/managedfields/internal: conflict.go,
  // lastappliedupdater.go's neighbours; structured-merge-diff): sim/kube/managed-fields.js
  it("records managedFields per manager and answers 409 to an apply that changes another manager's field", async () => {
    const yaml = { 'content-type': 'application/apply-patch+yaml' }
    const path = '/api/v1/namespaces/default/configmaps/owned'
    const a = await call('PATCH', `${path}?fieldManager=alpha`, {
      body: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned}\ndata: {x: "1", y: "2"}\n',
      headers: yaml,
    })
    expect(a.status).toBe(201)
    expect(a.json.metadata.managedFields).toEqual([
      expect.objectContaining({
        manager: 'alpha',
        operation: 'Apply',
        apiVersion: 'v1',
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:data': { '.': {}, 'f:x': {}, 'f:y': {} } },
      }),
    ])
    // the same value from another manager is shared ownership, not a conflict
    expect(
      (
        await call('PATCH', `${path}?fieldManager=beta`, {
          body: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned}\ndata: {x: "1"}\n',
          headers: yaml,
        })
      ).status,
    ).toBe(200)
    const clash = await call('PATCH', `${path}?fieldManager=beta`, {
      body: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned}\ndata: {y: "3"}\n',
      headers: yaml,
    })
    expect(clash.json).toMatchObject({
      code: 409,
      reason: 'Conflict',
      message: 'Apply failed with 1 conflict: conflict with "alpha" using v1: .data.y',
      details: { causes: [{ reason: 'FieldManagerConflict', field: '.data.y' }] },
    })
    const forced = await call('PATCH', `${path}?fieldManager=beta&force=true`, {
      body: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned}\ndata: {y: "3"}\n',
      headers: yaml,
    })
    expect([forced.status, forced.json.data]).toEqual([200, { x: '1', y: '3' }])
    const alpha = forced.json.metadata.managedFields.find((e: any) => e.manager === 'alpha')
    expect(alpha.fieldsV1).toEqual({ 'f:data': { '.': {}, 'f:x': {} } })
    // an ordinary write records an Update entry for its manager (the User-Agent's first word)
    const merge = await call('PATCH', path, {
      body: { data: { z: '4' } },
      headers: { 'content-type': 'application/merge-patch+json', 'user-agent': 'kubectl/v1.35.0 (linux/amd64)' },
    })
    expect(merge.json.metadata.managedFields.find((e: any) => e.manager === 'kubectl')).toMatchObject({
      operation: 'Update',
      fieldsV1: { 'f:data': { '.': {}, 'f:z': {} } },
    })
    // a field the applier stops sending, owned by nobody else, is removed
    const dropped = await call('PATCH', `${path}?fieldManager=beta`, {
      body: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned}\ndata: {x: "1"}\n',
      headers: yaml,
    })
    expect(dropped.json.data, JSON.stringify(dropped.json.metadata.managedFields)).toEqual({ x: '1', z: '4' })
  })

  // limit/continue (apiserver storage pagination; kubectl get asks limit=500)
  it('paginates lists with limit and continue', async () => {
    for (const n of ['p1', 'p2', 'p3']) await call('POST', '/api/v1/namespaces/kube-public/configmaps', { body: { metadata: { name: n } } })
    const first = await call('GET', '/api/v1/namespaces/kube-public/configmaps?limit=2')
    expect(first.json.items.map((i: any) => i.metadata.name)).toEqual(['p1', 'p2'])
    expect(first.json.metadata).toMatchObject({ remainingItemCount: 1, continue: expect.any(String) })
    const rest = await call(
      'GET',
      `/api/v1/namespaces/kube-public/configmaps?limit=2&continue=${encodeURIComponent(first.json.metadata.continue)}`,
    )
    expect(rest.json.items.map((i: any) => i.metadata.name)).toEqual(['p3'])
    expect(rest.json.metadata.continue).toBeUndefined()
    expect((await call('GET', '/api/v1/namespaces/kube-public/configmaps?limit=2&continue=bad')).status).toBe(400)
  })
  // a Secret's data is []byte: the apiserver's JSON decoding refuses what is not base64
  it('refuses Secret data that is not base64', async () => {
    const bad = await call('POST', '/api/v1/namespaces/default/secrets', { body: { metadata: { name: 'b64' }, data: { a: 'not*base64' } } })
    expect(bad.json).toMatchObject({
      code: 400,
      reason: 'BadRequest',
      message: 'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3',
    })
  })
})
