import { classify, NodeError } from '../classify.js'
import { goDuration } from '../duration.js'
import type { FluxGitSettings } from '../settings.js'
import type { ToolRunner } from './exec.js'

const HINT = 'see `flux get kustomizations -A` and `flux logs`, fix the repository or settings, then run: task bootstrap:flux'

/** The flux wrapper: explicit --kubeconfig, non-interactive (--silent), keys from files only. */
export class Flux {
  constructor(
    private readonly runner: ToolRunner,
    private readonly kubeconfig: string,
  ) {}

  private async call(args: string[], mutates: boolean, timeoutMs?: number): Promise<string> {
    const result = await this.runner.run({ tool: 'flux', args: [...args, '--kubeconfig', this.kubeconfig], mutates, ...(timeoutMs ? { timeoutMs } : {}) })
    if (result.exitCode === 0 && !result.timedOut) return result.stderr + result.stdout
    const { kind, message } = classify(result)
    // flux logs its progress (►, ✔, ◎) on stderr too; the failure is the `✗ <err>` line(s)
    const failures = `${result.stderr}\n${result.stdout}`.split('\n').filter((l) => l.trim().startsWith('✗')).map((l) => l.trim().replace(/^✗\s*/, ''))
    throw new NodeError(kind === 'unreachable' ? 'unreachable' : 'flux', failures.length ? failures.join('; ') : message.replace(/^✗\s*/, ''), HINT)
  }

  async clientVersion(): Promise<string> {
    const result = await this.runner.run({ tool: 'flux', args: ['version', '--client'], mutates: false, local: true, dryRunStdout: 'flux: (dry run)' })
    return /flux:\s*(\S+)/.exec(result.stdout)?.[1] ?? 'unknown'
  }

  async checkPre(): Promise<void> {
    await this.call(['check', '--pre'], false)
  }

  /** `flux bootstrap git` over SSH with the given deploy key (settings require one). */
  async bootstrap(git: FluxGitSettings, privateKeyFile: string, timeoutMs: number): Promise<void> {
    const args = ['bootstrap', 'git', '--url', git.url, '--branch', git.branch, '--path', git.path, '--private-key-file', privateKeyFile, '--silent', '--timeout', goDuration(timeoutMs)]
    await this.call(args, true, timeoutMs + 30_000)
  }
}
