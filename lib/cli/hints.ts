import { resolve } from 'node:path'
import type { ErrorKind } from '../core/errors.ts'
import type { ClusterNode } from '../core/model.ts'
import { shellWord } from '../core/shell.ts'
import { contextOf } from '../state/kubeconfig.ts'

/** The repository (its Taskfile): `task -d <repo>` runs from wherever the operator stands. */
const REPO = resolve(import.meta.dirname, '..', '..')

/** What every hint needs to be runnable as written: where the cluster is and how to reach it. */
export interface HintContext {
  /** absolute CLUSTER_DIR */
  clusterDir: string
  talosconfig: string
  kubeconfig: string
  /** whose context in the kubeconfig (it may hold other clusters, its current context another's) */
  clusterName?: string
  /** control planes in bootstrap order: the bootstrap node first */
  controlPlanes: Array<Pick<ClusterNode, 'name' | 'address' | 'kubeName'>>
}

let context: HintContext | undefined

/** Set once per command, when the cluster is loaded; every hint after that names it. */
export function setHintContext(next: HintContext): void {
  context = next
}

/** The API server this run reads through instead of the kubeconfig's (the endpoint down, `--endpoint`). */
let kubeServer: string | undefined

/** From now on every kubectl a hint names goes to `server` (`--server`), as the run's own calls do. */
export function setHintKubeServer(server: string): void {
  kubeServer = server
}

/** Per task, what a rerun of the running command must repeat (its target: TALOS_VERSION=…, --accept-downtime). */
const rerunArgs = new Map<string, { vars: Record<string, string>; flags: string[] }>()

/**
 * The command being run needs these variables and flags again when a hint names its task (a
 * rerun of `upgrade:talos` without its TALOS_VERSION is bad input): every taskCommand of `task`
 * carries them from now on, before the hint's own.
 */
export function setRerunArgs(task: string, vars: Record<string, string>, flags: string[] = []): void {
  rerunArgs.set(task, { vars, flags })
}

/**
 * The one way a hint names a task: `task -d <repo> <task> CLUSTER_DIR=<abs> VAR=… [-- flags]`, so it
 * runs as written in a fresh shell, from any directory, without CLUSTER_DIR exported.
 */
export function taskCommand(task: string, vars: Record<string, string> = {}, flags: string[] = []): string {
  const words = ['task', '-d', REPO, task]
  if (context) words.push(`CLUSTER_DIR=${context.clusterDir}`)
  const again = rerunArgs.get(task)
  for (const [name, value] of Object.entries({ ...again?.vars, ...vars })) words.push(`${name}=${value}`)
  const allFlags = [...new Set([...(again?.flags ?? []), ...flags])]
  if (allFlags.length > 0) words.push('--', ...allFlags)
  return words.map(shellWord).join(' ')
}

/** talosctl with the cluster's talosconfig, through `via` (a working node) to `node`. */
export function talosctlCommand(node: Pick<ClusterNode, 'address'>, args: string, via: Pick<ClusterNode, 'address'> = node): string {
  const config = context ? ` --talosconfig ${shellWord(context.talosconfig)}` : ''
  return `talosctl${config} -e ${via.address} -n ${node.address} ${args}`
}

/** talosctl against a node in maintenance: no talosconfig, the node is the endpoint (talosctl's WithClientMaintenance). */
function talosctlInsecure(node: Pick<ClusterNode, 'address'>, args: string): string {
  return `talosctl ${args} --insecure -n ${node.address}`
}

/** `--kubeconfig <path>` and this cluster's context in it (`--context` for kubectl, `--kube-context` for helm). */
export function kubeconfigFlags(contextFlag: '--context' | '--kube-context'): string {
  if (!context) return ''
  const file = `--kubeconfig ${shellWord(context.kubeconfig)}`
  try {
    const names = contextOf(context.kubeconfig, context.clusterName ?? '')
    return names ? `${file} ${contextFlag} ${shellWord(names.context)}` : file
  } catch {
    // a kubeconfig that cannot be read names no context: the file alone
    return file
  }
}

