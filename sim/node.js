// One Talos node: stages, services, disks, config, its side of etcd membership (sim/etcd.js runs the members).
// Stages and sequences follow internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer.go.
// Time is simulated (ctx.clock); every change bumps `rev` and calls ctx.changed(node).
import { randomUUID } from 'node:crypto'
import { rpc } from './talos/errors.js'
import {
  parseConfig,
  validateConfig,
  validationText,
  selectorExpression,
  diskMatches,
  immediateRefusal,
  configDiff,
} from './talos/validate.js'
import { bootSizeChecks } from './talos/hardware.js'
import { parseInstaller, runningVersion, stagedInstall, unsignedFor } from './talos/upgrade.js'
import { KUBELET_SPEC_RESTART_S, specVersion, staticPods, syncSpecs, tagOf } from './talos/k8s.js'

const REQUIRED = { controlplane: ['apid', 'machined', 'kubelet', 'etcd', 'trustd'], worker: ['apid', 'machined', 'kubelet'] }
// Talos's DrainTimeout (pkg/kubernetes/kubernetes.go) and LeaveCluster's retry (internal/pkg/etcd/etcd.go), simulated seconds
const DRAIN_TIMEOUT = 300
export const ETCD_LEAVE_RETRY = 300
export const KUBELET_RESTART_S = 15
const INSTALLER_PULL_RETRY_S = 20
// Every reboot keeps the API down at least this long in real time, whatever the speed: talosctl's
// `--wait` tracker (cmd/talosctl/pkg/talos/action/node.go) watches again 1 s after the reboot
// sequence starts, still with tail 0; a node already back by then has sent its RUNNING event and the
// client waits for --timeout. No real node reboots in under 2 s.
export const REBOOT_FLOOR_MS = 2000
// constants.ConfigTryTimeout: a try apply's rollback when the request names none
const TRY_TIMEOUT_MS = 60_000
// how often a service waiting for time sync finds it synced (our interval: Talos wakes it on the TimeStatus change)
const TIME_SYNC_RETRY_S = 10
const KUBELET_FAILURE = 'failed to create kubelet volume mounts: error mounting "/var/lib/kubelet": mount /var/lib/kubelet: no such device'

/** Go's time.Duration String() of a span in milliseconds: 1m0s, 30s, 1h0m0s, 1.5s, 500ms */
export function goDuration(ms) {
  if (ms === 0) return '0s'
  if (ms < 1000) return `${+ms.toFixed(6)}ms`
  const h = Math.floor(ms / 3_600_000),
    m = Math.floor((ms % 3_600_000) / 60_000)
  return `${h ? `${h}h` : ''}${h || m ? `${m}m` : ''}${+((ms % 60_000) / 1000).toFixed(9)}s`
}

export class Node {
  /** spec from the scenario; ctx = the Simulator (clock, faults, minor, etcd, trustd, listeners, kube hooks) */
  constructor(spec, ctx) {
    Object.assign(this, { name: spec.name, ip: spec.ip, image: spec.image, spec, ctx })
    this.role = spec.role // effective role once configured (from the applied config)
    this.disks = spec.disks.map((d) => {
      const id = d.dev.replace('/dev/', '')
      return { ...d, id, cdrom: false, busPath: `/pci0000:00/0000:00:0${id.length}.0/virtio${id.charCodeAt(id.length - 1) - 97}` }
    })
    if (spec.image === 'iso')
      this.disks.push({
        id: 'sr0',
        dev: '/dev/sr0',
        size: 1073741824,
        model: 'QEMU DVD-ROM',
        serial: '',
        type: 'hdd',
        transport: 'ata',
        rotational: true,
        readonly: true,
        wwid: '',
        cdrom: true,
        busPath: '/pci0000:00/0000:00:01.1/ata2/host1/target1:0:0/1:0:0:0',
      })
    this.installed = spec.image === 'disk'
    this.stage = 'unknown'
    this.configText = null
    this.config = null
    this.listener = 'off' // off | maintenance | secure (faults may override: sim/listeners.js modeOf)
    this.rev = 0
    this.created = ctx.clock.now()
    this.updated = this.created
    this.services = new Map()
    this.logs = []
    this.gen = 0 // lifecycle generation: a reset/reboot cancels older timers
    this.cancels = new Set()
    this.wipeImages()
    this.resetFlags()
  }

  resetFlags() {
    Object.assign(this, {
      rebootPending: false,
      criUp: false,
      bootDone: false,
      etcdMember: null,
      etcdHealthy: false,
      etcdRunning: false,
      apiServerUp: false,
      joining: false,
      registered: false,
      kubeletFailed: false,
      kubeletRunner: null,
      bootId: randomUUID(),
      installFailed: null,
      trustdUp: false,
      apiCert: false,
      wantsCert: false,
    })
  }

  /**
   * what the system disk and containerd's store hold beyond the running version (sim/talos/upgrade.js):
   * `onDisk` an installed image that boots next ({version, schematic}), `staged` a staged upgrade's
   * image (META), `pulled` the images pulled on this node, `unsignedLoader` a boot loader a secure-boot
   * machine refuses; a reset that wipes the system disk drops them
   */
  wipeImages() {
    Object.assign(this, { onDisk: null, staged: null, pulled: new Set(), lifecycleBusy: false, unsignedLoader: false })
  }

