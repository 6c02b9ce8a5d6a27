// The node API's methods, one plain function per Talos method (ARCHITECTURE.md "Node API methods"):
// each gets (sim, node, body, {insecure, maintenance, signal}) and returns what that node answers, or
// throws the RpcError machined would (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go,
// internal/app/maintenance/server.go). sim/talos/apid.js calls them; sim/grpc/server.js encodes the answers.
import { stringify } from 'yaml'
import { rpc } from './errors.js'
import { DEFINITIONS, resolveType, notFound } from './resources.js'
import { startAction } from './events.js'
import { CONTROL_PLANE_PODS, kubeletCsrDiagnostic, staticPodName } from '../health-faults.js'
import { ETCD_LEAVE_RETRY } from '../node.js'
import { etcdFatalLine } from '../etcd.js'
import { ephemeralVolume, memInfo } from './hardware.js'
import { imagePull, legacyUpgrade, lifecycleUpgrade, schematicIdOf, schematicInfo } from './upgrade.js'
import { manifestsOf, specVersion } from './k8s.js'

/** fault kubelet-crashloop without a message: the kubelet's own error for a node IP it does not have (k8s cmd/kubelet/app/server.go) */
const KUBELET_CRASH_DEFAULT = (ip) =>
  `E0101 00:00:00.000000    2456 run.go:72] "command failed" err="failed to run Kubelet: failed to validate nodeIP: node IP: \"${ip}\" not found in the host's network interfaces"`

const GO_VERSION = 'go1.25.5'
const sha = (tag) => Buffer.from(tag).toString('hex').padEnd(8, '0').slice(0, 8)
const prettySize = (b) => {
  for (const [u, v] of [
    ['TB', 1e12],
    ['GB', 1e9],
    ['MB', 1e6],
    ['kB', 1e3],
  ])
    if (b >= v) return `${Math.round((b / v) * 10) / 10} ${u}`
  return `${b} B`
}

const OMITEMPTY = ['model', 'serial', 'wwid', 'bus_path', 'transport', 'rotational']
const omitEmpty = (spec) =>
  Object.fromEntries(Object.entries(spec).filter(([k, v]) => !(OMITEMPTY.includes(k) && (v === '' || v === false || v == null))))
// the squashfs loop device every Talos node lists (no transport: never an install disk)
const LOOP0 = {
  id: 'loop0',
  dev: '/dev/loop0',
  size: 75763712,
  model: '',
  serial: '',
  wwid: '',
  busPath: '',
  transport: '',
  rotational: false,
  readonly: true,
  cdrom: false,
}

function resource(node, d, id, spec, extra = {}) {
  const show = (t) =>
    node.ctx
      .displayTime(t)
      .toISOString()
      .replace(/\.\d+Z$/, 'Z')
  return {
    metadata: {
      namespace: d.namespace,
      type: d.type,
      id,
      version: extra.version ?? node.rev + 1,
      owner: extra.owner ?? '',
      phase: 'running',
      created: show(node.created),
      updated: show(extra.updated ?? node.updated),
      ...(extra.annotations ? { annotations: extra.annotations } : {}),
    },
    spec,
    minor: node.minor, // the proto_spec layout of some specs changed at v1.13 (sim/grpc/cosi.js)
  }
}

/**
 * A control plane's static pods as its kubelet reports them (controllers/k8s/static_pod_status.go):
 * once the kubelet runs; Pending until the node's API server is up, then Running and Ready, unless
 * a static-pod fault holds one (sim/health-faults.js).
 */
function staticPodStatuses(sim, node) {
  if (node.role !== 'controlplane' || node.services.get('kubelet')?.state !== 'Running') return []
  const version = sim.scenario?.cluster?.kubernetesVersion ?? 'v1.35.0'
  return CONTROL_PLANE_PODS.map((c) => {
    const image = node.staticPods().find((p) => p.id === c)?.image ?? `registry.k8s.io/${c}:${version}`
    const faulted = sim.health?.staticPodStatus(node.name, c, image)
    const up = node.apiServerUp
    const ready = { type: 'Ready', status: up ? 'True' : 'False' }
    const status = faulted ?? {
      phase: up ? 'Running' : 'Pending',
      conditions: [
        { type: 'Initialized', status: 'True' },
        ready,
        { ...ready, type: 'ContainersReady' },
        { type: 'PodScheduled', status: 'True' },
      ],
      containerStatuses: [
        {
          name: c,
          image,
          ready: up,
          started: up,
          restartCount: 0,
          state: up ? { running: {} } : { waiting: { reason: 'ContainerCreating' } },
        },
      ],
    }
    return { id: `kube-system/${staticPodName(c, node.name)}`, status }
  })
}