/** kubectl with the kubeconfig the bootstrap wrote, at this cluster's context. */
export function kubectlCommand(args: string): string {
  const server = kubeServer ? ` --server ${shellWord(kubeServer)}` : ''
  return context ? `kubectl ${kubeconfigFlags('--context')}${server} ${args}` : `kubectl${server} ${args}`
}

/** A control plane other than `node` to ask about the cluster (the bootstrap node first). */
function workingControlPlane(node: Pick<ClusterNode, 'name' | 'address'>): Pick<ClusterNode, 'name' | 'address'> | undefined {
  return context?.controlPlanes.find((cp) => cp.name !== node.name)
}

/**
 * A control plane's etcd exits at each start: Talos restarts it every 5 s by itself and refuses
 * `service etcd start|stop|restart`; what it died of is in its log.
 */
export function hintForEtcdCrash(node: Pick<ClusterNode, 'name' | 'address'>): string {
  return `see why etcd exits in its log (\`${talosctlCommand(node, 'logs etcd')}\`; Talos restarts it every 5 s by itself); fix that (a failing disk, a full one; data that cannot be read: reset the node, its member rejoins: ${taskCommand('bootstrap:node', { NODE: node.name, RESET: 'true' }, ['--yes'])}), then run: ${taskCommand('bootstrap:node', { NODE: node.name })}`
}