  get configured() {
    return this.config != null
  }
  get minor() {
    return this.spec?.talosMinor ?? this.ctx.talosMinor
  }
  /** the Talos version this node runs (scenario node talosVersion, else the cluster's) */
  get talosVersion() {
    return this.spec?.talosVersion ?? this.ctx.scenario.cluster.talosVersion
  }

  /** the Kubernetes version the kubelet runs: its image's tag (sim/talos/k8s.js) */
  get kubeletVersion() {
    return tagOf(specVersion(this, 'kubelet')?.spec.image) || this.ctx.scenario.cluster.kubernetesVersion
  }
  /** the control plane static pods this node's kubelet runs (sim/talos/k8s.js staticPods) */
  staticPods() {
    return staticPods(this)
  }

  changed() {
    this.rev++
    this.updated = this.ctx.clock.now()
    this.ctx.changed(this)
  }
  log(text, { facility = 'user', priority = 'warning' } = {}) {
    this.logs.push({ facility, priority, ts: this.ctx.clock.now().toISOString(), text })
    if (this.logs.length > 2000) this.logs.splice(0, 500)
  }
  talosLog(text) {
    this.log(`[talos] ${text}`)
  }

  /** run fn after simSeconds unless the lifecycle moved on (reset/reboot/stop) */
  after(simSeconds, fn) {
    const gen = this.gen
    const cancel = this.ctx.clock.after(simSeconds, () => {
      this.cancels.delete(cancel)
      if (gen === this.gen) fn()
    })
    this.cancels.add(cancel)
  }
  newLifecycle() {
    this.gen++
    for (const c of this.cancels) c()
    this.cancels.clear()
    this.tryRollback = null // a reboot ends machined's rollback timer with it
  }

  /**
   * run fn once a reboot's down time is over: `timings.reboot` simulated seconds, and at least
   * REBOOT_FLOOR_MS of wall clock after the API listener really closed (unless the lifecycle moved on)
   */
  afterDown(fn) {
    const gen = this.gen
    let waiting = 2
    const go = () => --waiting === 0 && fn()
    this.after(this.ctx.timings.reboot, go)
    Promise.resolve(this.ctx.listeners?.closed(this)).then(() => {
      if (gen === this.gen) this.after((this.ctx.clock.speed * REBOOT_FLOOR_MS) / 1000, go)
    })
  }

  setStage(stage, listener) {
    this.stage = stage
    if (listener) this.listener = listener
    this.talosLog(`stage: ${stage}`)
    this.changed()
  }

  // ---- services ----
  service(id) {
    if (!this.services.has(id)) this.services.set(id, { id, state: 'Initialized', healthy: null, lastMessage: '', events: [] })
    return this.services.get(id)
  }
  svc(id, state, msg, healthy) {
    const s = this.service(id)
    s.state = state
    if (healthy !== undefined) {
      s.healthy = healthy
      s.lastMessage = healthy === false ? msg : ''
    }
    s.events.push({ msg, state, ts: this.ctx.clock.now().toISOString() })
    if (s.events.length > 30) s.events.shift()
  }
  startService(id, { healthy = true } = {}) {
    this.svc(id, 'Preparing', 'Running pre state')
    this.svc(id, 'Preparing', 'Creating service runner')
    this.taskStarted(id, { healthy: healthy ? undefined : null })
    if (healthy) this.svc(id, 'Running', 'Health check successful', true)
  }
  /** the runner's containerd task started (runner/containerd): `pid` the process's, else one made up; `healthy` as svc's */
  taskStarted(id, { pid = 1000 + Math.floor(Math.random() * 9000), healthy } = {}) {
    this.svc(id, 'Running', `Started task ${id} (PID ${pid}) for container ${id}`, healthy)
  }

  // ---- lifecycle ----
  powerOn() {
    this.newLifecycle()
    this.resetFlags()
    this.services.clear()
    this.log(`Linux version 6.18.1-talos (@buildkitsandbox) (gcc (GCC) 14.2.0, GNU ld (GNU Binutils) 2.44) #1 SMP`, {
      facility: 'kern',
      priority: 'notice',
    })
    this.log('Command line: talos.platform=metal console=ttyS0', { facility: 'kern', priority: 'info' })
    for (const id of ['machined', 'udevd', 'syslogd']) this.startService(id)
    this.setStage('booting', 'off')
    this.after(this.ctx.timings.maintenance, () => (this.configured ? this.bootConfigured() : this.enterMaintenance()))
  }

  enterMaintenance() {
    this.talosLog('entering maintenance service')
    this.talosLog(`this machine is reachable at: ${this.ip}`)
    this.talosLog(`upload configuration using talosctl: talosctl apply-config --insecure --nodes ${this.ip} --file <config.yaml>`)
    this.setStage('maintenance', 'maintenance')
  }

