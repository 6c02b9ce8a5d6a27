import { classify } from './classify.js'
import { isTransient, NodeError } from '../core/errors.js'
import { goDuration } from '../core/duration.js'
import { taskCommand } from '../cli/hints.js'
import type { CniSettings } from '../input/settings.js'
import type { ToolRunner } from './exec.js'
import { apiError, kubeArgs, type KubeAccess } from './kube-access.js'

export interface ReleaseStatus {
  status: string
  /** `<chart name>-<chart version>`, as helm list prints it */
  chart?: string
  revision?: number
}

/** The helm wrapper: explicit --kubeconfig and namespace, non-interactive. */
export class Helm {
  constructor(
    private readonly runner: ToolRunner,
    private readonly access: KubeAccess,
  ) {}

  async clientVersion(): Promise<string> {
    const result = await this.runner.run({ tool: 'helm', args: ['version', '--short'], local: true, dryRunStdout: '(dry run)' })
    return result.stdout.trim().split('+')[0] || 'unknown'
  }

  /**
   * undefined when the release does not exist. Read with `helm list`: `helm status -o json` leaves
   * the chart out (cmd/helm/status.go strips rel.Chart), and its version is what says whether an
   * upgrade is due. --all: a pending or failed release is listed too.
   */
  async release(release: string, namespace: string): Promise<ReleaseStatus | undefined> {
    const filter = `^${release.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`
    const result = await this.runner.run({
      tool: 'helm',
      args: ['list', `--namespace=${namespace}`, ...kubeArgs(this.access, '--kube-context'), `--filter=${filter}`, '--all', '-o', 'json'],
      dryRunStdout: '',
    })
    if (!result.ok) {
      const { kind, message } = classify(result)
      if (isTransient(kind)) throw apiError(kind, message, 'bootstrap:wait-ready')
      throw new NodeError(
        kind,
        message,
        `check the Kubernetes API and the release with \`helm status ${release} -n ${namespace} --kubeconfig ${this.access.kubeconfig}\`; then run: ${taskCommand('bootstrap:wait-ready')}`,
      )
    }
    if (!result.stdout.trim()) return undefined
    const rows = JSON.parse(result.stdout) as Array<{ name?: string; status?: string; chart?: string; revision?: string }>
    const row = rows.find((r) => r.name === release)
    if (!row) return undefined
    return {
      status: row.status ?? 'unknown',
      ...(row.chart ? { chart: row.chart } : {}),
      ...(row.revision ? { revision: Number(row.revision) } : {}),
    }
  }

  /**
   * A release left pending by an interrupted helm (helm's action/upgrade.go refuses while the last
   * revision is pending). A first install (pending-install, revision 1) has nothing to roll back to
   * (`helm rollback` needs a previous revision): it is uninstalled; a pending upgrade or rollback is
   * rolled back to the revision before it.
   */
  private pendingFix(cni: CniSettings, release: ReleaseStatus | undefined): string {
    const where = `-n ${cni.namespace} --kubeconfig ${this.access.kubeconfig}`
    if (release?.status === 'pending-install' || (release?.revision === 1 && release.status.startsWith('pending')))
      return `the first install of ${cni.release} was interrupted and is still pending-install (revision 1, nothing to roll back to): uninstall it with \`helm uninstall ${cni.release} ${where}\``
    if (release && release.status.startsWith('pending'))
      return `the release is stuck in ${release.status} (revision ${release.revision ?? '?'}): roll it back to the revision before it with \`helm rollback ${cni.release} ${where}\``
    return `the release is stuck in a pending state: see \`helm history ${cni.release} ${where}\`; uninstall it if its only revision is pending-install, otherwise \`helm rollback ${cni.release} ${where}\``
  }

  /** helm upgrade --install of a chart other than the CNI (flux-operator); failures hint `recovery`. */
  async installChart(
    chart: { release: string; chart: string; namespace: string; version?: string; repo?: string; caFile?: string },
    timeoutMs: number,
    recovery: string,
  ): Promise<void> {
    // every value joined to its flag and the names after `--`: none can be read as a flag
    const args = [
      'upgrade',
      '--install',
      `--namespace=${chart.namespace}`,
      '--create-namespace',
      ...kubeArgs(this.access, '--kube-context'),
      '--wait',
      `--timeout=${goDuration(timeoutMs)}`,
      ...(chart.version ? [`--version=${chart.version}`] : []),
      ...(chart.repo ? [`--repo=${chart.repo}`] : []),
      ...(chart.caFile ? [`--ca-file=${chart.caFile}`] : []),
      '--',
      chart.release,
      chart.chart,
    ]
    const result = await this.runner.run({ tool: 'helm', args, timeoutMs: timeoutMs + 30_000 })
    if (result.ok) return
    const { kind, message } = classify(result)
    if (isTransient(kind) && !chartUnreachable(message)) throw apiError(kind, message, 'bootstrap:flux')
    throw new NodeError(
      isTransient(kind) ? kind : 'flux',
      message,
      `check the chart (\`helm status ${chart.release} -n ${chart.namespace}\`), then run: ${recovery}`,
    )
  }