/**
 * `talosctl logs -k <namespace>/<pod>[:<container>]`: a control plane static pod's container log
 * through the CRI (its start line; a crash-looping one's last termination message after it); a
 * container that never started has none: `container "<id>" not found`.
 */
function staticPodLog(sim, node, id) {
  const [pod] = String(id).split(':')
  const found = staticPodStatuses(sim, node).find((p) => p.id === pod)
  const state = found?.status.containerStatuses?.[0]
  if (!found || (!state?.state?.running && !state?.lastState?.terminated))
    throw rpc('NotFound', `container ${JSON.stringify(id)} not found`)
  const started = `I0101 00:00:00.000000       1 server.go:150] "Starting" version="${sim.scenario?.cluster?.kubernetesVersion ?? 'v1.35.0'}"`
  return [started, ...(state.lastState?.terminated?.message ? [state.lastState.terminated.message] : [])]
}

/** all resources of one definition on a node */
function listResources(sim, node, d) {
  switch (d.displayType) {
    case 'MachineStatus':
      return [resource(node, d, 'machine', node.machineStatus(), { owner: 'runtime.MachineStatusController' })]
    // empty fields are omitted (pkg/machinery/resources/block/disk.go omitempty), loop devices listed
    case 'Disk':
      return [...node.disks, LOOP0].map((x) =>
        resource(
          node,
          d,
          x.id,
          omitEmpty({
            dev_path: x.dev,
            size: x.size,
            pretty_size: prettySize(x.size),
            io_size: 512,
            sector_size: 512,
            readonly: x.readonly,
            cdrom: x.cdrom,
            model: x.model,
            serial: x.serial,
            wwid: x.wwid,
            bus_path: x.busPath,
            transport: x.transport,
            rotational: x.rotational,
            sub_system: '/sys/class/block',
          }),
          { owner: 'block.DisksController' },
        ),
      )
    case 'SystemDisk': {
      // the disk with a META partition (controllers/block/system_disk.go), whatever the stage: a disk
      // image, or an earlier install, in maintenance too (Talos then takes the node as installed and skips its install)
      if (!node.installed) return []
      const dev = node.config?.machine?.install?.disk ?? node.disks[0].dev
      return [resource(node, d, 'system-disk', { diskID: dev.replace('/dev/', ''), devPath: dev }, { owner: 'block.SystemDiskController' })]
    }
    case 'Nodename':
      return node.configured
        ? [
            resource(
              node,
              d,
              'nodename',
              { nodename: node.name, hostnameVersion: '1', skipNodeRegistration: false },
              { owner: 'k8s.NodenameController' },
            ),
          ]
        : []
    case 'MachineConfig':
      // the active config, and `persistent` (what STATE holds for the next boot) once set in this boot (ID order)
      return node.configured
        ? [
            ...(node.persistent
              ? [resource(node, d, 'persistent', node.persistent.text, { annotations: { 'talos.dev/yaml-spec': '1' } })]
              : []),
            resource(node, d, 'v1alpha1', node.configText, { annotations: { 'talos.dev/yaml-spec': '1' } }),
          ]
        : []
    case 'MachineType':
      return [resource(node, d, 'machine-type', node.configured ? node.role : 'unknown')]
    case 'EtcdMember':
      return node.etcdMember && node.etcdRunning
        ? [resource(node, d, 'local', { memberID: node.etcdMember }, { owner: 'etcd.MemberController' })]
        : []
    // controllers/v1alpha1/service.go: a Service resource while the service runs, destroyed when it leaves Running
    case 'Service':
      return [...node.services.values()]
        .filter((s) => s.state === 'Running')
        .sort((a, b) => a.id.localeCompare(b.id))
        .map((s) => resource(node, d, s.id, { running: true, healthy: s.healthy === true, unknown: s.healthy == null }))
    // sim/talos/k8s.js: the typed specs Talos's Kubernetes controllers derive from the config, each at its own version
    case 'KubeletSpec':
    case 'APIServerConfig':
    case 'ControllerManagerConfig':
    case 'SchedulerConfig': {
      const id = {
        KubeletSpec: 'kubelet',
        APIServerConfig: 'kube-apiserver',
        ControllerManagerConfig: 'kube-controller-manager',
        SchedulerConfig: 'kube-scheduler',
      }[d.displayType]
      const v = node.configured ? specVersion(node, id) : null
      const owner = d.displayType === 'KubeletSpec' ? 'k8s.KubeletSpecController' : 'k8s.ControlPlaneController'
      return v ? [resource(node, d, id, v.spec, { owner, version: v.version, updated: v.updated })] : []
    }
    case 'StaticPod':
      return node
        .staticPods()
        .map((p) =>
          resource(node, d, p.id, p.pod, { owner: 'k8s.ControlPlaneStaticPodController', version: specVersion(node, p.id).version }),
        )
    case 'Manifest':
      return node.role === 'controlplane' && node.configured
        ? manifestsOf(node, sim).map((m) => resource(node, d, m.id, m.items, { owner: 'k8s.ManifestController', version: 1 }))
        : []
    case 'HostnameStatus':
      return [
        resource(node, d, 'hostname', { hostname: node.configured ? node.name : `talos-${node.ip.replace(/\./g, '-')}`, domainname: '' }),
      ]
    case 'TimeStatus':
      return [resource(node, d, 'node', { synced: !node.timeUnsynced(), epoch: 0, syncDisabled: false }, { owner: 'time.SyncController' })]
    case 'LinkStatus':
      return nodeLinks(node).map((l) => resource(node, d, l.id, l.spec, { owner: 'network.LinkStatusController' }))
    case 'AddressStatus':
      return nodeAddresses(node).map((a) =>
        resource(node, d, `${a.linkName}/${a.address}`, a, { owner: 'network.AddressStatusController' }),
      )
    case 'SecurityState':
      // controllers/runtime/security_state.go: secureBoot when the firmware has it on and is not in setup mode
      return [
        resource(node, d, 'securitystate', node.spec.secureBoot ? { secureBoot: true, bootedWithUKI: true } : { secureBoot: false }, {
          owner: 'runtime.SecurityStateController',
        }),
      ]
    case 'ExtensionStatus':
      return extensionStatuses(node).map(({ id, layer }) => resource(node, d, id, layer, { owner: 'runtime.ExtensionStatusController' }))
    // every simulated machine is bare metal (controllers/network/platform_config_apply.go: the platform's name)
    case 'PlatformMetadata':
      return [resource(node, d, 'platformmetadata', { platform: 'metal' }, { owner: 'network.PlatformConfigApplyController' })]
    // the EPHEMERAL volume once the node runs from its install (talosctl health's disk sizes read it)
    case 'VolumeStatus': {
      const ephemeral = ephemeralVolume(node)
      return ephemeral ? [resource(node, d, 'EPHEMERAL', ephemeral, { owner: 'block.VolumeManagerController' })] : []
    }
    case 'StaticPodStatus':
      return staticPodStatuses(sim, node).map(({ id, status }) => resource(node, d, id, status, { owner: 'k8s.StaticPodStatusController' }))
    // controllers/runtime/diagnostics: kubelet-csr while the node's serving CSRs are Pending (fault kubelet-serving-csr)
    case 'Diagnostic': {
      const pending = sim.pendingServingCsrs?.(node) ?? []
      return pending.length
        ? [resource(node, d, 'kubelet-csr', kubeletCsrDiagnostic(node.ip, pending), { owner: 'runtime.DiagnosticsController' })]
        : []
    }
    case 'Version':
      return [resource(node, d, 'version', { name: 'Talos', version: node.talosVersion })]
    case 'Member': {
      if (!node.configured) return []
      return sim
        .allNodes()
        .filter((n) => n.configured && ['booting', 'running'].includes(n.stage) && n.installed)
        .map((n) =>
          resource(
            node,
            d,
            n.name,
            {
              nodeId: n.bootId.replace(/-/g, '').slice(0, 22),
              addresses: [n.ip],
              hostname: n.name,
              machineType: n.role,
              operatingSystem: `Talos (${n.talosVersion})`,
            },
            { owner: 'cluster.MemberController' },
          ),
        )
    }
    default:
      return []
  }
}

