// cluster.HealthCheck: the default checks talosctl health runs on the server (cmd/talosctl/cmd/talos/health.go,
// pkg/cluster/check/default.go), evaluated on simulated state: each check's progress line
// ("waiting for …: OK") goes to `emit`; resolves with null once all pass (or the client went away),
// or with the RpcError the stream ends with.
import { multierror, rpc } from './errors.js'
import { CONTROL_PLANE_PODS } from '../health-faults.js'
import { EPHEMERAL_MINIMUM, MEMORY_MINIMUM, ephemeralVolume, humanizeIBytes, memInfo } from './hardware.js'

const MiB = 1024 ** 2

/**
 * nodes.go AllNodesMemorySizes: each node's MemTotal (the Memory API) against minimal.Memory of its
 * type; each short node one error
 */
function memoryErrors(cps, workers) {
  const errs = [...cps.map((n) => [n, MEMORY_MINIMUM.controlplane]), ...workers.map((n) => [n, MEMORY_MINIMUM.worker])]
    .map(([n, minimum]) => [n, minimum, memInfo(n).memtotal * 1024])
    .filter(([, minimum, total]) => total < minimum)
    .map(
      ([n, minimum, total]) =>
        `node ${JSON.stringify(n.ip)} does not meet memory requirements: expected at least ${Math.floor(minimum / MiB)} MiB, actual ${Math.floor(total / MiB)} MiB`,
    )
  return errs.length ? multierror(errs) : null
}

/** nodes.go AllNodesDiskSizes: each node's VolumeStatus EPHEMERAL (nodes in address order) against the smallest EPHEMERAL */
function diskErrors(nodes) {
  const errs = []
  for (const n of [...nodes].sort((a, b) => a.ip.localeCompare(b.ip))) {
    const v = ephemeralVolume(n)
    if (!v)
      errs.push(
        `error getting volume status for node ${JSON.stringify(n.ip)}: rpc error: code = NotFound desc = resource VolumeStatuses.block.talos.dev(runtime/EPHEMERAL@undefined) doesn't exist`,
      )
    else if (v.size < EPHEMERAL_MINIMUM)
      errs.push(
        `ephemeral partition ${JSON.stringify(v.location)} for node ${JSON.stringify(n.ip)} is too small, expected at least ${humanizeIBytes(EPHEMERAL_MINIMUM)}, actual ${humanizeIBytes(v.size)}`,
      )
  }
  return errs.length ? multierror(errs) : null
}