  /** insecure apply in maintenance (internal/app/maintenance/server.go ApplyConfiguration); returns {modeDetails, warnings} */
  applyMaintenance({ data, mode = 'auto', dryRun = false }) {
    const minor = this.minor
    if (minor <= 12 && (mode === 'no-reboot' || mode === 'staged')) {
      throw rpc('Unimplemented', `apply configuration --mode='${mode}' is not supported in maintenance mode`)
    }
    const cfg = parseConfig(data, { maintenance: true, minor })
    const wrap = (prefix, errs) => rpc('InvalidArgument', minor <= 12 ? `${prefix}: ${validationText(errs)}` : validationText(errs))
    const rejected = this.ctx.faults.take(this.name, { kind: 'config-rejected' })
    const errs = validateConfig(cfg, { requireInstall: minor <= 12 || !this.installed })
    if (rejected) errs.push(rejected.message ?? "install.extraKernelArgs and install.grubUseUKICmdline can't be used together")
    if (errs.length) throw wrap('configuration validation failed', errs)
    // runtime validation: the install disk selector against this node's disks
    const sel = cfg.machine.install?.diskSelector
    const mismatch = this.ctx.faults.take(this.name, { kind: 'disk-mismatch' })
    if ((sel && !this.disks.some((d) => diskMatches(sel, d))) || mismatch) {
      const expr = sel
        ? selectorExpression(sel)
        : `disk.dev_path == "${cfg.machine.install?.disk ?? ''}" && disk.transport != "" && !disk.readonly && !disk.cdrom`
      throw wrap('runtime configuration validation failed', [`no disks matched the expression: ${expr}`])
    }
    if (dryRun) {
      return {
        modeDetails:
          minor <= 12
            ? 'Dry run summary:\nNode is running in maintenance mode and does not have a config yet.'
            : 'Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\nConfig diff:\n\nNo changes.',
        warnings: [],
      }
    }
    if (minor >= 13 && mode === 'staged') {
      this.stagedConfig = { data, cfg }
      return { modeDetails: 'Staged configuration to be applied after the next reboot', warnings: [] }
    }
    this.acceptConfig(data, cfg)
    const details =
      minor <= 12
        ? ''
        : mode === 'try'
          ? "Applied configuration without a reboot\nThe config is applied in 'try' mode and will be automatically reverted back in 1m0s"
          : 'Applied configuration without a reboot'
    return { modeDetails: details, warnings: [] }
  }

  /**
   * ApplyConfiguration on a configured node (v1alpha1_server.go), in its order: the apply mutex
   * (TryLock, held for the whole call, dry runs included: `timings.apply` simulated seconds here;
   * fault `apply-busy`: another client holds it); the node already rebooting for an apply; any mode
   * but try cancels a pending try rollback (before the config is even parsed, so an invalid config or a
   * dry run cancels it too); validation (InvalidArgument); the mode: no-reboot and try refuse a change
   * Runtime.CanApplyImmediate rejects, auto resolves to no-reboot or reboot (the answer's mode says
   * which); a dry run answers the diff of the active config against the new one; then no-reboot sets
   * the persistent and the active config, staged only the persistent one, reboot the persistent one
   * and reboots, try only the active one with a rollback after `try_mode_timeout` (simulated).
   * Resolves to {mode, modeDetails, warnings}.
   */
  async applyConfigured({ data, mode = 'auto', dryRun = false, tryModeTimeoutMs }) {
    if (this.applyLocked || this.ctx.faults.take(this.name, { kind: 'apply-busy' }))
      throw rpc('FailedPrecondition', 'another apply configuration is already in progress')
    this.applyLocked = true
    try {
      const answer = this.applyUnderLock({ data, mode, dryRun, tryModeTimeoutMs })
      if (this.ctx.timings.apply > 0) await this.ctx.clock.sleep(this.ctx.timings.apply)
      return answer
    } finally {
      this.applyLocked = false
    }
  }

  applyUnderLock({ data, mode, dryRun, tryModeTimeoutMs }) {
    if (['rebooting', 'installing'].includes(this.stage) || this.rebootPending) {
      throw rpc(
        'FailedPrecondition',
        'configuration was already applied and node is rebooting, cannot apply more configuration changes until next reboot',
      )
    }
    if (mode !== 'try') this.cancelTry()
    const cfg = parseConfig(data, { maintenance: false, minor: this.minor })
    const errs = validateConfig(cfg, { requireInstall: this.minor <= 12 })
    // the config-rejected fault: the running node's own validation refuses it, dry runs included (v1alpha1_server.go ApplyConfiguration)
    const rejected = this.ctx.faults.take(this.name, { kind: 'config-rejected' })
    if (rejected) errs.push(rejected.message ?? "install.extraKernelArgs and install.grubUseUKICmdline can't be used together")
    if (errs.length) throw rpc('InvalidArgument', validationText(errs))
    let resolved = mode
    let details = 'Applied configuration with a reboot'
    let why = ''
    if (mode === 'try' || mode === 'no-reboot') {
      const refused = immediateRefusal(this.config, cfg)
      if (refused) throw rpc('InvalidArgument', refused)
      details = 'Applied configuration without a reboot'
    } else if (mode === 'staged') details = 'Staged configuration to be applied after the next reboot'
    else if (mode === 'auto') {
      const refused = immediateRefusal(this.config, cfg)
      resolved = refused ? 'reboot' : 'no-reboot'
      if (refused) why = `: ${refused}`
      else details = 'Applied configuration without a reboot'
    }
    if (dryRun)
      return {
        mode: resolved,
        modeDetails: `Dry run summary:\n${details} (skipped in dry-run).\nConfig diff:\n\n${configDiff(this.config, cfg)}`,
        warnings: [],
      }
    const label = (m) => m.replace('-', '_')
    this.talosLog(`apply config request: mode ${mode === 'auto' ? `auto(${label(resolved)})` : label(mode)}`)
    const next = { text: data, cfg }
    if (resolved === 'try') {
      const ms = tryModeTimeoutMs ?? TRY_TIMEOUT_MS
      details += `\nThe config is applied in 'try' mode and will be automatically reverted back in ${goDuration(ms)}`
      this.armTry(ms)
      this.setActive(next)
    } else if (resolved === 'no-reboot') {
      this.persist(next)
      this.setActive(next)
    } else if (resolved === 'staged') this.persist(next)
    else {
      this.persist(next)
      this.rebootPending = true
      // the reboot sequence stops services first: the API still answers `running` for a while
      this.after(Math.min(10, this.ctx.timings.reboot / 4), () => {
        this.rebootPending = false
        this.reboot({})
      })
    }
    return { mode: resolved, modeDetails: details + why, warnings: [] }
  }