/** The next thing an operator should do about a node's failure: always a command they can run. */
export function hintFor(kind: ErrorKind, node: Pick<ClusterNode, 'name' | 'address' | 'configFile'>): string {
  const recover = taskCommand('bootstrap:node', { NODE: node.name })
  const reset = taskCommand('bootstrap:node', { NODE: node.name, RESET: 'true' }, ['--yes'])
  const dmesg = `\`${talosctlCommand(node, 'dmesg')}\``
  switch (kind) {
    case 'unreachable':
      return `check that ${node.address} is powered on and port 50000 is reachable, then run: ${recover}`
    case 'timeout':
      return `${node.address} did not answer in time; check its console (${dmesg}), then run: ${recover}`
    case 'configured':
      return `the node already has a config; to apply it again over the authenticated API run: ${taskCommand('bootstrap:apply', { NODES: node.name }, ['--reapply'])}`
    case 'maintenance':
      return `the node is in maintenance mode (never applied, or it dropped back during install); run: ${recover}`
    case 'pki-mismatch':
      return `the node trusts another CA than the talosconfig (secrets regenerated?): regenerate the configs from the original secrets and run ${recover}, or wipe the node (STATE and EPHEMERAL) and apply again with: ${reset}`
    case 'clock':
      // Talos issues its API certificate by its own clock and issues it again when its time changes
      // (machined controllers/secrets/api.go: the time status is one of its inputs)
      return `compare the clocks: this workstation's (\`date -u\`) and the node's (its console; the certificate's validity in the message starts at the node's time when it issued it; a machine without a working RTC starts in 1970 until NTP answers); fix the one that is off: on the node make the time servers in machine.time.servers of ${node.configFile ? shellWord(node.configFile) : 'its config'} reachable (Talos issues its certificate again once its time syncs), then run: ${recover}`
    case 'cert-sans':
      return `the node's API certificate does not name ${node.address}: use an address the certificate names (listed in the message) as the node's address in the inventory, or add ${node.address} to machine.certSANs in ${node.configFile ? shellWord(node.configFile) : 'its config'} and apply it (\`talosctl apply-config\` through an address the certificate names), then run: ${recover}`
    case 'time-sync':
      // etcd, the kubelet and trustd wait for time sync, and so does the Bootstrap call
      // (v1alpha1_server.go Bootstrap; system/services/etcd.go: timeresource.NewSyncCondition)
      return `the node's clock never synced: set machine.time.servers in ${node.configFile ? shellWord(node.configFile) : 'its config'} to time servers the node can reach (NTP, udp/123, not blocked or intercepted on its network), apply it (${taskCommand('bootstrap:apply', { NODES: node.name }, ['--reapply'])}); check with \`${talosctlCommand(node, 'get timestatus')}\` and the console (\`${talosctlCommand(node, 'dmesg')}\`), then run: ${taskCommand('bootstrap:talos')}`
    case 'install':
      return hintForInstall(node, undefined)
    case 'extensions':
      return hintForExtensions(node, undefined)
    case 'unauthorized':
      return `the talosconfig's certificate lacks the os:admin role: point the inventory at the talosconfig generated with the machine configs, then run: ${recover}`
    case 'config-invalid':
      return `fix ${node.configFile} (check it with: talosctl validate --mode metal -c ${node.configFile ? shellWord(node.configFile) : '<config>'}), then run: ${recover}`
    case 'disk-mismatch':
      return `no disk matches the install disk or selector: list the node's disks with \`${talosctlInsecure(node, 'get disks')}\`, fix installDisk/installDiskSelector, regenerate the config, then run: ${recover}`
    case 'not-ready-yet':
      return `the node was not ready for this call within the retries; run again: ${recover}`
    case 'wrong-node':
      return `bootstrap must target a control plane: set bootstrapNode in ${context ? shellWord(`${context.clusterDir}/bootstrap.yaml`) : 'bootstrap.yaml'} to one of ${context?.controlPlanes.map((cp) => cp.name).join(', ') || 'the control planes'}, then run: ${taskCommand('bootstrap:etcd')}`
    case 'stuck':
      return `read the node's console with ${dmesg}, fix the cause, then run: ${recover}`
    case 'etcd-join': {
      const via = workingControlPlane(node)
      const ask = via
        ? `ask a working control plane: \`${talosctlCommand(via, 'etcd members')}\`, \`${talosctlCommand(node, 'service etcd', via)}\``
        : `check etcd: \`${talosctlCommand(node, 'service etcd')}\``
      // Talos retries the join for EtcdJoinTimeout (30 min: machined services/etcd.go, buildInitialCluster);
      // a boot whose services are not up within BootTimeout (70 min: v1alpha1_sequencer_tasks.go) fails
      // and machined reboots the node, which tries again (machined main.go)
      return `${ask}; once the cause is gone Talos joins by itself: it retries the join for 30 minutes, and a boot not done within 70 minutes reboots the node, which tries again; to retry now, reboot it and recover the node, run: ${talosctlCommand(node, 'reboot', via ?? node)} && ${recover}; if it still does not join, wipe it and let it rejoin with: ${reset}`
    }
    case 'quorum':
      return hintForQuorum(workingControlPlane(node) ?? node, recover)
    case 'busy':
      // the apply mutex is held for a whole ApplyConfiguration call, dry runs included (v1alpha1_server.go)
      return `another client is changing the node (an apply, or one that reboots it): wait for it to finish (\`${talosctlCommand(node, 'get machinestatus')}\`), then run the same command again: ${taskCommand('cluster:apply', { NODES: node.name })}`
    case 'gate-command':
      return `the gate command (GATE_COMMAND) kept failing after ${node.name} was done: see its output in the message, fix what it checks; the node is done (a rerun shows it as no change) and the gate runs after the nodes still to do, so then run again: ${taskCommand('cluster:apply')}`
    case 'upgrade-refused':
      return `the node refused the upgrade and nothing changed on it (it stays cordoned): fix what the message names (an etcd member not started or not healthy: \`${talosctlCommand(workingControlPlane(node) ?? node, 'etcd status')}\`), then run again: ${taskCommand('upgrade:talos', { NODES: node.name })}`
    case 'image-missing':
      return `the node could not pull the installer image named in the message (nothing changed; it stays cordoned): check the image exists and the node reaches its registry (a mirror in machine.registries), or give another with IMAGE=…, then run again: ${taskCommand('upgrade:talos', { NODES: node.name })}`
    case 'not-started':
      return hintForNotStarted(node, taskCommand('upgrade:talos', { NODES: node.name }))
    case 'rolled-back':
      return `the node rebooted into its old version: read why in its console (\`${talosctlCommand(node, 'dmesg')}\`: the installer's refusal or the new image's failed boot), fix it, then run again: ${taskCommand('upgrade:talos', { NODES: node.name })}`
    case 'version-skew':
      return `nothing was touched: pick a target the compatibility table allows (TALOS_VERSION one step at a time, Kubernetes inside the target's range first with task upgrade:k8s), then run: ${taskCommand('upgrade:talos')}`
    case 'k8s-upgrade':
      // upgrade-k8s skips every component and node already at the target (errUpdateSkipped): a rerun resumes
      return `see the control plane's pods (\`${kubectlCommand('-n kube-system get pods -o wide')}\`) and the nodes (\`${kubectlCommand('get nodes -o wide')}\`), fix what the message names (a component's log: \`${talosctlCommand(node, 'get staticpodstatus')}\`; a kubelet: \`${talosctlCommand(node, 'service kubelet')}\`); what is at the target already is skipped, so run again: ${taskCommand('upgrade:k8s')}`
    case 'needs-reboot':
      return `the change needs a reboot: MODE=staged takes it at the node's next reboot; to apply it now with a rolling reboot (drained, behind the quorum gate), run: ${taskCommand('cluster:apply', { NODES: node.name, MODE: 'auto' })}`
    case 'drain-blocked':
      // Talos's Drain gives up after DrainTimeout and the reset goes on (pkg/kubernetes/kubernetes.go)
      return `see the budgets (\`${kubectlCommand('get pdb -A')}\`) and the pods left on the node (\`${kubectlCommand(`get pods -A -o wide --field-selector spec.nodeName=${node.name}`)}\`); let them move (scale the workload up, or relax the budget); Talos ends the drain after 5m, removes the pods regardless and goes on: once the node is back in maintenance (\`${talosctlInsecure(node, 'get machinestatus')}\`), run: ${recover}`
    case 'kubelet':
      // a kubelet that failed its pre stage is not started again by Talos (machined
      // system/service_runner.go: only the process is restarted): restart it once the cause is gone
      return `check the kubelet (\`${talosctlCommand(node, 'service kubelet')}\`; a kubelet that failed before it started has no log of its own, machined's console has the cause: \`${talosctlCommand(node, 'dmesg')}\`); once the cause is fixed, restart it (Talos does not retry a kubelet that failed to start) and recover the node, run: ${talosctlCommand(node, 'service kubelet restart')} && ${recover}`
    case 'node-not-ready':
      return `see why with \`${kubectlCommand(`describe node ${node.name}`)}\`, then run: ${recover}`
    case 'etcd':
      // a crashing etcd says why only in its log (Talos restarts it every 5 s, and refuses `service etcd start`)
      return `check etcd on the control planes (\`${talosctlCommand(workingControlPlane(node) ?? node, 'etcd members')}\`, \`${talosctlCommand(node, 'service etcd')}\`, its log: \`${talosctlCommand(node, 'logs etcd')}\`), then run: ${taskCommand('bootstrap:wait-ready')}`
    case 'control-plane':
      return hintForStaticPod(node, 'kube-apiserver')
    case 'addon':
      return `see the pods (\`${kubectlCommand('-n kube-system get pods -o wide')}\`), then run: ${taskCommand('bootstrap:wait-ready')}`
    case 'diagnostics':
      return `list what Talos found (\`${talosctlCommand(node, 'get diagnostics')}\`), fix it, then run: ${taskCommand('bootstrap:wait-ready')}`
    case 'hardware':
      return `compare the node's memory and disks with Talos's minimums (\`${talosctlCommand(node, 'memory')}\`, \`${talosctlCommand(node, 'get volumestatus EPHEMERAL')}\`), then run: ${taskCommand('bootstrap:wait-ready')}`
    case 'cni':
      return `the CNI pod on ${node.name} is not ready: \`${kubectlCommand(`-n kube-system get pods -o wide --field-selector spec.nodeName=${node.name}`)}\`, then run: ${recover}`
    case 'flux':
      return fluxHint()
    case 'release':
      // a release step carries its own hint (which release, what to look at); this is the fallback
      return `see the bootstrap helmfile's releases with \`helm list -A --kubeconfig ${context ? shellWord(context.kubeconfig) : '<kubeconfig>'}\`, then run: ${taskCommand('bootstrap:all')}`
    case 'tool-missing':
      return 'install the missing tool or point its environment variable (TALOSCTL, KUBECTL, HELM, HELMFILE, FLUX) at it'
    case 'interrupted':
      return `run the same command again: it resumes where it stopped (for this node: ${recover})`
    case 'unknown':
      return `read the message above and the node's console (${dmesg}), then run: ${recover}`
  }
}

