// The simulated Kubernetes API (sim/ARCHITECTURE.md "Kubernetes side").
//
// createKube({ clock, kubernetesVersion, timings, faults, record }) -> kube
//   clock   { now(): Date /* simulated time */, after(simSeconds, fn): () => void /* cancel */ }
//           (sim/clock.js provides it; createRealtimeClock below is the same shape for tests)
//   timings { cni: simulated seconds from a CNI pod's creation to Ready (default 20) }
//   faults  { has(nodeName | null, kind): boolean, message(kind): string | undefined,
//             reason?(kind): string | undefined }
//           kinds asked: has(node, 'cni') per node; has(null, 'flux') for the cluster-wide
//           Flux fault (the root and every other Kustomization fail with message('flux'),
//           reason reason?.('flux') or BuildFailed). Both are re-asked every 60 simulated
//           seconds, so a cleared fault heals.
//   flux    { repository: [{kind, name, namespace?, parent?, wait?, decryption?, fail?}], ageKey?,
//             git?: { hostKeyScan: 'ok'|'refused', deployKey: 'accepted'|'refused' } (GET /sim/v1/git) }:
//           what the Git repository's root applies (scenario `flux`, sim/README.md)
//   record  (callRecord) => void: writes (POST/PUT/PATCH/DELETE) are recorded with
//           tool from the User-Agent and call "kube"; POST /sim/v1/calls appends its body.
//
// kube.handle(req, res)      one already-authenticated request (node:http(s) req/res)
// kube.bootstrap({coreDNS})  etcd is up: namespaces, coredns (unless coreDNS: false); the API answers from now on
// kube.apiUp / setApiUp(b)   before bootstrap (or when set false) health checks fail, the rest 503s
// kube.registerNode({ name, ip, role, kubeletVersion, osImage?, bootId? })   kubelet started: Node NotReady;
//                            an existing Node takes the new boot ID (status.nodeInfo.bootID);
//                            a control plane applies Talos's manifests (flannel, kube-proxy) per its config
// network   optional { of(nodeName) -> { cni, proxy, kubePrism: { enabled, port } } | undefined }: what
//           a node's machine config says (sim/cluster.js); without it no Talos manifests, and every
//           CNI agent reaches the API server
//                            staticPods ([{ id, image, pod }], sim/talos/k8s.js): the mirror pods a control plane's kubelet creates
// kube.replaceMirrorPod(name, staticPod)   a changed static pod: its mirror pod deleted and created again
// kube.setKubeletVersion(name, v)           the kubelet restarted at another version: the Node's nodeInfo.kubeletVersion
// kube.removeNode(name)      the Node and its pods go (kubectl delete node)
// kube.cordon(name) / kube.uncordon(name)   Talos's NodeApplyController (ApplyCordoned): cordons
//                            with the talos.dev/cordoned annotation, uncordons only a node it cordoned
// kube.drain(name, { blocked }) -> { evicted, blocked: [{ pod, pdb }] }   Talos's Drain: evicts the
//                            node's controller-owned pods (not mirror or DaemonSet pods); an eviction
//                            a PodDisruptionBudget refuses (429) stays. `blocked` first puts a
//                            budget-guarded pod there (the drain-blocked fault)
// kube.kubeletStopped(name, graceSeconds)   reset: the kubelet stopped; Ready=Unknown after the
//                            node-monitor grace period; the Node object stays
// kube.nodeLost(name)        kubelet stopped (reboot): Ready=Unknown until registerNode(name) again,
//                            then NotReady until the node's CNI pod has restarted
// kube.nodeReady(name)       the Node's Ready condition is True
// kube.stop()                cancel every controller timer
// (historyLimit: how many writes watches can resume across; tests shrink it to see 410s)
import { parseAllDocuments } from 'yaml'
import http from 'node:http'
import https from 'node:https'
import { createControllers, CNI_ANNOTATION } from './controllers.js'
import { createHandler, healthText } from './handler.js'
import { createRegistry } from './resources.js'
import { createStore } from './store.js'
import { evict } from './disruption.js'
import { randomHex, randomSuffix } from './util.js'

export { CNI_ANNOTATION }

/** Talos's annotation on a node it cordoned (pkg/machinery/constants AnnotationCordonedKey) */
export const CORDONED = 'talos.dev/cordoned'
const UNSCHEDULABLE_TAINT = 'node.kubernetes.io/unschedulable'