export async function healthCheck(sim, endpoint, body, { emit = () => {}, signal } = {}) {
  if (endpoint.role !== 'controlplane') {
    return sim.talosMinor >= 13
      ? rpc('Unimplemented', 'cluster health check is only available on control plane nodes')
      : rpc('Unknown', 'error getting kubernetes client: kubeconfig is only available on control plane nodes')
  }
  const byIp = (ips) => ips.map((ip) => sim.lookup(ip)).filter(Boolean)
  let cps = body.controlPlaneNodes?.length ? byIp(body.controlPlaneNodes) : null
  let workers = body.workerNodes?.length ? byIp(body.workerNodes) : null
  if (!cps) {
    const members = sim.allNodes().filter((n) => n.configured && n.installed && ['booting', 'running'].includes(n.stage))
    cps = members.filter((n) => n.role === 'controlplane')
    workers = members.filter((n) => n.role === 'worker')
    emit(`discovered nodes: [${members.map((n) => `"${n.ip}"`).join(' ')}]`)
  }
  workers ??= []
  const all = [...cps, ...workers]
  const v13 = sim.talosMinor >= 13
  const svcErr = (nodes, id) => {
    const errs = nodes
      .map((n) => {
        const s = n.services.get(id)
        if (s?.state === 'Running' && s.healthy) return null
        const last = s?.events.at(-1)?.msg ?? ''
        return `${n.ip}: service "${id}" not in expected state "Running": current state [${s?.state ?? 'Unknown'}] ${last}`
      })
      .filter(Boolean)
    return errs.length ? multierror(errs) : null
  }
  const checks = [
    ['etcd to be healthy', () => svcErr(cps, 'etcd')],
    ['etcd members to be consistent across nodes', () => null],
    ['etcd members to be control plane nodes', () => null],
    [
      'apid to be ready',
      () => {
        const errs = all
          .filter((n) => sim.listeners.modeOf(n) !== 'secure')
          .map((n) => `${n.ip}: rpc error: code = Unavailable desc = connection refused`)
        return errs.length ? multierror(errs) : null
      },
    ],
    ['all nodes memory sizes', () => memoryErrors(cps, workers)],
    ['all nodes disk sizes', () => diskErrors(all)],
    [
      'no diagnostics',
      // diagnostics.go: the first node with a Diagnostic (fault kubelet-serving-csr: kubelet-csr)
      () => {
        const n = all.find((x) => sim.kubeletCsrPending?.(x))
        return n ? `active diagnostic on node ${n.ip}: kubelet server certificate rotation is enabled, but CSR is not approved` : null
      },
    ],
    ['kubelet to be healthy', () => svcErr(cps, 'kubelet')],
    [
      'all nodes to finish boot sequence',
      () => {
        const notRunning = all.filter((n) => n.stage !== 'running')
        if (!notRunning.length) return null
        const groups = new Map()
        for (const n of notRunning) groups.set(n.stage, [...(groups.get(n.stage) ?? []), n.ip])
        return `nodes are not running: ${[...groups].map(([s, ips]) => `${s}: [${ips.join(' ')}]`).join(', ')}`
      },
    ],
    [
      'all k8s nodes to report',
      () => {
        const missing = all.filter((n) => !n.registered).map((n) => n.ip)
        return missing.length ? `can't find expected node with IPs [${missing.map((i) => `"${i}"`).join(' ')}]` : null
      },
    ],
    [
      'all control plane static pods to be running',
      // kubernetes.go K8sControlPlaneStaticPods: a StaticPodStatus per component, present (a crash-looping
      // or never-started pod is still listed by the kubelet)
      () => {
        const n = cps.find((x) => !x.apiServerUp)
        return n
          ? `missing static pods on node ${n.ip}: [${['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'].map((p) => `kube-system/${p}-${n.name}`).join(' ')}]`
          : null
      },
    ],
    [
      'all control plane components to be ready',
      () => {
        // K8sFullControlPlaneAssertion: Ready mirror pods, one per control plane, for each component
        for (const c of CONTROL_PLANE_PODS) {
          const ready = cps.filter((n) => n.apiServerUp && n.registered && !sim.health?.staticPod(n.name, c)).length
          if (ready !== cps.length) return `expected number of ready pods for ${c} to be ${cps.length}, got ${ready}`
        }
        return null
      },
    ],
    [
      'all k8s nodes to report ready',
      () => {
        if (v13) return 'SKIP'
        const nr = all.filter((n) => !sim.kubeNodeReady(n.name)).map((n) => n.name)
        return nr.length ? `some nodes are not ready: [${nr.join(' ')}]` : null
      },
    ],
    ['kube-proxy to report ready', () => 'SKIP'],
    [
      'coredns to report ready',
      () => {
        if (v13) return 'SKIP'
        return all.some((n) => sim.kubeNodeReady(n.name)) && !sim.health?.corednsDown()
          ? null
          : 'some pods are not ready: [kube-system/coredns]'
      },
    ],
    ['all k8s nodes to report schedulable', () => null],
  ]
  const deadline = Date.now() + (body.waitTimeoutMs ?? 20 * 60e3)
  const poll = Math.max(20, sim.clock.realMs(5))
  for (const [desc, fn] of checks) {
    let last = null
    emit(`waiting for ${desc}: ...`)
    for (;;) {
      if (signal?.aborted || sim.stopped) return null
      const r = fn()
      const text = r === null ? 'OK' : r
      if (text !== last) {
        emit(`waiting for ${desc}: ${text}`)
        last = text
      }
      if (r === null || r === 'SKIP') break
      if (Date.now() > deadline) return rpc('DeadlineExceeded', 'context deadline exceeded')
      await new Promise((resolve) => setTimeout(resolve, poll))
    }
  }
  return null
}