  /** the active config (MachineConfig v1alpha1) */
  setActive({ text, cfg }) {
    this.configText = text
    this.config = cfg
    this.k8sSync()
    this.changed()
  }

  /**
   * Talos's Kubernetes controllers on a new active config (sim/talos/k8s.js): the typed configs take
   * new versions; a changed KubeletSpec restarts a running kubelet (kubelet_service.go); changed
   * control plane configs give new static pods, which the kubelet restarts (its mirror pods replaced)
   */
  k8sSync() {
    const changed = syncSpecs(this, this.ctx.scenario.cluster.kubernetesVersion)
    if (changed.includes('kubelet') && this.services.get('kubelet')?.state === 'Running') this.restartKubeletForSpec()
    const pods = changed.filter((id) => id !== 'kubelet')
    if (pods.length) {
      this.talosLog(`static pods updated: ${pods.join(', ')}`)
      if (this.registered) this.ctx.staticPodsChanged?.(this, pods)
    }
  }

  /** kubelet_service.go: a new KubeletSpec stops the kubelet service and starts it again */
  restartKubeletForSpec() {
    this.svc('kubelet', 'Finished', 'Service finished successfully')
    this.talosLog('service[kubelet](Finished): Service finished successfully')
    this.changed()
    this.after(KUBELET_SPEC_RESTART_S, () => {
      if (this.services.get('kubelet')?.state !== 'Finished') return
      this.startKubelet()
      if (this.services.get('kubelet')?.state === 'Running') this.ctx.kubeletRestarted?.(this)
      this.changed()
    })
  }
  /**
   * SetPersistedConfig: the STATE partition's config, the one the next boot loads, and the
   * MachineConfig `persistent` until then (a boot from STATE alone sets none: controllers/config/acquire.go)
   */
  persist(next) {
    this.stored = next
    this.persistent = next
  }
  /** the boot loads the config on STATE; nothing is persisted in this boot yet */
  loadStored() {
    if (this.stored) {
      this.configText = this.stored.text
      this.config = this.stored.cfg
    }
    this.persistent = null
  }
  /** a config wiped (a reset, a failed install): no active, persisted or stored one */
  forgetConfig() {
    this.configText = null
    this.config = null
    this.stored = null
    this.persistent = null
  }
  /** RollbackToConfigAfter: the active config now comes back after `ms` (simulated); a new try replaces the timer */
  armTry(ms) {
    this.cancelTry()
    const previous = { text: this.configText, cfg: this.config }
    const gen = this.gen
    const cancel = this.ctx.clock.after(ms / 1000, () => {
      this.cancels.delete(cancel)
      this.tryRollback = null
      if (gen !== this.gen) return
      this.talosLog('rolling back the configuration')
      this.setActive(previous)
    })
    this.cancels.add(cancel)
    this.tryRollback = cancel
  }
  /** CancelConfigRollbackTimeout */
  cancelTry() {
    if (!this.tryRollback) return
    this.tryRollback()
    this.cancels.delete(this.tryRollback)
    this.tryRollback = null
  }

  acceptConfig(data, cfg) {
    this.configText = data
    this.config = cfg
    // acquired from the maintenance service: persisted to STATE (acquire.go: a source other than STATE)
    this.persist({ text: data, cfg })
    this.role = cfg.machine.type === 'worker' ? 'worker' : 'controlplane'
    if (this.ctx.scenario.cluster.configs === 'external') {
      // the node's identity comes from this config's CA, as a real node's does
      this.foreignCA = false
      this.ctx.adoptConfig(cfg).then(
        (ours) => {
          this.foreignCA = !ours
          this.changed()
        },
        (e) => this.ctx.log(`${this.name}: the config's CA could not be read: ${e.message}`),
      )
    } else this.foreignCA = !this.ctx.isClusterCA(cfg.machine.ca?.crt)
    this.talosLog('received new config from the maintenance service')
    // node leaves maintenance now: v1.12 closes the maintenance service; v1.13 apid switches to mTLS
    this.after(0.01, () => (this.installed ? this.bootConfigured() : this.install()))
    this.setStage('booting', this.minor >= 13 ? 'secure' : 'off')
  }

  /** ISO node: booting -> installing -> rebooting -> boot from disk */
  install() {
    const { install } = this.ctx.timings
    const head = Math.min(2, install * 0.1)
    this.after(head, () => {
      this.talosLog(`installing Talos ${this.talosVersion} to ${this.config.machine.install?.disk ?? 'the selected disk'}`)
      this.setStage('installing')
    })
    this.after(install, () => {
      if (this.ctx.faults.has(this.name, 'installer-pull')) return this.installerPullFails()
      const disk = this.config.machine.install?.disk
      const crash = this.ctx.faults.take(this.name, { kind: 'crash' })
      if (crash || (disk && !this.disks.some((d) => d.dev === disk))) {
        this.installFailed = crash
          ? 'install failed: installer container exited with code 1'
          : `install failed: failed to open disk ${disk}: no such file or directory`
        this.talosLog(this.installFailed)
        this.forgetConfig()
        return this.reboot({ thenMaintenance: true })
      }
      this.installDone()
    })
  }

