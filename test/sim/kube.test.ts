// The simulated Kubernetes API driven by the real kubectl (docs/design.md, Simulator contract; sim/README.md).
// Addresses: 127.40.0.0/16.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NOT_READY_MESSAGE } from '../../sim/kube/index.js'
import { startTestKube, type TestKube } from '../../sim/kube/testing.js'
import { NodeError } from '../../lib/core/errors.js'
import { Redactor } from '../../lib/input/redact.js'
import { blockedEvictions } from '../../lib/phases/shared/drain.js'
import { ToolRunner } from '../../lib/tools/exec.js'
import { Kubectl } from '../../lib/tools/kubectl.js'

const CILIUM = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: cilium
  namespace: kube-system
  annotations: {sim.talos-bootstrap.dev/cni: "true"}
spec:
  selector: {matchLabels: {k8s-app: cilium}}
  template:
    metadata: {labels: {k8s-app: cilium, tier: agent}}
    spec:
      hostNetwork: true
      tolerations: [{operator: Exists}]
      containers: [{name: cilium-agent, image: "quay.io/cilium/cilium:v1.16.5"}]
`

const FLUX = `apiVersion: v1
kind: Namespace
metadata: {name: flux-system}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: source-controller, namespace: flux-system}
spec:
  selector: {matchLabels: {app: source-controller}}
  template:
    metadata: {labels: {app: source-controller}}
    spec: {containers: [{name: manager, image: "ghcr.io/fluxcd/source-controller:v1.7.0"}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kustomize-controller, namespace: flux-system}
spec:
  selector: {matchLabels: {app: kustomize-controller}}
  template:
    metadata: {labels: {app: kustomize-controller}}
    spec: {containers: [{name: manager, image: "ghcr.io/fluxcd/kustomize-controller:v1.7.0"}]}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: flux-system, namespace: flux-system}
spec: {interval: 1m0s, ref: {branch: main}, url: "ssh://git@127.40.0.1/fleet"}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: flux-system, namespace: flux-system}
spec: {interval: 10m0s, path: ./clusters/sim, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}
`

// Flux's CRDs (as `flux install` applies them): before these, the API serves no Flux kind.
const crd = (plural: string, group: string, kind: string, short: string): string => `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ${plural}.${group}}
spec:
  group: ${group}
  names: {kind: ${kind}, listKind: ${kind}List, plural: ${plural}, singular: ${kind.toLowerCase()}, shortNames: [${short}]}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, subresources: {status: {}}}]
