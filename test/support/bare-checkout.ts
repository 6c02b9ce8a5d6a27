// A checkout holding only one set-up script (scripts/<name>), with nothing beside it to build from;
// HOME is the checkout, so the per-machine tools cache starts empty.
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

export function bareCheckouts(script: string) {
  const temps: string[] = []
  return {
    make(): string {
      const root = join(mkdtempSync(join(tmpdir(), 'bare-checkout-')), 'repo')
      temps.push(resolve(root, '..'))
      mkdirSync(join(root, 'scripts'), { recursive: true })
      copyFileSync(resolve('scripts', script), join(root, 'scripts', script))
      return root
    },
    run: (root: string, path: string) =>
      spawnSync('bash', [join(root, 'scripts', script)], { encoding: 'utf8', env: { PATH: path, HOME: root } }),
    cleanup() {
      for (const t of temps.splice(0)) rmSync(t, { recursive: true, force: true })
    },
  }
}
