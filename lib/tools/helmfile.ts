import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { classify } from './classify.ts'
import { NodeError } from '../core/errors.ts'
import type { ToolResult, ToolRunner } from './exec.ts'
import { helmEnv, kubeArgs, type KubeAccess } from './kube-access.ts'

/** One release of a helmfile as helmfile renders it (`helmfile build`): its templates already applied. */
export interface HelmfileRelease {
  name: string
  namespace: string
  /** as the helmfile names it: `oci://…/cilium`, `repo/chart` or a path */
  chart: string
  version?: string
  /** `namespace/name` of the releases it needs (helmfile's `needs`, a bare name taken in this namespace) */
  needs: string[]
  /** `installed: false` releases are left alone, as helmfile sync does */
  installed: boolean
  /** its values merged from every values file and inline entry (`--embed-values`) */
  values: Record<string, unknown>
}

/** helmfile could not render the file: what it said, for the operator to fix the file. */
export class HelmfileRenderError extends Error {}

interface BuiltRelease {
  name?: string
  namespace?: string
  chart?: string
  version?: string | number
  needs?: string[]
  installed?: boolean
  values?: Array<Record<string, unknown> | string>
}

/**
 * The helmfile wrapper: the only code that knows helmfile's arguments and output. helmfile runs
 * the helm the product runs (`--helm-binary`), against the run's kubeconfig and context; its own
 * templating (.gotmpl values, readFile, tpl) is never re-implemented here.
 */
export class Helmfile {
  private readonly runner: ToolRunner
  private readonly access: KubeAccess
  constructor(runner: ToolRunner, access: KubeAccess) {
    this.runner = runner
    this.access = access
  }

  /** helm's homes (helmfile runs helm) and helmfile's own cache of remote files, under the run's cache directory */
  private env(): Record<string, string> {
    const helm = helmEnv(this.access)
    return { ...helm, HELMFILE_CACHE_HOME: join(this.access.handedCacheDir ?? this.access.cacheDir, 'helmfile', 'cache') }
  }

  /** `--version` (cobra's: `helmfile version <v>`); `helmfile version` would ask GitHub for a newer release */
  async clientVersion(): Promise<string> {
    const result = await this.runner.run({
      tool: 'helmfile',
      args: ['--version'],
      local: true,
      reusable: { key: ['--version'] },
      dryRunStdout: '(dry run)',
    })
    return result.stdout.trim().split(/\s+/).pop() || 'unknown'
  }

  /** the flags before the command; `cluster`: the run's kubeconfig and context (rendering needs neither) */
  private global(file: string, cluster = false): string[] {
    return [
      '--file',
      file,
      '--helm-binary',
      this.runner.binary('helm'),
      '--no-color',
      ...(cluster ? kubeArgs(this.access, '--kube-context') : []),
    ]
  }

  /**
   * The releases as rendered (`helmfile build --embed-values`: the state after its templates, the
   * values files read in): local work, no cluster touched; it runs in a dry run too. `build` pulls
   * every chart first unless `--chart` names a local one for all releases: an empty stub chart, so
   * that rendering needs no registry (the releases keep their own chart and version in the output).
   */
  async releases(file: string): Promise<HelmfileRelease[]> {
    // under the run's cache directory: nothing of the tool's is written outside the cluster directory
    const base = join(this.access.handedCacheDir ?? this.access.cacheDir, 'helmfile')
    mkdirSync(base, { recursive: true })
    const stub = mkdtempSync(join(base, 'render-chart-'))
    writeFileSync(join(stub, 'Chart.yaml'), 'apiVersion: v2\nname: render-only\nversion: 0.0.0\n')
    let result: ToolResult
    try {
      result = await this.runner.run({
        tool: 'helmfile',
        env: this.env(),
        args: [...this.global(file), `--chart=${stub}`, 'build', '--embed-values'],
        local: true,
      })
    } finally {
      rmSync(stub, { recursive: true, force: true })
    }
    if (!result.ok) throw new HelmfileRenderError(lastLines(result))
    const releases: HelmfileRelease[] = []
    for (const doc of parseAllDocuments(result.stdout)) {
      const state = doc.toJS() as { releases?: BuiltRelease[] } | null
      for (const r of state?.releases ?? []) {
        if (!r.name || !r.chart) continue
        const namespace = r.namespace || 'default'
        releases.push({
          name: r.name,
          namespace,
          chart: r.chart,
          ...(r.version !== undefined && r.version !== '' ? { version: String(r.version) } : {}),
          // helmfile's needs: name, namespace/name or kubecontext/namespace/name
          needs: (r.needs ?? []).map((n) => {
            const parts = n.split('/')
            return parts.length === 1 ? `${namespace}/${n}` : parts.slice(-2).join('/')
          }),
          installed: r.installed !== false,
          values: Object.assign({}, ...(r.values ?? []).filter((v): v is Record<string, unknown> => typeof v === 'object' && v !== null)),
        })
      }
    }
    return releases
  }

  /**
   * The CustomResourceDefinitions the file's releases render (`helmfile template`, which pulls each
   * chart), as a YAML stream ready for a server-side apply.
   */
  async crds(file: string, timeoutMs: number): Promise<string> {
    const result = await this.runner.run({
      tool: 'helmfile',
      env: this.env(),
      args: [...this.global(file), '--quiet', 'template', '--include-crds', '--skip-tests'],
      timeoutMs,
      dryRunStdout: '',
    })
    if (!result.ok) throw failure(result, `check the charts of ${file} can be pulled from here`)
    return parseAllDocuments(result.stdout)
      .filter((d) => (d.toJS() as { kind?: string } | null)?.kind === 'CustomResourceDefinition')
      .map((d) => d.toString())
      .join('---\n')
  }

  /**
   * `helmfile sync` of one release (its needs are installed before by the caller, in order), with
   * the file's helmDefaults (wait, waitForJobs) and helm's --timeout bounded by `timeoutMs`.
   */
  async sync(file: string, release: HelmfileRelease, timeoutMs: number, recovery: string): Promise<void> {
    const result = await this.runner.run({
      tool: 'helmfile',
      env: this.env(),
      args: [
        ...this.global(file, true),
        `--selector=name=${release.name},namespace=${release.namespace}`,
        'sync',
        '--skip-needs',
        '--hide-notes',
        `--timeout=${Math.max(1, Math.floor(timeoutMs / 1000))}`,
      ],
      timeoutMs: timeoutMs + 30_000,
    })
    if (!result.ok) throw failure(result, recovery)
  }
}

/** what went wrong: from helm's last `Error:` line on (helmfile repeats helm's output around it), else the end */
function lastLines(result: ToolResult): string {
  const lines = `${result.stderr}\n${result.stdout}`
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
  const error = lines.map((l) => l.startsWith('Error: ')).lastIndexOf(true)
  return (error >= 0 ? lines.slice(error, error + 6) : lines.slice(-6)).join(' ') || `helmfile exited ${result.exitCode ?? 'on a signal'}`
}

function failure(result: ToolResult, recovery: string): NodeError {
  // our own deadline, an interruption or an unreachable API are what they are; anything else
  // (helm's wait giving up included) is the release's own failure, not retried
  const { kind } = classify(result)
  const own =
    result.timedOut ||
    kind === 'interrupted' ||
    (kind === 'unreachable' && !/resource not ready|timed out waiting|context deadline exceeded/.test(result.stderr))
  return new NodeError(own ? kind : 'release', lastLines(result), recovery)
}
