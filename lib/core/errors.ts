/** Exit codes of every script (docs/design.md, the task contract). */
export const ExitCode = {
  ok: 0,
  nodeFailed: 1,
  badInput: 2,
  toolMissing: 3,
  interrupted: 130,
} as const

/** Bad input: usage, inventory, settings, a missing file. Reported before any node is touched. */
export class InputError extends Error {
  readonly file: string | undefined
  readonly line: number | undefined
  readonly fix: string

  constructor(message: string, where: { file?: string; line?: number; fix: string }) {
    super(message)
    this.name = 'InputError'
    this.file = where.file
    this.line = where.line
    this.fix = where.fix
  }

  /** `<path>:<line>: <what is wrong> (fix: <what to do>)` */
  format(): string {
    const location = this.file ? `${this.file}${this.line ? `:${this.line}` : ''}: ` : ''
    return `${location}${this.message} (fix: ${this.fix})`
  }
}

/** Several input errors found in one pass, reported together. */
export class InputErrors extends Error {
  readonly errors: InputError[]
  constructor(errors: InputError[]) {
    super(errors.map((e) => e.format()).join('\n'))
    this.errors = errors
    this.name = 'InputErrors'
  }
}

export class ToolMissingError extends Error {
  readonly tool: string
  readonly binary: string
  readonly envVar: string
  constructor(tool: string, binary: string, envVar: string) {
    super(`${tool} not found (looked for "${binary}"): install it or point ${envVar} at it`)
    this.tool = tool
    this.binary = binary
    this.envVar = envVar
    this.name = 'ToolMissingError'
  }
}

/** A tool that is there but does not work as that tool (TALOSCTL=/bin/sh, a broken binary): exit 3 like a missing one. */
export class ToolUnusableError extends ToolMissingError {
  constructor(tool: string, binary: string, envVar: string, why: string) {
    super(tool, binary, envVar)
    this.name = 'ToolUnusableError'
    this.message = `${tool} at "${binary}" is not usable: ${why} (fix: install ${tool} or point ${envVar} at it)`
  }
}

/** The run was interrupted (Ctrl-C, SIGTERM, orphaned). */
export class InterruptedError extends Error {
  constructor(reason = 'interrupted') {
    super(reason)
    this.name = 'InterruptedError'
  }
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/** Stable error kinds (docs/report.md), plus the few reality added. */
export type ErrorKind =
  | 'unreachable'
  | 'timeout'
  | 'configured'
  | 'maintenance'
  | 'pki-mismatch'
  | 'clock'
  | 'cert-sans'
  | 'time-sync'
  | 'install'
  | 'extensions'
  | 'unauthorized'
  | 'config-invalid'
  | 'disk-mismatch'
  | 'not-ready-yet'
  | 'wrong-node'
  | 'stuck'
  | 'drain-blocked'
  | 'etcd-join'
  /** day 2: the etcd quorum gate before a control plane goes down did not pass (docs/day2-design.md 2.3) */
  | 'quorum'
  /**
   * day 2: the node is busy with another change of its own (its apply mutex is held, an apply already
   * reboots it): it clears by itself, so the one retry policy tries again (docs/day2-design.md 1.5)
   */
  | 'busy'
  /** cluster:apply: the change needs a reboot and MODE=no-reboot refuses one */
  | 'needs-reboot'
  /** day 2: the operator's gate command did not exit 0 within gateTimeout after a node */
  | 'gate-command'
  /**
   * upgrade:talos: the node refused the upgrade (Talos's etcd check before an upgrade; the installer
   * refusing the path on the v1.13 lifecycle path); nothing changed on it
   */
  | 'upgrade-refused'
  /** upgrade:talos: the node could not pull the installer image (Talos's `error validating installer image`) */
  | 'image-missing'
  /**
   * day 2: the node took the call that reboots it (the upgrade's ack, apply-config --mode reboot) and
   * kept answering on the boot it had: its sequence never started (machined's lock held by another
   * sequence: `upgrade failed: locked`); nothing changed on it
   */
  | 'not-started'
  /** upgrade:talos: the node rebooted (a new boot ID) but runs its old version: the upgrade failed and Talos went back */
  | 'rolled-back'
  /**
   * upgrade:talos, upgrade:k8s: the target is outside what the installer, the Kubernetes path or a
   * node's Talos allows (the compatibility tables); nothing was touched
   */
  | 'version-skew'
  /**
   * upgrade:k8s: `talosctl upgrade-k8s` failed (its own text), or a component or Node is not at the
   * target after it; a rerun resumes (upgrade-k8s skips what is at the target)
   */
  | 'k8s-upgrade'
  | 'kubelet'
  | 'node-not-ready'
  | 'etcd'
  | 'control-plane'
  | 'addon'
  | 'diagnostics'
  | 'hardware'
  | 'cni'
  | 'flux'
  | 'release'
  | 'tool-missing'
  | 'interrupted'
  | 'unknown'

/** Kinds worth another attempt: the condition clears by itself. */
const TRANSIENT: ReadonlySet<ErrorKind> = new Set<ErrorKind>(['unreachable', 'timeout', 'not-ready-yet', 'busy'])

export function isTransient(kind: ErrorKind): boolean {
  return TRANSIENT.has(kind)
}

/** A failure attributed to a node (or a cluster step), with its kind and what to do about it. */
export class NodeError extends Error {
  readonly kind: ErrorKind
  readonly hint: string
  constructor(kind: ErrorKind, message: string, hint: string) {
    super(message)
    this.kind = kind
    this.hint = hint
    this.name = 'NodeError'
  }

  get transient(): boolean {
    return isTransient(this.kind)
  }
}

/**
 * A cluster step's failure that found several nodes wrong: the step's own error (every cause), and
 * each node's own kind, message and hint (the nodes it blocks fail with theirs, not the first's).
 */
export class StepError extends NodeError {
  readonly perNode: ReadonlyMap<string, { kind: ErrorKind; message: string; hint: string }>
  constructor(
    kind: ErrorKind,
    message: string,
    hint: string,
    perNode: ReadonlyMap<string, { kind: ErrorKind; message: string; hint: string }>,
  ) {
    super(kind, message, hint)
    this.perNode = perNode
    this.name = 'StepError'
  }
}
