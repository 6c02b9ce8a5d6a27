import { classify } from './classify.ts'
import { isTransient, NodeError } from '../core/errors.ts'
import { goDuration } from '../core/duration.ts'
import { fluxHint, taskCommand } from '../cli/hints.ts'
import type { FluxGitSettings } from '../input/settings.ts'
import type { ToolRunner } from './exec.ts'
import { apiError, kubeArgs, kubeCacheFlag, type KubeAccess } from './kube-access.ts'

/** client-go's texts for a request to the API server (its URL) or the API's own 503 */
const KUBE_API_SIDE =
  /https:\/\/\S+|the server is currently unable|ServiceUnavailable|Kubernetes cluster unreachable|Unable to connect to the server/
/** the Git host's side of a bootstrap */
const GIT_SIDE = /SSH key scan|clone|ssh: /

/** What to do about a failed flux call: the Git side's two usual causes get their own fix. */
function hintFor(text: string): string {
  if (/SSH key scan for host .* failed/.test(text))
    return `flux could not read the Git host's SSH key: check the host and port in flux.git.url and that they are reachable from here, then run: ${taskCommand('bootstrap:flux')}`
  if (/failed to clone repository: .*unable to authenticate/.test(text))
    return `the repository refuses the deploy key: register the public key of flux.git.privateKeyFile as a deploy key with write access, then run: ${taskCommand('bootstrap:flux')}`
  return fluxHint('the repository or settings')
}

/** flux subcommands that change the cluster (the others read) */
const FLUX_CHANGES = new Set(['bootstrap', 'install', 'uninstall', 'reconcile', 'suspend', 'resume', 'create', 'delete'])

/** The flux wrapper: explicit --kubeconfig, non-interactive (--silent), keys from files only. */
export class Flux {
  private readonly runner: ToolRunner
  private readonly access: KubeAccess
  constructor(runner: ToolRunner, access: KubeAccess) {
    this.runner = runner
    this.access = access
  }

  private async call(args: string[], timeoutMs?: number): Promise<string> {
    const result = await this.runner.run({
      tool: 'flux',
      args: [...args, ...kubeArgs(this.access, '--context')],
      ...(timeoutMs ? { timeoutMs } : {}),
      ...(FLUX_CHANGES.has(args[0] ?? '') ? { mutates: true } : {}),
    })
    if (result.ok) return result.stderr + result.stdout
    const { kind, message } = classify(result)
    // flux logs its progress (►, ✔, ◎) on stderr too; the failure is the `✗ <err>` line(s)
    const failures = `${result.stderr}\n${result.stdout}`
      .split('\n')
      .filter((l) => l.trim().startsWith('✗'))
      .map((l) => l.trim().replace(/^✗\s*/, ''))
    const text = failures.length ? failures.join('; ') : message.replace(/^✗\s*/, '')
    // refused, reset, 503, timed out on the way to the Kubernetes API: the API's, not the repository's
    if (isTransient(kind) && KUBE_API_SIDE.test(text) && !GIT_SIDE.test(text)) throw apiError(kind, text, 'bootstrap:flux')
    throw new NodeError(kind === 'unreachable' ? 'unreachable' : 'flux', text, hintFor(text))
  }

  async clientVersion(): Promise<string> {
    const result = await this.runner.run({
      tool: 'flux',
      args: ['version', '--client', kubeCacheFlag(this.access)],
      local: true,
      reusable: { key: ['version', '--client'] },
      dryRunStdout: 'flux: (dry run)',
    })
    return /flux:\s*(\S+)/.exec(result.stdout)?.[1] ?? 'unknown'
  }

  async checkPre(): Promise<void> {
    await this.call(['check', '--pre'])
  }

  /** `flux bootstrap git` over SSH with the given deploy key (settings require one). */
  async bootstrap(git: FluxGitSettings, privateKeyFile: string, timeoutMs: number): Promise<void> {
    const args = [
      'bootstrap',
      'git',
      '--url',
      git.url,
      '--branch',
      git.branch,
      '--path',
      git.path,
      '--private-key-file',
      privateKeyFile,
      '--silent',
      '--timeout',
      goDuration(timeoutMs),
    ]
    await this.call(args, timeoutMs + 30_000)
  }
}