`
const FLUX_CRDS = [
  crd('gitrepositories', 'source.toolkit.fluxcd.io', 'GitRepository', 'gitrepo'),
  crd('kustomizations', 'kustomize.toolkit.fluxcd.io', 'Kustomization', 'ks'),
].join('---\n')

const SECRET = `apiVersion: v1
kind: Secret
metadata: {name: app-credentials, namespace: flux-system}
stringData: {username: admin}
data: {password: czNjcjN0}
`

describe('kube API with kubectl: nodes, CNI, readiness', () => {
  let k: TestKube
  beforeAll(async () => {
    // cni: 120 simulated s = 200 ms at speed 600, long enough to start a wait before it.
    k = await startTestKube({ host: '127.40.0.1', speed: 600, timings: { cni: 120 } })
    k.kube.registerNode({ name: 'cp-1', ip: '127.40.0.11', role: 'controlplane' })
    k.kube.registerNode({ name: 'wrkr-1', ip: '127.40.0.21', role: 'worker' })
  })
  afterAll(async () => {
    await k?.stop()
  })

  it('answers /readyz and /version', async () => {
    const ready = await k.kubectl(['get', '--raw', '/readyz'])
    expect(ready).toMatchObject({ code: 0, stdout: 'ok' })
    const v = await k.kubectl(['version', '-o', 'json'])
    expect(JSON.parse(v.stdout).serverVersion).toMatchObject({ major: '1', minor: '35', gitVersion: 'v1.35.0' })
  })

  it('lists registered nodes NotReady with the CNI message, as a Table and -o wide', async () => {
    const plain = await k.kubectl(['get', 'nodes'])
    expect(plain.code).toBe(0)
    const lines = plain.stdout.trim().split('\n')
    expect(lines[0]).toMatch(/^NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION$/)
    expect(lines[1]).toMatch(/^cp-1\s+NotReady\s+control-plane\s+\S+\s+v1\.35\.0$/)
    expect(lines[2]).toMatch(/^wrkr-1\s+NotReady\s+<none>\s+\S+\s+v1\.35\.0$/)
    const wide = await k.kubectl(['get', 'nodes', '-o', 'wide'])
    expect(wide.stdout.split('\n')[0]).toMatch(/INTERNAL-IP\s+EXTERNAL-IP\s+OS-IMAGE\s+KERNEL-VERSION\s+CONTAINER-RUNTIME/)
    expect(wide.stdout).toMatch(/wrkr-1\s+NotReady\s+<none>\s+\S+\s+v1\.35\.0\s+127\.40\.0\.21\s+<none>\s+Talos \(v1\.12\.0\)/)
    const json = JSON.parse((await k.kubectl(['get', 'node', 'wrkr-1', '-o', 'json'])).stdout)
    const ready = json.status.conditions.find((c: { type: string }) => c.type === 'Ready')
    expect(ready).toMatchObject({ status: 'False', reason: 'KubeletNotReady', message: NOT_READY_MESSAGE })
    expect(k.kube.nodeReady('wrkr-1')).toBe(false)
  })

  it('times out a wait on a NotReady node with the exact text', async () => {
    const r = await k.kubectl(['wait', '--for=condition=Ready', 'node/wrkr-1', '--timeout=1s'])
    expect(r.code).toBe(1)
    expect(r.stdout).toBe('')
    expect(r.stderr).toBe('error: timed out waiting for the condition on nodes/wrkr-1\n')
  })

  it('turns nodes Ready mid-wait once the CNI DaemonSet pod is ready', async () => {
    const waiting = k.kubectl(['wait', '--for=condition=Ready', 'node/wrkr-1', '--timeout=30s'])
    await new Promise((r) => setTimeout(r, 700)) // the wait is now watching
    expect(k.kube.nodeReady('wrkr-1')).toBe(false)
    const manifest = await k.writeManifest('cilium.yaml', CILIUM)
    const applied = await k.kubectl(['apply', '-f', manifest])
    expect(applied).toMatchObject({ code: 0, stdout: 'daemonset.apps/cilium created\n' })
    const r = await waiting
    expect(r).toMatchObject({ code: 0, stdout: 'node/wrkr-1 condition met\n', stderr: '' })
    expect(r.ms).toBeGreaterThan(700)
    expect(k.kube.nodeReady('wrkr-1')).toBe(true)
    const rollout = await k.kubectl(['rollout', 'status', 'daemonset/cilium', '-n', 'kube-system', '--timeout=20s'])
    expect(rollout.code).toBe(0)
    expect(rollout.stdout.trim().split('\n').at(-1)).toBe('daemon set "cilium" successfully rolled out')
    const all = await k.kubectl(['wait', '--for=condition=Ready', 'nodes', '--all', '--timeout=10s'])
    expect(all.stdout).toBe('node/cp-1 condition met\nnode/wrkr-1 condition met\n')
    const ready = JSON.parse((await k.kubectl(['get', 'node', 'cp-1', '-o', 'json'])).stdout).status.conditions.find(
      (c: { type: string }) => c.type === 'Ready',
    )
    expect(ready).toMatchObject({ status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' })
  })

  it('gives a DaemonSet one pod per node named <ds>-<5 chars> with the template labels', async () => {
    const r = await k.kubectl(['get', 'pods', '-n', 'kube-system', '-l', 'k8s-app=cilium', '-o', 'json'])
    const pods = JSON.parse(r.stdout).items as { metadata: { name: string; labels: Record<string, string> }; spec: { nodeName: string } }[]
    expect(pods.map((p) => p.spec.nodeName).sort()).toEqual(['cp-1', 'wrkr-1'])
    for (const p of pods) {
      expect(p.metadata.name).toMatch(/^cilium-[bcdfghjklmnpqrstvwxz2456789]{5}$/)
      expect(p.metadata.labels).toMatchObject({ 'k8s-app': 'cilium', tier: 'agent' })
    }
    const ds = JSON.parse((await k.kubectl(['get', 'ds', 'cilium', '-n', 'kube-system', '-o', 'json'])).stdout)
    expect(ds.status).toMatchObject({
      desiredNumberScheduled: 2,
      currentNumberScheduled: 2,
      updatedNumberScheduled: 2,
      numberReady: 2,
      numberAvailable: 2,
      observedGeneration: 1,
    })
  })

  it('runs the coredns Deployment once a node is Ready and rolls it out', async () => {
    const r = await k.kubectl(['rollout', 'status', 'deployment/coredns', '-n', 'kube-system', '--timeout=20s'])
    expect(r.code).toBe(0)
    expect(r.stdout.trim().split('\n').at(-1)).toBe('deployment "coredns" successfully rolled out')
    const av = await k.kubectl(['wait', '--for=condition=Available', 'deployment/coredns', '-n', 'kube-system', '--timeout=5s'])
    expect(av.stdout).toBe('deployment.apps/coredns condition met\n')
    expect(await k.kubectl(['scale', 'deployment/coredns', '-n', 'kube-system', '--replicas=3'])).toMatchObject({
      code: 0,
      stdout: 'deployment.apps/coredns scaled\n',
    })
    expect((await k.kubectl(['rollout', 'status', 'deployment/coredns', '-n', 'kube-system', '--timeout=20s'])).code).toBe(0)
    const table = await k.kubectl(['get', 'deploy', 'coredns', '-n', 'kube-system', '--no-headers'])
    expect(table.stdout).toMatch(/^coredns\s+3\/3\s+3\s+3\s+\S+\n$/)
  })

  it('runs a Job to completion', async () => {
    const job = (await k.kubectl(['create', 'job', 'hello', '--image=busybox', '--dry-run=client', '-o', 'yaml', '--', 'echo', 'hi']))
      .stdout
    expect(await k.kubectl(['apply', '-f', '-'], { input: job })).toMatchObject({ code: 0, stdout: 'job.batch/hello created\n' })
    expect(await k.kubectl(['wait', '--for=condition=complete', 'job/hello', '--timeout=20s'])).toMatchObject({
      code: 0,
      stdout: 'job.batch/hello condition met\n',
    })
    expect((await k.kubectl(['get', 'jobs', '--no-headers'])).stdout).toMatch(/^hello\s+Complete\s+1\/1\s+\S+\s+\S+\n$/)
    expect((await k.kubectl(['get', 'pods', '-l', 'job-name=hello', '--no-headers'])).stdout).toMatch(
      /^hello-\S{5}\s+0\/1\s+Completed\s+0\s+/,
    )
  })

  it('honours label and field selectors on list', async () => {
    const onWorker = await k.kubectl([
      'get',
      'pods',
      '-n',
      'kube-system',
      '-l',
      'k8s-app in (cilium,kube-dns)',
      '--field-selector',
      'spec.nodeName=wrkr-1',
      '-o',
      'name',
    ])
    const names = onWorker.stdout.trim().split('\n')
    expect(names.some((n) => /^pod\/cilium-/.test(n))).toBe(true)
    for (const n of names) expect(n).toMatch(/^pod\/(cilium|coredns)-/)
    const cp = JSON.parse(
      (
        await k.kubectl([
          'get',
          'pods',
          '-n',
          'kube-system',
          '--field-selector',
          'spec.nodeName=cp-1,metadata.name!=kube-scheduler-cp-1',
          '-l',
          'tier',
          '-o',
          'json',
        ])
      ).stdout,
    )
    const cpNames = cp.items.map((p: { metadata: { name: string } }) => p.metadata.name).sort()
    expect(cpNames).toContain('kube-apiserver-cp-1')
    expect(cpNames).not.toContain('kube-scheduler-cp-1')
    const none = await k.kubectl(['get', 'pods', '-n', 'kube-system', '-l', 'app=nothing'])
    expect(none).toMatchObject({ code: 0, stdout: '', stderr: 'No resources found in kube-system namespace.\n' })
    const byName = await k.kubectl(['get', 'nodes', '--field-selector', 'metadata.name=cp-1', '-o', 'name'])
    expect(byName.stdout).toBe('node/cp-1\n')
    const nf = await k.kubectl(['get', 'node', 'nope'])
    expect(nf).toMatchObject({ code: 1, stderr: 'Error from server (NotFound): nodes "nope" not found\n' })
  })

  it('keeps a node with the cni fault NotReady and its rollout waiting', async () => {
    k.faults.add('wrkr-2', 'cni')
    k.kube.registerNode({ name: 'wrkr-2', ip: '127.40.0.22', role: 'worker' })
    const r = await k.kubectl(['rollout', 'status', 'daemonset/cilium', '-n', 'kube-system', '--timeout=2s'])
    expect(r.code).toBe(1)
    expect(r.stderr).toBe('error: timed out waiting for the condition\n')
    expect(r.stdout).toContain('Waiting for daemon set "cilium" rollout to finish: 2 of 3 updated pods are available...')
    expect(k.kube.nodeReady('wrkr-2')).toBe(false)
    const pods = await k.kubectl(['get', 'pods', '-n', 'kube-system', '--field-selector', 'spec.nodeName=wrkr-2', '-l', 'k8s-app=cilium'])
    expect(pods.stdout).toMatch(/cilium-\S+\s+0\/1\s+CrashLoopBackOff/)
    const w = await k.kubectl(['wait', '--for=condition=Ready', 'nodes', '--all', '--timeout=1s'])
    expect(w.code).toBe(1)
    expect(w.stdout).toBe('node/cp-1 condition met\nnode/wrkr-1 condition met\n')
    expect(w.stderr).toBe('error: timed out waiting for the condition on nodes/wrkr-2\n')
  })
})

describe('kube API with kubectl: apply, secrets and Flux', () => {
  let k: TestKube
  beforeAll(async () => {
    k = await startTestKube({ host: '127.40.1.1', speed: 600, timings: { cni: 20 } })
    k.kube.registerNode({ name: 'cp-1', ip: '127.40.1.11', role: 'controlplane' })
    await k.kubectl(['apply', '-f', await k.writeManifest('cilium.yaml', CILIUM)])
  })
  afterAll(async () => {
    await k?.stop()
  })

  it('applies a Secret: created, configured, server-side, with stringData folded into data', async () => {
    const missingNs = await k.kubectl(['apply', '-f', await k.writeManifest('secret.yaml', SECRET)])
    expect(missingNs.code).toBe(1)
    expect(missingNs.stderr).toMatch(
      /^Error from server \(NotFound\): error when creating ".*secret\.yaml": namespaces "flux-system" not found\n$/,
    )
    expect(await k.kubectl(['create', 'namespace', 'flux-system'])).toMatchObject({ code: 0, stdout: 'namespace/flux-system created\n' })
    const file = await k.writeManifest('secret.yaml', SECRET)
    expect(await k.kubectl(['apply', '-f', file])).toMatchObject({ code: 0, stdout: 'secret/app-credentials created\n' })
    expect(await k.kubectl(['apply', '-f', file])).toMatchObject({ code: 0, stdout: 'secret/app-credentials configured\n' })
    expect(await k.kubectl(['apply', '--server-side', '-f', file])).toMatchObject({
      code: 0,
      stdout: 'secret/app-credentials serverside-applied\n',
    })
    const ssa = await k.writeManifest('ssa.yaml', SECRET.replace('app-credentials', 'ssa-credentials'))
    expect(await k.kubectl(['apply', '--server-side', '-f', ssa])).toMatchObject({
      code: 0,
      stdout: 'secret/ssa-credentials serverside-applied\n',
    })
    const s = JSON.parse((await k.kubectl(['get', 'secret', 'app-credentials', '-n', 'flux-system', '-o', 'json'])).stdout)
    expect(s.type).toBe('Opaque')
    expect(s.stringData).toBeUndefined()
    expect(Buffer.from(s.data.username, 'base64').toString()).toBe('admin')
    expect(Buffer.from(s.data.password, 'base64').toString()).toBe('s3cr3t')
    expect(s.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    const dup = await k.kubectl(['create', '-f', file])
    expect(dup.code).toBe(1)
    expect(dup.stderr).toMatch(/Error from server \(AlreadyExists\): error when creating ".*": secrets "app-credentials" already exists/)
    const table = await k.kubectl(['get', 'secrets', '-n', 'flux-system'])
    expect(table.stdout).toMatch(/^NAME\s+TYPE\s+DATA\s+AGE\napp-credentials\s+Opaque\s+2\s+\S+\nssa-credentials\s+Opaque\s+2\s+\S+\n$/)
    // `kubectl create secret … --dry-run=client -o yaml | kubectl apply -f -`, twice: the second run's
    // {"metadata":{"creationTimestamp":null}} patch must not lose it.
    const pipe = (
      await k.kubectl(['create', 'secret', 'generic', 'x', '-n', 'flux-system', '--from-literal=key=v', '--dry-run=client', '-o', 'yaml'])
    ).stdout
    expect(await k.kubectl(['apply', '-f', '-'], { input: pipe })).toMatchObject({ code: 0, stdout: 'secret/x created\n' })
    expect(await k.kubectl(['apply', '-f', '-'], { input: pipe })).toMatchObject({ code: 0, stdout: 'secret/x configured\n' })
    const ts = await k.kubectl(['get', 'secret', 'x', '-n', 'flux-system', '-o', 'jsonpath={.metadata.creationTimestamp}'])
    expect(ts.stdout).toMatch(/^\d{4}-/)
    const writes = k.calls.filter((c) => c.tool === 'kubectl' && c.call === 'kube')
    expect(writes.some((c) => c.command === 'POST /api/v1/namespaces/flux-system/secrets' && c.outcome === 'ok')).toBe(true)
    expect(writes.every((c) => !c.command.startsWith('GET'))).toBe(true)
  })

  it('reconciles Flux: Kustomization Ready after the controllers are available', async () => {
    // sim/kube/resources.js: Flux kinds are served only once their CRDs exist (apiextensions-apiserver)
    const before = await k.kubectl(['get', 'kustomizations', '-A'])
    expect(before).toMatchObject({ code: 1, stderr: `error: the server doesn't have a resource type "kustomizations"\n` })
    expect(await k.kubectl(['apply', '-f', await k.writeManifest('flux-crds.yaml', FLUX_CRDS)])).toMatchObject({ code: 0 })
    const applied = await k.kubectl(['apply', '-f', await k.writeManifest('flux.yaml', FLUX)])
    expect(applied.code).toBe(0)
    expect(applied.stdout).toContain('kustomization.kustomize.toolkit.fluxcd.io/flux-system created')
    const w = await k.kubectl(['wait', 'kustomization/flux-system', '-n', 'flux-system', '--for=condition=Ready', '--timeout=20s'])
    expect(w).toMatchObject({ code: 0, stdout: 'kustomization.kustomize.toolkit.fluxcd.io/flux-system condition met\n' })
    const ks = await k.kubectl(['get', 'ks', '-A'])
    expect(ks.stdout).toMatch(
      /^NAMESPACE\s+NAME\s+AGE\s+READY\s+STATUS\nflux-system\s+flux-system\s+\S+\s+True\s+Applied revision: main@sha1:[0-9a-f]{40}\n$/,
    )
    const git = JSON.parse((await k.kubectl(['get', 'gitrepo', 'flux-system', '-n', 'flux-system', '-o', 'json'])).stdout)
    const kso = JSON.parse(
      (await k.kubectl(['get', 'kustomizations.kustomize.toolkit.fluxcd.io', 'flux-system', '-n', 'flux-system', '-o', 'json'])).stdout,
    )
    expect(kso.status.lastAppliedRevision).toBe(git.status.artifact.revision)
    expect(kso.status.conditions[0]).toMatchObject({
      type: 'Ready',
      status: 'True',
      reason: 'ReconciliationSucceeded',
      observedGeneration: 1,
    })
  })

  it('fails Kustomizations with the flux fault message and heals when it clears', async () => {
    k.faults.add(null, 'flux', 'kustomize build failed: missing ./apps')
    const apps = await k.writeManifest(
      'apps.yaml',
      `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec: {interval: 10m0s, path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}
`,
    )
    await k.kubectl(['apply', '-f', apps])
    const w = await k.kubectl(['wait', 'kustomization/apps', '-n', 'flux-system', '--for=condition=Ready', '--timeout=1s'])
    expect(w).toMatchObject({ code: 1, stderr: 'error: timed out waiting for the condition on kustomizations/apps\n' })
    const row = await k.kubectl(['get', 'ks', 'apps', '-n', 'flux-system', '--no-headers'])
    expect(row.stdout).toMatch(/^apps\s+\S+\s+False\s+kustomize build failed: missing \.\/apps\n$/)
    const reason = await k.kubectl([
      'get',
      'ks',
      'apps',
      '-n',
      'flux-system',
      '-o',
      'jsonpath={.status.conditions[?(@.type=="Ready")].reason}',
    ])
    expect(reason.stdout).toBe('BuildFailed')
    k.faults.clear(null, 'flux')
    const healed = await k.kubectl(['wait', 'kustomization/apps', '-n', 'flux-system', '--for=condition=Ready', '--timeout=20s'])
    expect(healed.code).toBe(0)
  })
})