/**
 * A node that took its config and never came back: its install did not finish. The API is down while
 * an ISO node installs (v1.12), so its console tells: the installer image pull is the usual cause
 * (internal/pkg/containers/image/image.go: `retrying error: failed to pull image …`).
 */
export function hintForInstall(node: Pick<ClusterNode, 'name' | 'address' | 'configFile'>, image: string | undefined): string {
  const which = image ? `the installer image ${image} (machine.install.image)` : 'the installer image (machine.install.image)'
  return `read the node's console (its screen, serial console or hypervisor console: the API is down while it installs; Talos v1.13 also \`${talosctlCommand(node, 'dmesg')}\`) for the install's error; if ${which} cannot be pulled, make its registry reachable from the node (or a mirror in machine.registries) or set an image that exists for this Talos version in ${shellWord(node.configFile)}; Talos retries the pull for 20 minutes, so a registry that answers again within them lets the install go on by itself; a changed image needs the node back in maintenance (reboot it from the ISO); then run: ${taskCommand('bootstrap:node', { NODE: node.name })}`
}

/**
 * A node without extensions its schematic asks for: an upgrade to the installer of that schematic
 * installs the image again, extensions included (machined's Upgrade; talosctl upgrade).
 */
export function hintForExtensions(node: Pick<ClusterNode, 'name' | 'address' | 'configFile'>, image: string | undefined): string {
  return `list what runs with \`${talosctlCommand(node, 'get extensions')}\`; install the image of the schematic again so that they run (\`${talosctlCommand(node, `upgrade --image ${image ?? '<the Image Factory installer of the schematic>'}`)}\`: machine.install.image of ${shellWord(node.configFile)}, an installer whose schematic has them), then run: ${taskCommand('bootstrap:node', { NODE: node.name })}`
}