  installDone() {
    this.installed = true
    this.unsignedLoader = unsignedFor(this, parseInstaller(this.config.machine.install?.image ?? 'ghcr.io/siderolabs/installer').repo)
    this.talosLog('install successful')
    this.reboot({})
  }

  /**
   * fault installer-pull: the installer image (machine.install.image) cannot be pulled; the install
   * retries the pull (internal/pkg/containers/image/image.go Pull: retry.Exponential with error logging,
   * `failed to pull image %q: %w`) and never ends here while it lasts (Talos gives up after PullTimeout,
   * 20 min: not modelled); each retry's error goes to the console
   */
  installerPullFails() {
    const f = this.ctx.faults.find(this.name, { kind: 'installer-pull' })[0]
    if (this.stage !== 'installing') return
    // the registry answers again (the fault cleared) within the pull's 20 min retries: the install goes on
    if (!f) return this.installDone()
    const image = this.config?.machine?.install?.image ?? `ghcr.io/siderolabs/installer:${this.talosVersion}`
    const [repo, tag] = [image.replace(/:[^:/]+$/, ''), image.match(/:([^:/]+)$/)?.[1] ?? 'latest']
    const host = repo.split('/')[0]
    const error =
      f.message ??
      `failed to pull image "${image}": failed to resolve reference "${image}": failed to do request: Head "https://${host}/v2/${repo.slice(host.length + 1)}/manifests/${tag}": dial tcp: lookup ${host}: i/o timeout`
    this.talosLog(`retrying error: ${error}`)
    this.after(INSTALLER_PULL_RETRY_S, () => this.installerPullFails())
  }

  /** rebooting (nothing listens) for `reboot` seconds (at least REBOOT_FLOOR_MS of wall clock), then boot again */
  reboot({ thenMaintenance = false } = {}) {
    this.newLifecycle()
    this.etcdHealthy = false
    this.etcdRunning = false
    this.apiServerUp = false
    this.criUp = false
    this.bootDone = false
    this.setStage('rebooting', 'off')
    this.afterDown(() => this.powerUp(thenMaintenance))
  }

  /**
   * the machine starts again: from what the bootloader picks on the system disk (an upgrade's
   * installer wrote `onDisk`: the new version boots, or under fault `upgrade-rollback` fails to and
   * the bootloader falls back to the old one, another boot ID later), a staged upgrade first runs
   * its Install sequence (sim/talos/upgrade.js)
   */
  powerUp(thenMaintenance = false) {
    const wasMember = this.etcdMember
    this.resetFlags()
    this.etcdMember = wasMember
    this.loadStored()
    if (this.onDisk?.unsigned && !thenMaintenance && this.configured) this.unsignedLoader = true
    if (this.unsignedLoader && this.installed && !thenMaintenance) {
      // the firmware refuses the boot loader before Talos runs: no API, no fallback (the boot loader
      // itself was replaced); the console shows the firmware's verification failure, not Talos's log
      this.talosLog('secure boot violation: the firmware refuses the unsigned boot loader on the system disk; the machine does not boot')
      return
    }
    if (this.onDisk && !thenMaintenance && this.configured) {
      const next = this.onDisk
      this.onDisk = null
      if (this.ctx.faults.take(this.name, { kind: 'upgrade-rollback', on: 'boot' })) {
        // the new kernel does not come up: the boot counter runs out and the bootloader reverts
        this.talosLog(`boot of Talos ${next.version} failed, the bootloader falls back to ${this.talosVersion}`)
        return this.afterDown(() => this.powerUp())
      }
      runningVersion(this, next)
    }
    if (this.staged && !thenMaintenance && this.configured) return stagedInstall(this)
    if (thenMaintenance || !this.configured) {
      this.services.clear()
      this.setStage('booting', 'off')
      this.after(this.ctx.timings.maintenance, () => this.enterMaintenance())
    } else this.bootConfigured()
  }

  /** boot with a config: Boot sequence; control planes wait for etcd */
  bootConfigured() {
    const { boot } = this.ctx.timings
    this.bootId = randomUUID()
    // the resources of this boot: versions start again (COSI state is in memory)
    this.k8s = null
    syncSpecs(this, this.ctx.scenario.cluster.kubernetesVersion)
    this.servicesStarted = false
    // before StartAllServices only what machined starts itself is registered: cri, kubelet, trustd and
    // etcd are loaded there (v1alpha1_sequencer_tasks.go), so `talosctl service etcd` first says
    // "not registered" (cmd/talosctl/cmd/talos/service.go)
    for (const id of ['auditd', 'dashboard']) this.svc(id, 'Waiting', 'Waiting for service "machined" to be "up"')
    for (const id of ['machined', 'udevd', 'syslogd', 'auditd', 'containerd', 'dashboard']) this.startService(id)
    const worker = this.role === 'worker'
    // a worker's apid needs its certificate from a control plane's trustd first (secrets/api.go)
    if (worker) this.svc('apid', 'Waiting', 'Waiting for service "machined" to be "up", api certificates')
    else this.startService('apid')
    this.setStage('booting', worker ? 'off' : 'secure')
    for (const line of bootSizeChecks(this)) this.talosLog(line)
    if (worker) this.ctx.trustd.request(this)
    const loop = this.ctx.faults.take(this.name, { kind: 'boot-loop' })
    this.after(boot / 2, () => this.startAllServices())
    // CRI (and with it bootstrap and the kubelet) is up when the boot time is over: a worker then runs,
    // a control plane waits in booting for etcd, so boot + etcd stays a lower bound (criticalPathSeconds)
    this.after(boot, () => {
      if (loop) {
        this.talosLog('boot sequence failed: task "startAllServices" failed: context deadline exceeded')
        return this.reboot({})
      }
      this.criReady()
      this.bootDone = true
      this.maybeRunning()
    })
  }