// kubectl drain through pods/eviction (kubernetes pkg/registry/core/pod/storage/eviction.go, the
// disruption controller's status): a budget that allows no disruption holds the drain until its
// --timeout, as on a real API server.
const GUARDED = `apiVersion: apps/v1
kind: Deployment
metadata: {name: guarded, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: guarded}}
  template:
    metadata: {labels: {app: guarded}}
    spec:
      nodeSelector: {kubernetes.io/hostname: wrkr-1}
      containers: [{name: app, image: registry.k8s.io/pause:3.10}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guarded, namespace: default}
spec: {minAvailable: 1, selector: {matchLabels: {app: guarded}}}
`

/** a policy/v1 Eviction in kube-apiserver's protobuf envelope ("k8s", a NUL byte, then runtime.Unknown; k8s.io/api policy/v1 generated.proto) */
function protobufEviction(name: string, namespace: string, dryRun: string[]): Buffer {
  const field = (no: number, bytes: Buffer): Buffer => Buffer.concat([Buffer.from([(no << 3) | 2, bytes.length]), bytes])
  const text = (no: number, v: string): Buffer => field(no, Buffer.from(v))
  const meta = Buffer.concat([text(1, name), text(3, namespace)])
  const deleteOptions = Buffer.concat(dryRun.map((d) => text(5, d)))
  const eviction = Buffer.concat([field(1, meta), field(2, deleteOptions)])
  const typeMeta = Buffer.concat([text(1, 'policy/v1'), text(2, 'Eviction')])
  return Buffer.concat([Buffer.from('k8s\0', 'latin1'), field(1, typeMeta), field(2, eviction)])
}

