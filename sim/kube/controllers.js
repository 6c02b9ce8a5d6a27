// Controllers on the simulated clock: DaemonSet and Deployment pods, a scheduler, pod
// start-up, node readiness from the CNI pod, workload status (the apps/v1 status fields as
// kubernetes pkg/controller/deployment and daemon set them), garbage collection, and Flux's
// source/kustomize/helm controllers (their rules: sim/flux-rules.js, shared with the real API's side).
// One reconcile pass walks everything; it is idempotent and writes only what changed,
// so every write (ours included) simply schedules another pass.
import { createHash } from 'node:crypto'
import { admitCreate } from './admission.js'
import { FLUX_KINDS, createFluxRules } from '../flux-rules.js'
import { syncReplicaSet } from './replicasets.js'
import { budgetStatus } from './disruption.js'
import { clone, deepEqual, randomHex, randomSuffix, rfc3339 } from './util.js'
import { CNI_ANNOTATION, cniApiUnreachable, isCni, setCondition as setConditionAt } from '../kube-rules.js'
import { COREDNS_PROBE, pullBackOff } from '../health-faults.js'

export { CNI_ANNOTATION }
// the chart a pod comes from (sim/charts): while faults.chartCrash(chart) gives a message (a
// scenario `chart` fault) its pods crash-loop with it as the container's last log
export const CHART_ANNOTATION = 'sim.talos-bootstrap.dev/chart'
const POD_START = 5 // simulated seconds for an ordinary pod once its node is Ready
const HOST_NETWORK_START = 1
const RECHECK = 60 // how often a faulted CNI pod looks again

// pod-template-hash / controller-revision-hash: 10 chars of the name generator's alphabet.
const SAFE = 'bcdfghjklmnpqrstvwxz2456789'
const templateHash = (tpl) =>
  [
    ...createHash('sha256')
      .update(JSON.stringify(tpl || {}))
      .digest()
      .subarray(0, 10),
  ]
    .map((b) => SAFE[b % SAFE.length])
    .join('')