/**
 * The node's links as the LinkStatus controller reports them (the loopback and one physical NIC,
 * `eth0`: a name the simulator chose), and their addresses (its address on eth0 in the /8 the generated
 * configs give it).
 */
function nodeLinks(node) {
  const mac = `52:54:00:${node.ip
    .split('.')
    .slice(1)
    .map((o) => Number(o).toString(16).padStart(2, '0'))
    .join(':')}`
  const link = (index, type, kind, hardwareAddr, extra = {}) => ({
    index,
    type,
    linkIndex: 0,
    flags: 'UP,LOWER_UP',
    hardwareAddr,
    permanentAddr: hardwareAddr,
    broadcastAddr: type === 'ether' ? 'ff:ff:ff:ff:ff:ff' : '00:00:00:00:00:00',
    mtu: type === 'ether' ? 1500 : 65536,
    queueDisc: type === 'ether' ? 'fq_codel' : 'noqueue',
    operationalState: type === 'ether' ? 'up' : 'unknown',
    kind,
    slaveKind: '',
    linkState: true,
    port: 'Other',
    duplex: 'Unknown',
    ...extra,
  })
  return [
    { id: 'lo', spec: link(1, 'loopback', '', '00:00:00:00:00:00') },
    { id: 'eth0', spec: link(2, 'ether', '', mac, { busPath: '0000:00:03.0', driver: 'virtio_net' }) },
  ]
}

