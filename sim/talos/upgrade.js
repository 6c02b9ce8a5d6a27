// Talos upgrades on the node model.
// - The legacy path, MachineService.Upgrade (internal/app/machined/internal/server/v1alpha1/
//   v1alpha1_server.go Upgrade, tryLockUpgradeMutex): the installer image pulled and validated inside
//   the call (internal/pkg/install/pull.go, internal/pkg/containers/image/image.go: a missing image
//   fails on its second NotFound), then on a control plane, unless `force` or `preserve` is sent, the
//   cluster-wide upgrade mutex and etcd's ValidateForUpgrade (sim/etcd.js, against the real members),
//   then the Upgrade or StageUpgrade sequence in the background (v1alpha1_sequencer.go).
// - The sequences: the phases and tasks of v1alpha1_sequencer.go Upgrade / StageUpgrade / Install,
//   the stages of controllers/runtime/machine_status.go (upgrading; rebooting from the kexec phase or
//   a FATAL sequence error; installing in the Install sequence's install phase).
// - The installer (cmd/installer/pkg/install/preflight.go): its Talos version against the host's
//   (sim/talos/compat.js); a refusal fails phase 9 and machined reboots into the old version after
//   its countdown (internal/app/machined/main.go handle: revertBootloader, `rebooting in N seconds`).
// - v1.13's ImageService.Pull (internal/app/images/images.go: NotFound at once), the legacy
//   MachineService.ImagePull, and LifecycleService.Upgrade (internal/app/lifecycle/lifecycle.go,
//   container.go: one at a time, the installer's output streamed, then its exit code; no etcd check,
//   no drain, no reboot).
import { createHash, randomUUID } from 'node:crypto'
import { stringify } from 'yaml'
import { rpc } from './errors.js'
import { runSequence, sequenceLocked, stopAll } from './events.js'
import { parseTag, upgradeRefusal } from './compat.js'

// image.go Pull with WithMaxNotFoundRetries(1): the second NotFound ends it, one 5 s retry unit later
const LEGACY_NOT_FOUND_RETRY_S = 5
// internal/app/machined/main.go: the countdown before the reboot after a fatal sequence error
const FATAL_REBOOT_COUNTDOWN_S = 10
// the stages in which a sequence holds the controller's lock
const SEQUENCE_STAGES = ['upgrading', 'rebooting', 'installing', 'resetting', 'shutting down']

/** the Image Factory schematic ID of a schematic {extensions, id?} (its extraInfo's sha256, or the ID an installer image named) */
export function schematicIdOf(schematic) {
  if (schematic.id) return schematic.id
  const official = schematic.extensions.map((name) => (name.includes('/') ? name : `siderolabs/${name}`))
  return createHash('sha256').update(schematicInfo(official)).digest('hex')
}
/** the schematic as the Image Factory's virtual extension carries it (its extraInfo) */
export function schematicInfo(official) {
  return stringify({ customization: { systemExtensions: { officialExtensions: official } } })
}

/** an installer reference: its registry path, tag (the version it installs) and Image Factory schematic ID, if any */
export function parseInstaller(ref) {
  const m = /^(.+?)(?::([^:/@]+))?(@sha256:[0-9a-f]{64})?$/.exec(String(ref))
  const repo = m?.[1] ?? String(ref)
  const tag = m?.[2] ?? 'latest'
  const factory = /^factory\.talos\.dev\/[^/]+\/([0-9a-f]{64})$/.exec(repo)
  return { repo, tag, version: parseTag(tag) ? `v${parseTag(tag).text}` : null, schematicId: factory?.[1] ?? null }
}

/**
 * whether the registry holds the image: the scenario's `installers` list when given, else every
 * ghcr.io/siderolabs/installer and factory.talos.dev/<name>/<schematic ID> tag of v1.11 to v1.13;
 * fault `image-missing` (its `image`, or every installer) takes it away for that node
 */