  /**
   * Installs or upgrades the release without `--wait`: the nodes' CNI pods are waited for one by
   * one afterwards (each node named with its own cause). Timeout-like text (`i/o timeout`,
   * `context deadline exceeded`) may come from a chart download or the API as well as from helm's
   * own deadline: the release says whether it went in.
   */
  async upgradeInstall(cni: CniSettings, valuesFile: string | undefined, timeoutMs: number): Promise<{ note?: string }> {
    // every value joined to its flag and the names after `--`: none can be read as a flag
    const args = [
      'upgrade',
      '--install',
      `--namespace=${cni.namespace}`,
      '--create-namespace',
      ...kubeArgs(this.access, '--kube-context'),
      `--timeout=${goDuration(timeoutMs)}`,
    ]
    if (cni.repo) args.push(`--repo=${cni.repo}`)
    if (cni.caFile) args.push(`--ca-file=${cni.caFile}`)
    if (cni.version) args.push(`--version=${cni.version}`)
    if (valuesFile) args.push(`--values=${valuesFile}`)
    args.push('--', cni.release, cni.chart)
    // helm's own --timeout bounds its operations; our deadline is a little longer. Without --wait it
    // takes seconds: a run killed meanwhile lets it finish (cut, it would leave the release pending-install)
    const result = await this.runner.run({ tool: 'helm', args, timeoutMs: timeoutMs + 30_000, outlivesRun: true })
    if (result.ok) return {}
    const { kind, message } = classify(result)
    if (kind === 'interrupted') throw new NodeError(kind, message, `run it again: ${taskCommand('bootstrap:wait-ready')}`)
    if (kind === 'timeout') {
      const release = await this.release(cni.release, cni.namespace).catch((err: unknown) => {
        // the API does not answer the read either: it is the cause, and the install is tried again
        throw err instanceof NodeError && err.transient ? apiError('timeout', message, 'bootstrap:wait-ready') : err
      })
      if (release?.status === 'deployed') return { note: `helm said "${message}", but the release is deployed` }
      throw new NodeError(
        'cni',
        `${message} (release ${cni.release}: ${release ? release.status : 'not installed'})`,
        `check that the chart can be fetched (${cni.repo ?? cni.chart}) and the Kubernetes API answers (\`helm status ${cni.release} -n ${cni.namespace}\`), then run: ${taskCommand('bootstrap:wait-ready')}`,
      )
    }
    // helm's text for an index.yaml it could not get (pkg/repo/chartrepo.go FindChartInRepoURL)
    if (chartUnreachable(message)) {
      const fix = /x509: certificate signed by unknown authority/.test(message)
        ? `the chart repository's certificate is not trusted: set cni.caFile in bootstrap.yaml to its CA certificate (PEM)`
        : `check cni.repo in bootstrap.yaml (${cni.repo ?? cni.chart}) and that it answers from here`
      throw new NodeError('cni', message, `${fix}, then run: ${taskCommand('bootstrap:wait-ready')}`)
    }
    if (/another operation .* in progress/.test(message)) {
      const release = await this.release(cni.release, cni.namespace).catch(() => undefined)
      throw new NodeError(
        'cni',
        `${message} (release ${cni.release}: ${release ? `${release.status}, revision ${release.revision ?? '?'}` : 'unknown'})`,
        `${this.pendingFix(cni, release)}, then run: ${taskCommand('bootstrap:wait-ready')}`,
      )
    }
    // refused, reset, 503: the Kubernetes API, never the chart (retried by the caller)
    if (isTransient(kind)) throw apiError(kind, message, 'bootstrap:wait-ready')
    throw new NodeError(
      'cni',
      message,
      `fix the chart or its values (helm said: ${message.slice(0, 120)}), then run: ${taskCommand('bootstrap:wait-ready')}`,
    )
  }
}

/** helm's text for a chart repository it could not reach: the repository is the cause, not the Kubernetes API. */
function chartUnreachable(message: string): boolean {
  return /is not a valid chart repository or cannot be reached|failed to fetch .*\.tgz|looks like .* is not a valid chart repository/.test(
    message,
  )
}