function nodeAddresses(node) {
  const address = (addr, linkIndex, linkName, family, scope) => ({
    address: addr,
    linkIndex,
    linkName,
    family,
    scope,
    flags: 'permanent',
    priority: 0,
  })
  return [
    address('127.0.0.1/8', 1, 'lo', 'inet4', 'host'),
    address('::1/128', 1, 'lo', 'inet6', 'host'),
    address(`${node.ip}/8`, 2, 'eth0', 'inet4', 'global'),
  ]
}

/**
 * The extension layers the node runs (controllers/runtime/extension_status.go: one ExtensionStatus per
 * layer of extensions.yaml, its ID the layer's image name without `.sqsh`), then the Image Factory's
 * virtual `schematic` extension when the image came from a schematic: its version the schematic ID, its
 * extraInfo the schematic itself (siderolabs/image-factory internal/artifacts/schematic.go).
 */
function extensionStatuses(node) {
  const layer = (name, metadata) => ({ image: `${name}.sqsh`, metadata })
  const layers = (node.spec.extensions ?? []).map((name, i) => ({
    id: String(i),
    layer: layer(String(i), {
      name: name.replace(/^.*\//, ''),
      version: 'v1.0.0',
      author: 'Sidero Labs',
      description: `${name} system extension`,
      compatibility: { talos: { version: '>= v1.12.0' } },
    }),
  }))
  const schematic = node.spec.schematic
  if (!schematic) return layers
  const official = schematic.extensions.map((name) => (name.includes('/') ? name : `siderolabs/${name}`))
  const extraInfo = schematicInfo(official)
  const id = String(layers.length)
  return [
    ...layers,
    {
      id,
      layer: layer(id, {
        name: 'schematic',
        version: schematicIdOf(schematic),
        author: 'Image Factory',
        description: 'Virtual extension which specifies the schematic of the image built with Image Factory.',
        compatibility: { talos: { version: '>= 1.0.0' } },
        extraInfo,
      }),
    },
  ]
}

/** v1alpha1_server.go checkControlplane: the etcd APIs of a worker are Unimplemented */
const controlPlaneOnly = (node, api) => {
  if (node.role !== 'controlplane') throw rpc('Unimplemented', `${api} is only available on control plane nodes`)
}

export const METHODS = {
  'resources.Get'(sim, node, body, { insecure }) {
    const d = resolveType(body.type)
    if (insecure && d.sensitive) throw rpc('PermissionDenied', 'not authorized')
    if (body.namespace && body.namespace !== d.namespace) throw rpc('PermissionDenied', `namespace "${body.namespace}" is not supported`)
    let resources = listResources(sim, node, d)
    if (body.id != null && body.id !== '') {
      resources = resources.filter((r) => r.metadata.id === body.id)
      if (!resources.length) throw notFound(d, body.namespace, body.id)
    }
    return { resources }
  },

  'machine.Version'(sim, node, body, { insecure, maintenance }) {
    if (maintenance && node.minor <= 12) throw rpc('Unimplemented', 'API is not implemented in maintenance mode')
    // each node answers with the Talos it runs (scenario node talosVersion)
    const tag = node.talosVersion
    return { tag, sha: sha(tag), goVersion: GO_VERSION, os: 'linux', arch: 'amd64', features: { rbac: !insecure || node.minor >= 13 } }
  },

  // /proc/meminfo (v1alpha1_server.go Memory); talosctl memory, talosctl health's memory sizes
  'machine.Memory'(sim, node) {
    return { meminfo: memInfo(node) }
  },

  'machine.ApplyConfiguration'(sim, node, body, { maintenance }) {
    return maintenance ? node.applyMaintenance(body) : node.applyConfigured(body)
  },

  'machine.Bootstrap'(sim, node) {
    node.bootstrap()
    return {}
  },

  'machine.Kubeconfig'(sim, node) {
    if (node.role !== 'controlplane') throw rpc('Unimplemented', 'kubeconfig is only available on control plane nodes')
    return { kubeconfig: sim.kubeconfigYaml() }
  },

  'machine.ServiceList'(sim, node) {
    return {
      services: [...node.services.values()]
        .sort((a, b) => a.id.localeCompare(b.id))
        .map((s) => ({
          id: s.id,
          state: s.state,
          health: { unknown: s.healthy == null, healthy: s.healthy === true, lastMessage: s.lastMessage },
          events: s.events.map((e) => ({ ...e, ts: sim.displayTime(e.ts).toISOString() })),
        })),
    }
  },

  // system.go APIStart/APIStop/APIRestart: a start of a running service and a stop of a stopped one
  // do nothing; otherwise only a service that allows the action through the API takes it (the kubelet:
  // start and restart; an extension's service: all three); etcd, apid, trustd and the others refuse
  'machine.ServiceAction'(sim, node, body) {
    const { id, action } = body
    if (!['start', 'stop', 'restart'].includes(action)) throw rpc('Unknown', `unsupported service action: "${action}"`)
    if (!node.services.has(id)) throw rpc('Unknown', `service "${id}" not defined`)
    const verb = { start: 'started', stop: 'stopped', restart: 'restarted' }[action]
    const done = { response: `Service "${id}" ${verb}` }
    // the runner of a service is alive from its start until it finished, failed or was skipped
    const running = !['Initialized', 'Finished', 'Failed', 'Skipped'].includes(node.services.get(id).state)
    // a restart of a service that does not run is its start
    const asked = action === 'restart' && !running ? 'start' : action
    if ((asked === 'start' && running) || (asked === 'stop' && !running)) return done
    const allowed = id.startsWith('ext-') ? ['start', 'stop', 'restart'] : id === 'kubelet' ? ['start', 'restart'] : []
    if (!allowed.includes(asked)) throw rpc('Unknown', `service "${id}" doesn't support ${asked} operation via API`)
    if (asked === 'stop') node.svc(id, 'Finished', 'Service finished successfully', null)
    else if (id === 'kubelet') node.startKubelet()
    else node.startService(id)
    node.changed()
    return done
  },

  // talosctl asks the local etcd (queryLocal); while it is down the client waits for a connection
  async 'machine.EtcdMemberList'(sim, node, body, { signal }) {
    if (node.role !== 'controlplane') throw rpc('Unimplemented', 'member list is only available on control plane nodes')
    const members = await sim.etcd.memberList(node, signal)
    return {
      members: members.map((m) => ({ id: m.id, hostname: m.name, peerUrls: m.peerUrls, clientUrls: m.clientUrls, isLearner: m.isLearner })),
    }
  },

  async 'machine.EtcdRemoveMemberByID'(sim, node, body) {
    controlPlaneOnly(node, 'etcd remove member')
    if (!node.etcdHealthy) throw rpc('Unknown', `failed to create etcd client: error getting endpoints: etcd is not running on ${node.ip}`)
    await sim.etcd.removeMember(node, body.memberId)
    return {}
  },

  // the local etcd's alarms, cluster-wide (v1alpha1_server.go EtcdAlarmList: checkControlplane, then the local client's AlarmList)
  async 'machine.EtcdAlarmList'(sim, node, body, { signal }) {
    controlPlaneOnly(node, 'etcd alarm list')
    return { alarms: await sim.etcd.alarms(node, signal) }
  },

  // every alarm disarmed, the disarmed ones answered (EtcdAlarmDisarm: AlarmDisarm with an empty AlarmMember;
  // v1.12 checks it under the name "etcd alarm list" too)
  async 'machine.EtcdAlarmDisarm'(sim, node, body, { signal }) {
    controlPlaneOnly(node, 'etcd alarm list')
    return { alarms: await sim.etcd.disarmAlarms(node, signal) }
  },

  // the local member's maintenance Status (v1alpha1_server.go EtcdStatus: the local client, which waits for its etcd)
  async 'machine.EtcdStatus'(sim, node, body, { signal }) {
    controlPlaneOnly(node, 'etcd status')
    return { memberStatus: await sim.etcd.status(node, signal) }
  },

  // the local member removed through the control planes' etcd, then its etcd stopped and its data wiped (EtcdLeaveCluster)
  async 'machine.EtcdLeaveCluster'(sim, node) {
    controlPlaneOnly(node, 'etcd leave')
    await sim.etcd.leaveCluster(node, ETCD_LEAVE_RETRY)
    return {}
  },

  // the local member's snapshot, as etcd streams it (EtcdSnapshot)
  async 'machine.EtcdSnapshot'(sim, node, body, { signal }) {
    controlPlaneOnly(node, 'etcd snapshot')
    return { bytes: await sim.etcd.snapshot(node, signal) }
  },

  'machine.Reset'(sim, node, body, { maintenance }) {
    if (maintenance)
      throw node.minor <= 12
        ? rpc('Unimplemented', 'API is not implemented in maintenance mode')
        : rpc('PermissionDenied', 'not authorized')
    const wipeMode = body.wipeMode ?? 'all'
    if (!['all', 'system-disk', 'user-disks'].includes(wipeMode)) throw rpc('InvalidArgument', `unknown wipe mode "${wipeMode}"`)
    const graceful = body.graceful !== false
    const actorId = startAction(node, 'reset', {
      graceful,
      wipeMode,
      systemLabels: body.systemLabelsToWipe ?? [],
      userDisks: body.userDisksToWipe ?? [],
    })
    node.ctx.clock.after(0.01, () =>
      node.reset({ graceful, reboot: !!body.reboot, wipeMode, systemLabelsToWipe: body.systemLabelsToWipe ?? [] }),
    )
    return { actorId }
  },

  'machine.Reboot'(sim, node, body) {
    const mode = body.mode ?? 'default'
    if (!['default', 'powercycle', 'force', ''].includes(mode)) throw rpc('Unknown', `invalid reboot mode: "${mode}"`)
    const actorId = startAction(node, 'reboot', { mode })
    node.ctx.clock.after(0.01, () => node.reboot({}))
    return { actorId }
  },

  // MachineService.Upgrade, the legacy path (sim/talos/upgrade.js)
  'machine.Upgrade'(sim, node, body, { signal }) {
    return legacyUpgrade(sim, node, body, signal)
  },
  // MachineService.ImagePull (v1alpha1_images.go) and v1.13's ImageService.Pull (images.go): the same pull
  async 'machine.ImagePull'(sim, node, body, { signal }) {
    await imagePull(sim, node, body.reference, signal)
    return {}
  },
  'image.Pull'(sim, node, body, { signal }) {
    if (node.minor < 13) throw rpc('Unimplemented', 'unknown service machine.ImageService')
    return imagePull(sim, node, body.reference, signal)
  },
  // v1.13's LifecycleService.Upgrade: the installer's output through `emit`, then its exit code
  'lifecycle.Upgrade'(sim, node, body, { emit, signal }) {
    return lifecycleUpgrade(sim, node, body, emit, signal).then(() => ({}))
  },

  'machine.Dmesg'(sim, node) {
    return { lines: node.logs.map((l) => ({ ...l, ts: sim.displayTime(l.ts).toISOString() })) }
  },

  // a service's log exists once its process started in this boot (logging/circular.go: only the
  // runner's Writer registers it); what the process printed is not modelled beyond its start line
  'machine.Logs'(sim, node, body) {
    if (body.namespace === 'k8s.io') return { lines: staticPodLog(sim, node, body.id) }
    const s = node.services.get(body.id)
    const starts = (s?.events ?? []).filter((e) => e.state === 'Running' && e.msg.startsWith('Started task'))
    if (!starts.length) throw rpc('Unknown', `log ${JSON.stringify(body.id)} was not registered`)
    // fault kubelet-crashloop: each start of the kubelet ends with its own error line
    // fault etcd-crash: each start of etcd ends with its fatal line
    const crash = (at) =>
      body.id === 'kubelet' && sim.faults.has(node.name, 'kubelet-crashloop')
        ? (sim.faults.find(node.name, { kind: 'kubelet-crashloop' })[0]?.message ?? KUBELET_CRASH_DEFAULT(node.ip))
        : body.id === 'etcd' && sim.faults.has(node.name, 'etcd-crash')
          ? etcdFatalLine(sim.faults.find(node.name, { kind: 'etcd-crash' })[0]?.message, at)
          : null
    return {
      lines: starts.flatMap((e) => {
        const at = sim.displayTime(e.ts)
        const end = crash(at)
        return [serviceStartLine(sim, body.id, at), ...(end ? [end] : [])]
      }),
    }
  },

  // Read serves the one file talosctl reads by itself: the boot ID its reboot/reset --wait compares
  'machine.Read'(sim, node, body) {
    if (body.path !== '/proc/sys/kernel/random/boot_id') throw rpc('Unknown', `open ${body.path}: no such file or directory`)
    return { bytes: `${node.bootId}\n` }
  },

  // the Events stream's start: access and reachability (the stream itself: sim/grpc/server.js follows sim/talos/events.js)
  'machine.Events'() {
    return {}
  },

  // storaged's Disks (internal/app/storaged/server.go), also on the maintenance API: reset --reboot --wait's post check
  'storage.Disks'(sim, node) {
    return {
      disks: node.disks.map((d) => ({
        size: d.size,
        model: d.model ?? '',
        deviceName: d.dev,
        serial: d.serial ?? '',
        wwid: d.wwid ?? '',
        type: d.cdrom
          ? 'CD'
          : d.transport === 'nvme'
            ? 'NVME'
            : d.transport === 'mmc'
              ? 'SD'
              : d.rotational
                ? 'HDD'
                : d.transport
                  ? 'SSD'
                  : 'UNKNOWN',
        busPath: d.busPath ?? '',
        systemDisk: false,
        subsystem: '/sys/class/block',
        readonly: !!d.readonly,
      })),
    }
  },
}

/** the first line a started service's process writes (texts chosen to read like the real ones) */
function serviceStartLine(sim, id, at) {
  const k8s = sim.scenario.cluster.kubernetesVersion
  if (id === 'kubelet') {
    const p2 = (n) => String(n).padStart(2, '0')
    const klog = `${p2(at.getUTCMonth() + 1)}${p2(at.getUTCDate())} ${p2(at.getUTCHours())}:${p2(at.getUTCMinutes())}:${p2(at.getUTCSeconds())}.${String(at.getUTCMilliseconds() * 1000).padStart(6, '0')}`
    return `I${klog}    2456 server.go:526] "Kubelet version" kubeletVersion="${k8s}"`
  }
  if (id === 'etcd')
    return `{"level":"info","ts":"${at.toISOString()}","caller":"etcdmain/etcd.go:64","msg":"Running: ","args":["/usr/local/bin/etcd"]}`
  return `${at.toISOString()} ${id} started`
}

// roles allowed per method (internal/app/machined/pkg/system/services/machined.go rules); others: PermissionDenied
const READ = ['os:admin', 'os:operator', 'os:reader']
export const ROLES = {
  'resources.Get': READ,
  'machine.Version': READ,
  'machine.ServiceList': READ,
  'machine.Dmesg': READ,
  'cluster.HealthCheck': READ,
  'machine.EtcdMemberList': [...READ, 'os:etcd:backup'],
  'machine.Logs': READ,
  'machine.Events': READ,
  'storage.Disks': READ,
  'machine.Memory': READ,
  'machine.Read': ['os:admin'],
  'machine.ServiceAction': ['os:admin', 'os:operator'],
  'machine.Reboot': ['os:admin', 'os:operator'],
  'machine.ApplyConfiguration': ['os:admin'],
  'machine.Bootstrap': ['os:admin'],
  'machine.Kubeconfig': ['os:admin'],
  'machine.Reset': ['os:admin'],
  'machine.EtcdRemoveMemberByID': ['os:admin'],
  'machine.EtcdAlarmList': [...READ, 'os:etcd:backup'],
  'machine.EtcdAlarmDisarm': ['os:admin', 'os:operator'],
  'machine.EtcdStatus': [...READ, 'os:etcd:backup'],
  'machine.EtcdLeaveCluster': ['os:admin'],
  'machine.EtcdSnapshot': ['os:admin', 'os:operator', 'os:etcd:backup'],
  'machine.Upgrade': ['os:admin'],
  'machine.ImagePull': ['os:admin', 'os:operator'],
  'image.Pull': ['os:admin', 'os:operator'],
  'lifecycle.Upgrade': ['os:admin'],
}

// methods the maintenance API serves (everything else: Unimplemented)
export const MAINTENANCE_METHODS = new Set([
  'resources.Get',
  'machine.ApplyConfiguration',
  'machine.Version',
  'machine.Reset',
  'storage.Disks',
])

/** `on:` kind of a call for faults and the calls log */
export function callKind(method, insecure) {
  if (insecure && (method === 'resources.Get' || method === 'machine.Version' || method === 'storage.Disks')) return 'probe'
  return (
    {
      'machine.ApplyConfiguration': 'apply',
      'machine.Bootstrap': 'bootstrap',
      'machine.Kubeconfig': 'kubeconfig',
      'machine.ServiceAction': 'service',
      'machine.Reset': 'reset',
      'machine.Reboot': 'reboot',
      'machine.Upgrade': 'upgrade',
      'machine.ImagePull': 'image',
      'image.Pull': 'image',
      'lifecycle.Upgrade': 'lifecycle',
      'cluster.HealthCheck': 'health',
      'machine.EtcdMemberList': 'etcd',
      'machine.EtcdRemoveMemberByID': 'etcd',
      'machine.EtcdAlarmList': 'etcd',
      'machine.EtcdAlarmDisarm': 'etcd',
      'machine.EtcdStatus': 'etcd',
      'machine.EtcdLeaveCluster': 'etcd',
      'machine.EtcdSnapshot': 'etcd',
    }[method] ?? 'get'
  )
}

export function kubeconfigYaml(scenario, pki) {
  const name = scenario.cluster.name
  const b64 = (s) => Buffer.from(s).toString('base64')
  return stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name, cluster: { server: scenario.cluster.endpoint, 'certificate-authority-data': b64(pki.kube.ca.cert) } }],
      users: [
        {
          name: `admin@${name}`,
          user: { 'client-certificate-data': b64(pki.kube.admin.cert), 'client-key-data': b64(pki.kube.admin.key) },
        },
      ],
      contexts: [{ context: { cluster: name, namespace: 'default', user: `admin@${name}` }, name: `admin@${name}` }],
      'current-context': `admin@${name}`,
    },
    { lineWidth: 0 },
  )
}
export { DEFINITIONS }