  /** StartAllServices: cri, the kubelet (loaded, not started) and, on a control plane, trustd and etcd */
  startAllServices() {
    if (this.criUp || this.servicesStarted) return // already past it in this boot
    this.servicesStarted = true
    this.talosLog('task startAllServices (1/1): starting')
    for (const id of ['cri', 'kubelet']) this.svc(id, 'Waiting', 'Waiting for service "containerd" to be "up"')
    if (this.role === 'controlplane') {
      this.startService('trustd')
      this.trustdUp = true
      this.svc('etcd', 'Waiting', 'Waiting for service "cri" to be "up"')
    }
    this.changed()
  }

  /** trustd on a control plane signed this worker's API certificate: apid starts, :50000 opens */
  apiCertIssued() {
    if (!this.wantsCert || !this.configured || !['booting', 'installing', 'running'].includes(this.stage)) return
    this.wantsCert = false
    this.apiCert = true
    this.talosLog('api certificate issued by trustd, apid starting')
    this.startService('apid')
    this.listener = 'secure'
    this.changed()
    this.maybeRunning()
  }

  criReady() {
    // StartAllServices comes first in the boot sequence, whatever order the timers fired in
    this.startAllServices()
    this.criUp = true
    this.criUpAt = this.ctx.clock.now().getTime()
    this.startService('cri')
    if (this.timeUnsynced()) {
      // etcd (and the kubelet) wait for time sync before their pre stage (system/services/etcd.go,
      // kubelet.go: timeresource.NewSyncCondition; service_runner.go "Waiting for %s")
      if (this.role === 'controlplane') this.svc('etcd', 'Waiting', 'Waiting for time sync')
      this.after(TIME_SYNC_RETRY_S, () => this.timeSynced())
    } else this.startEtcd()
    this.startKubelet()
    this.changed()
  }

  /** the condition they wait for holds once the time syncs (the fault cleared): etcd and the kubelet go on */
  timeSynced() {
    if (this.timeUnsynced()) return this.after(TIME_SYNC_RETRY_S, () => this.timeSynced())
    this.startEtcd()
    if (this.kubeletFailed) this.startKubelet()
    this.changed()
  }

  startEtcd() {
    if (this.role === 'controlplane') {
      this.svc('etcd', 'Preparing', 'Running pre state')
      if (this.etcdMember) this.ctx.etcd.restart(this)
      else {
        this.talosLog(
          'etcd is waiting to join the cluster, if this node is the first node in the cluster, please run `talosctl bootstrap` against one of the following IPs:',
        )
        this.talosLog(`[${this.ip}]`)
        this.ctx.etcd.maybeJoin(this)
      }
    }
  }

  /**
   * Whether a joining control plane can learn the etcd peers: from the Kubernetes endpoints read
   * through the cluster endpoint with the admin kubeconfig (controllers/k8s/endpoint.go
   * watchEndpointsOnControlPlane: a control plane's API server at the endpoint's address, or the VIP
   * once up), or from the discovery service's members (controllers/cluster/endpoint.go). Without
   * either Talos's join retries `no controlplane endpoints discovered yet` (internal/pkg/etcd/endpoints.go)
   * until its 30 min join timeout: a VIP that never comes up keeps every other control plane out.
   */
  etcdEndpointsKnown() {
    const { scenario, nodes, realKube } = this.ctx
    if (scenario.cluster.discovery === 'enabled') return true
    // with the real control plane (SIM_KUBE=real) the endpoints are read from its API server: not
    // before that answers, seconds after the first member's health (sim/kube answers at once)
    if (realKube && !realKube.serving) return false
    const host = new URL(scenario.cluster.endpoint).hostname
    const servers = (nodes ?? []).filter((cp) => cp !== this && cp.role === 'controlplane' && cp.etcdHealthy && cp.apiServerUp)
    if (servers.some((cp) => cp.ip === host)) return true
    const vip = scenario.cluster.vip
    return !!vip && vip.address === host && vip.up === 'after-bootstrap' && servers.length > 0
  }

  /** fault time-sync: no time server answers, the TimeStatus stays synced: false */
  timeUnsynced() {
    return this.ctx.faults.has(this.name, 'time-sync')
  }

  startKubelet() {
    // a start (a boot, `service kubelet restart`, the crash loop's once its cause is gone) ends the
    // crash loop's runner: machined stops a service before it starts it again (pkg/system/system.go APIRestart)
    this.kubeletRunner = null
    if (this.timeUnsynced()) {
      this.kubeletFailed = true
      this.svc('kubelet', 'Waiting', 'Waiting for time sync')
      this.talosLog('ntp query error with server "time.cloudflare.com": read udp: i/o timeout')
      return
    }
    if (this.ctx.faults.has(this.name, 'kubelet')) {
      this.kubeletFailed = true
      this.svc('kubelet', 'Preparing', 'Running pre state')
      this.svc('kubelet', 'Failed', `Failed to run pre stage: ${KUBELET_FAILURE}`, false)
      this.talosLog(`service[kubelet](Failed): Failed to run pre stage: ${KUBELET_FAILURE}`)
      return
    }
    if (this.kubeletCrashes()) {
      this.kubeletFailed = true
      this.kubeletRunner = {}
      this.kubeletCrash(this.kubeletRunner)
      return
    }
    const restarted = this.kubeletFailed
    this.kubeletFailed = false
    this.startService('kubelet')
    // started again (service restart) after its pre stage failed: it registers like one started at boot;
    // a kubelet back from a crash loop posts its Node again (its version: the image it runs now)
    if (restarted && this.stage === 'running') this.registered ? this.ctx.kubeletBack?.(this) : this.ctx.nodeRunning(this)
  }