export const NOT_READY_MESSAGE =
  'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized'

// Simulated time running `speed` times faster than the wall clock.
export function createRealtimeClock({ speed = 1, start = new Date() } = {}) {
  const t0 = Date.now()
  return {
    speed,
    now: () => new Date(start.getTime() + (Date.now() - t0) * speed),
    after(simSeconds, fn) {
      const t = setTimeout(fn, Math.max(0, (simSeconds * 1000) / speed))
      return () => clearTimeout(t)
    },
  }
}

export function createKube({ clock, kubernetesVersion = 'v1.35.0', timings = {}, faults, record, historyLimit, network, flux } = {}) {
  if (!clock) clock = createRealtimeClock()
  const registry = createRegistry()
  const store = createStore({ clock, historyLimit })
  const controllers = createControllers({
    store,
    registry,
    clock,
    timings: { cni: 20, ...timings },
    faults,
    network,
    flux,
    record,
    isLost: (name) => lost.has(name),
  })
  let up = false
  const lost = new Set() // nodes whose kubelet stopped
  const stopped = new Map() // node -> cancel: kubelet stopped by a reset, Unknown after the grace period
  const def = (g, v, p) => registry.get(g, v, p)
  const NODES = def('', 'v1', 'nodes')

  // Custom resource definitions served by the API once created.
  store.onChange((d, type, obj) => {
    if (d.kind !== 'CustomResourceDefinition' || type === 'DELETED') return
    const names = obj.spec?.names || {}
    for (const v of obj.spec?.versions || []) {
      if (v.served === false || !names.plural || !names.kind) continue
      registry.register({
        group: obj.spec.group,
        version: v.name,
        plural: names.plural,
        kind: names.kind,
        namespaced: obj.spec.scope !== 'Cluster',
        shortNames: names.shortNames || [],
        categories: names.categories || [],
        singular: names.singular,
        status: Boolean(v.subresources?.status),
        hasGeneration: true,
      })
    }
  })

  const handle = createHandler({
    registry,
    store,
    clock,
    kubernetesVersion,
    record,
    isUp: () => up,
    onDelete: (d, obj) => controllers.gc(d, obj),
    git: flux?.git,
  })

  function ensure(g, v, p, obj) {
    const d = def(g, v, p)
    if (!store.get(d, obj.metadata.namespace, obj.metadata.name)) store.create(d, obj)
  }

  function bootstrap({ coreDNS = true } = {}) {
    if (up) return
    up = true
    for (const name of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
      ensure('', 'v1', 'namespaces', {
        metadata: { name, labels: { 'kubernetes.io/metadata.name': name } },
        spec: { finalizers: ['kubernetes'] },
        status: { phase: 'Active' },
      })
    }
    ensure('', 'v1', 'services', {
      metadata: { name: 'kubernetes', namespace: 'default', labels: { component: 'apiserver', provider: 'kubernetes' } },
      spec: {
        type: 'ClusterIP',
        clusterIP: '127.96.0.1',
        clusterIPs: ['127.96.0.1'],
        ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: 6443 }],
        sessionAffinity: 'None',
      },
      status: { loadBalancer: {} },
    })
    // Talos renders CoreDNS only while cluster.coreDNS.disabled is not true (the bootstrap manifests)
    if (coreDNS) {
      ensure('', 'v1', 'services', {
        metadata: { name: 'kube-dns', namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns', 'kubernetes.io/name': 'CoreDNS' } },
        spec: {
          type: 'ClusterIP',
          clusterIP: '127.96.0.10',
          clusterIPs: ['127.96.0.10'],
          selector: { 'k8s-app': 'kube-dns' },
          ports: [
            { name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 },
            { name: 'dns-tcp', port: 53, protocol: 'TCP', targetPort: 53 },
          ],
          sessionAffinity: 'None',
        },
        status: { loadBalancer: {} },
      })
      ensure('apps', 'v1', 'deployments', {
        metadata: { name: 'coredns', namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns', 'kubernetes.io/name': 'CoreDNS' } },
        spec: {
          replicas: 2,
          selector: { matchLabels: { 'k8s-app': 'kube-dns' } },
          revisionHistoryLimit: 10,
          progressDeadlineSeconds: 600,
          strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: '25%' } },
          template: {
            metadata: { labels: { 'k8s-app': 'kube-dns' } },
            spec: {
              priorityClassName: 'system-cluster-critical',
              serviceAccountName: 'coredns',
              dnsPolicy: 'Default',
              tolerations: [
                { key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' },
                { key: 'CriticalAddonsOnly', operator: 'Exists' },
              ],
              containers: [
                {
                  name: 'coredns',
                  image: 'registry.k8s.io/coredns/coredns:v1.12.4',
                  args: ['-conf', '/etc/coredns/Corefile'],
                  ports: [{ name: 'dns', containerPort: 53, protocol: 'UDP' }],
                },
              ],
            },
          },
        },
        status: {},
      })
    }
    controllers.schedule()
  }

  function registerNode({
    name,
    ip,
    role = 'worker',
    kubeletVersion = kubernetesVersion,
    osImage = 'Talos (v1.12.0)',
    bootId,
    staticPods = [],
  }) {
    let existing = store.get(NODES, undefined, name)
    if (existing) {
      // static pods that changed while the kubelet was away: their mirror pods are replaced
      for (const p of staticPods) {
        const have = store.get(def('', 'v1', 'pods'), 'kube-system', `${p.id}-${name}`)
        if (
          have &&
          (have.spec.containers?.[0]?.image !== p.image ||
            have.metadata.annotations?.['talos.dev/config-version'] !== p.pod.metadata.annotations['talos.dev/config-version'])
        )
          replaceMirrorPod(name, p)
      }
      // the kubelet registers the existing Node again (same name) with its boot's ID, and what it runs
      // now (after an upgrade: the OS image and kubelet version; kubelet_node_status.go setNodeStatus)
      const info = existing.status?.nodeInfo ?? {}
      if ((bootId && info.bootID !== bootId) || info.osImage !== osImage || info.kubeletVersion !== kubeletVersion) {
        existing = store.update(
          NODES,
          {
            ...existing,
            status: { ...existing.status, nodeInfo: { ...info, ...(bootId ? { bootID: bootId } : {}), osImage, kubeletVersion } },
          },
          { checkVersion: false },
        )
      }
      const wasStopped = stopped.has(name)
      if (wasStopped) {
        stopped.get(name)()
        stopped.delete(name)
      }
      // The kubelet came back (after nodeLost, or a reset that stopped it): NotReady until its CNI pod has restarted.
      if (lost.delete(name) || wasStopped) {
        setReady(existing, { status: 'False', reason: 'KubeletNotReady', message: NOT_READY_MESSAGE })
        const PODS = def('', 'v1', 'pods')
        for (const p of store.list(PODS)) {
          if (p.spec.nodeName !== name) continue
          store.update(
            PODS,
            {
              ...p,
              status: {
                ...p.status,
                phase: 'Pending',
                conditions: (p.status?.conditions || []).filter((c) => c.type === 'PodScheduled'),
                containerStatuses: (p.status?.containerStatuses || []).map((c) => ({
                  ...c,
                  ready: false,
                  started: false,
                  restartCount: (c.restartCount || 0) + 1,
                  state: { waiting: { reason: 'ContainerCreating' } },
                })),
              },
            },
            { checkVersion: false },
          )
        }
        controllers.schedule()
      }
      return
    }
    const ts = clock
      .now()
      .toISOString()
      .replace(/\.\d{3}Z$/, 'Z')
    const cp = role === 'controlplane' || role === 'control-plane'
    const pressure = (type, reason, message) => ({ type, status: 'False', lastHeartbeatTime: ts, lastTransitionTime: ts, reason, message })
    store.create(NODES, {
      metadata: {
        name,
        labels: {
          'beta.kubernetes.io/arch': 'amd64',
          'beta.kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          'kubernetes.io/hostname': name,
          'kubernetes.io/os': 'linux',
          ...(cp ? { 'node-role.kubernetes.io/control-plane': '' } : {}),
        },
        annotations: { 'node.alpha.kubernetes.io/ttl': '0', 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' },
      },
      spec: {
        taints: [
          ...(cp ? [{ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' }] : []),
          { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' },
        ],
      },
      status: {
        capacity: { cpu: '4', 'ephemeral-storage': '102305Mi', memory: '8124668Ki', pods: '110' },
        allocatable: { cpu: '3950m', 'ephemeral-storage': '96290137Ki', memory: '7760124Ki', pods: '110' },
        conditions: [
          pressure('MemoryPressure', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
          pressure('DiskPressure', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
          pressure('PIDPressure', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
          {
            type: 'Ready',
            status: 'False',
            lastHeartbeatTime: ts,
            lastTransitionTime: ts,
            reason: 'KubeletNotReady',
            message: NOT_READY_MESSAGE,
          },
        ],
        addresses: [
          { type: 'InternalIP', address: ip },
          { type: 'Hostname', address: name },
        ],
        daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
        nodeInfo: {
          machineID: randomHex(32),
          systemUUID: crypto.randomUUID(),
          bootID: bootId ?? crypto.randomUUID(),
          kernelVersion: '6.18.2-talos',
          osImage,
          containerRuntimeVersion: 'containerd://2.1.5',
          kubeletVersion,
          operatingSystem: 'linux',
          architecture: 'amd64',
        },
      },
    })
    if (cp) talosManifests(name)
    // Control planes run the control plane as static pods; the kubelet mirrors them.
    if (cp) {
      for (const c of ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']) {
        const pod = mirrorPod(name, staticPods.find((p) => p.id === c) ?? { id: c, image: `registry.k8s.io/${c}:${kubernetesVersion}` })
        if (
          def('', 'v1', 'namespaces') &&
          store.get(def('', 'v1', 'namespaces'), undefined, 'kube-system') &&
          !store.get(def('', 'v1', 'pods'), 'kube-system', pod.metadata.name)
        )
          store.create(def('', 'v1', 'pods'), pod)
      }
    }
    controllers.schedule()
  }

  /** the mirror pod of a static pod ({ id, image, pod? }: sim/talos/k8s.js staticPods), its labels and annotations the static pod's */
  function mirrorPod(name, { id, image, pod }) {
    const node = store.get(NODES, undefined, name)
    return {
      metadata: {
        name: `${id}-${name}`,
        namespace: 'kube-system',
        labels: pod?.metadata.labels ?? { 'k8s-app': id, tier: 'control-plane' },
        annotations: {
          ...pod?.metadata.annotations,
          'kubernetes.io/config.hash': randomHex(32),
          'kubernetes.io/config.mirror': randomHex(32),
          'kubernetes.io/config.source': 'file',
        },
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: node.metadata.uid, controller: true }],
      },
      spec: {
        nodeName: name,
        hostNetwork: true,
        priorityClassName: 'system-node-critical',
        containers: [{ name: id, image, ...(pod ? { command: pod.spec.containers[0].command } : {}) }],
      },
      status: { phase: 'Pending' },
    }
  }

  /**
   * The kubelet runs a changed static pod: its mirror pod is deleted and created again (kubelet
   * pkg/kubelet/kubelet.go syncPod: a mirror pod whose config hash differs is deleted; mirror_client.go
   * creates the new one), Pending until the container runs again (controllers.js)
   */
  function replaceMirrorPod(name, staticPod) {
    const PODS = def('', 'v1', 'pods')
    if (!store.get(NODES, undefined, name)) return
    const podName = `${staticPod.id}-${name}`
    if (store.get(PODS, 'kube-system', podName)) store.remove(PODS, 'kube-system', podName)
    store.create(PODS, mirrorPod(name, staticPod))
    controllers.schedule()
  }

  /** the kubelet started again at another version: it posts the Node's nodeInfo.kubeletVersion (kubelet_node_status.go) */
  function setKubeletVersion(name, kubeletVersion) {
    const node = store.get(NODES, undefined, name)
    if (!node || node.status?.nodeInfo?.kubeletVersion === kubeletVersion) return
    store.update(
      NODES,
      { ...node, status: { ...node.status, nodeInfo: { ...node.status.nodeInfo, kubeletVersion } } },
      { checkVersion: false },
    )
  }

  // What a control plane's Talos applies from its own config (machined controllers/k8s
  // control_plane.go, k8stemplates flannel.go and kube-proxy.go): Talos's flannel when
  // cluster.network.cni.name is flannel (the default), kube-proxy unless cluster.proxy.disabled.
  // Applied here when its kubelet registers (Talos does it once its API server answers).
  function talosManifests(name) {
    const of = network?.of?.(name)
    if (!of || !store.get(def('', 'v1', 'namespaces'), undefined, 'kube-system')) return
    const daemonSet = (dsName, labels, container, annotations) =>
      ensure('apps', 'v1', 'daemonsets', {
        metadata: { name: dsName, namespace: 'kube-system', labels, ...(annotations ? { annotations } : {}) },
        spec: {
          selector: { matchLabels: labels },
          updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
          template: {
            metadata: { labels, ...(annotations ? { annotations } : {}) },
            spec: {
              hostNetwork: true,
              priorityClassName: 'system-node-critical',
              tolerations: [{ operator: 'Exists' }],
              containers: [container],
            },
          },
        },
        status: {},
      })
    if (of.cni === 'flannel') {
      const env = of.kubePrism.enabled
        ? [
            { name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' },
            { name: 'KUBERNETES_SERVICE_PORT', value: String(of.kubePrism.port) },
          ]
        : []
      daemonSet(
        'kube-flannel',
        { 'k8s-app': 'flannel', tier: 'node' },
        {
          name: 'kube-flannel',
          image: 'ghcr.io/siderolabs/flannel:v0.27.4',
          command: ['/opt/bin/flanneld'],
          args: ['--ip-masq', '--kube-subnet-mgr'],
          env,
        },
        { [CNI_ANNOTATION]: 'true' },
      )
    }
    if (of.proxy)
      daemonSet(
        'kube-proxy',
        { 'k8s-app': 'kube-proxy', tier: 'node' },
        { name: 'kube-proxy', image: `registry.k8s.io/kube-proxy:${kubernetesVersion}`, command: ['/usr/local/bin/kube-proxy'] },
      )
    // the config's inline manifests, each object created when missing (manifest_apply.go applies
    // them the same way: create, and leave what exists); kinds the API does not serve are skipped
    for (const manifest of of.inlineManifests ?? []) {
      for (const doc of parseAllDocuments(manifest.contents)) {
        const o = doc.errors.length === 0 ? doc.toJS() : null
        const d = o?.kind && o.metadata?.name ? registry.byKind(o.apiVersion, o.kind) : undefined
        if (!d) continue
        const namespace = d.namespaced ? (o.metadata.namespace ?? 'default') : undefined
        if (!store.get(d, namespace, o.metadata.name))
          store.create(d, { ...o, metadata: { ...o.metadata, ...(namespace ? { namespace } : {}) }, status: o.status ?? {} })
      }
    }
    controllers.schedule()
  }

  function setReady(node, ready) {
    const ts = clock
      .now()
      .toISOString()
      .replace(/\.\d{3}Z$/, 'Z')
    const conditions = (node.status?.conditions || []).map((c) =>
      c.type === 'Ready'
        ? { ...c, ...ready, lastHeartbeatTime: ts, lastTransitionTime: c.status === ready.status ? c.lastTransitionTime : ts }
        : c,
    )
    const next = { ...node, status: { ...node.status, conditions } }
    if (ready.status !== 'True')
      next.spec = {
        ...node.spec,
        taints: [
          ...(node.spec?.taints || []).filter(
            (t) => t.key !== 'node.kubernetes.io/not-ready' && t.key !== 'node.kubernetes.io/unreachable',
          ),
          { key: ready.status === 'Unknown' ? 'node.kubernetes.io/unreachable' : 'node.kubernetes.io/not-ready', effect: 'NoSchedule' },
        ],
      }
    store.update(NODES, next, { checkVersion: false })
  }

  // The kubelet stopped (reboot, shutdown): the node controller marks the Node Unknown.
  // registerNode(name) again when the kubelet is back.
  function nodeLost(name) {
    const node = store.get(NODES, undefined, name)
    if (!node || lost.has(name)) return
    lost.add(name)
    setReady(node, { status: 'Unknown', reason: 'NodeStatusUnknown', message: 'Kubelet stopped posting node status.' })
  }

  // The kubelet stopped for good (a reset's cleanup): nothing posts the Node's status any more, so the
  // node-lifecycle controller marks it Unknown once node-monitor-grace-period has passed; until then
  // the last status (Ready) stands. The Node object stays.
  function kubeletStopped(name, graceSeconds) {
    if (!store.get(NODES, undefined, name) || stopped.has(name)) return
    stopped.set(
      name,
      clock.after(graceSeconds, () => nodeLost(name)),
    )
  }

  // Talos's NodeApplyController.ApplyCordoned (machined controllers/k8s/node_apply.go): a node it
  // cordons gets the talos.dev/cordoned annotation; an already unschedulable node is left as it is
  function cordon(name) {
    const node = store.get(NODES, undefined, name)
    if (!node || node.spec?.unschedulable) return
    store.update(
      NODES,
      {
        ...node,
        metadata: { ...node.metadata, annotations: { ...node.metadata.annotations, [CORDONED]: 'true' } },
        spec: {
          ...node.spec,
          unschedulable: true,
          taints: [
            ...(node.spec?.taints || []).filter((t) => t.key !== UNSCHEDULABLE_TAINT),
            { key: UNSCHEDULABLE_TAINT, effect: 'NoSchedule' },
          ],
        },
      },
      { checkVersion: false },
    )
  }
  // ...and uncordons only a node that carries its annotation (one cordoned by someone else stays)
  function uncordon(name) {
    const node = store.get(NODES, undefined, name)
    if (!node?.spec?.unschedulable || node.metadata.annotations?.[CORDONED] === undefined) return
    const { [CORDONED]: _, ...annotations } = node.metadata.annotations
    const { unschedulable: __, ...spec } = node.spec
    const taints = (spec.taints || []).filter((t) => t.key !== UNSCHEDULABLE_TAINT)
    if (taints.length) spec.taints = taints
    else delete spec.taints
    store.update(NODES, { ...node, metadata: { ...node.metadata, annotations }, spec }, { checkVersion: false })
    controllers.schedule()
  }

  // Talos's Drain (pkg/kubernetes/kubernetes.go): every pod on the node except mirror pods, pods
  // without a controller and DaemonSet pods is evicted through the eviction API (disruption.js
  // evict, the same as POST .../pods/{name}/eviction): a PodDisruptionBudget that allows no
  // disruption refuses it (429); Talos retries that every 5 s until its DrainTimeout (the caller's
  // time). An allowed eviction deletes the pod.
  function drain(name, { blocked = false } = {}) {
    const PODS = def('', 'v1', 'pods')
    const PDBS = def('policy', 'v1', 'poddisruptionbudgets')
    if (blocked) guardedPod(name)
    const out = { evicted: 0, blocked: [] }
    const remove = (pod) => {
      const gone = store.remove(PODS, pod.metadata.namespace, pod.metadata.name)
      controllers.gc(PODS, gone)
      return gone
    }
    for (const pod of store.list(PODS)) {
      if (pod.spec.nodeName !== name || pod.metadata.annotations?.['kubernetes.io/config.mirror']) continue
      const owner = (pod.metadata.ownerReferences || []).find((r) => r.controller)
      if (!owner || owner.kind === 'DaemonSet') continue
      try {
        evict({ store, PODS, PDBS, remove, now: clock.now() }, pod.metadata.namespace, pod.metadata.name)
        out.evicted++
      } catch (e) {
        // a refusal (or more than one budget: Talos's drain fails on that pod) leaves the pod; gone is gone
        if (e.pdb) out.blocked.push({ pod: `${pod.metadata.namespace}/${pod.metadata.name}`, pdb: e.pdb })
      }
    }
    controllers.schedule()
    return out
  }

  // the drain-blocked fault: one Running pod of a ReplicaSet on the node, covered by a budget with
  // minAvailable 1 (so no eviction is allowed), as an operator's single-replica workload would be
  function guardedPod(name) {
    const PODS = def('', 'v1', 'pods')
    const PDBS = def('policy', 'v1', 'poddisruptionbudgets')
    const labels = { app: 'guarded' }
    const podName = `guarded-${randomSuffix()}`
    const ts = clock
      .now()
      .toISOString()
      .replace(/\.\d{3}Z$/, 'Z')
    store.create(PODS, {
      metadata: {
        name: podName,
        namespace: 'default',
        labels,
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'ReplicaSet',
            name: 'guarded-7d4b9c',
            uid: crypto.randomUUID(),
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: { nodeName: name, containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }] },
      status: {
        phase: 'Running',
        conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: ts }],
        containerStatuses: [{ name: 'app', ready: true, started: true, restartCount: 0, state: { running: { startedAt: ts } } }],
      },
    })
    if (!store.get(PDBS, 'default', 'guarded'))
      store.create(PDBS, {
        metadata: { name: 'guarded', namespace: 'default' },
        spec: { minAvailable: 1, selector: { matchLabels: labels } },
        status: { observedGeneration: 1, disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1 },
      })
  }

  function removeNode(name) {
    lost.delete(name)
    if (stopped.has(name)) {
      stopped.get(name)()
      stopped.delete(name)
    }
    const node = store.get(NODES, undefined, name)
    if (!node) return
    const gone = store.remove(NODES, undefined, name)
    controllers.gc(NODES, gone)
  }

  // a kubelet serving CSR (fault kubelet-serving-csr): Pending until someone approves it
  function servingCsr(nodeName, name) {
    const CSR = def('certificates.k8s.io', 'v1', 'certificatesigningrequests')
    if (store.get(CSR, undefined, name)) return
    store.create(CSR, {
      metadata: { name },
      spec: {
        request: Buffer.from(`-----BEGIN CERTIFICATE REQUEST-----\n${nodeName}\n-----END CERTIFICATE REQUEST-----\n`).toString('base64'),
        signerName: 'kubernetes.io/kubelet-serving',
        username: `system:node:${nodeName}`,
        groups: ['system:nodes', 'system:authenticated'],
        usages: ['digital signature', 'server auth'],
      },
      status: {},
    })
  }
  /**
   * The serving CSRs of a node's kubelet nobody approved, by name: what Talos's kubelet-csr diagnostic
   * lists (signer kubernetes.io/kubelet-serving, username system:node:<node>, no Approved condition)
   */
  function pendingServingCsrs(nodeName) {
    return store
      .list(def('certificates.k8s.io', 'v1', 'certificatesigningrequests'))
      .filter(
        (c) =>
          c.spec?.signerName === 'kubernetes.io/kubelet-serving' &&
          c.spec?.username === `system:node:${nodeName}` &&
          !(c.status?.conditions ?? []).some((x) => x.type === 'Approved'),
      )
      .map((c) => c.metadata.name)
      .sort()
  }
  function csrApproved(name) {
    const csr = store.get(def('certificates.k8s.io', 'v1', 'certificatesigningrequests'), undefined, name)
    return Boolean(csr?.status?.conditions?.some((c) => c.type === 'Approved' && c.status === 'True'))
  }

  // the kubelet reports another address (fault node-ip, sim/health-faults.js): its Node's InternalIP follows
  function setInternalIP(name, ip) {
    const node = store.get(NODES, undefined, name)
    const current = (node?.status?.addresses || []).find((a) => a.type === 'InternalIP')?.address
    if (!node || current === ip) return
    const addresses = [{ type: 'InternalIP', address: ip }, ...(node.status.addresses || []).filter((a) => a.type !== 'InternalIP')]
    store.update(NODES, { ...node, status: { ...node.status, addresses } }, { checkVersion: false })
  }

  function nodeReady(name) {
    const node = store.get(NODES, undefined, name)
    return Boolean(node && (node.status?.conditions || []).some((c) => c.type === 'Ready' && c.status === 'True'))
  }

  return {
    handle,
    bootstrap,
    registerNode,
    replaceMirrorPod,
    setKubeletVersion,
    removeNode,
    kubeletStopped,
    cordon,
    uncordon,
    drain,
    nodeLost,
    nodeReady,
    setInternalIP,
    servingCsr,
    csrApproved,
    pendingServingCsrs,
    /** a fault changed (sim/health-faults.js): the controllers look again */
    reconcile: () => controllers.recheck(),
    get apiUp() {
      return up
    },
    /** the verbose answer of /healthz, /livez or /readyz */
    healthText: async (kind) => healthText(kind, up),
    setApiUp(v) {
      up = Boolean(v)
    },
    stop: () => controllers.stop(),
    // For tests and the simulator core (read-only use, please).
    store,
    registry,
    clock,
    suffix: randomSuffix,
  }
}

// A listener for tests and standalone runs: plain HTTP, or HTTPS when `tls` is given
// ({ key, cert, ca?, requestCert? }). Resolves to { server, url, close() }.
export function createKubeServer({ kube, tls, host = '127.0.0.1', port = 0 }) {
  const handler = (req, res) => {
    kube.handle(req, res)
  }
  const server = tls
    ? https.createServer(
        { key: tls.key, cert: tls.cert, ca: tls.ca, requestCert: Boolean(tls.requestCert), rejectUnauthorized: Boolean(tls.requestCert) },
        handler,
      )
    : http.createServer(handler)
  server.keepAliveTimeout = 60_000
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      const addr = server.address()
      resolve({
        server,
        url: `${tls ? 'https' : 'http'}://${host}:${addr.port}`,
        close: () =>
          new Promise((r) => {
            server.closeAllConnections?.()
            server.close(() => r())
          }),
      })
    })
  })
}
