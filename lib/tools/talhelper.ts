// The talhelper wrapper: `genconfig` and `gensecret` as the operator runs them in the cluster directory
// (budimanjojo/talhelper v3 cmd/genconfig.go, cmd/gensecret.go), before the inventory is read.
import { runLocalSync, type LocalResult } from './exec.ts'

/** genconfig's default --secret-file list, looked up in the directory it runs in. */
export const TALSECRET_FILES = ['talsecret.yaml', 'talsecret.sops.yaml', 'talsecret.yml', 'talsecret.sops.yml'] as const

/** The command line the operator would type, relative to the cluster directory. */
export function genconfigCommand(talconfig: string, outDir: string): string {
  return `talhelper genconfig -c ${talconfig} -o ${outDir}`
}

export function genconfig(env: NodeJS.ProcessEnv, dir: string, talconfig: string, outDir: string): LocalResult {
  return runLocalSync(env, 'talhelper', ['genconfig', '-c', talconfig, '-o', outDir], { cwd: dir })
}

/** A new secrets bundle on stdout: the caller writes it (encrypted) and never prints it. */
export function gensecret(env: NodeJS.ProcessEnv, dir: string): LocalResult {
  return runLocalSync(env, 'talhelper', ['gensecret'], { cwd: dir })
}

/**
 * talhelper's failure without the timestamp log.Fatalf puts in front ("2026/11/27 10:00:00 failed to …"),
 * followed by the issues its validator printed on stdout (`field: "nodes[0].x"` then `  * <what>` lines,
 * pkg/config/loader.go), each as `<field>: <what>`.
 */
export function talhelperFailure(result: LocalResult): string {
  const fatal = result.stderr
    .split('\n')
    .map((l) => l.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d /, '').trim())
    .filter((l) => l !== '')
    .join(' ')
  const issues: string[] = []
  let field = ''
  for (const line of result.stdout.split('\n')) {
    const named = /^field: "(.*)"$/.exec(line.trim())
    if (named) field = named[1] ?? ''
    else if (/^\s*\* /.test(line)) issues.push(`${field ? `${field}: ` : ''}${line.replace(/^\s*\* /, '').trim()}`)
  }
  return [fatal || `exit ${String(result.exitCode)}`, ...issues].join('; ')
}
