// The simulated kubelets against the real API server (SIM_KUBE=real, sim/kube-real.js): per running
// node, what a kubelet writes and nothing more, with the node's own credentials:
// * registration: a bootstrap-token CSR (signer kubernetes.io/kube-apiserver-client-kubelet) that the
//   real controller-manager approves (Talos's RBAC, sim/kube-manifests.js) and signs, then the Node
//   with the not-ready taint (kubelet_node_status.go initialNode; the real node-lifecycle controller
//   removes it once Ready), the control plane's taint unless allowSchedulingOnControlPlanes;
// * a Lease heartbeat in kube-node-lease; the Node's status: NotReady until its CNI pod is Ready;
// * the status of the pods the real scheduler binds to it, by the simulator's rules (below), and the
//   deletion of its pods once they are terminating (evictions, drains, rollouts);
// * on a control plane, the mirror pods of Talos's static pods.
// Talos's own writes (the node-role label, the cordon of a reset and its drain through pods/eviction,
// the uncordon) go with the admin's credentials, as machined's controllers do.
import { createHash, randomUUID } from 'node:crypto'
import { certificateRequest } from './pki.js'
import { KubeClient } from './lib-kubeclient.js'
import { Informer } from './informer.js'
import { networkOf } from './talos/network.js'
import { cniApiUnreachable, isCni } from './kube-rules.js'
import { COREDNS_PROBE, imageNotFound, pullBackOff } from './health-faults.js'
import { KubeletApi } from './kubelet-api.js'

export const CHART_ANNOTATION = 'sim.talos-bootstrap.dev/chart'
export const NOT_READY_MESSAGE =
  'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized'
const CORDONED = 'talos.dev/cordoned'
const STATIC_PODS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']
// simulated seconds (as sim/kube/controllers.js): an ordinary pod once its node's network is ready, a hostNetwork pod
const POD_START = 5
const HOST_NETWORK_START = 1
const TICK_MS = 250
const LEASE_S = 40 // the kubelet's nodeLeaseDurationSeconds; renewed every quarter of it (10 s of the controller-manager's 50 s grace: heartbeat)
const MIN_RENEW_MS = 1000
// the kubelet's nodeStatusReportFrequency (Talos sets none): an unchanged status is posted this often,
// the Lease being what the node-lifecycle controller reads (kubelet_node_status.go isUpdateStatusPeriodExpired)
const STATUS_REPORT_S = 300
const CSR_POLL_MS = 250
const COLLECTIONS = ['/api/v1/nodes', '/api/v1/pods', '/apis/policy/v1/poddisruptionbudgets']

const isoNow = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z')
const microNow = () => new Date().toISOString().replace(/Z$/, '000Z')
const cond = (o, type) => (o?.status?.conditions ?? []).find((c) => c.type === type)

export class Kubelets {
  /** ctx = the Simulator; kube = sim/kube-real.js RealKube (its admin client, address, network) */
  constructor(ctx, kube) {
    this.ctx = ctx
    this.kube = kube
    this.states = new Map() // node name -> kubelet state
    this.nodes = new Map() // name -> Node object (last list)
    this.pods = [] // last list
    this.timer = null
    this.busy = false
    this.api = new KubeletApi(ctx, this) // each running kubelet's :10250 (kubectl logs)
  }

  start() {
    if (this.timer) return
    // what the kubelets read every tick, kept by a list and a watch each (a kubelet's informers) rather
    // than listed four times a second (CPU: docs/real-control-plane.md "CPU")
    this.informers = COLLECTIONS.map((path) => new Informer(this.kube.admin, path))
    for (const i of this.informers) i.start()
    this.timer = setInterval(() => this.tick(), TICK_MS)
    this.tick()
  }
  stop() {
    for (const i of this.informers ?? []) i.stop()
    clearInterval(this.timer)
    this.timer = null
    this.api.closeAll()
    for (const k of this.states.values()) k.client?.close()
  }

  state(n) {
    let k = this.states.get(n.name)
    if (!k) this.states.set(n.name, (k = { n, wanted: false, client: null, registered: false, pods: new Map() }))
    return k
  }

  // ---- hooks (sim/cluster.js) ----
  /** the kubelet service runs on a running node: it registers (again) */
  run(n) {
    const k = this.state(n)
    k.wanted = true
    k.bootId = n.bootId
    this.tick()
  }
  /** the reset's cleanup stopped the kubelet: nothing posts for this node any more */
  stopped(n) {
    const k = this.state(n)
    k.wanted = false
    k.registered = false
  }
  /** the node was wiped: its kubelet's credentials with it */
  wiped(n) {
    const k = this.state(n)
    this.stopped(n)
    k.client?.close()
    k.client = null
  }
  nodeReady(name) {
    return cond(this.nodes.get(name), 'Ready')?.status === 'True'
  }
  /** the node's serving CSRs nobody approved, as its kubelet's credentials last listed them (Talos's kubelet-csr diagnostic) */
  pendingServingCsrs(name) {
    return this.states.get(name)?.pendingServing ?? []
  }

