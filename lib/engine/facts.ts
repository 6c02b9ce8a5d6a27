import type { ClusterVersions, Day2Node } from '../core/results.ts'

export type NodeState = 'maintenance' | 'configured' | 'unreachable'

/** What the run learned about each node, gathered once and shared by the phases (k0sctl's facts). */
export interface NodeFacts {
  state?: NodeState
  /** the node's config was applied during this run */
  applied?: boolean
  /** it took a config from someone else during this run (why this run thinks so): it installs */
  tookConfigElsewhere?: string
  /** the etcd service state last read on this node during this run */
  etcd?: string
  /** that service's last event (`Waiting for time sync`, `Running pre state`) */
  etcdEvent?: string
  /** a re-apply made the node reboot: it is verified only once seen down and back */
  rebootAfterApply?: boolean
  /** verify left this worker waiting for a control plane's trustd (why): the bootstrap completes it */
  awaitingControlPlane?: string
  /** the etcd member ID this control plane had before this run reset it: its rejoin needs a new one */
  replacedEtcdMember?: string
  /** this run reset the node: it must end uncordoned */
  resetInRun?: boolean
  /**
   * its Kubernetes Node before this run reset it (the object stays): the kubelet's boot ID and when
   * Ready last changed; wait-ready takes the Node as registered only once its kubelet wrote a new one
   */
  kubeBeforeReset?: { bootId?: string; readySince?: string }
  /** upgrade:talos: the node's plan and how far it got (the report's NodeResult.day2) */
  day2?: Day2Node
}

/** What the run learned about the cluster as a whole. */
export interface ClusterFacts {
  /** etcd was found running (or was bootstrapped by this run); false: found not bootstrapped */
  bootstrapped?: boolean
  /** flux install or bootstrap failed in this run (its failure is already named) */
  fluxInstallFailed?: boolean
  /** why Flux must not be installed: the cluster check found it not ready (the later flux steps are not-run) */
  fluxBlocked?: string
  /** the handover wait failed in this run */
  fluxNotHandedOver?: boolean
  /** a day-2 command read the versions every node runs at its end (the report's `versions`) */
  versions?: ClusterVersions
}

export class Facts {
  private readonly byNode = new Map<string, NodeFacts>()
  readonly cluster: ClusterFacts = {}

  of(name: string): NodeFacts {
    let facts = this.byNode.get(name)
    if (!facts) {
      facts = {}
      this.byNode.set(name, facts)
    }
    return facts
  }
}