export function registryHas(sim, node, ref) {
  const missing = sim.faults.find(node.name, { kind: 'image-missing' }).some((f) => !f.image || f.image === ref)
  if (missing) return false
  // the Kubernetes images upgrade-k8s pre-pulls (registry.k8s.io, Talos's kubelet): every release from
  // 1.28 on, unless an image-pull fault takes one away (sim/health-faults.js)
  if (K8S_IMAGE.test(ref)) return !sim.health?.imagePull(ref)
  if (sim.scenario.installers) return sim.scenario.installers.includes(ref)
  const { repo, version } = parseInstaller(ref)
  const minor = version ? Number(version.split('.')[1]) : 0
  return (repo === 'ghcr.io/siderolabs/installer' || /^factory\.talos\.dev\/[^/]+\/[0-9a-f]{64}$/.test(repo)) && minor >= 11 && minor <= 13
}

const K8S_IMAGE =
  /^(registry\.k8s\.io\/kube-(apiserver|controller-manager|scheduler|proxy)|ghcr\.io\/siderolabs\/kubelet):v1\.(2[89]|3\d)\.\d+(-fat|-slim)?$/
/** containerd's resolver error for a reference the registry does not hold (core/remotes/docker/resolver.go) */
const notFoundText = (ref) => `failed to resolve reference "${ref}": ${ref}: not found`

/**
 * the pull, `timings.pull` simulated seconds (a pulled image is kept: containerd's store on the
 * node); resolves or rejects with containerd's error. `retryNotFound`: the legacy path's one retry.
 */
async function pull(sim, node, ref, { retryNotFound, signal }) {
  if (node.pulled.has(ref)) return
  await wait(sim, sim.timings.pull, signal)
  if (!registryHas(sim, node, ref)) {
    if (retryNotFound) await wait(sim, LEGACY_NOT_FOUND_RETRY_S, signal)
    throw Object.assign(new Error(notFoundText(ref)), { notFound: true })
  }
  node.pulled.add(ref)
}

/**
 * simulated seconds inside a call: the call's context ends with its client (a killed talosctl, its
 * deadline), and what it was doing stops there (the pull, the checks, the installer container)
 */
