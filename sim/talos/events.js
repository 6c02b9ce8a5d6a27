// machined's event stream of one node (MachineService.Events), derived from the node model's changes:
// sequences, phases and tasks as the controller publishes them around each task
// (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_controller.go run/runPhase/runTask), with the
// phase and task names of the Reboot and Reset sequences (v1alpha1_sequencer.go, the tasks in
// v1alpha1_sequencer_tasks.go), and a MachineStatusEvent whenever the stage or readiness changes
// (controllers/runtime/machine_status.go). The buffer is machined's memory: a new boot starts it empty
// (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_events.go). The actor ID of a reboot or reset
// is the API call's (v1alpha1_server.go Reboot/Reset answer it; talosctl's --wait follows it).
import { EventEmitter } from 'node:events'
import { randomBytes, randomUUID } from 'node:crypto'

const CAPACITY = 1000 // events kept per boot (machined's buffer is bounded too)
// MachineStatusEvent.MachineStage as the node model names its stages
export const STAGES = {
  unknown: 'UNKNOWN',
  booting: 'BOOTING',
  installing: 'INSTALLING',
  maintenance: 'MAINTENANCE',
  running: 'RUNNING',
  rebooting: 'REBOOTING',
  'shutting down': 'SHUTTING_DOWN',
  resetting: 'RESETTING',
  upgrading: 'UPGRADING',
}
// stopAllPhaselist(r, enableKexec) (v1alpha1_sequencer.go): [phase, task], each task as it names itself
// (the string its function returns in v1alpha1_sequencer_tasks.go: StopServicesEphemeral is
// `stopServicesForUpgrade`, TeardownVolumeLifecycle `teardownLifecycle`, KexecPrepare `kexecPrepare`)
export const stopAll = (kexec) => [
  ['stopServices', 'stopServicesForUpgrade'],
  ['umount', 'unmountPodMounts'],
  ['unmountBind', 'unmountSystemDiskBindMounts'],
  ['unmountSystem', 'unmountEphemeralPartition'],
  ['volumeFinalize', 'teardownLifecycle'],
  ...(kexec ? [['kexec', 'kexecPrepare']] : []),
  ['stopEverything', 'stopAllServices'],
]

