// The faults that make a cluster fail `talosctl health` after the nodes run (issue 30), in one place
// so another Kubernetes model (SIM_KUBE=real) can port them: each rule is a plain function of the
// scenario's faults, asked by the parts that act on it (sim/listeners.js, sim/cluster.js,
// sim/kube/controllers.js, sim/talos/methods.js, sim/talos/health.js). sim/README.md "Faults"
// describes each rule and the Talos / Kubernetes source it follows.
import { createHash } from 'node:crypto'

/** Talos's control plane static pods (internal/app/machined/pkg/controllers/k8s/control_plane_static_pod.go) */
export const CONTROL_PLANE_PODS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']

/** the kubelet's waiting message of a container whose image pull failed (ImagePullBackOff), the registry's error after it */
export const pullBackOff = (image, err) => `Back-off pulling image "${image}": ErrImagePull: ${err}`

/** what containerd answers for an image the registry does not have */
export const imageNotFound = (image) =>
  `failed to pull and unpack image "${image}": failed to resolve reference "${image}": ${image}: not found`

/** the ID of a static pod's StaticPodStatus and the name of its mirror pod: `<component>-<node name>` */
export const staticPodName = (component, node) => `${component}-${node}`

/**
 * faults: the simulator's fault list (sim/faults.js createFaults); controlPlanes(): the names of the
 * configured control planes (a leader-elected component is down only when it is down on all of them).
 */
export function createHealthFaults(
  faults,
  controlPlanes = () => [],
  kubernetesVersion = 'v1.35.0',
  imageOf = (node, component) => `registry.k8s.io/${component}:${kubernetesVersion}`,
) {
  const first = (node, kind, pick = () => true) => faults.find(node, { kind }).find(pick) ?? null

  /** `image-pull`: the registry's answer for this image (pods using it stay ImagePullBackOff), or null */
  function imagePull(image) {
    const f = faults.find(null, { kind: 'image-pull' }).find((x) => x.image === image || String(image).startsWith(`${x.image}:`))
    if (!f) return null
    return f.message ?? imageNotFound(image)
  }

  /**
   * This component's static pod does not run on this node: a `static-pod` fault ({ restarts, message }),
   * or an `image-pull` fault on its image (registry.k8s.io/<component>:<version>: it never starts)
   */
  function staticPod(node, component, image = imageOf(node, component)) {
    // with `image`: only while the pod runs that image (the version a config moved it to: upgrade-k8s)
    const f = first(node, 'static-pod', (x) => x.pod === component && (x.image == null || x.image === image))
    if (f) return { restarts: f.restarts === true, message: f.message }
    const pull = imagePull(image)
    return pull ? { restarts: false, message: pullBackOff(image, pull) } : null
  }

  /** a leader-elected component (kube-controller-manager, kube-scheduler) runs nowhere */
  const downEverywhere = (component) => {
    const cps = controlPlanes()
    return cps.length > 0 && cps.every((cp) => staticPod(cp, component) !== null)
  }

  /**
   * The pod status the kubelet reports for a faulted static pod (its StaticPodStatus and its mirror
   * pod): never started, it waits pulling its image (ImagePullBackOff, the registry's text); with
   * `restarts`, it runs and exits, CrashLoopBackOff with `message` as its last termination message.
   */
  function staticPodStatus(node, component, image) {
    const f = staticPod(node, component, image)
    if (!f) return null
    const container = (state) => ({
      name: component,
      image,
      imageID: '',
      ready: false,
      started: false,
      restartCount: f.restarts ? 7 : 0,
      ...state,
    })
    const unready = [
      { type: 'Initialized', status: 'True' },
      { type: 'Ready', status: 'False', reason: 'ContainersNotReady', message: `containers with unready status: [${component}]` },
      { type: 'ContainersReady', status: 'False', reason: 'ContainersNotReady', message: `containers with unready status: [${component}]` },
      { type: 'PodScheduled', status: 'True' },
    ]
    if (f.restarts) {
      const message = f.message ?? `E0101 00:00:00.000000       1 run.go:72] "command failed" err="${component}: exit status 1"`
      return {
        phase: 'Running',
        conditions: unready,
        containerStatuses: [
          container({
            state: {
              waiting: {
                reason: 'CrashLoopBackOff',
                message: `back-off 5m0s restarting failed container=${component} pod=${staticPodName(component, node)}_kube-system`,
              },
            },
            lastState: { terminated: { exitCode: 1, reason: 'Error', message } },
          }),
        ],
      }
    }
    const message = f.message ?? pullBackOff(image, imageNotFound(image))
    return {
      phase: 'Pending',
      conditions: unready,
      containerStatuses: [container({ state: { waiting: { reason: 'ImagePullBackOff', message } } })],
    }
  }

  return {
    staticPod,
    staticPodStatus,
    /** this control plane's kube-apiserver does not run: its :6443 stays closed */
    apiServerDown: (node) => staticPod(node, 'kube-apiserver') !== null,
    /** no kube-controller-manager runs: kubelet CSRs are neither approved nor signed, no Node registers, no controller runs */
    controllerManagerDown: () => downEverywhere('kube-controller-manager'),
    /** no kube-scheduler runs: pods are never bound (they stay Pending without a FailedScheduling event) */
    schedulerDown: () => downEverywhere('kube-scheduler'),
    imagePull,
    /** `coredns`: CoreDNS's pods run and never pass their readiness probe */
    corednsDown: () => first(null, 'coredns') !== null,
    /** `kubelet-serving-csr`: this node's kubelet serving CSR stays Pending */
    servingCsrPending: (node) => first(node, 'kubelet-serving-csr') !== null,
    /** `node-ip`: the address the node's kubelet registers as its InternalIP instead of its own, or null */
    nodeIp: (node) => first(node, 'node-ip')?.address ?? null,
  }
}

/** The CoreDNS readiness probe's failure (kubelet prober: `Readiness probe failed: …`). */
export const COREDNS_PROBE = 'Readiness probe failed: HTTP probe failed with statuscode: 503'

/** the name of a node's kubelet serving CSR (stable for the node) */
export const servingCsrName = (node) => `csr-${createHash('sha256').update(node).digest('hex').slice(0, 5)}`

/**
 * Talos's kubelet-csr diagnostic (controllers/runtime/internal/diagnostics/kubelet_csr_not_approved.go):
 * the kubelet API's TLS error, and the node's pending serving CSRs by name
 */
export function kubeletCsrDiagnostic(ip, csrs) {
  return {
    message: 'kubelet server certificate rotation is enabled, but CSR is not approved',
    details: [
      `kubelet API error: Get "https://${ip}:10250/pods/?timeout=30s": remote error: tls: internal error`,
      `pending CSRs: ${csrs.join(', ')}`,
    ],
  }
}
