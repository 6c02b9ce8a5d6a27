import { dirname } from 'node:path'
import { openedDirUnchanged } from '../state/state-files.ts'
import { parseAllDocuments } from 'yaml'
import { classify } from './classify.ts'
import { isTransient, NodeError } from '../core/errors.ts'
import { goDuration } from '../core/duration.ts'
import { shellWord } from '../core/shell.ts'
import { taskCommand } from '../cli/hints.ts'
import type { CniSettings } from '../input/settings.ts'
import type { ToolRunner } from './exec.ts'
import { apiError, helmEnv, kubeArgs, type KubeAccess } from './kube-access.ts'

export interface ReleaseStatus {
  status: string
  /** `<chart name>-<chart version>`, as helm list prints it */
  chart?: string
  revision?: number
}

/** The helm wrapper: explicit --kubeconfig and namespace, non-interactive. */
export class Helm {
  private readonly runner: ToolRunner
  private readonly access: KubeAccess
  constructor(runner: ToolRunner, access: KubeAccess) {
    this.runner = runner
    this.access = access
  }

  async clientVersion(): Promise<string> {
    const result = await this.runner.run({
      tool: 'helm',
      args: ['version', '--short'],
      local: true,
      reusable: { key: ['version', '--short'] },
      env: helmEnv(this.access),
      dryRunStdout: '(dry run)',
    })
    return result.stdout.trim().split('+')[0] || 'unknown'
  }

  /**
   * undefined when the release does not exist. Read with `helm list`: `helm status -o json` leaves
   * the chart out (cmd/helm/status.go strips rel.Chart), and its version is what says whether an
   * upgrade is due. A pending or failed release is listed too: --deployed --failed --pending, which
   * helm 3 and 4 both take (helm 4 dropped --all, and lists every state by default).
   */
  async release(release: string, namespace: string): Promise<ReleaseStatus | undefined> {
    const filter = `^${release.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`
    const result = await this.runner.run({
      tool: 'helm',
      env: helmEnv(this.access),
      args: [
        'list',
        `--namespace=${namespace}`,
        ...kubeArgs(this.access, '--kube-context'),
        `--filter=${filter}`,
        '--deployed',
        '--failed',
        '--pending',
        '-o',
        'json',
      ],
      dryRunStdout: '',
    })
    if (!result.ok) {
      const { kind, message } = classify(result)
      if (isTransient(kind)) throw apiError(kind, message, 'bootstrap:wait-ready')
      throw new NodeError(
        kind,
        message,
        `check the Kubernetes API and the release with \`helm status ${release} -n ${namespace} ${kubeArgs(this.access, '--kube-context').map(shellWord).join(' ')}\`; then run: ${taskCommand('bootstrap:wait-ready')}`,
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
   * The objects a release deployed (`helm get manifest`), kind, name and namespace each, in the
   * manifest's order; a namespaced object without one is in the release's namespace.
   */
  async manifestObjects(release: string, namespace: string): Promise<Array<{ kind: string; name: string; namespace: string }>> {
    const result = await this.runner.run({
      tool: 'helm',
      args: ['get', 'manifest', `--namespace=${namespace}`, ...kubeArgs(this.access, '--kube-context'), '--', release],
      dryRunStdout: '',
    })
    if (!result.ok) return []
    return parseAllDocuments(result.stdout).flatMap((doc) => {
      const o = doc.toJS() as { kind?: string; metadata?: { name?: string; namespace?: string } } | null
      return o?.kind && o.metadata?.name ? [{ kind: o.kind, name: o.metadata.name, namespace: o.metadata.namespace ?? namespace }] : []
    })
  }

  /**
   * A release left pending by an interrupted helm (helm's action/upgrade.go refuses while the last
   * revision is pending). A first install (pending-install, revision 1) has nothing to roll back to
   * (`helm rollback` needs a previous revision): it is uninstalled; a pending upgrade or rollback is
   * rolled back to the revision before it.
   */
  private pendingFix(cni: CniSettings, release: ReleaseStatus | undefined): string {
    // this cluster's context: the kubeconfig may hold other clusters (its current context another's)
    const where = `-n ${shellWord(cni.namespace)} ${kubeArgs(this.access, '--kube-context').map(shellWord).join(' ')}`
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
    const result = await this.runner.run({ tool: 'helm', args, env: helmEnv(this.access), timeoutMs: timeoutMs + 30_000, mutates: true })
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
  async upgradeInstall(cni: CniSettings, values: string | undefined, timeoutMs: number): Promise<{ note?: string }> {
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
    // the values on stdin: never a file in $TMPDIR (left behind by a SIGKILL) nor anywhere else
    if (values !== undefined) args.push('--values=-')
    args.push('--', cni.release, cni.chart)
    // helm's own --timeout bounds its operations; our deadline is a little longer. Without --wait it
    // takes seconds: a run killed meanwhile lets it finish (cut, it would leave the release pending-install)
    // it may outlive this run, so it gets the state directory's plain path: only while that is still
    // the directory this run checked (never a link put in its place)
    if (!this.runner.dryRun && !openedDirUnchanged(this.access.cacheDir))
      throw new NodeError(
        'unknown',
        `${dirname(this.access.cacheDir)} was moved, removed or replaced during the run: helm is not started with its caches there`,
        `put the cluster's .bootstrap directory back (or remove what took its place), then run: ${taskCommand('bootstrap:wait-ready')}`,
      )
    const result = await this.runner.run({
      tool: 'helm',
      args,
      env: helmEnv(this.access, true),
      timeoutMs: timeoutMs + 30_000,
      outlivesRun: true,
      mutates: true,
      ...(values !== undefined ? { input: values } : {}),
    })
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
