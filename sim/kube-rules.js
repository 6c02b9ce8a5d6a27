// The simulator's rules of the Kubernetes side shared by sim/kube (the model) and the kubelets on the
// real API (sim/kubelet.js, SIM_KUBE=real): which pod is a CNI's, whether a CNI agent reaches the API
// server from its node, and the calls-log record of a write to the API.

export const CNI_ANNOTATION = 'sim.talos-bootstrap.dev/cni'

/** a CNI's pod: the simulator's charts mark theirs; any other mounts the host's /etc/cni/net.d (flannel, cilium, calico) */
export const isCni = (pod) =>
  pod.metadata.annotations?.[CNI_ANNOTATION] === 'true' ||
  (pod.spec?.volumes ?? []).some((v) => String(v.hostPath?.path ?? '').replace(/\/$/, '') === '/etc/cni/net.d')

/**
 * A CNI agent must reach the API server before it can set the node's network up: through
 * KUBERNETES_SERVICE_HOST/PORT when its chart sets them (cilium's k8sServiceHost/Port), else
 * through the in-cluster Service, which only kube-proxy makes reachable. On a Talos node localhost
 * is KubePrism (machine.features.kubePrism). Returns the agent's last log lines (its termination
 * message) when it cannot, null when it can. of: networkOf(the node's config) (undefined: it can);
 * kubeProxy: kube-proxy runs; serviceIp: the `kubernetes` Service's address; time: the log's timestamp.
 */
export function cniApiUnreachable(pod, of, { kubeProxy, serviceIp = '127.96.0.1', time }) {
  if (!of) return null
  const env = Object.fromEntries((pod.spec.containers?.[0]?.env || []).map((e) => [e.name, e.value]))
  const serviceHost = env.KUBERNETES_SERVICE_HOST
  const port = env.KUBERNETES_SERVICE_PORT
  let target
  let dialError
  if (!serviceHost) {
    if (kubeProxy) return null
    target = `https://${serviceIp}:443`
    dialError = `dial tcp ${serviceIp}:443: i/o timeout`
  } else if (['localhost', '127.0.0.1', '::1'].includes(serviceHost)) {
    if (of.kubePrism.enabled && String(of.kubePrism.port) === String(port)) return null
    target = `https://${serviceHost}:${port}`
    dialError = `dial tcp 127.0.0.1:${port}: connect: connection refused`
  } else {
    return null
  }
  const get = `Get \\"${target}/api/v1/namespaces/kube-system\\": ${dialError}`
  return [
    `time="${time}" level=error msg="Unable to contact k8s api-server" error="${get}" ipAddr="${target}" subsys=k8s-client`,
    `time="${time}" level=fatal msg="Unable to initialize Kubernetes subsystem" error="unable to create k8s client: ${get}" subsys=daemon`,
  ].join('\n')
}

/** the calls log's record of one write to the Kubernetes API (sim/ARCHITECTURE.md "Calls log"): tool from the User-Agent */
export function kubeWriteRecord(req, path, time, outcome) {
  return {
    time,
    node: null,
    ip: null,
    tool: String(req.headers['user-agent'] || 'unknown')
      .split('/')[0]
      .toLowerCase(),
    call: 'kube',
    command: `${req.method} ${path}`,
    args: req.headers['kubectl-command'] ? [String(req.headers['kubectl-command'])] : [],
    outcome,
  }
}

/**
 * Replace one condition of a status's list, keeping its place and its lastTransitionTime when its
 * status did not change (and lastHeartbeatTime with `heartbeat`, as a Node's); `now` an RFC 3339 time.
 */
export function setCondition(conditions, c, now, { heartbeat = false } = {}) {
  const list = (conditions || []).filter((x) => x.type !== c.type)
  const old = (conditions || []).find((x) => x.type === c.type)
  const next = { ...c, lastTransitionTime: old && old.status === c.status ? old.lastTransitionTime : now }
  if (heartbeat) next.lastHeartbeatTime = old && old.status === c.status ? old.lastHeartbeatTime : now
  const at = (conditions || []).findIndex((x) => x.type === c.type)
  if (at >= 0) {
    list.splice(at, 0, next)
    return list
  }
  return [...list, next]
}