function wait(sim, simSeconds, signal) {
  return new Promise((done, fail) => {
    const gone = () => fail(rpc('Canceled', 'context canceled'))
    if (signal?.aborted) return gone()
    const cancel = sim.clock.after(simSeconds, () => {
      signal?.removeEventListener('abort', onAbort)
      done()
    })
    const onAbort = () => {
      cancel()
      gone()
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
/** the call's client went away: it stops before anything else happens */
function stillWanted(signal) {
  if (signal?.aborted) throw rpc('Canceled', 'context canceled')
}

/** a plain Go error through gRPC (machined returns fmt.Errorf): code Unknown */
const goError = (text) => rpc('Unknown', text)

/** MachineService.Upgrade (v1alpha1_server.go Upgrade): the checks in their order, then the sequence; answers the ack */
export async function legacyUpgrade(sim, node, { image, preserve, stage, force, rebootMode }, signal) {
  node.talosLog(`upgrade request received: staged ${!!stage}, force ${!!force}, reboot mode ${rebootMode.toUpperCase()}`)
  node.talosLog(`validating ${JSON.stringify(image)}`)
  try {
    await pull(sim, node, image, { retryNotFound: true, signal })
  } catch (e) {
    if (!e.notFound) throw e
    throw goError(`error validating installer image "${image}": failed to pull image "${image}": ${e.message}`)
  }
  if (node.role === 'controlplane' && !force && !preserve) {
    let unlock
    try {
      unlock = await sim.etcd.tryLockUpgradeMutex(node)
    } catch (e) {
      throw goError(`failed to acquire upgrade mutex: error trying to lock etcd upgrade mutex: ${e.message}`)
    }
    // the mutex protects only the pre-upgrade checks: unlocked when the call returns
    try {
      const refused = await sim.etcd.validateForUpgrade(node)
      if (refused) throw goError(`error validating etcd for upgrade: ${refused}`)
    } finally {
      await unlock()
    }
  }
  stillWanted(signal)
  const target = parseInstaller(image)
  const actorId = randomUUID()
  // the controller's lock: a sequence already running (an upgrade, a reboot, a reset) keeps this one
  // from starting; the call has answered its ack all the same (v1alpha1_server.go runs it in a goroutine)
  if (SEQUENCE_STAGES.includes(node.stage) || node.rebootPending || sim.faults.take(node.name, { kind: 'upgrade-locked' })) {
    sim.clock.after(0.01, () => {
      sequenceLocked(node, stage ? 'stageUpgrade' : 'upgrade')
      node.talosLog(`${stage ? 'reboot for staged upgrade failed:' : 'upgrade failed:'} locked`)
    })
    return { ack: 'Upgrade request received', actorId }
  }
  sim.clock.after(0.01, () =>
    stage ? stageUpgrade(node, image, target, rebootMode, actorId) : upgrade(node, image, target, rebootMode, actorId),
  )
  return { ack: 'Upgrade request received', actorId }
}

/** the phases of a sequence, spread over `timings.upgrade` simulated seconds, each with a step of its own */
function stepper(node, seq) {
  const gen = node.gen
  const each = node.ctx.timings.upgrade / 12
  return (p, t, fn, opts) =>
    new Promise((done) =>
      node.after(each, () => {
        if (gen !== node.gen) return
        seq.phase(p, t, opts)
        fn?.()
        node.changed()
        done()
      }),
    )
}

/** stopServicesForUpgrade (StopServicesEphemeral): cri and what depends on it (etcd, the kubelet) stop; trustd too */
function stopEphemeral(node) {
  for (const id of ['kubelet', 'etcd', 'cri', 'trustd'])
    if (node.services.has(id)) node.svc(id, 'Finished', 'Service finished successfully', null)
  node.etcdRunning = false
  node.etcdHealthy = false
  node.apiServerUp = false
  node.criUp = false
}

/** the installer's run: null, or its failure as install.go reports it (the version check of preflight.go) */
function installer(node, target) {
  const refused = target.version ? upgradeRefusal(node.talosVersion, target.version) : 'upgrades to version latest are not supported'
  if (!refused) return null
  node.talosLog(`pre-flight checks failed: ${refused}`)
  return 'task "upgrade" failed: exit code 1'
}

/** what the node runs after booting the installed image: its version and schematic (Version, osImage, ExtensionStatus follow) */
export function runningVersion(node, next) {
  node.spec.talosVersion = next.version
  node.spec.talosMinor = Number(next.version.split('.')[1])
  node.spec.schematic = next.schematic
  node.spec.extensions = next.schematic ? [...next.schematic.extensions] : []
  node.talosLog(`booted Talos ${next.version}`)
}

/**
 * what an installer image puts on the disk: its version, and the schematic its reference names (an
 * Image Factory ID: a known schematic's extensions, else that ID without extensions we know; the
 * official installer: none)
 */
function diskImage(node, target) {
  const unsigned = unsignedFor(node, target.repo)
  if (!target.schematicId) return { version: target.version, schematic: null, unsigned }
  const known = node.ctx.nodes.map((n) => n.spec.schematic).find((sc) => sc && schematicIdOf(sc) === target.schematicId)
  return {
    version: target.version,
    schematic: known ? { extensions: [...known.extensions] } : { extensions: [], id: target.schematicId },
    unsigned,
  }
}

/**
 * a secure-boot machine given a boot loader its keys do not sign: the installer of a repository that
 * is no `…-secureboot` one (Image Factory's installer-secureboot, <platform>-installer-secureboot)
 * writes sd-boot and the UKI unsigned (pkg/imager: only the secure-boot profile signs them), and
 * neither the upgrade nor the install checks it (v1alpha1_server.go Upgrade, install.PullAndValidateInstallerImage)
 */
export function unsignedFor(node, repo) {
  return (
    node.spec.secureBoot === true &&
    !String(repo)
      .split('/')
      .slice(1)
      .some((part) => part.endsWith('-secureboot'))
  )
}

/** the machine fails the sequence at its running phase: the FATAL event, `rebooting`, the countdown, the reboot into what is on disk */
function fatal(node, seq, err) {
  seq.fail(err)
  node.talosLog(`upgrade failed: ${err}`)
  node.setStage('rebooting')
  const gen = node.gen
  for (let i = FATAL_REBOOT_COUNTDOWN_S; i >= 0; i--)
    node.after(FATAL_REBOOT_COUNTDOWN_S - i, () => gen === node.gen && node.talosLog(`rebooting in ${i} seconds`))
  node.after(FATAL_REBOOT_COUNTDOWN_S + 0.5, () => gen === node.gen && node.reboot({}))
}

/** the end of a sequence: kexec (DEFAULT mode: stage rebooting), stopEverything, then down in the reboot phase */
async function goDown(node, step, kexec) {
  if (kexec) await step('kexec', 'kexecPrepare', () => node.setStage('rebooting'))
  await step('stopEverything', 'stopAllServices', () => {
    for (const s of node.services.values()) if (s.state === 'Running') node.svc(s.id, 'Finished', 'Service finished successfully', null)
  })
  await step('reboot', 'reboot', null, { done: false })
  node.reboot({})
}

/** cleanup (StopAllPods): the kubelet and its pods stop; the Node stays, unposted */
function stopPods(node) {
  if (node.services.has('kubelet')) node.svc('kubelet', 'Finished', 'Service finished successfully', null)
  node.ctx.kubeletStopped(node)
}

/** Sequencer.Upgrade: drain, cleanup, dbus, stopServices, the unmounts, volumeFinalize, upgrade (9), meta, kexec, stopEverything, reboot */
async function upgrade(node, image, target, rebootMode, actorId) {
  const gen = node.gen
  node.setStage('upgrading')
  node.ctx.kubeCordon(node) // NodeCordonedSpecController at stage upgrading
  const seq = runSequence(node, 'upgrade', actorId)
  const step = stepper(node, seq)
  // drain: the kubelet registers a node (machine.kubelet.skipNodeRegistration is not modelled)
  seq.phase('drain', 'cordonAndDrainNode', { done: false })
  await node.talosDrain()
  if (gen !== node.gen) return
  seq.finish()
  await step('cleanup', 'stopAllPods', () => stopPods(node))
  await step('dbus', 'stopDBus')
  await step('stopServices', 'stopServicesForUpgrade', () => stopEphemeral(node))
  await step('unmount', 'unmountPodMounts')
  await step('unmountBind', 'unmountSystemDiskBindMounts')
  await step('unmountSystem', 'unmountEphemeralPartition')
  await step('volumeFinalize', 'teardownLifecycle')
  await step('upgrade', 'upgrade', null, { done: false })
  const failed = installer(node, target)
  if (failed) return fatal(node, seq, failed)
  node.onDisk = diskImage(node, target)
  seq.finish()
  await step('meta', 'reloadMeta')
  await goDown(node, step, rebootMode === 'default')
}

/** Sequencer.StageUpgrade: cleanup, dbus, stopAllPhaselist (kexec in DEFAULT mode), reboot; the image waits in META */
async function stageUpgrade(node, image, target, rebootMode, actorId) {
  node.staged = { image, target }
  node.setStage('upgrading')
  const seq = runSequence(node, 'stageUpgrade', actorId)
  const step = stepper(node, seq)
  await step('cleanup', 'stopAllPods', () => stopPods(node))
  await step('dbus', 'stopDBus')
  for (const [p, t] of stopAll(false)) {
    if (p === 'stopEverything') break
    await step(p, t, p === 'stopServices' ? () => stopEphemeral(node) : null)
  }
  await goDown(node, step, rebootMode === 'default')
}

/**
 * a staged upgrade's next boot (Sequencer.Install while the staged image's META tag is set): env,
 * install (stage installing: the installer runs), meta, saveMeta, volumeFinalize, stopEverything,
 * kexec, reboot: the second reboot, into the new version. The API is not up in this boot.
 */
export function stagedInstall(node) {
  const { target } = node.staged
  node.services.clear()
  node.setStage('booting', 'off')
  const seq = runSequence(node, 'install')
  const step = stepper(node, seq)
  ;(async () => {
    await step('env', 'setUserEnvVars')
    await step('install', 'install', () => node.setStage('installing'), { done: false })
    node.staged = null
    const failed = installer(node, target)
    if (failed) return fatal(node, seq, failed)
    node.onDisk = diskImage(node, target)
    seq.finish()
    await step('meta', 'reloadMeta')
    await step('saveMeta', 'flushMeta')
    await step('volumeFinalize', 'teardownLifecycle')
    await step('stopEverything', 'stopAllServices')
    await step('kexec', 'kexecPrepare', () => node.setStage('rebooting', 'off'))
    await step('reboot', 'reboot', null, { done: false })
    node.reboot({})
  })()
}

/** ImageService.Pull (v1.13) and MachineService.ImagePull (v1alpha1_images.go): the pinned name, or NotFound at once (WithMaxNotFoundRetries(0)) */
export async function imagePull(sim, node, ref, signal) {
  if (!ref) throw rpc('InvalidArgument', 'image reference is required')
  try {
    await pull(sim, node, ref, { retryNotFound: false, signal })
  } catch (e) {
    if (!e.notFound) throw e
    throw rpc('NotFound', `error pulling image: failed to pull image "${ref}": ${e.message}`)
  }
  const { repo } = parseInstaller(ref)
  return { name: `${repo}@sha256:${createHash('sha256').update(ref).digest('hex')}` }
}

/**
 * LifecycleService.Upgrade (v1.13 nodes): one install or upgrade at a time; the machine installed;
 * the image in containerd's store (ImageService.Pull first); the installer's output as messages, then
 * its exit code. It writes the disk only: the next reboot boots the new version.
 */
export async function lifecycleUpgrade(sim, node, { image }, emit, signal) {
  if (node.minor < 13) throw rpc('Unimplemented', 'unknown service machine.LifecycleService')
  if (node.lifecycleBusy) throw rpc('FailedPrecondition', 'another installation/upgrade is already in progress')
  if (!node.installed) throw rpc('FailedPrecondition', 'machine is not installed')
  if (!image) throw rpc('InvalidArgument', 'installer image name is required')
  if (!node.pulled?.has(image))
    throw rpc('Internal', `upgrade failed: installer image "${image}" not found in containerd store: image "${image}": not found`)
  node.lifecycleBusy = true
  try {
    const target = parseInstaller(image)
    // the installer's log.Printf lines (Go's default `2006/01/02 15:04:05 ` prefix), in the wall clock the client reads
    const stamp = () => new Date().toISOString().replace('T', ' ').replace(/-/g, '/').slice(0, 19)
    const line = (text) => emit({ message: `${stamp()} ${text}\n` })
    node.talosLog(`starting upgrade: installer_image=${image}, disk=${node.config?.machine?.install?.disk ?? '/dev/sda'}`)
    line(`running Talos installer ${target.version ?? target.tag}`)
    await wait(sim, sim.timings.upgrade / 2, signal)
    line('running pre-flight checks')
    line(`host Talos version: ${node.talosVersion}`)
    const refused = target.version ? upgradeRefusal(node.talosVersion, target.version) : 'upgrades to version latest are not supported'
    if (refused) {
      emit({ message: `pre-flight checks failed: ${refused}\n` })
      node.talosLog('upgrade failed: exit_code=1')
      return emit({ exitCode: 1 })
    }
    line('all pre-flight checks successful')
    await wait(sim, sim.timings.upgrade / 2, signal)
    node.onDisk = diskImage(node, target)
    line(`installation of ${target.version} complete`)
    node.talosLog('upgrade completed successfully: exit_code=0')
    emit({ exitCode: 0 })
  } finally {
    node.lifecycleBusy = false
  }
}
