// The Talos machine API over gRPC on a node's :50000, for the real talosctl: MachineService,
// cosi State, ClusterService and StorageService. Each call is served in process by
// sim/talos/apid.js (faults, the calls log, apid's routing and proxying, the node model's method);
// this layer maps requests, answers and errors the way apid and machined put them on the wire.
// The listener (sim/listeners.js) hands each TLS connection that negotiated h2 to the node's server.
import { fileURLToPath } from 'node:url'
import { join } from 'node:path'
import grpc from '@grpc/grpc-js'
import protoLoader from '@grpc/proto-loader'
import protobuf from 'protobufjs'
import { serveCall } from '../talos/apid.js'
import { METHODS } from '../talos/methods.js'
import { eventsOf, observe as observeEvents } from '../talos/events.js'
import { RpcError } from '../talos/errors.js'
import { DEFINITIONS } from '../talos/resources.js'
import { resourceDefinition, toResource, timestamp, tombstone, RD_TYPE, RD_DEFINITION } from './cosi.js'
import { kubeconfigArchive } from './archive.js'

const dir = fileURLToPath(new URL('./proto/', import.meta.url))
const packages = grpc.loadPackageDefinition(
  protoLoader.loadSync(['machine.proto', 'image.proto', 'lifecycle.proto', 'cosi.proto', 'cluster.proto', 'storage.proto'], {
    includeDirs: [dir],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: false,
    oneofs: true,
  }),
)
// the event payloads, encoded into Event.data (google.protobuf.Any) as machined does (runtime/events.go ToMachineEvent)
const eventTypes = new protobuf.Root().loadSync(join(dir, 'machine.proto'), { keepCase: true })

const CODES = {
  OK: 0,
  Canceled: 1,
  Unknown: 2,
  InvalidArgument: 3,
  DeadlineExceeded: 4,
  NotFound: 5,
  AlreadyExists: 6,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
  OutOfRange: 11,
  Unimplemented: 12,
  Internal: 13,
  Unavailable: 14,
  DataLoss: 15,
  Unauthenticated: 16,
}
const codeOf = (name) => CODES[name] ?? CODES.Unknown
const statusError = ({ code, message }) => Object.assign(new Error(message), { code: codeOf(code), details: message })

/** `nodes` / `node` metadata as talosctl sends it (Node's HTTP/2 joins repeated values with ", ") */
function targetsOf(call) {
  const split = (key) =>
    call.metadata
      .get(key)
      .flatMap((v) => String(v).split(/,\s*/))
      .filter(Boolean)
  return { nodes: split('nodes'), node: split('node') }
}

/** the roles of the client certificate the TLS connection verified (its Organization) */
function rolesOf(call) {
  const o = call.getAuthContext?.()?.sslPeerCertificate?.subject?.O ?? ''
  return String(o)
    .split(/\n|,/)
    .map((r) => r.trim())
}

/**
 * Serves one call on the node (sim/talos/apid.js). Resolves with the per-node answers
 * `[{node, error, data}]` or rejects with a gRPC status error; never settles for a hung call (fault `timeout`).
 */
function invoke(ns, call, method, body, { targets, purpose, words = [], emit }) {
  const gone = new AbortController() // a call whose client went away (deadline, Ctrl-C) cancels what still waits for it
  const cancel = () => gone.abort()
  call.on('cancelled', cancel)
  return serveCall(ns.sim, ns.node, ns.mode, {
    method,
    body,
    targets,
    purpose,
    words,
    roles: rolesOf(call),
    signal: gone.signal,
    emit,
  })
    .catch((e) => {
      if (e instanceof RpcError) throw statusError(e)
      ns.sim.log(`grpc ${method} on ${ns.node.ip}: ${e.stack}`)
      throw statusError({ code: 'Internal', message: e.message })
    })
    .finally(() => call.off('cancelled', cancel)) // a long watch reads many times on one call
}

/** apid's per-node metadata: hostname when the endpoint proxied, error and status when that node failed */
function metadataOf(m) {
  if (!m.node && !m.error) return undefined
  const md = { hostname: m.node }
  if (m.error)
    Object.assign(md, {
      error: `rpc error: code = ${m.error.code} desc = ${m.error.message}`,
      status: { code: codeOf(m.error.code), message: m.error.message },
    })
  return md
}