/** every control plane of the run, as one talosctl `-n` list (the one given when the run's are not known) */
function everyControlPlane(via: Pick<ClusterNode, 'address'>): Pick<ClusterNode, 'address'> {
  return { address: (context?.controlPlanes ?? [via]).map((cp) => cp.address).join(',') }
}

/** the gate's three etcd reads as the operator runs them: every control plane's status, the members and alarms through `via` */
function etcdReads(via: Pick<ClusterNode, 'address'>): string {
  return `\`${talosctlCommand(everyControlPlane(via), 'etcd status', via)}\`, \`${talosctlCommand(via, 'etcd members')}\`, \`${talosctlCommand(via, 'etcd alarm list')}\``
}

/**
 * The quorum gate did not pass: its own reads as the operator runs them (every control plane's etcd
 * status through `via`, a control plane that answered; the member list and alarms through it), what
 * brings members back or removes one that never will, and the command to run again (`rerun`):
 * nothing was taken down.
 */
export function hintForQuorum(via: Pick<ClusterNode, 'address'>, rerun: string): string {
  const all = everyControlPlane(via)
  return `see what the gate read: ${etcdReads(via)}; bring back the members named (\`${talosctlCommand(all, 'service etcd', via)}\`); a learner that is never promoted or a member no control plane is: remove it (\`${talosctlCommand(via, 'etcd remove-member <member ID>')}\`); for an alarm, free space on the members named with \`${talosctlCommand(via, 'etcd defrag')}\` on each, then \`${talosctlCommand(via, 'etcd alarm disarm')}\`; nothing was taken down, so then run again: ${rerun}`
}

/**
 * A control plane came back from its reboot but its etcd member did not turn healthy and caught up:
 * the node's own change is done; its member's reads (through `via`, a control plane that answered)
 * and service, and the command that goes on with the nodes left once it is (its gate reads it again).
 */
export function hintForMemberBack(node: Pick<ClusterNode, 'name' | 'address'>, via: Pick<ClusterNode, 'address'>, rerun: string): string {
  return `see what etcd says: ${etcdReads(via)}, and its service and log on ${node.name} (\`${talosctlCommand(node, 'service etcd')}\`, \`${talosctlCommand(node, 'logs etcd')}\`); ${node.name} itself is done and no further node was started: once its member is healthy, run again: ${rerun}`
}

