import { execFileSync } from 'node:child_process'
import { join } from 'node:path'

/** Where `go install` put go-task (GOPATH/bin), which need not be on PATH; tests and the bench add it. */
export function goBin(): string {
  try {
    return join(execFileSync('go', ['env', 'GOPATH'], { encoding: 'utf8' }).trim(), 'bin')
  } catch {
    return join(process.env.HOME ?? '/root', 'go', 'bin')
  }
}