  /** Talos's cordon (NodeCordonedSpecController / NodeApplyController): unschedulable, marked as Talos's */
  async cordon(n) {
    const admin = this.kube.admin
    const node = this.nodes.get(n.name)
    if (!node || node.spec?.unschedulable) return
    await admin.patch('Node', null, n.name, { metadata: { annotations: { [CORDONED]: 'true' } }, spec: { unschedulable: true } })
  }
  /** uncordoned when it runs again, only when Talos cordoned it */
  async uncordon(name) {
    const node = this.nodes.get(name) ?? (await this.kube.admin.getOrNull('Node', null, name))
    if (!node?.metadata?.annotations?.[CORDONED]) return
    await this.kube.admin.patch('Node', null, name, { metadata: { annotations: { [CORDONED]: null } }, spec: { unschedulable: null } })
  }

  /**
   * Talos's drain (pkg/kubernetes Drain): every pod on the node but mirror and DaemonSet pods is
   * evicted through pods/eviction; a refusal (a PodDisruptionBudget: 429) is retried every 5 s until
   * the drain's timeout. Returns at once what the node model needs: how many go and which a budget holds.
   */
  drain(n, { timeoutMs, blocked: guard = false }) {
    const deadline = Date.now() + timeoutMs
    const sleep = (ms) => new Promise((res) => setTimeout(res, ms))
    const onNode = () =>
      this.pods.filter(
        (p) =>
          p.spec.nodeName === n.name &&
          !p.metadata.deletionTimestamp &&
          !p.metadata.annotations?.['kubernetes.io/config.mirror'] &&
          !(p.metadata.ownerReferences ?? []).some((o) => o.kind === 'DaemonSet'),
      )
    const gone = (p) => !this.pods.some((x) => x.metadata.uid === p.metadata.uid)
    const held = []
    const evict = async (p) => {
      const path = `/api/v1/namespaces/${p.metadata.namespace}/pods/${p.metadata.name}/eviction`
      const body = { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: p.metadata.name, namespace: p.metadata.namespace } }
      for (;;) {
        const r = await this.kube.admin.request('POST', path, body).catch(() => ({ status: 0 }))
        if (r.status !== 429 && r.status !== 0) break
        if (Date.now() > deadline || this.kube.stopping) return void held.push(`${p.metadata.namespace}/${p.metadata.name}`)
        await sleep(Math.max(200, 5000 / this.ctx.clock.speed))
      }
      // evicted: Drain waits for the pod to be deleted (its kubelet stops it and removes it)
      while (!gone(p) && Date.now() < deadline && !this.kube.stopping) await sleep(TICK_MS)
    }
    const run = async () => {
      if (guard) await this.guardedPod(n, deadline)
      await Promise.all(onNode().map(evict))
      return { blocked: held }
    }
    const pods = onNode()
    const blocked = pods.filter((p) => this.budgetHolds(p)).map((p) => ({ pod: `${p.metadata.namespace}/${p.metadata.name}` }))
    return { evicted: pods.length - blocked.length, blocked, done: run() }
  }
  /**
   * the drain-blocked fault: an operator's single-replica workload on the node, its budget
   * minAvailable 1 (no eviction allowed), created through the API and running before the drain
   */
  async guardedPod(n, deadline) {
    const admin = this.kube.admin
    const labels = { app: 'guarded' }
    await admin.request('POST', '/apis/policy/v1/namespaces/default/poddisruptionbudgets', {
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: { name: 'guarded', namespace: 'default' },
      spec: { minAvailable: 1, selector: { matchLabels: labels } },
    })
    // a ReplicaSet's pods are named guarded-<suffix>, as sim/kube names the guarded pod
    await admin.request('POST', '/apis/apps/v1/namespaces/default/replicasets', {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      metadata: { name: 'guarded', namespace: 'default' },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            nodeSelector: { 'kubernetes.io/hostname': n.name },
            tolerations: [{ operator: 'Exists' }],
            containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
          },
        },
      },
    })
    const guarded = () =>
      this.pods.some((p) => p.spec.nodeName === n.name && p.metadata.labels?.app === 'guarded' && cond(p, 'Ready')?.status === 'True') &&
      this.pdbs.some((b) => b.metadata.name === 'guarded' && b.status?.currentHealthy >= 1 && b.status?.disruptionsAllowed === 0)
    while (!guarded() && Date.now() < deadline && !this.kube.stopping) await new Promise((res) => setTimeout(res, TICK_MS))
  }
  budgetHolds(pod) {
    return (this.pdbs ?? []).some(
      (b) =>
        b.metadata.namespace === pod.metadata.namespace &&
        (b.status?.disruptionsAllowed ?? 0) < 1 &&
        Object.entries(b.spec?.selector?.matchLabels ?? {}).every(([key, v]) => pod.metadata.labels?.[key] === v),
    )
  }

  // ---- the loop ----
  async tick() {
    if (this.busy || !this.timer || this.kube.stopping) return
    this.busy = true
    try {
      // the static pods first: they run whatever the API server answers (it may be the one down)
      this.kube.reconcileComponents(this.ctx.health)
      const admin = this.kube.admin
      // the informers' caches while they are in step; a list of each otherwise (the API server away: it fails as the lists do)
      const cached = { query: { resourceVersion: '0' } }
      const [nodes, pods, pdbs] = await Promise.all(
        COLLECTIONS.map((p, i) => this.informers[i].items() ?? admin.call('GET', p, undefined, cached).then((l) => l.items ?? [])),
      )
      const before = new Map([...this.nodes].map(([name, o]) => [name, cond(o, 'Ready')?.status]))
      this.nodes = new Map(nodes.map((o) => [o.metadata.name, o]))
      this.pods = pods
      this.pdbs = pdbs
      await Promise.all([...this.states.values()].map((k) => this.sync(k).catch((e) => this.ctx.log(`kubelet ${k.n.name}: ${e.message}`))))
      // Talos's MachineStatus (nodeReady) and health read the Nodes: a change is a node change
      for (const n of this.ctx.nodes) if (before.get(n.name) !== cond(this.nodes.get(n.name), 'Ready')?.status) this.ctx.changed(n)
    } catch (e) {
      this.ctx.log(`kubelets: ${e.message}`)
    } finally {
      this.busy = false
    }
  }

  /**
   * its kubelet service runs in this boot (a reset's stage `resetting` too, until its cleanup stops
   * the kubelet), and the node is on the network: a lasting `unreachable` fault cuts it off, so its
   * kubelet reaches no API server either
   */
  alive(k) {
    const n = k.n
    const cut = this.ctx.faults.find(n.name, { on: 'any', kind: 'unreachable' }).some((f) => f.times == null)
    return k.wanted && !cut && n.criUp && n.bootId === k.bootId && n.services.get('kubelet')?.state === 'Running'
  }

  async sync(k) {
    if (!this.alive(k)) {
      k.registered = false
      this.api.close(k.n.name)
      return
    }
    // one registration step at a time; a failure (no bootstrap token yet, the API away) is retried on a later tick
    const step = (fn) => {
      k.registering ??= fn()
        .catch((e) => this.ctx.log(`kubelet ${k.n.name}: ${e.message}`))
        .finally(() => (k.registering = null))
    }
    if (!k.client) return step(() => this.bootstrapCert(k))
    if (!k.registered) return step(() => this.register(k))
    await this.heartbeat(k)
    if (k.servingCsr) await this.listServingCsrs(k)
    const node = this.nodes.get(k.n.name)
    if (!node) {
      k.registered = false // deleted (kubectl delete node): the kubelet registers it again
      return
    }
    this.api.serve(k)
    const mine = this.pods.filter((p) => p.spec.nodeName === k.n.name)
    await this.syncPods(k, node, mine)
    await this.syncNodeStatus(k, node, mine)
  }

  /** the bootstrap kubeconfig's token: a CSR for system:node:<name>, approved and signed by the controller-manager */
  async bootstrapCert(k) {
    const n = k.n
    const { url } = this.kube
    const token = n.config?.cluster?.token ?? this.ctx.pki.secrets.bootstrapToken
    const boot = new KubeClient({ server: url, ca: this.ctx.pki.kube.ca.cert, token }, { userAgent: 'kubelet/v1.35.0' })
    try {
      const { csr, key } = await certificateRequest(`CN=system:node:${n.name}, O=system:nodes`)
      const created = await postCsr(boot, 'node-csr-', csr, 'kubernetes.io/kube-apiserver-client-kubelet', 'client auth')
      const path = `/apis/certificates.k8s.io/v1/certificatesigningrequests/${created.metadata.name}`
      for (;;) {
        if (!this.alive(k) || this.kube.stopping) return
        const got = await boot.call('GET', path)
        if (got.status?.certificate) {
          const cert = Buffer.from(got.status.certificate, 'base64').toString()
          k.client = new KubeClient({ server: url, ca: this.ctx.pki.kube.ca.cert, cert, key }, { userAgent: 'kubelet/v1.35.0' })
          k.csr = created.metadata.name
          n.talosLog(`kubelet: client certificate signed (CSR ${created.metadata.name})`)
          return
        }
        if ((got.status?.conditions ?? []).some((c) => c.type === 'Denied' || c.type === 'Failed')) {
          n.talosLog(`kubelet: certificate request ${created.metadata.name} denied`)
          return
        }
        await new Promise((r) => setTimeout(r, CSR_POLL_MS))
      }
    } finally {
      boot.close()
    }
  }

  /** the Node (created, or an existing one taken over with this boot's ID), Talos's labels, the uncordon */
  async register(k) {
    const n = k.n
    const cp = n.role === 'controlplane'
    const address = this.ctx.health.nodeIp(n.name) ?? n.ip
    const status = this.nodeStatus(k, false, address)
    const allowCp = n.config?.cluster?.allowSchedulingOnControlPlanes === true
    const taints = [
      ...(cp && !allowCp ? [{ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' }] : []),
      { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' },
    ]
    const labels = {
      'kubernetes.io/hostname': n.name,
      'kubernetes.io/os': 'linux',
      'kubernetes.io/arch': 'amd64',
      'beta.kubernetes.io/os': 'linux',
      'beta.kubernetes.io/arch': 'amd64',
    }
    const res = await k.client.request('POST', '/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: n.name, labels },
      spec: { taints },
      status,
    })
    if (res.status === 409)
      await k.client.call('PATCH', `/api/v1/nodes/${n.name}/status`, { status }, { contentType: 'application/strategic-merge-patch+json' })
    else if (res.status >= 300) throw new Error(`register: ${res.body?.message ?? res.status}`)
    // Talos's NodeApplyController (admin): the role label and machine.nodeLabels; the uncordon of a node it cordoned
    const nodeLabels = { ...(cp ? { 'node-role.kubernetes.io/control-plane': '' } : {}), ...(n.config?.machine?.nodeLabels ?? {}) }
    if (Object.keys(nodeLabels).length) await this.kube.admin.patch('Node', null, n.name, { metadata: { labels: nodeLabels } })
    await this.uncordon(n.name)
    if (this.ctx.health.servingCsrPending(n.name) && !k.servingCsr) await this.servingCsr(k, address)
    k.registered = true
    k.statusKey = null
    // a new boot: every pod's containers start again (back on the network after a cut, they ran on)
    if (k.registeredBoot !== n.bootId) {
      k.pods.clear()
      k.netReadyAt = null
    }
    k.registeredBoot = n.bootId
    if (!n.registered) {
      n.registered = true
      n.talosLog(`kubelet: node "${n.name}" registered`)
      n.changed()
    }
  }

  /**
   * fault kubelet-serving-csr: the kubelet asks for its serving certificate (serverTLSBootstrap,
   * signer kubernetes.io/kubelet-serving); kube-controller-manager never approves that signer, and
   * no approver runs here, so the request stays Pending
   */
  async servingCsr(k, address) {
    const { csr, key } = await certificateRequest(`CN=system:node:${k.n.name}, O=system:nodes`, { ips: [address], names: [k.n.name] })
    const r = await postCsr(k.client, 'csr-', csr, 'kubernetes.io/kubelet-serving', 'server auth')
    k.servingCsr = r.metadata.name
    k.servingKey = key
  }

  /**
   * Talos's kubelet-csr diagnostic, with the kubelet's kubeconfig: the kubelet-serving CSRs (field
   * selector spec.signerName), those of username system:node:<node> without an Approved condition
   */
  async listServingCsrs(k) {
    const list = await k.client.call(
      'GET',
      `/apis/certificates.k8s.io/v1/certificatesigningrequests?fieldSelector=${encodeURIComponent('spec.signerName=kubernetes.io/kubelet-serving')}`,
    )
    // approved, the controller-manager's signer issues it and the kubelet serves with it (:10250)
    const own = (list.items ?? []).find((c) => c.metadata.name === k.servingCsr)
    if (own?.status?.certificate && !k.servingCert) k.servingCert = Buffer.from(own.status.certificate, 'base64').toString()
    k.pendingServing = (list.items ?? [])
      .filter((c) => c.spec?.username === `system:node:${k.n.name}` && !(c.status?.conditions ?? []).some((x) => x.type === 'Approved'))
      .map((c) => c.metadata.name)
      .sort()
  }

  nodeStatus(k, networkReady, address = k.n.ip) {
    const n = k.n
    const now = isoNow()
    const ok = (type, reason, message) => ({ type, status: 'False', reason, message, lastHeartbeatTime: now, lastTransitionTime: now })
    return {
      conditions: [
        ok('MemoryPressure', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
        ok('DiskPressure', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
        ok('PIDPressure', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
        networkReady
          ? {
              type: 'Ready',
              status: 'True',
              reason: 'KubeletReady',
              message: 'kubelet is posting ready status',
              lastHeartbeatTime: now,
              lastTransitionTime: now,
            }
          : {
              type: 'Ready',
              status: 'False',
              reason: 'KubeletNotReady',
              message: NOT_READY_MESSAGE,
              lastHeartbeatTime: now,
              lastTransitionTime: now,
            },
      ],
      addresses: [
        { type: 'InternalIP', address },
        { type: 'Hostname', address: n.name },
      ],
      capacity: { cpu: '4', memory: '8148080Ki', pods: '110', 'ephemeral-storage': '61202244Ki' },
      allocatable: { cpu: '3950m', memory: '7521392Ki', pods: '110', 'ephemeral-storage': '56391010Ki' },
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        // stable per node (the machine's /etc/machine-id and its SMBIOS UUID)
        machineID: idOf(n.name),
        systemUUID: idOf(`uuid:${n.name}`).replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5'),
        bootID: n.bootId,
        kernelVersion: '6.18.2-talos',
        osImage: `Talos (${n.talosVersion})`,
        containerRuntimeVersion: 'containerd://2.1.5',
        kubeletVersion: n.kubeletVersion, // its image's tag (sim/talos/k8s.js)
        kubeProxyVersion: '',
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
    }
  }

  /** the node's Lease in kube-node-lease, renewed every quarter of its duration (scaled to the speed) */
  async heartbeat(k) {
    // a kubelet renews every 10 s against the controller-manager's 50 s grace: the same share of the
    // grace the real controller-manager runs with here (its floor keeps it above the scaled 10 s)
    const renewMs = Math.max(MIN_RENEW_MS, (this.kube.graceS * 1000 * (LEASE_S / 4)) / this.ctx.scenario.timings.nodeMonitorGrace)
    if (k.leaseAt && Date.now() - k.leaseAt < renewMs) return
    const name = k.n.name
    const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${name}`
    const spec = { holderIdentity: name, leaseDurationSeconds: LEASE_S, renewTime: microNow() }
    let r = k.lease ? await k.client.request('PUT', path, { ...k.lease, spec: { ...k.lease.spec, ...spec } }) : { status: 404 }
    if (r.status === 404)
      r = await k.client.request('POST', '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name, namespace: 'kube-node-lease' },
        spec,
      })
    if (r.status === 409) {
      const got = await k.client.call('GET', path)
      r = await k.client.request('PUT', path, { ...got, spec: { ...got.spec, ...spec } })
    }
    if (r.status < 300) {
      k.lease = r.body
      k.leaseAt = Date.now()
    } else k.lease = null
  }

  /** Ready once this node's CNI pod is (the kubelet's network-ready check); posted on change, else every nodeStatusReportFrequency */
  async syncNodeStatus(k, node, mine) {
    const ready = mine.some((p) => isCni(p) && k.pods.get(p.metadata.uid)?.ready)
    if (ready) k.netReadyAt ??= Date.now()
    else k.netReadyAt = null
    const address = this.ctx.health.nodeIp(k.n.name) ?? k.n.ip
    const key = `${ready}|${k.n.bootId}|${k.n.kubeletVersion}|${k.n.talosVersion}|${address}`
    // the same share of the controller-manager's grace as a real kubelet's 5 min of its 50 s (the Lease: heartbeat)
    const every = Math.max(MIN_RENEW_MS * 5, (this.kube.graceS * 1000 * STATUS_REPORT_S) / this.ctx.scenario.timings.nodeMonitorGrace)
    if (key === k.statusKey && Date.now() - k.statusAt < every && cond(node, 'Ready')?.status !== 'Unknown') return
    const status = this.nodeStatus(k, ready, address)
    const prev = cond(node, 'Ready')
    const r = status.conditions.find((c) => c.type === 'Ready')
    if (prev && prev.status === r.status) r.lastTransitionTime = prev.lastTransitionTime
    await k.client.call(
      'PATCH',
      `/api/v1/nodes/${k.n.name}/status`,
      { status: { conditions: status.conditions, nodeInfo: status.nodeInfo, addresses: status.addresses } },
      {
        contentType: 'application/strategic-merge-patch+json',
      },
    )
    k.statusKey = key
    k.statusAt = Date.now()
  }

  // ---- pods ----
  async syncPods(k, node, mine) {
    const n = k.n
    if (n.role === 'controlplane') await this.mirrorPods(k, node, mine)
    for (const pod of mine) {
      const uid = pod.metadata.uid
      if (pod.metadata.deletionTimestamp) {
        // its containers stopped: the kubelet removes the pod for good (status_manager.go canBeDeleted)
        if (pod.metadata.annotations?.['kubernetes.io/config.mirror']) continue
        await k.client.request('DELETE', `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}`, {
          apiVersion: 'v1',
          kind: 'DeleteOptions',
          gracePeriodSeconds: 0,
          preconditions: { uid },
        })
        k.pods.delete(uid)
        continue
      }
      let st = k.pods.get(uid)
      if (!st) k.pods.set(uid, (st = { since: Date.now(), ready: false }))
      const want = this.podStatus(k, node, pod, st)
      st.status = want // what its API (:10250) answers from, as the kubelet's status manager holds it
      const key = JSON.stringify([
        want.phase,
        want.podIP,
        want.conditions.map((c) => c.status),
        want.containerStatuses.map((c) => Object.keys(c.state)[0] + (c.state.waiting?.reason ?? '')),
      ])
      if (key === st.key) continue
      await k.client.call(
        'PATCH',
        `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}/status`,
        { status: want },
        {
          contentType: 'application/strategic-merge-patch+json',
        },
      )
      st.key = key
      await this.postEvent(k, pod, st)
    }
  }

  /** a Warning event about the pod, once per state that raises it (the kubelet's recorder: core/v1 Events) */
  async postEvent(k, pod, st) {
    const e = st.event
    const key = e ? `${e.reason}|${e.message}` : null
    if (key === st.eventKey) return
    st.eventKey = key
    if (!e) return
    const t = isoNow()
    const { namespace, name, uid, resourceVersion } = pod.metadata
    const r = await k.client.request('POST', `/api/v1/namespaces/${namespace}/events`, {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${name}.${randomUUID().replaceAll('-', '').slice(0, 16)}`, namespace },
      involvedObject: { kind: 'Pod', namespace, name, uid, apiVersion: 'v1', resourceVersion, fieldPath: e.fieldPath },
      reason: e.reason,
      message: e.message,
      source: { component: 'kubelet', host: k.n.name },
      firstTimestamp: t,
      lastTimestamp: t,
      count: 1,
      type: 'Warning',
      reportingComponent: 'kubelet',
      reportingInstance: k.n.name,
    })
    if (r.status >= 300) this.ctx.log(`kubelet ${k.n.name}: event ${e.reason} on ${name}: ${r.body?.message ?? r.status}`)
  }

  /**
   * Talos's static pods seen through the API: kube-apiserver-<node> etc. in kube-system, with the
   * StaticPod's labels, annotations and image (sim/talos/k8s.js); a mirror pod that no longer matches
   * its static pod (a new config version) is deleted and created again (kubelet pkg/kubelet/pod
   * mirror_client.go, kubelet.go syncPod: a mirror pod whose hash differs is deleted at once)
   */
  async mirrorPods(k, node, mine) {
    const wanted = new Map(k.n.staticPods().map((p) => [p.id, p]))
    for (const c of STATIC_PODS) {
      const name = `${c}-${k.n.name}`
      const want = wanted.get(c)
      const image = want?.image ?? `registry.k8s.io/${c}:${this.ctx.scenario.cluster.kubernetesVersion}`
      const have = mine.find((p) => p.metadata.name === name && p.metadata.namespace === 'kube-system')
      const version = want?.pod.metadata.annotations['talos.dev/config-version']
      if (have && have.spec.containers?.[0]?.image === image && have.metadata.annotations?.['talos.dev/config-version'] === version)
        continue
      if (have) {
        const d = await k.client.request('DELETE', `/api/v1/namespaces/kube-system/pods/${name}`, {
          apiVersion: 'v1',
          kind: 'DeleteOptions',
          gracePeriodSeconds: 0,
          preconditions: { uid: have.metadata.uid },
        })
        if (d.status >= 300 && d.status !== 404) this.ctx.log(`kubelet ${k.n.name}: mirror pod ${name}: ${d.body?.message ?? d.status}`)
        continue // created on the next pass, once gone
      }
      const r = await k.client.request('POST', '/api/v1/namespaces/kube-system/pods', {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name,
          namespace: 'kube-system',
          labels: want?.pod.metadata.labels ?? { 'k8s-app': c, tier: 'control-plane' },
          annotations: {
            ...want?.pod.metadata.annotations,
            'kubernetes.io/config.hash': randomUUID().replaceAll('-', ''),
            'kubernetes.io/config.mirror': randomUUID().replaceAll('-', ''),
            'kubernetes.io/config.source': 'file',
            'kubernetes.io/config.seen': isoNow(),
          },
          ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: k.n.name, uid: node.metadata.uid, controller: true }],
        },
        spec: {
          nodeName: k.n.name,
          hostNetwork: true,
          priorityClassName: 'system-cluster-critical',
          containers: [{ name: c, image, ...(want ? { command: want.pod.spec.containers[0].command } : {}) }],
        },
      })
      if (r.status >= 300 && r.status !== 409) this.ctx.log(`kubelet ${k.n.name}: mirror pod ${name}: ${r.body?.message ?? r.status}`)
    }
  }

  /**
   * The rules (sim/kube/controllers.js before, sim/README.md "Real Kubernetes"): a CNI pod is Ready
   * `timings.cni` after it is bound, only with the Node's spec.podCIDR and the API reachable
   * (KubePrism or kube-proxy); an ordinary pod 5 s after its node's network is ready; a hostNetwork
   * pod after 1 s; faults cni, chart, coredns, image-pull and static-pod act on them.
   */
  podStatus(k, node, pod, st) {
    const { faults, clock, timings } = this.ctx
    const n = k.n
    const elapsedS = ((Date.now() - st.since) * clock.speed) / 1000
    const hostIP = k.n.ip
    const mirror = !!pod.metadata.annotations?.['kubernetes.io/config.mirror']
    const rules = this.ctx.health
    // image-pull: the first container whose image the registry refuses waits in ImagePullBackOff with
    // the registry's text, and the kubelet records the failed pull (kubelet images/image_manager.go)
    const failing = (pod.spec.containers ?? []).find((c) => rules.imagePull(c.image))
    const pulled = failing ? rules.imagePull(failing.image) : null
    let pull = failing ? { container: failing.name, message: pullBackOff(failing.image, pulled) } : null
    st.event = failing
      ? { reason: 'Failed', message: `Failed to pull image "${failing.image}": ${pulled}`, fieldPath: `spec.containers{${failing.name}}` }
      : null
    const component = mirror ? STATIC_PODS.find((c) => pod.metadata.name === `${c}-${n.name}`) : null
    const staticFault = component ? rules.staticPod(n.name, component, pod.spec.containers?.[0]?.image) : null
    const chart = pod.metadata.annotations?.[CHART_ANNOTATION]
    const crashLog = chart ? faults.find(null, { kind: 'chart' }).find((f) => f.chart === chart) : null
    let state // 'creating' | 'running' | 'notready' | 'crash' | 'pull' | 'done'
    let log = null
    if (pull) state = 'pull'
    else if (mirror) {
      // never started: its image never pulled; with `restarts`, it runs and exits (CrashLoopBackOff with the message)
      if (staticFault?.restarts)
        [state, log] = [
          'crash',
          staticFault.message ?? `E0101 00:00:00.000000       1 run.go:72] "command failed" err="${component}: exit status 1"`,
        ]
      else if (staticFault) {
        const c = pod.spec.containers[0]
        ;[state, pull] = ['pull', { container: c.name, message: staticFault.message ?? pullBackOff(c.image, imageNotFound(c.image)) }]
      } else state = n.apiServerUp ? 'running' : 'creating'
    } else if (isCni(pod)) {
      if (elapsedS < (timings.cni ?? 20)) state = 'creating'
      else {
        const of = networkOf(n.config)
        const kubeProxy = this.pods.some((p) => p.metadata.namespace === 'kube-system' && p.metadata.labels?.['k8s-app'] === 'kube-proxy')
        log = cniApiUnreachable(pod, of, { kubeProxy, serviceIp: this.kube.serviceIp, time: isoNow() })
        if (!log && !node.spec?.podCIDR) log = `Error: failed to get the node's pod CIDR: node "${n.name}" has no spec.podCIDR`
        // fault cni: the agent restarts, its last words the fault's message if it has one (as sim/kube's)
        const cniFault = !log && faults.has(n.name, 'cni')
        if (cniFault) log = faults.message('cni') ?? null
        state = log || cniFault ? 'crash' : 'running'
      }
    } else if (crashLog) [state, log] = ['crash', crashLog.message ?? `Error: ${chart} failed to start: the simulated chart fault`]
    else if (pod.spec.hostNetwork) state = elapsedS < HOST_NETWORK_START ? 'creating' : 'running'
    else {
      const netS = k.netReadyAt ? ((Date.now() - Math.max(k.netReadyAt, st.since)) * clock.speed) / 1000 : -1
      state = netS < POD_START ? 'creating' : 'running'
    }
    if (state === 'running' && ['Never', 'OnFailure'].includes(pod.spec.restartPolicy)) state = 'done'
    if (state === 'running' && pod.metadata.labels?.['k8s-app'] === 'kube-dns' && rules.corednsDown(n.name)) {
      // coredns: it runs and its readiness probe fails (kubelet prober's Unhealthy event)
      state = 'notready'
      st.event = { reason: 'Unhealthy', message: COREDNS_PROBE, fieldPath: 'spec.containers{coredns}' }
    }
    st.ready = state === 'running'
    st.ip ??= pod.spec.hostNetwork ? hostIP : this.podIp(node)
    const ready = st.ready ? 'True' : 'False'
    const names = (pod.spec.containers ?? []).map((c) => c.name).join(' ')
    const notReady = st.ready
      ? {}
      : {
          reason: state === 'done' ? 'PodCompleted' : 'ContainersNotReady',
          message: state === 'done' ? undefined : `containers with unready status: [${names}]`,
        }
    const t = isoNow()
    const phase = state === 'done' ? 'Succeeded' : ['creating', 'pull'].includes(state) ? 'Pending' : 'Running'
    const started = st.startedAt ?? (phase === 'Running' ? (st.startedAt = t) : null)
    return {
      phase,
      hostIP,
      hostIPs: [{ ip: hostIP }],
      ...(state !== 'pull' && state !== 'creating' ? { podIP: st.ip, podIPs: [{ ip: st.ip }] } : {}),
      startTime: pod.status?.startTime ?? t,
      conditions: [
        { type: 'PodReadyToStartContainers', status: state === 'creating' || state === 'pull' ? 'False' : 'True', lastTransitionTime: t },
        { type: 'Initialized', status: 'True', lastTransitionTime: t },
        { type: 'Ready', status: ready, lastTransitionTime: t, ...notReady },
        { type: 'ContainersReady', status: ready, lastTransitionTime: t, ...notReady },
        { type: 'PodScheduled', status: 'True', lastTransitionTime: pod.status?.startTime ?? t },
      ],
      containerStatuses: (pod.spec.containers ?? []).map((c, i) => {
        const prev = pod.status?.containerStatuses?.[i]
        const base = {
          name: c.name,
          image: c.image,
          imageID: '',
          restartCount: prev?.restartCount ?? 0,
          started: state === 'running' || state === 'notready',
          ready: st.ready,
        }
        if (state === 'running' || state === 'notready')
          return { ...base, containerID: `containerd://${uid64(pod, i, base.restartCount)}`, state: { running: { startedAt: started } } }
        if (state === 'done')
          return {
            ...base,
            containerID: `containerd://${uid64(pod, i, base.restartCount)}`,
            state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: started ?? t, finishedAt: t } },
          }
        if (state === 'crash')
          return {
            ...base,
            restartCount: base.restartCount + (prev?.state?.waiting?.reason === 'CrashLoopBackOff' ? 0 : 1),
            lastState: {
              terminated: {
                exitCode: 1,
                reason: 'Error',
                ...(log ? { message: log } : {}),
                startedAt: t,
                finishedAt: t,
                containerID: `containerd://${uid64(pod, i, base.restartCount)}`,
              },
            },
            state: {
              waiting: {
                reason: 'CrashLoopBackOff',
                message: `back-off 5m0s restarting failed container=${c.name} pod=${pod.metadata.name}_${pod.metadata.namespace}`,
              },
            },
          }
        if (state === 'pull' && c.name === pull.container)
          return { ...base, state: { waiting: { reason: 'ImagePullBackOff', message: pull.message } } }
        return { ...base, state: { waiting: { reason: 'ContainerCreating' } } }
      }),
    }
  }

  /** a pod address from the node's spec.podCIDR (what the CNI's IPAM would hand out) */
  podIp(node) {
    const cidr = node.spec?.podCIDR
    if (!cidr) return this.kube.address
    this.next ??= new Map()
    const i = (this.next.get(cidr) ?? 1) + 1
    this.next.set(cidr, i)
    const [a, b, c] = cidr.split('/')[0].split('.')
    return `${a}.${b}.${c}.${i % 254}`
  }
}

/** a CertificateSigningRequest for one of the kubelet's certificates (client-go util/certificate/csr RequestCertificate) */
const postCsr = (client, generateName, csr, signerName, usage) =>
  client.call('POST', '/apis/certificates.k8s.io/v1/certificatesigningrequests', {
    apiVersion: 'certificates.k8s.io/v1',
    kind: 'CertificateSigningRequest',
    metadata: { generateName },
    spec: { request: Buffer.from(csr).toString('base64'), signerName, usages: ['digital signature', usage] },
  })

const idOf = (text) => createHash('sha256').update(text).digest('hex').slice(0, 32)

/** a container's ID: per pod, container and attempt (a restarted container is another container) */
const uid64 = (pod, i, attempt = 0) => createHash('sha256').update(`${pod.metadata.uid}/${i}/${attempt}`).digest('hex')
