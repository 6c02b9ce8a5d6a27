import type { ErrorKind } from './classify.js'
import type { ClusterNode } from './inventory.js'

/** The next thing an operator should do about a node's failure: always a command they can run. */
export function hintFor(kind: ErrorKind, node: Pick<ClusterNode, 'name' | 'ip' | 'configFile'>): string {
  const recover = `task bootstrap:node NODE=${node.name}`
  switch (kind) {
    case 'unreachable':
      return `check that ${node.ip} is powered on and port 50000 is reachable, then run: ${recover}`
    case 'timeout':
      return `${node.ip} did not answer in time; check its console (talosctl -n ${node.ip} dmesg), then run: ${recover}`
    case 'configured':
      return `the node already has a config; to apply it again over the authenticated API run: task bootstrap:apply NODES=${node.name} -- --reapply`
    case 'maintenance':
      return `the node is in maintenance mode (never applied, or it dropped back during install); run: ${recover}`
    case 'pki-mismatch':
      return `the node trusts another CA than the talosconfig (secrets regenerated?): regenerate the configs from the original secrets, or wipe the node with: ${recover} RESET=true`
    case 'unauthorized':
      return `the talosconfig's certificate lacks the os:admin role; use the talosconfig generated with the machine configs`
    case 'config-invalid':
      return `fix ${node.configFile} (check it with: talosctl validate --mode metal -c ${node.configFile}), then run: ${recover}`
    case 'disk-mismatch':
      return `no disk matches the install disk or selector: list the node's disks with \`talosctl get disks --insecure -n ${node.ip}\`, fix installDisk/installDiskSelector, regenerate the config, then run: ${recover}`
    case 'not-ready-yet':
      return `the node was not ready for this call within the retries; run again: ${recover}`
    case 'wrong-node':
      return `bootstrap must target a control plane; set bootstrapNode in bootstrap.yaml to a control plane`
    case 'stuck':
      return `read the node's console with \`talosctl -n ${node.ip} dmesg\`, fix the cause, then run: ${recover}`
    case 'etcd-join':
      return `check etcd on the node (\`talosctl -n ${node.ip} service etcd\`, \`talosctl -n ${node.ip} etcd members\`), then run: ${recover}`
    case 'kubelet':
      return `check the kubelet (\`talosctl -n ${node.ip} service kubelet\`, \`talosctl -n ${node.ip} logs kubelet\`), then run: ${recover}`
    case 'node-not-ready':
      return `see why with \`kubectl describe node ${node.name}\`, then run: ${recover}`
    case 'cni':
      return `the CNI pod on ${node.name} is not ready: \`kubectl -n kube-system get pods -o wide --field-selector spec.nodeName=${node.name}\`, then run: ${recover}`
    case 'flux':
      return 'see `flux get kustomizations -A` and `flux logs`, fix the repository, then run: task bootstrap:flux'
    case 'tool-missing':
      return 'install the missing tool or point its environment variable (TALOSCTL, KUBECTL, HELM, FLUX) at it'
    case 'interrupted':
      return 'run the same command again: it resumes where it stopped'
    case 'unknown':
      return `read the message above and the node's console (\`talosctl -n ${node.ip} dmesg\`), then run: ${recover}`
  }
}

/** A CNI agent that cannot reach the API server: with kube-proxy disabled it needs KubePrism. */
export function hintForCniApi(pod: { name: string; namespace: string }): string {
  return `the CNI cannot reach the API server: with cluster.proxy.disabled set cni.values kubeProxyReplacement: true, k8sServiceHost: localhost, k8sServicePort: 7445 (KubePrism, machine.features.kubePrism) in bootstrap.yaml, check it with \`task bootstrap:preflight\`, then run: task bootstrap:wait-ready (its log: \`kubectl -n ${pod.namespace} logs -p ${pod.name}\`)`
}

/** Talos runs its own CNI next to the configured one. */
export function hintForTalosCni(node: Pick<ClusterNode, 'name' | 'configFile'>): string {
  return `set cluster.network.cni.name: none in ${node.configFile} and every other config, re-apply them (task bootstrap:apply -- --reapply), remove Talos's flannel (\`kubectl -n kube-system delete daemonset kube-flannel\`), then run: task bootstrap:node NODE=${node.name}`
}
