import { classify, NodeError } from '../classify.js'
import { goDuration } from '../duration.js'
import { fluxHint } from '../hints.js'
import type { FluxSettings } from '../settings.js'
import type { ToolRunner } from './exec.js'

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
    throw new NodeError(kind === 'unreachable' ? 'unreachable' : 'flux', failures.length ? failures.join('; ') : message.replace(/^✗\s*/, ''), fluxHint('the repository or settings'))
  }

  async clientVersion(): Promise<string> {
    const result = await this.runner.run({ tool: 'flux', args: ['version', '--client'], mutates: false, local: true, dryRunStdout: 'flux: (dry run)' })
    return /flux:\s*(\S+)/.exec(result.stdout)?.[1] ?? 'unknown'
  }

  async checkPre(): Promise<void> {
    await this.call(['check', '--pre'], false)
  }

  async install(flux: FluxSettings, privateKeyFile: string | undefined, timeoutMs: number): Promise<void> {
    const timeout = ['--timeout', goDuration(timeoutMs)]
    if (flux.mode === 'install') {
      await this.call(['install', ...timeout], true, timeoutMs + 30_000)
      return
    }
    const git = flux.git
    if (!git) throw new NodeError('flux', 'flux.mode bootstrap needs flux.git', fluxHint('the settings'))
    const args = ['bootstrap', 'git', '--url', git.url, '--branch', git.branch, '--path', git.path, '--silent', ...timeout]
    if (privateKeyFile) args.push('--private-key-file', privateKeyFile)
    await this.call(args, true, timeoutMs + 30_000)
  }
}