  /** fault kubelet-crashloop holds for the kubelet's image (`image`: only that one, e.g. the version upgrade-k8s moves it to) */
  kubeletCrashes() {
    const image = specVersion(this, 'kubelet')?.spec.image
    return this.ctx.faults.find(this.name, { kind: 'kubelet-crashloop' }).some((f) => f.image == null || f.image === image)
  }

  /**
   * fault kubelet-crashloop: the kubelet's process starts and exits (its log's last line the fault's
   * message), and machined restarts it forever (runner/restart/restart.go: "Error running %v, going to
   * restart forever: %v"; the interval is ours); the node never registers
   */
  kubeletCrash(runner) {
    // one runner per service: a start since (startKubelet) replaced this one
    if (!this.criUp || runner !== this.kubeletRunner) return
    // the cause gone (a fixed config applied): machined's next restart runs it for good
    if (!this.kubeletCrashes()) return this.startKubelet()
    this.ctx.kubeletCrashing?.(this)
    this.startService('kubelet', { healthy: false })
    this.svc('kubelet', 'Waiting', 'Error running Containerd(kubelet), going to restart forever: task "kubelet" failed: exit code 1')
    this.after(KUBELET_RESTART_S, () => this.kubeletCrash(runner))
  }

  /** etcd on this control plane came up healthy (bootstrap or join) */
  etcdUp() {
    this.etcdHealthy = true
    this.apiServerUp = true
    this.svc('etcd', 'Running', 'Health check successful', true)
    this.talosLog('etcd is healthy')
    this.ctx.apiServerUp(this)
    this.maybeRunning()
    this.changed()
  }

  maybeRunning() {
    if (this.stage !== 'booting' || !this.bootDone) return
    if (this.role === 'controlplane' && !this.etcdHealthy) return
    // StartAllServices waits for every service, apid included: a worker without its certificate keeps booting
    if (this.role === 'worker' && !this.apiCert) return
    this.talosLog('boot sequence: done')
    this.setStage('running')
    this.ctx.nodeRunning(this)
  }

  /** machine.Bootstrap's checks in their order (v1alpha1_server.go Bootstrap) */
  bootstrap() {
    if (!this.criUp || this.ctx.faults.take(this.name, { kind: 'bootstrap-not-ready' })) {
      throw rpc('FailedPrecondition', 'bootstrap is not available yet')
    }
    if (this.role !== 'controlplane') {
      throw this.minor <= 12
        ? rpc('FailedPrecondition', 'bootstrap can only be performed on a control plane node')
        : rpc('Unimplemented', 'bootstrap is only available on control plane nodes')
    }
    // then time sync (waited for 5 s: v1alpha1_server.go Bootstrap, timeresource.NewSyncCondition)
    if (this.timeUnsynced()) throw rpc('FailedPrecondition', 'time is not in sync yet')
    // the only check is an empty data directory (v1alpha1_server.go Bootstrap): a control plane still
    // joining has none yet, so bootstrapping it starts a second etcd cluster
    if (this.ctx.etcd.hasData(this)) throw rpc('AlreadyExists', 'etcd data directory is not empty')
    this.ctx.etcd.bootstrap(this)
  }

  /**
   * machine.Reset, as the Reset sequence runs it (v1alpha1_sequencer.go): stage resetting cordons the
   * Node (controllers/k8s/node_cordoned_spec.go); graceful: wait for the cordon (1 min at most), drain
   * (DrainTimeout 5 min, pkg/kubernetes/kubernetes.go; its errors only logged), stop the kubelet
   * (RemoveAllPods), leave etcd (retried 5 min, internal/pkg/etcd/etcd.go; a failure aborts the
   * sequence), wipe; --reboot ends in maintenance, else powered off.
   */
  reset({ graceful = true, reboot = false, wipeMode = 'all', systemLabelsToWipe = [] } = {}) {
    // wiping the system disk (all / system-disk, no label subset) removes what an ISO node installed
    const wipesSystem = ['all', 'system-disk'].includes(wipeMode || 'all') && !systemLabelsToWipe?.length
    this.newLifecycle()
    const gen = this.gen
    this.setStage('resetting')
    this.ctx.kubeCordon(this)
    const cleanup = () =>
      this.after(0, () => {
        // cleanup (RemoveAllPods / StopAllPods) stops the kubelet: the Node object stays, unposted
        if (this.services.has('kubelet')) this.svc('kubelet', 'Finished', 'Service finished successfully', null)
        this.ctx.kubeletStopped(this)
        this.changed()
        // LeaveEtcd: a refused MemberRemove is retried for 5 min, then fails the sequence: still configured, stage resetting
        // only while the service is Running, Stopping or Failed: one Waiting between the restarts of a
        // crash loop leaves its member behind (v1alpha1_sequencer_tasks.go LeaveEtcd shouldLeaveEtcd)
        const etcdState = this.services.get('etcd')?.state
        const leaves =
          graceful && this.role === 'controlplane' && this.etcdRunning && ['Running', 'Stopping', 'Failed'].includes(etcdState ?? '')
        const leaving = leaves ? this.ctx.etcd.leave(this, ETCD_LEAVE_RETRY) : null
        if (leaving) leaving.then((refused) => gen === this.gen && this.afterLeave(refused, { graceful, reboot, wipesSystem }))
        else this.afterLeave(null, { graceful, reboot, wipesSystem })
      })
    if (graceful) this.talosDrain().then(() => gen === this.gen && cleanup())
    else cleanup()
  }