describe('kube API with kubectl: drain, evictions and PodDisruptionBudgets', () => {
  let k: TestKube
  beforeAll(async () => {
    k = await startTestKube({ host: '127.40.2.1', speed: 600, timings: { cni: 20 } })
    k.kube.registerNode({ name: 'cp-1', ip: '127.40.2.11', role: 'controlplane' })
    k.kube.registerNode({ name: 'wrkr-1', ip: '127.40.2.21', role: 'worker' })
    await k.kubectl(['apply', '-f', await k.writeManifest('cilium.yaml', CILIUM)])
    expect((await k.kubectl(['wait', '--for=condition=Ready', 'nodes', '--all', '--timeout=20s'])).code).toBe(0)
  })
  afterAll(async () => {
    await k?.stop()
  })

  const guardedPods = async (): Promise<string[]> =>
    (await k.kubectl(['get', 'pods', '-n', 'default', '-l', 'app=guarded', '-o', 'name'])).stdout.trim().split('\n').filter(Boolean)
  const budget = async (): Promise<string> =>
    (
      await k.kubectl([
        'get',
        'pdb',
        'guarded',
        '-n',
        'default',
        '-o',
        'jsonpath={.status.currentHealthy}/{.status.desiredHealthy}/{.status.disruptionsAllowed}/{.status.expectedPods}',
      ])
    ).stdout

  it('lists the eviction subresource of pods in discovery, legacy and aggregated', async () => {
    const legacy = JSON.parse((await k.kubectl(['get', '--raw', '/api/v1'])).stdout)
    expect(legacy.resources.find((r: { name: string }) => r.name === 'pods/eviction')).toEqual({
      name: 'pods/eviction',
      singularName: '',
      namespaced: true,
      group: 'policy',
      version: 'v1',
      kind: 'Eviction',
      verbs: ['create'],
    })
    const res = await fetch(`${k.url}/api`, { headers: { Accept: 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList' } })
    const pods = (await res.json()).items[0].versions[0].resources.find((r: { resource: string }) => r.resource === 'pods')
    expect(pods.subresources.map((s: { subresource: string }) => s.subresource)).toEqual(['eviction', 'status'])
    expect(pods.subresources[0]).toEqual({
      subresource: 'eviction',
      responseKind: { group: 'policy', version: 'v1', kind: 'Eviction' },
      verbs: ['create'],
    })
  })

  it('keeps a budget status as the disruption controller does', async () => {
    await k.kubectl(['apply', '-f', await k.writeManifest('guarded.yaml', GUARDED)])
    expect((await k.kubectl(['rollout', 'status', 'deployment/guarded', '-n', 'default', '--timeout=20s'])).code).toBe(0)
    let held = ''
    for (let i = 0; i < 50 && held !== '1/1/0/1'; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100))
      held = await budget()
    }
    expect(held, 'currentHealthy/desiredHealthy/disruptionsAllowed/expectedPods').toBe('1/1/0/1')
    const pdb = JSON.parse((await k.kubectl(['get', 'pdb', 'guarded', '-n', 'default', '-o', 'json'])).stdout)
    expect(pdb.status).toMatchObject({
      observedGeneration: 1,
      conditions: [{ type: 'DisruptionAllowed', status: 'False', observedGeneration: 1, reason: 'InsufficientPods', message: '' }],
    })
  })

  it('holds kubectl drain with a 429 while the budget allows no disruption, and the pod stays', async () => {
    const before = await guardedPods()
    expect(before).toHaveLength(1)
    const r = await k.kubectl(['drain', 'wrkr-1', '--ignore-daemonsets', '--delete-emptydir-data', '--timeout', '3s'])
    expect(r.code, r.stdout + r.stderr).not.toBe(0)
    expect(r.stdout + r.stderr).toContain("Cannot evict pod as it would violate the pod's disruption budget.")
    expect(r.stderr).toContain(`error when evicting pods/"${before[0].slice('pod/'.length)}" -n "default" (will retry after 5s)`)
    expect(await guardedPods()).toEqual(before)
    // the raw answer: 429 TooManyRequests naming the budget's numbers
    const res = await fetch(`${k.url}/api/v1/namespaces/default/${before[0].replace('pod/', 'pods/')}/eviction`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'policy/v1',
        kind: 'Eviction',
        metadata: { name: before[0].slice('pod/'.length), namespace: 'default' },
      }),
    })
    expect(res.status).toBe(429)
    expect(await res.json()).toMatchObject({
      kind: 'Status',
      status: 'Failure',
      reason: 'TooManyRequests',
      code: 429,
      message: "Cannot evict pod as it would violate the pod's disruption budget.",
      details: {
        causes: [{ reason: 'DisruptionBudget', message: 'The disruption budget guarded needs 1 healthy pods and has 1 currently' }],
      },
    })
  })

  it("the product's drain: drain-blocked, naming the budget from its status", async () => {
    const runner = new ToolRunner({
      env: { PATH: process.env.PATH ?? '', HOME: k.dir },
      callTimeoutMs: 30_000,
      signal: new AbortController().signal,
      dryRun: false,
      redactor: new Redactor(),
    })
    const kubectl = new Kubectl(runner, { kubeconfig: k.kubeconfig, clusterName: 'sim', cacheDir: k.dir })
    const [pod] = await guardedPods()
    expect(await blockedEvictions(kubectl, 'wrkr-1')).toEqual([{ pod: `default/${pod!.slice('pod/'.length)}`, pdb: 'default/guarded' }])
    const err = await kubectl.drain('wrkr-1', 2000).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(NodeError)
    expect((err as NodeError).kind).toBe('drain-blocked')
    expect(await guardedPods()).toEqual([pod])
  })

  it('refuses a pod two budgets cover (500) and an unknown pod (404)', async () => {
    const [pod] = await guardedPods()
    const name = pod.slice('pod/'.length)
    const second = await k.writeManifest(
      'second.yaml',
      'apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: second, namespace: default}\nspec: {maxUnavailable: 1, selector: {matchLabels: {app: guarded}}}\n',
    )
    expect((await k.kubectl(['apply', '-f', second])).code).toBe(0)
    const post = (n: string): Promise<Response> =>
      fetch(`${k.url}/api/v1/namespaces/default/pods/${n}/eviction`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: n, namespace: 'default' } }),
      })
    const two = await post(name)
    expect(two.status).toBe(500)
    expect((await two.json()).message).toBe(
      'This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.',
    )
    expect((await k.kubectl(['delete', 'pdb', 'second', '-n', 'default'])).code).toBe(0)
    const missing = await post('nope')
    expect(missing.status).toBe(404)
    expect((await missing.json()).message).toBe('pods "nope" not found')
    expect(await guardedPods()).toEqual([pod])
  })

  it('drains once the budget is relaxed: the eviction deletes the pod', async () => {
    const before = await guardedPods()
    expect(
      (await k.kubectl(['patch', 'pdb', 'guarded', '-n', 'default', '--type', 'merge', '-p', '{"spec":{"minAvailable":0}}'])).code,
    ).toBe(0)
    let allowed = ''
    for (let i = 0; i < 50 && allowed !== '1/0/1/1'; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100))
      allowed = await budget()
    }
    expect(allowed).toBe('1/0/1/1')
    // a dry run, in a protobuf body as client-go's typed clients may send it: allowed, nothing deleted
    const res = await fetch(`${k.url}/api/v1/namespaces/default/${before[0].replace('pod/', 'pods/')}/eviction`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/vnd.kubernetes.protobuf' },
      body: protobufEviction(before[0].slice('pod/'.length), 'default', ['All']),
    })
    expect(res.status).toBe(201)
    expect(await res.json()).toEqual({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 })
    expect(await guardedPods()).toEqual(before)
    expect(await budget()).toBe('1/0/1/1')
    const r = await k.kubectl(['drain', 'wrkr-1', '--ignore-daemonsets', '--delete-emptydir-data', '--timeout', '10s'])
    expect(r.code, r.stdout + r.stderr).toBe(0)
    expect(r.stdout).toContain(`${before[0]} evicted`)
    expect(r.stdout).toContain('node/wrkr-1 drained')
    expect(await guardedPods()).not.toContain(before[0])
  })
})