/**
 * apid's director: `nodes` is one-2-many (each answer carries its node's metadata), a single `node`
 * one-2-one (the target's answer passed through as it is; talosctl's --wait tracker calls so), none local.
 */
function routing(call) {
  const { nodes, node } = targetsOf(call)
  if (nodes.length) return { targets: nodes, one2one: false }
  return { targets: node, one2one: true }
}

/**
 * Machine API call: per-node `messages[]`. A call answered locally (no `nodes`) or one-2-one fails as
 * a plain gRPC error; a one-2-many one carries the node's error in its message metadata (apid BuildError).
 */
async function machineCall(ns, call, method, body, toMessage, { purpose, words } = {}) {
  const { targets, one2one } = routing(call)
  const messages = await invoke(ns, call, method, body, { targets, purpose, words: words ?? COMMAND_WORDS[method] })
  if ((one2one || (messages.length === 1 && !messages[0].node)) && messages[0]?.error) throw statusError(messages[0].error)
  if (one2one) return messages.map((m) => toMessage(m.data ?? {}))
  return messages.map((m) => ({ metadata: metadataOf(m), ...(m.error ? {} : toMessage(m.data ?? {})) }))
}

/**
 * Machine API stream: `send(data, write, target)` writes each target node's messages. One-2-many
 * (`nodes`): every message carries its node's hostname, a node that failed one message with its error.
 */