export function createControllers({ store, registry, clock, timings, faults, network, flux = {}, isLost = () => false }) {
  const R = (g, v, p) => registry.get(g, v, p)
  const NODES = R('', 'v1', 'nodes'),
    PODS = R('', 'v1', 'pods'),
    NS = R('', 'v1', 'namespaces'),
    SA = R('', 'v1', 'serviceaccounts')
  const EVENTS = R('', 'v1', 'events')
  const DS = R('apps', 'v1', 'daemonsets'),
    DEPLOY = R('apps', 'v1', 'deployments'),
    RS = R('apps', 'v1', 'replicasets')
  const JOBS = R('batch', 'v1', 'jobs')
  const PDBS = R('policy', 'v1', 'poddisruptionbudgets'),
    STS = R('apps', 'v1', 'statefulsets')

  // issue 30's faults (sim/health-faults.js), when the simulator core gives them
  const hf = faults?.health
  const faulted = new Set() // uids of pods a health fault holds (looked at again when a fault changes)
  const timers = new Map() // key -> cancel
  let pending = false
  let stopped = false
  const now = () => rfc3339(clock.now())

  function schedule() {
    if (pending || stopped) return
    pending = true
    setImmediate(() => {
      pending = false
      if (!stopped) reconcile()
    })
  }

  function timer(key, simSeconds, fn) {
    if (timers.has(key) || stopped) return
    const cancel = clock.after(simSeconds, () => {
      timers.delete(key)
      if (!stopped) {
        fn()
        schedule()
      }
    })
    timers.set(key, cancel)
  }

  const tryUpdate = (def, obj) => {
    try {
      return store.update(def, obj, { checkVersion: false })
    } catch {
      return null
    }
  }
  const tryCreate = (def, obj) => {
    try {
      return store.create(def, obj)
    } catch {
      return null
    }
  }
  const ownedBy = (o, owner) => (o.metadata.ownerReferences || []).some((r) => r.uid === owner.metadata.uid)
  const cond = (o, type) => (o.status?.conditions || []).find((c) => c.type === type)

  const setCondition = (conditions, c, opts) => setConditionAt(conditions, c, now(), opts)

  function event(obj, reason, message, type = 'Normal', fieldPath, host) {
    if (!EVENTS || !obj.metadata.namespace) return
    const ts = now()
    tryCreate(EVENTS, {
      metadata: { name: `${obj.metadata.name}.${randomHex(16)}`, namespace: obj.metadata.namespace },
      involvedObject: {
        kind: obj.kind,
        namespace: obj.metadata.namespace,
        name: obj.metadata.name,
        uid: obj.metadata.uid,
        apiVersion: obj.apiVersion,
        resourceVersion: obj.metadata.resourceVersion,
        ...(fieldPath ? { fieldPath } : {}),
      },
      reason,
      message,
      source: { component: host ? 'kubelet' : 'default-scheduler', ...(host ? { host } : {}) },
      firstTimestamp: ts,
      lastTimestamp: ts,
      count: 1,
      type,
      eventTime: null,
      reportingComponent: host ? 'kubelet' : 'default-scheduler',
      reportingInstance: host || '',
    })
  }

  // ---- pods -------------------------------------------------------------------------

  function newPod(owner, name, extraLabels, nodeName, pinnedTo) {
    const tpl = owner.spec?.template || {}
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: owner.metadata.namespace,
        labels: { ...(tpl.metadata?.labels || {}), ...extraLabels },
        ...(tpl.metadata?.annotations ? { annotations: { ...tpl.metadata.annotations } } : {}),
        ownerReferences: [
          {
            apiVersion: owner.apiVersion,
            kind: owner.kind,
            name: owner.metadata.name,
            uid: owner.metadata.uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: {
        restartPolicy: 'Always',
        schedulerName: 'default-scheduler',
        dnsPolicy: 'ClusterFirst',
        terminationGracePeriodSeconds: 30,
        ...clone(tpl.spec || {}),
        ...(nodeName ? { nodeName } : {}),
        ...(pinnedTo
          ? {
              affinity: {
                nodeAffinity: {
                  requiredDuringSchedulingIgnoredDuringExecution: {
                    nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [pinnedTo] }] }],
                  },
                },
              },
            }
          : {}),
      },
    }
    if (owner.kind === 'DaemonSet' && owner.metadata.annotations?.[CNI_ANNOTATION] === 'true')
      pod.metadata.annotations = { ...(pod.metadata.annotations || {}), [CNI_ANNOTATION]: 'true' }
    admitCreate(PODS, pod)
    return tryCreate(PODS, pod)
  }

  /** the node a DaemonSet pod is pinned to by its node affinity (matchFields metadata.name) */
  const daemonTarget = (pod) =>
    pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms?.[0]?.matchFields?.find(
      (f) => f.key === 'metadata.name',
    )?.values?.[0]
  const podReady = (pod) => cond(pod, 'Ready')?.status === 'True'
  const nodeIsReady = (node) => cond(node, 'Ready')?.status === 'True'
  let podIp = 0
  const nextPodIp = () => {
    podIp++
    return `127.244.${Math.floor(podIp / 250) % 250}.${(podIp % 250) + 1}`
  }

  function containerStatuses(pod, state, log) {
    return (pod.spec.containers || []).map((c, i) => {
      const prev = pod.status?.containerStatuses?.[i]
      const base = {
        name: c.name,
        image: c.image,
        imageID: '',
        restartCount: prev?.restartCount || 0,
        started: state === 'running',
        ready: state === 'running',
      }
      if (state === 'running') return { ...base, containerID: `containerd://${randomHex(64)}`, state: { running: { startedAt: now() } } }
      if (state === 'crash')
        return {
          ...base,
          restartCount: base.restartCount + 1,
          lastState: {
            terminated: { exitCode: 1, reason: 'Error', ...(log ? { message: log } : {}), startedAt: now(), finishedAt: now() },
          },
          state: {
            waiting: {
              reason: 'CrashLoopBackOff',
              message: `back-off 5m0s restarting failed container=${c.name} pod=${pod.metadata.name}_${pod.metadata.namespace}`,
            },
          },
        }
      return { ...base, state: { waiting: { reason: 'ContainerCreating' } } }
    })
  }

  function bindPod(pod, node) {
    const next = clone(pod)
    next.spec.nodeName = node.metadata.name
    next.status = {
      ...next.status,
      phase: 'Pending',
      hostIP: nodeIp(node),
      hostIPs: [{ ip: nodeIp(node) }],
      startTime: now(),
      conditions: setCondition(next.status?.conditions, { type: 'PodScheduled', status: 'True' }),
      containerStatuses: containerStatuses(next, 'creating'),
    }
    const out = tryUpdate(PODS, next)
    if (out) event(out, 'Scheduled', `Successfully assigned ${pod.metadata.namespace}/${pod.metadata.name} to ${node.metadata.name}`)
    return out
  }

  function startPod(uid) {
    const pod = store.list(PODS, undefined, { raw: true }).find((p) => p.metadata.uid === uid)
    if (!pod || !pod.spec.nodeName) return
    const node = store.get(NODES, undefined, pod.spec.nodeName)
    if (!node) return
    const host = pod.spec.nodeName
    if (healthFault(pod, host)) {
      faulted.add(uid)
      timer(`pod:${uid}`, RECHECK, () => startPod(uid))
      return
    }
    faulted.delete(uid)
    const noApi = isCni(pod) ? apiUnreachable(pod, host) : null
    const chart = pod.metadata.annotations?.[CHART_ANNOTATION]
    const crashLog = chart ? faults?.chartCrash?.(chart) : undefined
    if ((isCni(pod) && (noApi || faults?.has(host, 'cni'))) || crashLog) {
      const next = clone(pod)
      next.status = {
        ...next.status,
        phase: 'Running',
        conditions: conditionsFor(next, false),
        containerStatuses: containerStatuses(next, 'crash', noApi ?? crashLog),
      }
      if (!podReady(pod) && pod.status?.containerStatuses?.[0]?.state?.waiting?.reason !== 'CrashLoopBackOff')
        event(pod, 'BackOff', 'Back-off restarting failed container', 'Warning', undefined, host)
      tryUpdate(PODS, next)
      timer(`pod:${uid}`, RECHECK, () => startPod(uid))
      return
    }
    if (['Never', 'OnFailure'].includes(pod.spec.restartPolicy)) return completePod(pod, node)
    const next = clone(pod)
    const ip = pod.spec.hostNetwork ? nodeIp(node) : pod.status?.podIP || nextPodIp()
    next.status = {
      ...next.status,
      phase: 'Running',
      // the kubelet reports its node's address for every pod it runs, mirror pods too (upgrade-k8s matches on it)
      hostIP: nodeIp(node),
      hostIPs: [{ ip: nodeIp(node) }],
      podIP: ip,
      podIPs: [{ ip }],
      conditions: conditionsFor(next, true),
      containerStatuses: containerStatuses(next, 'running'),
    }
    const out = tryUpdate(PODS, next)
    if (out)
      for (const c of pod.spec.containers || []) {
        event(out, 'Pulled', `Container image "${c.image}" already present on machine`, 'Normal', `spec.containers{${c.name}}`, host)
        event(out, 'Started', `Started container ${c.name}`, 'Normal', `spec.containers{${c.name}}`, host)
      }
  }

  // The kubelet's side of sim/health-faults.js: a control plane static pod that does not run (its
  // mirror pod shows the status the kubelet reports), a pod whose image no pull gets (ImagePullBackOff
  // with the registry's text), CoreDNS failing its readiness probe. True when one holds the pod.
  function healthFault(pod, host) {
    if (!hf) return false
    const next = clone(pod)
    if (pod.metadata.annotations?.['kubernetes.io/config.mirror']) {
      const status = hf.staticPodStatus(host, pod.metadata.labels?.['k8s-app'], pod.spec.containers?.[0]?.image)
      if (!status) return false
      const node = store.get(NODES, undefined, host)
      next.status = { ...next.status, ...(node ? { hostIP: nodeIp(node), hostIPs: [{ ip: nodeIp(node) }] } : {}), ...status }
      if (!deepEqual(pod.status, next.status)) tryUpdate(PODS, next)
      return true
    }
    const image = (pod.spec.containers || []).map((c) => c.image).find((i) => hf.imagePull(i))
    if (image) {
      const message = pullBackOff(image, hf.imagePull(image))
      next.status = {
        ...next.status,
        phase: 'Pending',
        conditions: conditionsFor(next, false),
        containerStatuses: (pod.spec.containers || []).map((c, i) => ({
          ...containerStatuses(next, 'creating')[i],
          ...(c.image === image ? { state: { waiting: { reason: 'ImagePullBackOff', message } } } : {}),
        })),
      }
      if (pod.status?.containerStatuses?.some((c) => c.state?.waiting?.reason === 'ImagePullBackOff') !== true)
        event(pod, 'Failed', `Failed to pull image "${image}": ${hf.imagePull(image)}`, 'Warning', undefined, host)
      tryUpdate(PODS, next)
      return true
    }
    if (hf.corednsDown() && pod.metadata.labels?.['k8s-app'] === 'kube-dns') {
      const running = pod.status?.phase === 'Running' && pod.status.containerStatuses?.every((c) => c.state?.running)
      next.status = {
        ...next.status,
        phase: 'Running',
        podIP: pod.status?.podIP || nextPodIp(),
        conditions: conditionsFor(next, false),
        containerStatuses: running ? pod.status.containerStatuses : containerStatuses(next, 'running').map((c) => ({ ...c, ready: false })),
      }
      if (!running) {
        tryUpdate(PODS, next)
        event(pod, 'Unhealthy', COREDNS_PROBE, 'Warning', 'spec.containers{coredns}', host)
      }
      return true
    }
    return false
  }

  /** a health fault started or ended: the pods it held (or may hold now) start again */
  function recheck() {
    for (const pod of store.list(PODS, undefined, { raw: true })) {
      const uid = pod.metadata.uid
      if (!pod.spec.nodeName || (!faulted.has(uid) && (podReady(pod) ? !healthFaultApplies(pod) : true))) continue
      timers.get(`pod:${uid}`)?.()
      timers.delete(`pod:${uid}`)
      startPod(uid)
    }
    schedule()
  }
  const healthFaultApplies = (pod) =>
    Boolean(
      hf &&
      ((pod.metadata.annotations?.['kubernetes.io/config.mirror'] &&
        hf.staticPod(pod.spec.nodeName, pod.metadata.labels?.['k8s-app'], pod.spec.containers?.[0]?.image)) ||
        (pod.spec.containers || []).some((c) => hf.imagePull(c.image)) ||
        (hf.corednsDown() && pod.metadata.labels?.['k8s-app'] === 'kube-dns')),
    )

  // whether a CNI agent reaches the API server from its node (sim/kube-rules.js); without a node
  // model (sim/kube alone) every agent can
  const apiUnreachable = (pod, host) =>
    cniApiUnreachable(pod, network?.of?.(host), { kubeProxy: !!store.get(DS, 'kube-system', 'kube-proxy'), time: now() })

  // A run-to-completion pod (a Job's): its containers exit 0.
  function completePod(pod, node) {
    const next = clone(pod)
    const ip = pod.spec.hostNetwork ? nodeIp(node) : pod.status?.podIP || nextPodIp()
    let cs = conditionsFor(next, false).map((c) =>
      c.type === 'Ready' || c.type === 'ContainersReady' ? { ...c, reason: 'PodCompleted', message: undefined } : c,
    )
    cs = cs.map((c) => JSON.parse(JSON.stringify(c)))
    const containerStatuses = (pod.spec.containers || []).map((c) => ({
      name: c.name,
      image: c.image,
      imageID: '',
      restartCount: 0,
      started: false,
      ready: false,
      containerID: `containerd://${randomHex(64)}`,
      state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: now(), finishedAt: now() } },
    }))
    next.status = { ...next.status, phase: 'Succeeded', podIP: ip, podIPs: [{ ip }], conditions: cs, containerStatuses }
    tryUpdate(PODS, next)
  }

  function conditionsFor(pod, ready) {
    let cs = pod.status?.conditions || []
    const s = ready ? 'True' : 'False'
    cs = setCondition(cs, { type: 'PodReadyToStartContainers', status: 'True' })
    cs = setCondition(cs, { type: 'Initialized', status: 'True' })
    cs = setCondition(cs, {
      type: 'Ready',
      status: s,
      ...(ready
        ? {}
        : {
            reason: 'ContainersNotReady',
            message: `containers with unready status: [${(pod.spec.containers || []).map((c) => c.name).join(' ')}]`,
          }),
    })
    cs = setCondition(cs, {
      type: 'ContainersReady',
      status: s,
      ...(ready
        ? {}
        : {
            reason: 'ContainersNotReady',
            message: `containers with unready status: [${(pod.spec.containers || []).map((c) => c.name).join(' ')}]`,
          }),
    })
    cs = setCondition(cs, { type: 'PodScheduled', status: 'True' })
    return cs
  }

  const nodeIp = (node) => (node.status?.addresses || []).find((a) => a.type === 'InternalIP')?.address

  const tolerates = (pod, taint) =>
    (pod.spec.tolerations || []).some((t) =>
      t.operator === 'Exists' && !t.key ? true : t.key === taint.key && (!t.effect || t.effect === taint.effect),
    )
  // a cordoned node (spec.unschedulable) takes no new pods (kube-scheduler's NodeUnschedulable plugin)
  const fits = (pod, node) =>
    !node.spec?.unschedulable &&
    (node.spec?.taints || []).every((t) => t.effect === 'PreferNoSchedule' || tolerates(pod, t)) &&
    Object.entries(pod.spec.nodeSelector || {}).every(([k, v]) => node.metadata.labels?.[k] === v)

  function schedulePods(pods, nodes) {
    const placed = new Map() // uid -> node, for pods bound in this pass
    const load = new Map()
    for (const p of pods) if (p.spec.nodeName) load.set(p.spec.nodeName, (load.get(p.spec.nodeName) || 0) + 1)
    for (const pod of pods) {
      if (pod.spec.nodeName || placed.has(pod.metadata.uid)) continue
      // Strict taints first; when nothing fits, any Ready node (the simulated cluster has no
      // way to untaint control planes, and small clusters are all control planes).
      const pinned = daemonTarget(pod)
      let candidates = pinned ? nodes.filter((n) => n.metadata.name === pinned) : nodes.filter((n) => fits(pod, n))
      if (!candidates.length && !pinned)
        candidates = nodes.filter(
          (n) =>
            nodeIsReady(n) &&
            !n.spec?.unschedulable &&
            Object.entries(pod.spec.nodeSelector || {}).every(([k, v]) => n.metadata.labels?.[k] === v),
        )
      candidates.sort((a, b) => (load.get(a.metadata.name) || 0) - (load.get(b.metadata.name) || 0))
      if (candidates[0]) {
        const bound = bindPod(pod, candidates[0])
        if (bound) {
          placed.set(bound.metadata.uid, bound.spec.nodeName)
          load.set(bound.spec.nodeName, (load.get(bound.spec.nodeName) || 0) + 1)
        }
        continue
      }
      if (cond(pod, 'PodScheduled')?.status !== 'False') {
        const next = clone(pod)
        const msg = `0/${nodes.length} nodes are available: ${nodes.length ? `${nodes.length} node(s) had untolerated taint {node.kubernetes.io/not-ready: }` : 'no nodes available to schedule pods'}. preemption: 0/${nodes.length} nodes are available: ${nodes.length} Preemption is not helpful for scheduling.`
        next.status = {
          ...next.status,
          phase: 'Pending',
          conditions: setCondition(next.status?.conditions, {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: msg,
          }),
        }
        tryUpdate(PODS, next)
        event(pod, 'FailedScheduling', msg, 'Warning')
      }
    }
  }

  function startPods(pods, nodes) {
    for (const pod of pods) {
      if (!pod.spec.nodeName || pod.status?.phase !== 'Pending') continue
      const node = nodes.find((n) => n.metadata.name === pod.spec.nodeName)
      if (!node) continue
      const uid = pod.metadata.uid
      if (isCni(pod)) timer(`pod:${uid}`, timings.cni ?? 20, () => startPod(uid))
      else if (pod.spec.hostNetwork) timer(`pod:${uid}`, HOST_NETWORK_START, () => startPod(uid))
      else if (nodeIsReady(node)) timer(`pod:${uid}`, POD_START, () => startPod(uid))
    }
  }

  // ---- workloads --------------------------------------------------------------------

  // The DaemonSet controller adds these tolerations to every daemon pod.
  const DS_TOLERATED = [
    'node.kubernetes.io/not-ready',
    'node.kubernetes.io/unreachable',
    'node.kubernetes.io/disk-pressure',
    'node.kubernetes.io/memory-pressure',
    'node.kubernetes.io/pid-pressure',
    'node.kubernetes.io/unschedulable',
    'node.kubernetes.io/network-unavailable',
  ]
  const nodeSelected = (ds, node) => {
    const tpl = { spec: ds.spec?.template?.spec || {} }
    return (
      Object.entries(tpl.spec.nodeSelector || {}).every(([k, v]) => node.metadata.labels?.[k] === v) &&
      (node.spec?.taints || []).every((t) => t.effect === 'PreferNoSchedule' || DS_TOLERATED.includes(t.key) || tolerates(tpl, t))
    )
  }

  function reconcileDaemonSet(ds, nodes, pods) {
    const gen = String(ds.metadata.generation || 1)
    const wanted = nodes.filter((n) => nodeSelected(ds, n))
    const wantedNames = new Set(wanted.map((n) => n.metadata.name))
    const owned = []
    for (const p of pods) {
      if (!ownedBy(p, ds)) continue
      const stale = p.metadata.labels?.['pod-template-generation'] !== gen
      if (stale || !wantedNames.has(p.spec.nodeName ?? daemonTarget(p))) {
        try {
          store.remove(PODS, p.metadata.namespace, p.metadata.name)
        } catch {
          /* gone */
        }
      } else owned.push(p)
    }
    const covered = new Set(owned.map((p) => p.spec.nodeName ?? daemonTarget(p)))
    for (const n of wanted) {
      if (covered.has(n.metadata.name)) continue
      // the DaemonSet controller pins its pod to the node with a node affinity and kube-scheduler binds
      // it (pkg/controller/daemon/util ReplaceDaemonSetPodNodeNameNodeAffinity): without a scheduler
      // it stays Pending and unbound; otherwise it is bound here at once, as before
      const unbound = hf?.schedulerDown() === true
      const pod = newPod(
        ds,
        `${ds.metadata.name}-${randomSuffix()}`,
        { 'controller-revision-hash': templateHash(ds.spec?.template), 'pod-template-generation': gen },
        unbound ? undefined : n.metadata.name,
        unbound ? n.metadata.name : undefined,
      )
      if (pod && unbound) owned.push(pod)
      else if (pod) {
        owned.push(pod)
        event(pod, 'Scheduled', `Successfully assigned ${pod.metadata.namespace}/${pod.metadata.name} to ${n.metadata.name}`)
      }
    }
    const ready = owned.filter(podReady).length
    const status = {
      currentNumberScheduled: owned.length,
      desiredNumberScheduled: wanted.length,
      numberMisscheduled: 0,
      numberReady: ready,
      observedGeneration: ds.metadata.generation || 1,
      updatedNumberScheduled: owned.length,
    }
    if (ready) status.numberAvailable = ready
    if (wanted.length - ready > 0) status.numberUnavailable = wanted.length - ready
    if (!deepEqual(ds.status, status)) tryUpdate(DS, { ...ds, status })
  }

  // Jobs: one pod at a time until spec.completions pods succeeded.
  function reconcileJob(job, pods) {
    if (job.spec?.suspend) return
    const owned = pods.filter((p) => ownedBy(p, job))
    const succeeded = owned.filter((p) => p.status?.phase === 'Succeeded').length
    const completions = job.spec?.completions ?? 1
    let active = owned.filter((p) => !['Succeeded', 'Failed'].includes(p.status?.phase)).length
    if (succeeded + active < completions && active < (job.spec?.parallelism ?? 1)) {
      const uid = job.metadata.uid
      const pod = newPod(job, `${job.metadata.name}-${randomSuffix()}`, {
        'batch.kubernetes.io/controller-uid': uid,
        'batch.kubernetes.io/job-name': job.metadata.name,
        'controller-uid': uid,
        'job-name': job.metadata.name,
      })
      if (pod) active++
    }
    const status = {
      ...(job.status || {}),
      startTime: job.status?.startTime || now(),
      active: active || undefined,
      succeeded: succeeded || undefined,
      ready: 0,
      terminating: 0,
      uncountedTerminatedPods: {},
    }
    if (succeeded >= completions && !cond(job, 'Complete')) {
      status.completionTime = now()
      status.conditions = [
        {
          type: 'SuccessCriteriaMet',
          status: 'True',
          reason: 'CompletionsReached',
          message: 'Reached expected number of succeeded pods',
          lastProbeTime: now(),
          lastTransitionTime: now(),
        },
        {
          type: 'Complete',
          status: 'True',
          reason: 'CompletionsReached',
          message: 'Reached expected number of succeeded pods',
          lastProbeTime: now(),
          lastTransitionTime: now(),
        },
      ]
    }
    const clean = JSON.parse(JSON.stringify(status))
    if (!deepEqual(job.status, clean)) tryUpdate(JOBS, { ...job, status: clean })
  }

  const maxUnavailable = (d) => {
    const v = d.spec?.strategy?.rollingUpdate?.maxUnavailable ?? '25%'
    const replicas = d.spec?.replicas ?? 1
    return typeof v === 'string' && v.endsWith('%') ? Math.floor((replicas * parseInt(v, 10)) / 100) : Number(v)
  }

  function reconcileDeployment(d, pods) {
    const hash = templateHash(d.spec?.template)
    const replicas = d.spec?.replicas ?? 1
    let owned = pods.filter((p) => ownedBy(p, d))
    const current = owned.filter((p) => p.metadata.labels?.['pod-template-hash'] === hash)
    const extra = [...owned.filter((p) => p.metadata.labels?.['pod-template-hash'] !== hash), ...current.slice(replicas)]
    for (const p of extra) {
      try {
        store.remove(PODS, p.metadata.namespace, p.metadata.name)
      } catch {
        /* gone */
      }
    }
    owned = current.slice(0, replicas)
    for (let i = owned.length; i < replicas; i++) {
      const pod = newPod(d, `${d.metadata.name}-${hash}-${randomSuffix()}`, { 'pod-template-hash': hash })
      if (pod) owned.push(pod)
    }
    const available = owned.filter(podReady).length
    syncReplicaSet({ store, def: RS, d, hash, pods: owned, ready: available })
    const status = { observedGeneration: d.metadata.generation || 1, replicas: owned.length, updatedReplicas: owned.length }
    if (available) {
      status.readyReplicas = available
      status.availableReplicas = available
    }
    if (owned.length - available > 0) status.unavailableReplicas = owned.length - available
    const rsName = `${d.metadata.name}-${hash}`
    const isAvailable = available >= replicas - maxUnavailable(d)
    let conditions = d.status?.conditions || []
    conditions = setCondition(
      conditions,
      isAvailable
        ? { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' }
        : {
            type: 'Available',
            status: 'False',
            reason: 'MinimumReplicasUnavailable',
            message: 'Deployment does not have minimum availability.',
          },
    )
    conditions = setCondition(
      conditions,
      available >= replicas
        ? {
            type: 'Progressing',
            status: 'True',
            reason: 'NewReplicaSetAvailable',
            message: `ReplicaSet "${rsName}" has successfully progressed.`,
          }
        : { type: 'Progressing', status: 'True', reason: 'ReplicaSetUpdated', message: `ReplicaSet "${rsName}" is progressing.` },
    )
    status.conditions = conditions.map((c) => {
      const old = (d.status?.conditions || []).find((x) => x.type === c.type)
      return {
        type: c.type,
        status: c.status,
        lastUpdateTime: old && old.reason === c.reason && old.status === c.status ? old.lastUpdateTime : now(),
        lastTransitionTime: c.lastTransitionTime,
        reason: c.reason,
        message: c.message,
      }
    })
    if (!deepEqual(d.status, status)) tryUpdate(DEPLOY, { ...d, status })
  }

  // ---- the disruption controller (sim/kube/disruption.js budgetStatus) ----------------

  // the scale of a pod's controller, as the controller's finders read it: a ReplicaSet a Deployment
  // controls counts as that Deployment (here a Deployment owns its pods directly)
  function scaleOf(ref, ns) {
    const byKind = { Deployment: DEPLOY, ReplicaSet: RS, StatefulSet: STS }
    const d = byKind[ref.kind]
    const o = d && store.get(d, ns, ref.name)
    if (!o || o.metadata.uid !== ref.uid) return undefined
    const parent = ref.kind === 'ReplicaSet' && (o.metadata.ownerReferences || []).find((r) => r.controller && r.kind === 'Deployment')
    if (parent) return scaleOf(parent, ns)
    return { uid: o.metadata.uid, scale: o.spec?.replicas ?? 1 }
  }

  function reconcilePdb(pdb, pods) {
    const status = budgetStatus(pdb, pods, { scaleOf, now: clock.now() })
    if (!deepEqual(pdb.status, status)) tryUpdate(PDBS, { ...pdb, status })
  }

  // ---- nodes ------------------------------------------------------------------------

  function reconcileNodes(nodes, pods) {
    for (const node of nodes) {
      if (nodeIsReady(node) || isLost(node.metadata.name)) continue
      const cniReady = pods.some((p) => p.spec.nodeName === node.metadata.name && isCni(p) && podReady(p))
      if (!cniReady) continue
      const next = clone(node)
      next.spec.taints = (next.spec.taints || []).filter((t) => t.key !== 'node.kubernetes.io/not-ready')
      if (!next.spec.taints.length) delete next.spec.taints
      next.status.conditions = setCondition(
        next.status.conditions,
        { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' },
        { heartbeat: true },
      )
      tryUpdate(NODES, next)
    }
  }

  // ---- flux (sim/flux-rules.js): Flux's kinds exist only once its CRDs are created ----
  const defOf = (kind) => {
    if (kind === 'Deployment') return DEPLOY
    if (kind === 'Secret') return R('', 'v1', 'secrets')
    const k = FLUX_KINDS[kind]
    return k ? R(k.group, k.version, k.plural) : undefined
  }
  const fluxRules = createFluxRules({
    get: (kind, ns, name) => {
      const def = defOf(kind)
      return def ? store.get(def, ns, name) : null
    },
    list: (kind) => {
      const def = defOf(kind)
      return def ? store.list(def) : []
    },
    served: (kind) => Boolean(defOf(kind)),
    writeStatus: (kind, o, status) => tryUpdate(defOf(kind), { ...o, status }),
    writeSpec: (kind, o, spec) => tryUpdate(defOf(kind), { ...o, spec }),
    create: (o) => {
      const def = registry.byKind(o.apiVersion, o.kind)
      if (!def || store.get(def, o.metadata.namespace, o.metadata.name)) return
      admitCreate(def, o)
      tryCreate(def, o)
    },
    after: (simSeconds, fn) =>
      clock.after(simSeconds, () => {
        if (stopped) return
        fn()
        schedule()
      }),
    now,
    faults,
    flux,
  })

  // ---- garbage collection -----------------------------------------------------------

  function gc(def, obj) {
    if (def === NS)
      for (const { key, obj: o } of store.namespaceObjects(obj.metadata.name)) {
        const d = registry.all().find((x) => x.key === key)
        try {
          store.remove(d, o.metadata.namespace, o.metadata.name)
        } catch {
          /* gone */
        }
      }
    if (def === NODES)
      for (const p of store.list(PODS))
        if (p.spec.nodeName === obj.metadata.name) {
          try {
            store.remove(PODS, p.metadata.namespace, p.metadata.name)
          } catch {
            /* gone */
          }
        }
    for (const { key, obj: o } of store.allObjects({ raw: true })) {
      if (!ownedBy(o, obj)) continue
      const d = registry.all().find((x) => x.key === key)
      try {
        const gone = store.remove(d, o.metadata.namespace, o.metadata.name)
        gc(d, gone)
      } catch {
        /* gone */
      }
    }
    schedule()
  }

  // ---- the pass ---------------------------------------------------------------------

  function reconcile() {
    const raw = { raw: true } // read-only views; every change goes through store.update
    for (const n of store.list(NS, undefined, raw))
      if (!store.get(SA, n.metadata.name, 'default'))
        tryCreate(SA, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace: n.metadata.name } })
    const nodes = store.list(NODES, undefined, raw)
    const podsIn = (all, ns) => all.filter((p) => p.metadata.namespace === ns)
    let pods = store.list(PODS, undefined, raw)
    // the workload controllers run in kube-controller-manager, the binding in kube-scheduler
    // (sim/health-faults.js: a component down on every control plane does nothing)
    const kcm = !hf?.controllerManagerDown()
    if (kcm) for (const ds of store.list(DS, undefined, raw)) reconcileDaemonSet(ds, nodes, podsIn(pods, ds.metadata.namespace))
    pods = store.list(PODS, undefined, raw)
    if (kcm) for (const d of store.list(DEPLOY, undefined, raw)) reconcileDeployment(d, podsIn(pods, d.metadata.namespace))
    pods = store.list(PODS, undefined, raw)
    if (kcm) for (const j of store.list(JOBS, undefined, raw)) reconcileJob(j, podsIn(pods, j.metadata.namespace))
    pods = store.list(PODS, undefined, raw)
    if (!hf?.schedulerDown()) schedulePods(pods, nodes)
    pods = store.list(PODS, undefined, raw)
    startPods(pods, nodes)
    reconcileNodes(nodes, pods)
    // Workload status again, now that pods may have moved on in this pass.
    const after = store.list(PODS, undefined, raw)
    const nodesNow = store.list(NODES, undefined, raw)
    if (kcm) for (const ds of store.list(DS, undefined, raw)) reconcileDaemonSet(ds, nodesNow, podsIn(after, ds.metadata.namespace))
    if (kcm) for (const d of store.list(DEPLOY, undefined, raw)) reconcileDeployment(d, podsIn(after, d.metadata.namespace))
    const podsNow = store.list(PODS, undefined, raw)
    if (kcm) for (const b of store.list(PDBS, undefined, raw)) reconcilePdb(b, podsIn(podsNow, b.metadata.namespace))
    fluxRules.reconcile()
  }

  const unsubscribe = store.onChange(() => schedule())

  return {
    schedule,
    gc,
    recheck,
    CNI_ANNOTATION,
    stop() {
      stopped = true
      unsubscribe()
      for (const c of timers.values()) c()
      timers.clear()
      fluxRules.stop()
    },
  }
}