/**
 * The node took the call that reboots it and kept its boot: its sequence never ran (machined logs
 * `upgrade failed: locked` when another sequence holds its lock); nothing changed, it stays cordoned.
 */
export function hintForNotStarted(node: Pick<ClusterNode, 'address'>, rerun: string): string {
  return `see why in its log (\`${talosctlCommand(node, 'dmesg')}\`: \`upgrade failed: locked\` is another sequence, a reboot or reset, holding machined's lock); once nothing else runs on it, run again: ${rerun}`
}

/** The commands a run offers instead when the member count refuses a control plane. */
export interface MemberCountWayOut {
  /** the run's workers alone (no control plane goes down) */
  workersAlone?: string
  /** the only control plane, its downtime accepted */
  acceptDowntime?: string
}

/**
 * The quorum gate refused because of the member count, which no wait changes: 2 members lose the
 * quorum with either one down (Talos refuses the upgrade too: internal/pkg/etcd/etcd.go), 1 takes the
 * API down with it. What to do instead, ending with a command that runs as printed.
 */
export function hintForMemberCount(
  members: number,
  node: Pick<ClusterNode, 'name'>,
  rerun: string,
  instead: MemberCountWayOut = {},
): string {
  if (members === 1)
    return instead.acceptDowntime
      ? `${node.name} is the only etcd member and nothing was taken down: add control planes (3 keep the API up while one is down), or accept that the API is down while it reboots (an etcd snapshot is taken first), run: ${instead.acceptDowntime}`
      : `${node.name} is the only etcd member and nothing was taken down: add control planes (3 keep the API up while one is down), then run again: ${rerun}`
  const workers = instead.workersAlone ? `; the workers need no quorum gate: to upgrade them alone now, run: ${instead.workersAlone}` : ''
  return `etcd of ${members} members loses its quorum with either one down, so no control plane is taken down (nothing was): add a third control plane (3 members keep a quorum with one down), then run again: ${rerun}${workers}`
}

/**
 * A kubelet that keeps restarting (machined restarts it forever: runner/restart/restart.go): its own
 * log names the cause; Talos picks up a fixed config on its next restart.
 */
export function hintForKubeletLog(node: Pick<ClusterNode, 'name' | 'address' | 'configFile'>): string {
  return `the kubelet starts and exits: read its log (\`${talosctlCommand(node, 'logs kubelet')}\`); fix what it names in ${shellWord(node.configFile)} (a node IP it does not have: machine.kubelet.nodeIP.validSubnets must select one of the node's addresses and not the VIP; an image it cannot pull: machine.kubelet.image and the registry), apply it (${taskCommand('bootstrap:apply', { NODES: node.name }, ['--reapply'])}), then run: ${taskCommand('bootstrap:node', { NODE: node.name })}`
}

/** A CNI agent that cannot reach the API server: with kube-proxy disabled it needs KubePrism. */
export function hintForCniApi(pod: { name: string; namespace: string }): string {
  return `the CNI cannot reach the API server: with cluster.proxy.disabled set cni.values kubeProxyReplacement: true, k8sServiceHost: localhost, k8sServicePort: 7445 (KubePrism, machine.features.kubePrism) in bootstrap.yaml, check it with \`${taskCommand('bootstrap:preflight')}\`, then run: ${taskCommand('bootstrap:wait-ready')} (its log: \`${kubectlCommand(`-n ${pod.namespace} logs -p ${pod.name}`)}\`)`
}

/**
 * A Ready node still cordoned: Talos uncordons only what it cordoned (annotation talos.dev/cordoned);
 * anyone else's cordon is lifted by hand.
 */
export function hintForCordoned(node: Pick<ClusterNode, 'name' | 'address'> & { kubeName: string }, byTalos: boolean): string {
  const uncordon = `\`${kubectlCommand(`uncordon ${node.kubeName}`)}\``
  const recover = taskCommand('bootstrap:node', { NODE: node.name })
  return byTalos
    ? `see why Talos keeps it cordoned (\`${talosctlCommand(node, 'get machinestatus')}\`); to put it back in service by hand: ${uncordon}, then run: ${recover}`
    : `if it should take pods again, uncordon it: ${uncordon}, then run: ${recover}`
}

