// Fault matching and `times` counting. A fault is {node, on, kind, times?, ms?, message?}.
// `node` may be null (every node, or cluster-wide such as flux).

export const CALL_KINDS = [
  'probe',
  'apply',
  'get',
  'bootstrap',
  'kubeconfig',
  'etcd',
  'service',
  'reset',
  'reboot',
  'health',
  'upgrade',
  'image',
  'lifecycle',
]

// `on: kube`: the Kubernetes API (6443) of a control plane (or, without a node, every one and the
// VIP): refused per connection, unavailable (503) / timeout / latency per request, `path` narrows
// the request ones to URL paths starting with it
export const KUBE_FAULT_KINDS = ['refused', 'unavailable', 'timeout', 'latency']

// kind -> {on: allowed `on` values, def: default `on`}
export const FAULT_KINDS = {
  refused: { on: ['any', ...CALL_KINDS, 'kube'], def: 'any' },
  timeout: { on: ['any', ...CALL_KINDS, 'kube'], def: 'any' },
  unavailable: { on: ['any', ...CALL_KINDS, 'kube'], def: 'any' },
  unreachable: { on: ['any'], def: 'any' },
  latency: { on: ['any', ...CALL_KINDS, 'kube'], def: 'any' },
  // the node does what the call asks, then its answer never reaches the client (a connection cut, a
  // client deadline): EOF, or no answer at all
  'answer-lost': { on: CALL_KINDS, def: 'apply' },
  'answer-timeout': { on: CALL_KINDS, def: 'apply' },
  'pki-mismatch': { on: ['any'], def: 'any' },
  clock: { on: ['any'], def: 'any' },
  'cert-sans': { on: ['any'], def: 'any' },
  'time-sync': { on: ['any'], def: 'any' },
  'disk-mismatch': { on: ['apply'], def: 'apply' },
  'config-rejected': { on: ['apply'], def: 'apply' },
  // another client holds the node's apply mutex (v1alpha1_server.go applyConfigMu.TryLock)
  'apply-busy': { on: ['apply'], def: 'apply' },
  crash: { on: ['install'], def: 'install' },
  'installer-pull': { on: ['install'], def: 'install' },
  'boot-loop': { on: ['boot'], def: 'boot' },
  // the registry does not hold the installer (`image` names one; else every one): Talos's pulls fail NotFound (sim/talos/upgrade.js)
  'image-missing': { on: ['upgrade'], def: 'upgrade' },
  // the upgraded image does not boot: the bootloader falls back to the old version (a new boot ID, the old version)
  'upgrade-rollback': { on: ['boot'], def: 'boot' },
  // another sequence holds the controller's lock: Upgrade answers its ack and the sequence never starts
  'upgrade-locked': { on: ['upgrade'], def: 'upgrade' },
  'bootstrap-not-ready': { on: ['bootstrap'], def: 'bootstrap' },
  'etcd-join': { on: ['etcd-join'], def: 'etcd-join' },
  'etcd-leave': { on: ['etcd-leave'], def: 'etcd-leave' },
  'etcd-nospace': { on: ['etcd'], def: 'etcd' },
  // the member's process exits whenever it runs (a disk error, corrupt data): Talos restarts it every 5 s
  'etcd-crash': { on: ['etcd-crash'], def: 'etcd-crash' },
  'drain-blocked': { on: ['drain'], def: 'drain' },
  kubelet: { on: ['kubelet'], def: 'kubelet' },
  // `image`: only while the kubelet runs that image (the version upgrade-k8s moves it to: it never comes back)
  'kubelet-crashloop': { on: ['kubelet'], def: 'kubelet' },
  cni: { on: ['cni'], def: 'cni' },
  flux: { on: ['flux'], def: 'flux' },
  // a chart the OCI registry serves whose pods crash-loop (`chart` names it; sim/charts/oci.js)
  chart: { on: ['chart'], def: 'chart' },
  // issue 30's, read through sim/health-faults.js: a control plane static pod (`pod`, `restarts`,
  // `message`, `image`: only while it runs that image, e.g. the version upgrade-k8s moves it to), an
  // image no pull gets (`image`, `message`; ImagePull answers NotFound for it), CoreDNS never ready, a kubelet serving
  // CSR never approved, a Node registered at another InternalIP (`address`)
  'static-pod': { on: ['static-pod'], def: 'static-pod' },
  'image-pull': { on: ['image-pull'], def: 'image-pull' },
  coredns: { on: ['coredns'], def: 'coredns' },
  'kubelet-serving-csr': { on: ['kubelet'], def: 'kubelet' },
  'node-ip': { on: ['kubelet'], def: 'kubelet' },
}

/** the kinds that may name no node (cluster-wide; static-pod: every control plane; image-missing: the registry) */
export const NODELESS_KINDS = ['flux', 'chart', 'static-pod', 'image-pull', 'coredns', 'image-missing']
/** the control plane static pods a static-pod fault names */
export const STATIC_POD_NAMES = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']

export function createFaults(list = []) {
  // each entry keeps its own remaining count; cleared entries are removed
  let faults = list.map((f, index) => ({ ...f, index, used: 0 }))

  const matches = (f, node, on, kind) =>
    (f.node == null || node == null || f.node === node) &&
    (on == null || f.on === on) &&
    (kind == null || f.kind === kind) &&
    (f.times == null || f.used < f.times)

  return {
    list: () => faults.map((f) => ({ ...f })),
    /** active faults for a node (any `on`, or one), without consuming */
    find(node, { on, kind } = {}) {
      return faults.filter((f) => matches(f, node, on, kind))
    },
    has(node, kind) {
      return faults.some((f) => matches(f, node, null, kind))
    },
    message(kind) {
      return faults.find((f) => f.kind === kind && (f.times == null || f.used < f.times))?.message
    },
    /** the first matching fault, counting one occurrence; null when none applies */
    take(node, { on, kind } = {}) {
      const f = faults.find((x) => matches(x, node, on, kind))
      if (!f) return null
      f.used++
      return f
    },
    /** the first `on: kube` fault of one of `kinds` for this request path, counting one occurrence */
    takeKube(node, kinds, path) {
      const f = faults.find(
        (x) =>
          matches(x, node, 'kube', null) &&
          kinds.includes(x.kind) &&
          (path == null || !x.path || path.startsWith(x.path)) &&
          (path != null || !x.path),
      )
      if (!f) return null
      f.used++
      return f
    },
    /** a fault that starts now (already validated) */
    add(f) {
      faults.push({ ...f, index: faults.length, used: 0 })
    },
    clear(node, kind) {
      faults = faults.filter((f) => !(f.kind === kind && (node == null || f.node === node || f.node == null)))
    },
  }
}