// xid-like IDs (rs/xid: 20 characters of base32hex, ordered by time): the client only passes them back as tail_id
let counter = randomBytes(3).readUIntBE(0, 3)
const machine = randomBytes(5)
function xid() {
  const b = Buffer.alloc(12)
  b.writeUInt32BE(Math.floor(Date.now() / 1000), 0)
  machine.copy(b, 4)
  b.writeUIntBE((counter = (counter + 1) % 0x1000000), 9, 3)
  const alphabet = '0123456789abcdefghijklmnopqrstuv'
  let bits = 0,
    value = 0,
    out = ''
  for (const byte of b) {
    value = (value << 8) | byte
    bits += 8
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  return out + alphabet[(value << (5 - bits)) & 31]
}

/** a node's event buffer: { list, emitter } plus what was last seen of the node */
export function eventsOf(node) {
  node.machineEvents ??= {
    list: [],
    emitter: new EventEmitter().setMaxListeners(0),
    stage: null,
    status: null,
    actor: null,
    own: null, // the sequence the node model runs itself (runSequence)
    resetState: null,
  }
  return node.machineEvents
}

/** one event: { id, type (the payload's message name), payload, actorId } */
function publish(node, type, payload, actorId = '') {
  const ev = eventsOf(node)
  const e = { id: xid(), type, payload, actorId }
  ev.list.push(e)
  if (ev.list.length > CAPACITY) ev.list.shift()
  ev.emitter.emit('event', e)
}

/**
 * a reboot or reset accepted by the API: its sequence's events carry this actor ID. `graceful`: a
 * reset's drain and leave; `mode`: a reboot's (force: no teardown phases); `systemLabels`: a reset's
 * system partitions to wipe (then kexec, unless BOOT is wiped, and `resetSpec` instead of `reset`)
 */
export function startAction(
  node,
  sequence,
  { graceful = true, mode = 'default', systemLabels = [], wipeMode = 'all', userDisks = [] } = {},
) {
  const id = randomUUID()
  eventsOf(node).actor = { sequence, id, graceful, mode, systemLabels, wipeMode, userDisks }
  return id
}

const sequence = (node, name, action, actor, error) =>
  publish(node, 'SequenceEvent', { sequence: name, action, ...(error ? { error: { code: 'FATAL', message: error } } : {}) }, actor)
/** a phase with its one task, run to the end (or only started: the machine goes down in it) */
function phase(node, name, task, actor, { done = true } = {}) {
  publish(node, 'PhaseEvent', { phase: name, action: 'START' }, actor)
  publish(node, 'TaskEvent', { task, action: 'START' }, actor)
  if (!done) return
  publish(node, 'TaskEvent', { task, action: 'STOP' }, actor)
  publish(node, 'PhaseEvent', { phase: name, action: 'STOP' }, actor)
}

/**
 * A sequence the node model runs step by step (upgrade, stageUpgrade, install: sim/talos/upgrade.js),
 * its events as the controller publishes them (v1alpha1_controller.go run/runPhase/runTask) with the
 * API call's actor. While it runs, observe() leaves the stage changes to it (no Reboot sequence of its
 * own when the machine goes down in its `reboot` phase).
 */
export function runSequence(node, name, actor = '') {
  const ev = eventsOf(node)
  ev.own = name
  sequence(node, name, 'START', actor)
  let number = 0
  let open = null
  return {
    /** the next phase with its one task; `done: false` leaves it running (the machine goes down in it, or it fails) */
    phase(p, t, { done = true } = {}) {
      number++
      phase(node, p, t, actor, { done })
      open = done ? null : [p, t]
    },
    /** the running phase's task and the phase end */
    finish() {
      if (!open) return
      publish(node, 'TaskEvent', { task: open[1], action: 'STOP' }, actor)
      publish(node, 'PhaseEvent', { phase: open[0], action: 'STOP' }, actor)
      open = null
    },
    /** the running phase's task failed: the sequence ends, then the NOOP event with the FATAL error */
    fail(err) {
      this.finish()
      sequence(node, name, 'STOP', actor)
      // (still its own: the machine reboots after machined's countdown, no Reboot sequence)
      sequence(node, name, 'NOOP', actor, `sequence failed: error running phase ${number} in ${name} sequence: task 1/1: failed, ${err}`)
    },
  }
}

/** a sequence the controller did not start, another holding its lock (v1alpha1_controller.go Run: no actor) */
export function sequenceLocked(node, name) {
  publish(node, 'SequenceEvent', { sequence: name, action: 'NOOP', error: { code: 'LOCKED', message: 'sequence not started: locked' } })
}

/** the API call that started this sequence, if one did: { id, graceful } */
function takeActor(node, name) {
  const ev = eventsOf(node)
  const actor =
    ev.actor?.sequence === name ? ev.actor : { id: '', graceful: true, mode: 'default', systemLabels: [], wipeMode: 'all', userDisks: [] }
  if (ev.actor?.sequence === name) ev.actor = null
  return actor
}

/** the node's stage and readiness as a MachineStatusEvent, when they changed */
function machineStatus(node) {
  const ev = eventsOf(node)
  const { stage, status } = node.machineStatus()
  const payload = {
    stage: STAGES[stage] ?? 'UNKNOWN',
    status: { ready: status.ready, unmet_conditions: status.unmetConditions.map((c) => ({ name: c.name, reason: c.reason })) },
  }
  const key = JSON.stringify(payload)
  if (key === ev.status) return
  ev.status = key
  publish(node, 'MachineStatusEvent', payload)
}

/**
 * Called on every change of the node (sim/cluster.js changed) and by open Events streams (readiness
 * also follows the Kubernetes side): turns stage transitions into the sequences machined runs.
 */
export function observe(node) {
  const ev = eventsOf(node)
  const prev = ev.stage
  const stage = node.stage
  ev.stage = stage
  if (prev !== stage) {
    // a new boot: machined starts again with an empty buffer
    if (stage === 'booting' && ['unknown', 'rebooting', 'resetting', 'shutting down', null].includes(prev)) {
      ev.list = []
      ev.status = null
      ev.own = null
      sequence(node, 'initialize', 'START')
      sequence(node, 'initialize', 'STOP')
    }
    // a staged upgrade's first boot runs the Install sequence instead (sim/talos/upgrade.js stagedInstall)
    if (stage === 'booting' && node.configured && !node.staged) sequence(node, 'boot', 'START')
    if (prev === 'booting' && stage === 'running') sequence(node, 'boot', 'STOP')
    if (stage === 'rebooting' && !ev.own) {
      // Sequencer.Reboot: FORCE skips the teardown; otherwise stopAllPhaselist with kexec (KexecPrepare
      // itself does nothing under powercycle, its phase still runs)
      const { id: actor, mode } = takeActor(node, 'reboot')
      sequence(node, 'reboot', 'START', actor)
      if (mode !== 'force') {
        phase(node, 'cleanup', 'stopAllPods', actor)
        phase(node, 'dbus', 'stopDBus', actor)
        for (const [p, t] of stopAll(true)) phase(node, p, t, actor)
      }
      phase(node, 'reboot', 'reboot', actor, { done: false })
    }
    if (stage === 'resetting') resetBegins(node)
  }
  if (stage === 'resetting' || stage === 'shutting down') resetProgress(node)
  machineStatus(node)
}

/** the Reset sequence up to LeaveEtcd (drain and cleanup run first; v1alpha1_sequencer.go Reset) */
function resetBegins(node) {
  const ev = eventsOf(node)
  const { id: actor, graceful, systemLabels, wipeMode, userDisks } = takeActor(node, 'reset')
  const leaves = graceful && node.role === 'controlplane'
  ev.resetState = { actor, leaves, systemLabels, wipeMode, userDisks, phases: 0, logMark: node.logs.at(-1) }
  sequence(node, 'reset', 'START', actor)
  const begin = graceful
    ? [
        ['drain', 'cordonAndDrainNode'],
        ['cleanup', 'removeAllPods'],
      ]
    : [['cleanup', 'stopAllPods']]
  for (const [p, t] of [...begin, ['dbus', 'stopDBus']]) {
    phase(node, p, t, actor)
    ev.resetState.phases++
  }
  if (leaves) {
    phase(node, 'leave', 'leaveEtcd', actor, { done: false })
    ev.resetState.phases++
  }
}

/** the rest of a reset: a refused etcd leave fails the sequence; otherwise every service stops and the node goes down */
function resetProgress(node) {
  const ev = eventsOf(node)
  const st = ev.resetState
  if (!st || st.finished) return
  const { actor, systemLabels, wipeMode, userDisks } = st
  // LeaveEtcd failed (the node model logs why; v1alpha1_sequencer_tasks.go LeaveEtcd)
  const last = node.logs.at(-1)
  const refused =
    last !== st.logMark && last?.text.startsWith('[talos] reset: leave etcd: ')
      ? last.text.slice('[talos] reset: leave etcd: '.length)
      : null
  if (refused) {
    st.finished = true
    publish(node, 'TaskEvent', { task: 'leaveEtcd', action: 'STOP' }, actor)
    publish(node, 'PhaseEvent', { phase: 'leave', action: 'STOP' }, actor)
    sequence(node, 'reset', 'STOP', actor)
    sequence(
      node,
      'reset',
      'NOOP',
      actor,
      `sequence failed: error running phase ${st.phases} in reset sequence: task 1/1: failed, failed to leave cluster: ${refused}`,
    )
    return
  }
  // the node model wiped it: its config is gone, services stopped
  if (node.configured) return
  st.finished = true
  if (st.leaves) {
    publish(node, 'TaskEvent', { task: 'leaveEtcd', action: 'STOP' }, actor)
    publish(node, 'PhaseEvent', { phase: 'leave', action: 'STOP' }, actor)
  }
  phase(node, 'preReset', 'sendResetSignal', actor)
  // Sequencer.Reset: kexec only when system partitions are named and BOOT is not among them; the
  // system disk is wiped whole (`reset`) or by those partitions (`resetSpec`), in modes ALL and SYSTEM_DISK
  const targets = systemLabels.length > 0
  for (const [p, t] of stopAll(targets && !systemLabels.includes('BOOT'))) phase(node, p, t, actor)
  phase(node, 'forceCleanup', 'forceCleanup', actor)
  if (wipeMode !== 'user-disks') phase(node, ...(targets ? ['resetSpec', 'resetSystemDiskSpec'] : ['reset', 'resetSystemDisk']), actor)
  if (wipeMode !== 'system-disk' && userDisks.length) phase(node, 'resetUserDisks', 'resetUserDisks', actor)
  if (node.stage === 'shutting down') phase(node, 'shutdown', 'shutdown', actor, { done: false })
  else phase(node, 'reboot', 'reboot', actor, { done: false })
}