/** Talos runs its own CNI next to the configured one. */
export function hintForTalosCni(node: Pick<ClusterNode, 'name' | 'configFile'>): string {
  return `set cluster.network.cni.name: none in ${node.configFile} and every other config, re-apply them (${taskCommand('bootstrap:apply', {}, ['--reapply'])}), remove Talos's flannel (\`${kubectlCommand('-n kube-system delete daemonset kube-flannel')}\`), then run: ${taskCommand('bootstrap:node', { NODE: node.name })}`
}

/** A Kustomization or Flux install that failed: the repository is the usual cause. */
export function fluxHint(what = 'the repository'): string {
  const kubeconfig = context ? ` ${kubeconfigFlags('--context')}` : ''
  return `see \`flux get kustomizations -A${kubeconfig}\` and \`flux logs${kubeconfig}\`, fix ${what}, then run: ${taskCommand('bootstrap:flux')}`
}

/**
 * A control plane component that does not run: it is a static pod of the kubelet, not a Talos
 * service (`talosctl service kube-apiserver` knows no such service): its StaticPodStatus, its log
 * through the CRI.
 */
export function hintForStaticPod(node: Pick<ClusterNode, 'name' | 'address'> & { kubeName?: string }, component: string): string {
  const pod = `kube-system/${component}-${node.kubeName ?? node.name}`
  return `see its status and log on ${node.name} (\`${talosctlCommand(node, 'get staticpodstatus')}\`, \`${talosctlCommand(node, `logs -k ${pod}`)}\`); fix what they name (the component's image in cluster.${componentKey(component)}.image and the registry, its extraArgs in cluster.${componentKey(component)}.extraArgs of the node's config) and apply it (${taskCommand('bootstrap:apply', { NODES: node.name }, ['--reapply'])}), then run: ${taskCommand('bootstrap:wait-ready')}`
}

/** the machine config key of a control plane component (cluster.apiServer, …) */
function componentKey(component: string): string {
  return component === 'kube-apiserver' ? 'apiServer' : component === 'kube-scheduler' ? 'scheduler' : 'controllerManager'
}

/**
 * The Kubernetes API did not answer a tool (refused, reset, 503, timed out) through the retries: the
 * API is the cause, not a chart or a repository. kube-apiserver is a static pod, not a Talos service;
 * the API's usual cause is etcd, which is one.
 */
export function apiHint(task: string): string {
  const cps = context?.controlPlanes ?? []
  const etcd = cps.map((cp) => `\`${talosctlCommand(cp, 'service etcd')}\``).join(', ')
  // kube-apiserver is a static pod: its StaticPodStatus and its container's log, not a service
  const apiServer = cps
    .map(
      (cp) =>
        `\`${talosctlCommand(cp, 'get staticpodstatus')}\`, \`${talosctlCommand(cp, `logs -k kube-system/kube-apiserver-${cp.kubeName ?? cp.name}`)}\``,
    )
    .join(', ')
  return `the Kubernetes API did not answer: check that it does (\`${kubectlCommand("get --raw '/readyz?verbose'")}\`), the control planes' kube-apiserver static pods (${apiServer || '`talosctl get staticpodstatus`'}) and their etcd (${etcd || '`talosctl service etcd`'}), then run: ${taskCommand(task)}`
}

/** The task that runs a phase (the bootstrap phase is `bootstrap:etcd`). */
export function phaseTask(phase: string): string {
  if (phase === 'cluster-apply') return 'cluster:apply'
  if (phase === 'upgrade-talos') return 'upgrade:talos'
  if (phase === 'upgrade-k8s') return 'upgrade:k8s'
  return `bootstrap:${phase === 'bootstrap' ? 'etcd' : phase}`
}

/** A cluster-wide step of a phase that failed: run the phase's task again. */
export function phaseHint(task: string, first = 'read the message above'): string {
  return `${first}, then run again: ${taskCommand(task)}`
}