async function machineStream(ns, call, method, body, send, { purpose, words } = {}) {
  const { targets, one2one } = routing(call)
  const messages = await invoke(ns, call, method, body, { targets, purpose, words: words ?? COMMAND_WORDS[method] })
  const plain = one2one || (messages.length === 1 && !messages[0].node)
  if (plain && messages[0]?.error) throw statusError(messages[0].error)
  await Promise.all(
    messages.map(async (m) => {
      if (m.error) {
        call.write({ metadata: metadataOf(m) })
        return
      }
      const write = (msg) => {
        if (!call.cancelled && !call.writableEnded) call.write(plain ? msg : { ...msg, metadata: { hostname: m.node } })
      }
      await send(m.data ?? {}, write, (m.node && ns.sim.lookup(m.node)) || ns.node)
    }),
  )
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
/** the --wait tracker calls with a single `node` (action/tracker.go client.WithNode); `talosctl events`/`read` with `nodes` */
const byTracker = (call) => targetsOf(call).node.length > 0
/**
 * A followed stream (dmesg -f, logs -f, events): `tick` every 100 ms until the client goes away or
 * the node stops answering (a proxied target that went down ends the stream as apid's does).
 */
async function follow(ns, call, target, tick) {
  let gone = false
  call.on('cancelled', () => {
    gone = true
  })
  while (!gone && !ns.sim.stopped && ns.wanted === 'secure') {
    await sleep(100)
    tick() // what the node wrote before it went down still arrives
    if (target !== ns.node && ns.sim.listeners.modeOf(target) !== 'secure')
      throw statusError({ code: 'Unavailable', message: 'error reading from server: EOF' })
  }
}

/** Go's RFC3339Nano: trailing zeros of the fraction dropped */
const rfc3339Nano = (iso) => iso.replace(/\.(\d*?)0*Z$/, (_, f) => (f ? `.${f}Z` : 'Z'))
/** one kernel log record as machined streams it (v1alpha1_server.go Dmesg: "%s: %7s: [%s]: %s") */
const dmesgRecord = (l) => ({ bytes: Buffer.from(`${l.facility}: ${String(l.priority).padStart(7)}: [${rfc3339Nano(l.ts)}]: ${l.text}\n`) })

/** an event of the node's buffer as machine.Event (data: the payload as google.protobuf.Any) */
function toEvent(e) {
  const type = eventTypes.lookupType(`machine.${e.type}`)
  return {
    data: { type_url: `talos/runtime/machine.${e.type}`, value: type.encode(type.fromObject(e.payload)).finish() },
    id: e.id,
    actor_id: e.actorId,
  }
}

/** COSI call: one node (`node` metadata, proxied one to one); its error is the call's error */
async function cosiCall(ns, call, body, purpose) {
  const { nodes, node } = targetsOf(call)
  if (nodes.length) throw statusError({ code: 'InvalidArgument', message: 'one-2-many proxying is not supported for COSI methods' })
  // `get <plural type name> [id]`, as talosctl's argument would be in its canonical form
  const words = ['get', String(body.type).split('.')[0].toLowerCase(), ...(body.id ? [body.id] : [])]
  const [m] = await invoke(ns, call, 'resources.Get', body, { targets: node, purpose, words })
  if (!m) throw statusError({ code: 'Internal', message: 'no answer' })
  if (m.error) throw statusError(m.error)
  return m.data
}

/**
 * A call in flight holds the node's listener open (NodeServer.closeServer waits for `active`), so an
 * answer written just before a stage change (apply, reset) reaches the client.
 */
function inFlight(ns) {
  const entry = {}
  ns.active.add(entry)
  // a few ms for the written frames to leave the socket before the listener may cut it
  return () => setTimeout(() => ns.active.delete(entry), 20)
}
/** the talosctl command a machine API method serves, for the calls log */
const COMMAND_WORDS = {
  'machine.ApplyConfiguration': ['apply-config'],
  'machine.Bootstrap': ['bootstrap'],
  'machine.EtcdMemberList': ['etcd', 'members'],
  'machine.Dmesg': ['dmesg'],
  'machine.Events': ['events'],
  'cluster.HealthCheck': ['health'],
  'storage.Disks': ['disks'],
  'machine.EtcdRemoveMemberByID': ['etcd', 'remove-member'],
  'machine.EtcdAlarmList': ['etcd', 'alarm', 'list'],
  'machine.EtcdAlarmDisarm': ['etcd', 'alarm', 'disarm'],
  'machine.EtcdStatus': ['etcd', 'status'],
  'machine.EtcdLeaveCluster': ['etcd', 'leave'],
  'machine.EtcdSnapshot': ['etcd', 'snapshot'],
  'machine.Kubeconfig': ['kubeconfig'],
  'machine.Reboot': ['reboot'],
  'machine.Reset': ['reset'],
  'machine.ServiceList': ['service'],
  'machine.Version': ['version'],
  'machine.Memory': ['memory'],
  'machine.ImagePull': ['image', 'pull'],
  'image.Pull': ['image', 'pull'],
}

const unary = (ns, fn) => (call, cb) => {
  const done = inFlight(ns)
  call.on('cancelled', done) // a hung call (fault `timeout`) the client gave up on
  fn(call)
    .then(
      (r) => cb(null, r),
      (e) => cb(e),
    )
    .finally(done)
}
/** server stream: `fn` writes the messages; an error ends the stream with its status */
const streaming = (ns, fn) => (call) => {
  const done = inFlight(ns)
  call.on('finish', done)
  call.on('cancelled', done)
  fn(call).then(
    () => call.end(),
    (e) => call.emit('error', e),
  )
}
const hexToDecimal = (hex) => BigInt(`0x${hex}`).toString(10)
const decimalToHex = (dec) => BigInt(dec).toString(16).padStart(16, '0')
const memberAlarms = (d) => (d.alarms ?? []).map((a) => ({ member_id: hexToDecimal(a.memberId), alarm: a.alarm }))
const SNAPSHOT_CHUNK = 64 * 1024
const APPLY_MODES = { REBOOT: 'reboot', AUTO: 'auto', NO_REBOOT: 'no-reboot', STAGED: 'staged', TRY: 'try' }
const APPLY_MODE_ENUM = Object.fromEntries(Object.entries(APPLY_MODES).map(([k, v]) => [v, k]))
const WIPE_MODES = { ALL: 'all', SYSTEM_DISK: 'system-disk', USER_DISKS: 'user-disks' }

const serviceAction = (ns, action) =>
  unary(ns, async (call) => ({
    messages: await machineCall(ns, call, 'machine.ServiceAction', { id: call.request.id, action }, (d) => ({ resp: d.response ?? '' }), {
      words: ['service', call.request.id, action],
    }),
  }))

function machineService(ns) {
  return {
    ApplyConfiguration: unary(ns, async (call) => {
      const r = call.request
      const mode = APPLY_MODES[r.mode ?? 'REBOOT'] ?? 'auto'
      const body = {
        data: Buffer.from(r.data ?? []).toString('utf8'),
        mode,
        dryRun: !!r.dry_run,
        ...(r.try_mode_timeout
          ? { tryModeTimeoutMs: Number(r.try_mode_timeout.seconds ?? 0) * 1000 + Number(r.try_mode_timeout.nanos ?? 0) / 1e6 }
          : {}),
      }
      // the mode the node resolved (auto: NO_REBOOT or REBOOT); the maintenance service answers the one asked
      const messages = await machineCall(ns, call, 'machine.ApplyConfiguration', body, (d) => ({
        mode: d.mode ? APPLY_MODE_ENUM[d.mode] : (r.mode ?? 'REBOOT'),
        mode_details: d.modeDetails ?? '',
        warnings: d.warnings ?? [],
      }))
      return { messages }
    }),
    Bootstrap: unary(ns, async (call) => ({ messages: await machineCall(ns, call, 'machine.Bootstrap', {}, () => ({})) })),
    EtcdMemberList: unary(ns, async (call) => ({
      messages: await machineCall(ns, call, 'machine.EtcdMemberList', { queryLocal: !!call.request.query_local }, (d) => ({
        members: (d.members ?? []).map((m) => ({
          id: hexToDecimal(m.id),
          hostname: m.hostname,
          peer_urls: m.peerUrls,
          client_urls: m.clientUrls,
          is_learner: !!m.isLearner,
        })),
      })),
    })),
    EtcdRemoveMemberByID: unary(ns, async (call) => ({
      messages: await machineCall(
        ns,
        call,
        'machine.EtcdRemoveMemberByID',
        { memberId: decimalToHex(call.request.member_id ?? '0') },
        () => ({}),
        { words: ['etcd', 'remove-member', decimalToHex(call.request.member_id ?? '0')] },
      ),
    })),
    EtcdAlarmList: unary(ns, async (call) => ({
      messages: await machineCall(ns, call, 'machine.EtcdAlarmList', {}, (d) => ({ member_alarms: memberAlarms(d) })),
    })),
    EtcdAlarmDisarm: unary(ns, async (call) => ({
      messages: await machineCall(ns, call, 'machine.EtcdAlarmDisarm', {}, (d) => ({ member_alarms: memberAlarms(d) })),
    })),
    EtcdStatus: unary(ns, async (call) => ({
      messages: await machineCall(ns, call, 'machine.EtcdStatus', {}, (d) => {
        const st = d.memberStatus ?? {}
        return {
          member_status: {
            member_id: hexToDecimal(st.memberId ?? '0'),
            protocol_version: st.protocolVersion,
            db_size: st.dbSize,
            db_size_in_use: st.dbSizeInUse,
            leader: hexToDecimal(st.leader ?? '0'),
            raft_index: st.raftIndex,
            raft_term: st.raftTerm,
            raft_applied_index: st.raftAppliedIndex,
            storage_version: st.storageVersion,
            errors: st.errors ?? [],
            is_learner: !!st.isLearner,
          },
        }
      }),
    })),
    EtcdLeaveCluster: unary(ns, async (call) => ({
      messages: await machineCall(ns, call, 'machine.EtcdLeaveCluster', {}, () => ({})),
    })),
    // the snapshot in chunks, as machined's chunker streams the reader (v1alpha1_server.go EtcdSnapshot)
    EtcdSnapshot: streaming(ns, (call) =>
      machineStream(ns, call, 'machine.EtcdSnapshot', {}, async (data, write) => {
        const bytes = data.bytes ?? Buffer.alloc(0)
        for (let at = 0; at < bytes.length; at += SNAPSHOT_CHUNK) write({ bytes: bytes.subarray(at, at + SNAPSHOT_CHUNK) })
      }),
    ),
    Reboot: unary(ns, async (call) => ({
      messages: await machineCall(ns, call, 'machine.Reboot', { mode: String(call.request.mode ?? 'DEFAULT').toLowerCase() }, (d) => ({
        actor_id: d.actorId ?? '',
      })),
    })),
    // MachineService.Upgrade (v1alpha1_server.go): the ack and the actor ID the --wait tracker follows
    Upgrade: unary(ns, async (call) => {
      const r = call.request
      const body = {
        image: r.image ?? '',
        preserve: !!r.preserve,
        stage: !!r.stage,
        force: !!r.force,
        rebootMode: String(r.reboot_mode ?? 'DEFAULT').toLowerCase(),
      }
      const words = [
        'upgrade',
        '--image',
        body.image,
        ...(body.stage ? ['--stage'] : []),
        ...(body.preserve ? ['--preserve'] : []),
        ...(body.force ? ['--force'] : []),
        ...(body.rebootMode !== 'default' ? ['--reboot-mode', body.rebootMode] : []),
      ]
      return {
        messages: await machineCall(ns, call, 'machine.Upgrade', body, (d) => ({ ack: d.ack ?? '', actor_id: d.actorId ?? '' }), { words }),
      }
    }),
    ImagePull: unary(ns, async (call) => ({
      messages: await machineCall(ns, call, 'machine.ImagePull', { reference: call.request.reference ?? '' }, () => ({}), {
        words: ['image', 'pull', call.request.reference ?? ''],
      }),
    })),
    Reset: unary(ns, async (call) => {
      const r = call.request
      const body = {
        graceful: !!r.graceful,
        reboot: !!r.reboot,
        wipeMode: WIPE_MODES[r.mode ?? 'ALL'] ?? 'all',
        systemLabelsToWipe: (r.system_partitions_to_wipe ?? []).filter((p) => p.wipe).map((p) => p.label),
        userDisksToWipe: r.user_disks_to_wipe ?? [],
      }
      const words = [
        'reset',
        `--graceful=${body.graceful}`,
        ...(body.reboot ? ['--reboot'] : []),
        ...body.systemLabelsToWipe.flatMap((l) => ['--system-labels-to-wipe', l]),
      ]
      return { messages: await machineCall(ns, call, 'machine.Reset', body, (d) => ({ actor_id: d.actorId ?? '' }), { words }) }
    }),
    ServiceList: unary(ns, async (call) => ({
      messages: await machineCall(ns, call, 'machine.ServiceList', {}, (d) => ({
        services: (d.services ?? []).map((s) => ({
          id: s.id,
          state: s.state,
          events: { events: (s.events ?? []).map((e) => ({ msg: e.msg, state: e.state, ts: timestamp(e.ts) })) },
          health: { unknown: !!s.health?.unknown, healthy: !!s.health?.healthy, last_message: s.health?.lastMessage ?? '' },
        })),
      })),
    })),
    // `talosctl service <id> start|stop|restart` (v1alpha1_server.go ServiceStart/Stop/Restart): one node model call
    ServiceStart: serviceAction(ns, 'start'),
    ServiceStop: serviceAction(ns, 'stop'),
    ServiceRestart: serviceAction(ns, 'restart'),
    // /proc/meminfo in kB (v1alpha1_server.go Memory): talosctl memory, and talosctl health's memory sizes
    Memory: unary(ns, async (call) => ({
      messages: await machineCall(ns, call, 'machine.Memory', {}, (d) => ({ meminfo: d.meminfo })),
    })),
    // talosctl asks Version before most commands (a skew check whose errors it ignores): a client-internal call
    Version: unary(ns, async (call) => ({
      messages: await machineCall(
        ns,
        call,
        'machine.Version',
        {},
        (d) => ({
          version: { tag: d.tag, sha: d.sha, built: d.built ?? '', go_version: d.goVersion, os: d.os, arch: d.arch },
          platform: { name: 'metal', mode: 'metal' },
          features: { rbac: !!d.features?.rbac },
        }),
        { purpose: 'version-check' },
      ),
    })),
    // kernel log records, then (--follow) what the node logs from then on (v1alpha1_server.go Dmesg)
    Dmesg: streaming(ns, (call) =>
      machineStream(ns, call, 'machine.Dmesg', {}, async (data, write, target) => {
        if (!call.request.tail) for (const l of data.lines ?? []) write(dmesgRecord(l))
        if (!call.request.follow) return
        let last = target.logs.at(-1)
        await follow(ns, call, target, () => {
          const fresh = target.logs.slice(target.logs.lastIndexOf(last) + 1)
          if (!fresh.length) return
          last = fresh.at(-1)
          for (const l of fresh) write(dmesgRecord({ ...l, ts: ns.sim.displayTime(l.ts).toISOString() }))
        })
      }),
    ),
    // a service's log (v1alpha1_server.go Logs: the system namespace and the kubelet from machined's buffers)
    Logs: streaming(ns, (call) => {
      const { id = '', namespace = '', tail_lines: tail = -1, follow: following } = call.request
      return machineStream(
        ns,
        call,
        'machine.Logs',
        { id, namespace },
        async (data, write, target) => {
          const lines = data.lines ?? []
          const shown = Number(tail) >= 0 ? lines.slice(Math.max(0, lines.length - Number(tail))) : lines
          for (const l of shown) write({ bytes: Buffer.from(`${l}\n`) })
          if (!following) return
          let sent = lines.length
          await follow(ns, call, target, () => {
            let now = []
            try {
              now = METHODS['machine.Logs'](ns.sim, target, { id, namespace }).lines
            } catch {
              return
            }
            for (const l of now.slice(sent)) write({ bytes: Buffer.from(`${l}\n`) })
            sent = Math.max(sent, now.length)
          })
        },
        { words: ['logs', id] },
      )
    }),
    // only the boot ID: talosctl's reboot/reset --wait reads it before and after (action/tracker.go getBootID)
    Read: streaming(ns, (call) =>
      machineStream(
        ns,
        call,
        'machine.Read',
        { path: call.request.path ?? '' },
        async (data, write) => {
          write({ bytes: Buffer.from(data.bytes ?? '') })
        },
        {
          purpose: byTracker(call) && call.request.path === '/proc/sys/kernel/random/boot_id' ? 'wait' : undefined,
          words: ['read', call.request.path ?? ''],
        },
      ),
    ),
    // machined's events: an empty hello, the tail asked for, then each new event (v1alpha1_server.go Events)
    Events: streaming(ns, (call) =>
      machineStream(
        ns,
        call,
        'machine.Events',
        {},
        async (data, write, target) => {
          const r = call.request
          const wanted = (e) => !r.with_actor_id || e.actorId === r.with_actor_id
          observeEvents(target)
          const ev = eventsOf(target)
          write({ data: { type_url: '', value: Buffer.alloc(0) }, actor_id: r.with_actor_id ?? '' })
          const tail = Number(r.tail_events ?? 0)
          for (const e of tail < 0 ? ev.list : tail > 0 ? ev.list.slice(-tail) : []) if (wanted(e)) write(toEvent(e))
          const onEvent = (e) => {
            if (wanted(e)) write(toEvent(e))
          }
          ev.emitter.on('event', onEvent)
          // readiness also follows the Kubernetes side: look again while someone listens
          try {
            await follow(ns, call, target, () => observeEvents(target))
          } finally {
            ev.emitter.off('event', onEvent)
          }
        },
        { purpose: byTracker(call) ? 'wait' : undefined },
      ),
    ),
    Kubeconfig: streaming(ns, async (call) => {
      const { nodes } = targetsOf(call)
      const messages = await invoke(ns, call, 'machine.Kubeconfig', {}, { targets: nodes, words: COMMAND_WORDS['machine.Kubeconfig'] })
      if (messages.length === 1 && !messages[0].node && messages[0].error) throw statusError(messages[0].error)
      for (const m of messages)
        call.write(m.error ? { metadata: metadataOf(m) } : { metadata: metadataOf(m), bytes: kubeconfigArchive(m.data.kubeconfig) })
    }),
  }
}

/** v1.13's ImageService.Pull (internal/app/images/images.go): the pinned name when done */
function imageService(ns) {
  return {
    Pull: streaming(ns, (call) =>
      machineStream(
        ns,
        call,
        'image.Pull',
        { reference: call.request.image_ref ?? '' },
        async (data, write) => write({ name: data.name }),
        {
          words: ['image', 'pull', call.request.image_ref ?? ''],
        },
      ),
    ),
  }
}

/**
 * v1.13's LifecycleService.Upgrade (internal/app/lifecycle/lifecycle.go): the installer's output as
 * it comes, then its exit code; talosctl calls it per node (`node` metadata), each answer unwrapped
 */
function lifecycleService(ns) {
  return {
    Upgrade: streaming(ns, async (call) => {
      const image = call.request.source?.image_name ?? ''
      const { targets, one2one } = routing(call)
      const write = (node) => (p) => {
        const progress = p.exitCode != null ? { exit_code: p.exitCode } : { message: p.message }
        if (!call.cancelled && !call.writableEnded) call.write({ ...(one2one || !node ? {} : { metadata: { hostname: node } }), progress })
      }
      const messages = await invoke(
        ns,
        call,
        'lifecycle.Upgrade',
        { image },
        {
          targets,
          words: ['upgrade', '--image', image],
          emit: write(targets.length === 1 ? targets[0] : ''),
        },
      )
      const failed = messages.find((m) => m.error)
      if (failed) throw statusError(failed.error)
    }),
  }
}

/** ClusterService.HealthCheck: talosctl health runs it on the server by default (cmd/talosctl/cmd/talos/health.go --server) */
function clusterService(ns) {
  return {
    HealthCheck: streaming(ns, async (call) => {
      const r = call.request
      const { targets, one2one } = routing(call)
      const info = r.cluster_info ?? {}
      const timeout = r.wait_timeout
        ? Number(r.wait_timeout.seconds ?? 0) * 1000 + Math.round((r.wait_timeout.nanos ?? 0) / 1e6)
        : undefined
      const body = {
        ...(timeout ? { waitTimeoutMs: timeout } : {}),
        controlPlaneNodes: info.control_plane_nodes ?? [],
        workerNodes: info.worker_nodes ?? [],
        forceEndpoint: info.force_endpoint ?? '',
      }
      // one-2-many adds the node's metadata; a worker answers a call for itself locally (apid director)
      const md = one2one || ns.node.role === 'worker' ? undefined : { hostname: targets[0] }
      const write = (msg) => {
        if (!call.cancelled) call.write(md ? { metadata: md, ...msg } : msg)
      }
      const messages = await invoke(ns, call, 'cluster.HealthCheck', body, {
        targets,
        words: COMMAND_WORDS['cluster.HealthCheck'],
        emit: (line) => write({ message: line }),
      })
      const err = messages.find((m) => m.error)?.error
      if (!err) return
      // one-2-many: the node's error as message metadata (apid); otherwise the call's status
      if (md) write({ metadata: metadataOf({ node: targets[0], error: err }) })
      else throw statusError(err)
    }),
  }
}

function storageService(ns) {
  const TYPES = new Set(['UNKNOWN', 'SSD', 'HDD', 'NVME', 'SD', 'CD'])
  return {
    Disks: unary(ns, async (call) => ({
      messages: await machineCall(
        ns,
        call,
        'storage.Disks',
        {},
        (d) => ({
          disks: (d.disks ?? []).map((x) => ({
            size: String(x.size),
            model: x.model,
            device_name: x.deviceName,
            serial: x.serial,
            wwid: x.wwid,
            type: TYPES.has(x.type) ? x.type : 'UNKNOWN',
            bus_path: x.busPath,
            system_disk: !!x.systemDisk,
            subsystem: x.subsystem,
            readonly: !!x.readonly,
          })),
        }),
        { purpose: 'wait' },
      ),
    })),
  }
}

/** the `meta` namespace: ResourceDefinitions, read through the target node (reachability as any call) */
async function definitions(ns, call) {
  await cosiCall(ns, call, { type: 'MachineTypes.config.talos.dev', namespace: 'config' }, 'resolve')
  return [...DEFINITIONS, RD_DEFINITION].map((d) => resourceDefinition(d, ns.sim))
}

async function resources(ns, call, { namespace, type, id }, purpose) {
  if (namespace === 'meta' && type === RD_TYPE) {
    const all = await definitions(ns, call)
    return id ? all.filter((r) => r.metadata.id === id) : all
  }
  const data = await cosiCall(ns, call, { type, namespace, ...(id ? { id } : {}) }, purpose)
  return data.resources.map(toResource)
}

function stateService(ns) {
  return {
    Get: unary(ns, async (call) => {
      const { namespace, type, id } = call.request
      const [resource] = await resources(ns, call, { namespace, type, id })
      if (!resource) throw statusError({ code: 'NotFound', message: `resource ${type}(${namespace}/${id}@undefined) doesn't exist` })
      return { resource }
    }),
    List: streaming(ns, async (call) => {
      for (const resource of await resources(ns, call, call.request)) call.write({ resource })
    }),
    // initial contents, then a re-read on every node change (and every 250 ms): an event per changed or
    // gone resource. A state that lasts a moment (the kubelet stopped for a new spec: its Service
    // destroyed, then created) is read when the node changes, so a watcher sees it as COSI delivers it
    Watch: streaming(ns, async (call) => {
      const { namespace, type, id, options } = call.request
      let known = new Map()
      let stopped = false
      let wake = () => {}
      // the node the watch reads (apid proxies to `node`), woken by its changes only
      const target = (targetsOf(call).node[0] && ns.sim.lookup(targetsOf(call).node[0])) || ns.node
      const unwatch = ns.sim.watch((v) => v.name === target?.name && wake())
      call.on('cancelled', () => {
        stopped = true
        unwatch()
        wake()
      })
      call.on('finish', unwatch)
      call.write({ event: [] }) // the client waits for a first, empty response (cosi runtime protobuf client)
      for (let first = true; !stopped; first = false) {
        if (!first)
          await new Promise((r) => {
            const t = setTimeout(r, 250)
            wake = () => {
              clearTimeout(t)
              r()
            }
          })
        wake = () => {}
        // re-reads after the first are the watch's own: logged, no call fault fires on them
        // a watched ID that does not exist (yet, or any more) is no error: the list, filtered
        const list = (await resources(ns, call, { namespace, type }, first ? undefined : 'watch')).filter(
          (r) => !id || r.metadata.id === id,
        )
        const now = new Map(list.map((r) => [r.metadata.id, r]))
        const events = []
        for (const [rid, r] of now) {
          const old = known.get(rid)
          if (!old) events.push({ resource: r, event_type: 'CREATED' })
          else if (old.metadata.version !== r.metadata.version || old.spec.yaml_spec !== r.spec.yaml_spec)
            events.push({ resource: r, old, event_type: 'UPDATED' })
        }
        for (const [rid, r] of known) if (!now.has(rid)) events.push({ resource: r, event_type: 'DESTROYED' })
        // one resource watched that does not exist: its first event is Destroyed, a tombstone (cosi
        // runtime pkg/state/impl/inmem/collection.go Watch; upgrade-k8s's kubelet wait refuses it)
        if (first && id && !now.has(id)) events.push({ resource: tombstone(namespace, type, id), event_type: 'DESTROYED' })
        if (first && !id && !options?.bootstrap_contents) events.length = 0
        if (first && !id && options?.bootstrap_contents) events.push({ event_type: 'BOOTSTRAPPED' })
        known = now
        if (events.length && !stopped) call.write({ event: events })
      }
    }),
  }
}

/** a node listener's gRPC server (sim/listeners.js NodeServer `ns`: sim, node, mode, wanted, active) */
export function createGrpcServer(ns) {
  const server = new grpc.Server()
  server.addService(packages.machine.MachineService.service, machineService(ns))
  server.addService(packages.cosi.resource.State.service, stateService(ns))
  server.addService(packages.machine.ImageService.service, imageService(ns))
  server.addService(packages.machine.LifecycleService.service, lifecycleService(ns))
  server.addService(packages.cluster.ClusterService.service, clusterService(ns))
  server.addService(packages.storage.StorageService.service, storageService(ns))
  return server
}
