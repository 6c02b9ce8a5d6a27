// A Deployment's ReplicaSet, as the deployment controller keeps it (pkg/controller/deployment/
// sync.go getNewReplicaSet): named <deployment>-<pod-template-hash>, controlled by the Deployment,
// its template the Deployment's plus the pod-template-hash label. helm's --wait (pkg/kube/ready.go)
// finds it through client-go's deploymentutil.GetNewReplicaSet (ReplicaSets listed by the
// Deployment's selector, controlled by its uid, template equal ignoring the hash) and reads the
// ready count from the ReplicaSet, not the Deployment: without one a Deployment never counts
// as ready. Older ReplicaSets of the Deployment are scaled to 0, as a finished rollout leaves them.
// Known difference: the pods stay owned by the Deployment (controllers.js), not by the ReplicaSet.
import { clone, deepEqual } from './util.js'

/** Create or update `d`'s ReplicaSet for `hash`; `pods` are the Deployment's current pods. */
export function syncReplicaSet({ store, def, d, hash, pods, ready }) {
  const name = `${d.metadata.name}-${hash}`
  const replicas = d.spec?.replicas ?? 1
  const ns = d.metadata.namespace
  const owned = (rs) => (rs.metadata.ownerReferences || []).some((r) => r.uid === d.metadata.uid && r.controller)
  for (const old of store.list(def, ns, { raw: true })) {
    if (old.metadata.name === name || !owned(old) || (old.spec?.replicas ?? 0) === 0) continue
    try {
      store.update(
        def,
        {
          ...clone(old),
          spec: { ...old.spec, replicas: 0 },
          status: { replicas: 0, observedGeneration: (old.metadata.generation || 1) + 1 },
        },
        { checkVersion: false },
      )
    } catch {
      /* gone */
    }
  }
  const tpl = clone(d.spec?.template || {})
  tpl.metadata = { ...(tpl.metadata || {}), labels: { ...(tpl.metadata?.labels || {}), 'pod-template-hash': hash } }
  const spec = {
    replicas,
    selector: { ...clone(d.spec?.selector || {}), matchLabels: { ...(d.spec?.selector?.matchLabels || {}), 'pod-template-hash': hash } },
    template: tpl,
  }
  const current = store.get(def, ns, name)
  if (!current) {
    try {
      store.create(def, {
        apiVersion: 'apps/v1',
        kind: 'ReplicaSet',
        metadata: {
          name,
          namespace: ns,
          labels: { ...tpl.metadata.labels },
          annotations: {
            'deployment.kubernetes.io/desired-replicas': String(replicas),
            'deployment.kubernetes.io/max-replicas': String(replicas),
            'deployment.kubernetes.io/revision': '1',
          },
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              name: d.metadata.name,
              uid: d.metadata.uid,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec,
      })
    } catch {
      return
    }
  }
  const rs = store.get(def, ns, name)
  if (!rs) return
  let next = rs
  if (!deepEqual(rs.spec, spec)) next = store.update(def, { ...rs, spec }, { checkVersion: false })
  const status = { replicas: pods.length, fullyLabeledReplicas: pods.length, observedGeneration: next.metadata.generation || 1 }
  if (ready) {
    status.readyReplicas = ready
    status.availableReplicas = ready
  }
  if (!deepEqual(next.status, status)) store.update(def, { ...next, status }, { checkVersion: false })
}