  /**
   * Talos's drain (CordonAndDrainNode, pkg/kubernetes/kubernetes.go Drain): resolves when it is
   * over. A budget-blocked eviction is retried every 5 s until DrainTimeout; Drain then logs and
   * returns nil. The real API (SIM_KUBE=real): it waits for its evicted pods to be gone, or for its timeout.
   */
  talosDrain() {
    const drained = this.ctx.kubeDrain(this, { blocked: !!this.ctx.faults.take(this.name, { kind: 'drain-blocked' }) })
    const warn = (pod) => this.talosLog(`WARNING: failed to evict pod: failed to evict pod ${pod}: context deadline exceeded`)
    if (drained.done) return drained.done.then(({ blocked }) => blocked.forEach(warn))
    const drainTime = drained.blocked.length ? DRAIN_TIMEOUT : drained.evicted ? this.ctx.timings.drain : 0
    return new Promise((done) =>
      this.after(drainTime, () => {
        for (const b of drained.blocked) warn(b.pod)
        done()
      }),
    )
  }

  /** the reset after LeaveEtcd: a refusal fails the sequence; else the node is wiped and goes down or reboots */
  afterLeave(refused, { graceful, reboot, wipesSystem }) {
    if (refused) {
      this.talosLog(`reset: leave etcd: ${refused}`)
      this.changed()
      return
    }
    this.ctx.nodeReset(this, { graceful })
    this.after(2, () => {
      this.forgetConfig()
      this.role = this.spec.role
      if (this.spec.image === 'iso' && wipesSystem) this.installed = false
      if (wipesSystem) this.wipeImages()
      this.resetFlags()
      this.services.clear()
      if (reboot) {
        this.setStage('resetting', 'off') // the reboot is the reset sequence's own phase: machinestatus stays resetting (controllers/runtime/machine_status.go)
        this.afterDown(() => this.powerOn())
      } else {
        this.poweredOff = true
        this.setStage('shutting down', 'off')
      }
    })
  }

  // ---- status ----
  unmetConditions() {
    if (!['booting', 'running'].includes(this.stage) || !this.configured) return []
    const out = []
    if (!this.criUp) out.push({ name: 'time', reason: 'time is not synced' })
    // as Talos's MachineStatusController: every service (ID order) not running / running but unhealthy,
    // then each required service that is not running (so a waiting etcd is named twice, as on a real node)
    const bad = []
    const running = new Set()
    for (const sv of [...this.services.values()].sort((a, b) => a.id.localeCompare(b.id))) {
      if (sv.state !== 'Running') {
        bad.push(`${sv.id} not running`)
        continue
      }
      running.add(sv.id)
      if (sv.healthy === false) bad.push(`${sv.id} not healthy`)
    }
    for (const id of REQUIRED[this.role]) if (!running.has(id)) bad.push(`${id} not running`)
    if (bad.length) out.push({ name: 'services', reason: bad.join(', ') })
    // static pod statuses exist once the kubelet runs; they stay pending until this node's API server is up
    if (this.role === 'controlplane' && !this.apiServerUp && this.services.get('kubelet')?.state === 'Running') {
      out.push({
        name: 'staticPods',
        reason: ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']
          .map((p) => `kube-system/${p}-${this.name} pending`)
          .join(', '),
      })
    }
    if (!this.registered) out.push({ name: 'nodeReady', reason: `node "${this.name}" status is not available yet` })
    else if (!this.ctx.kubeNodeReady(this.name)) out.push({ name: 'nodeReady', reason: `node "${this.name}" is not ready` })
    return out
  }

  machineStatus() {
    const unmetConditions = this.unmetConditions()
    // readiness also changes with the Kubernetes side (nodeReady): a change is a new resource version
    const key = JSON.stringify(unmetConditions)
    if (this.lastConditions !== undefined && key !== this.lastConditions) {
      this.rev++
      this.updated = this.ctx.clock.now()
    }
    this.lastConditions = key
    return { stage: this.stage, status: { ready: unmetConditions.length === 0, unmetConditions } }
  }

  view() {
    const ms = this.machineStatus()
    return {
      name: this.name,
      ip: this.ip,
      role: this.role,
      image: this.image,
      stage: this.stage,
      ready: ms.status.ready,
      unmetConditions: ms.status.unmetConditions,
      configured: this.configured,
      installed: this.installed,
      listener: this.ctx.listeners?.modeOf(this) ?? this.listener,
      etcdMember: this.etcdMember,
      etcdHealthy: this.etcdHealthy,
      apiServerUp: this.apiServerUp,
      registered: this.registered,
      bootId: this.bootId,
      services: Object.fromEntries([...this.services.values()].map((s) => [s.id, s.state])),
    }
  }
}
