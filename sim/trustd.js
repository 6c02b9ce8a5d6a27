// trustd on the control planes, as a worker's apid needs it: a worker asks trustd for its API
// certificate on every boot (it is kept in memory), and apid starts only once one signed it
// (internal/app/machined/pkg/controllers/secrets/api.go generateJoin).
export class Trustd {
  /** ctx = the Simulator: scenario, faults, nodes */
  constructor(ctx) {
    this.ctx = ctx
    this.waiting = new Set() // workers whose apid waits for a certificate
  }

  /** a worker asks trustd on a control plane for its apid certificate */
  request(n) {
    n.wantsCert = true
    this.waiting.add(n)
    this.issue()
  }

  /**
   * The control plane whose trustd a worker can reach, or null. The worker dials the addresses of
   * ControlPlaneEndpoints: the cluster endpoint's host (k8s/static_endpoint.go) and, with discovery,
   * every control plane member. trustd runs from StartAllServices, before etcd; a VIP is up only
   * once etcd is (network/operator/vip.go campaigns through etcd), on a control plane running etcd.
   */
  reachable() {
    const { scenario, faults, nodes } = this.ctx
    const host = new URL(scenario.cluster.endpoint).hostname
    const down = (cp) => faults.find(cp.name, { on: 'any' }).some((f) => f.times == null && ['unreachable', 'timeout'].includes(f.kind))
    const cps = nodes.filter((cp) => cp.role === 'controlplane' && cp.configured && cp.trustdUp && !down(cp))
    const direct = cps.find((cp) => cp.ip === host)
    if (direct) return direct
    if (scenario.cluster.discovery === 'enabled' && cps.length) return cps[0]
    const vip = scenario.cluster.vip
    if (vip && vip.address === host && vip.up === 'after-bootstrap') return cps.find((cp) => cp.etcdHealthy && cp.apiServerUp) ?? null
    return null
  }

  /** signs the certificates of the workers waiting, when a trustd is reachable (on every change) */
  issue() {
    if (!this.waiting.size) return
    for (const w of [...this.waiting]) {
      if (!w.wantsCert) {
        this.waiting.delete(w)
        continue
      }
      if (!this.reachable()) return
      this.waiting.delete(w)
      w.after(0.01, () => w.apiCertIssued())
    }
  }
}
