// Issue 19 item 3: the docs are self-contained: every link resolves to a file in the repository,
// none leaves it, and nothing sends the reader to a document the repository does not have.
// Issue 24: the repository stands alone (docs/design.md holds what the code relies on), and CI runs
// exactly the README's test command.
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, relative, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(import.meta.dirname, '../..')
const markdown = execFileSync('git', ['ls-files', '*.md'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean)

describe('documentation', () => {
  it('finds the markdown files', () => {
    expect(markdown).toEqual(expect.arrayContaining(['README.md', 'docs/report.md', 'sim/README.md']))
  })

  for (const file of markdown) {
    it(`${file}: every link stays in the repository and resolves`, () => {
      const text = readFileSync(resolve(ROOT, file), 'utf8')
      for (const [, target = ''] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        expect(target, `${file} links outside the repository`).not.toMatch(/^[a-z]+:/i)
        const path = target.split('#')[0] ?? ''
        if (path === '') continue
        const full = resolve(dirname(resolve(ROOT, file)), path)
        expect(relative(ROOT, full).startsWith('..'), `${file}: ${target} leaves the repository`).toBe(false)
        expect(existsSync(full), `${file}: ${target} does not exist`).toBe(true)
      }
      // paths written out (not as links) that point above the repository
      expect(text, `${file} points above the repository`).not.toMatch(/`(\.\.\/){2,}/)
      expect(text, `${file} refers to DESIGN.md, which is not in the repository`).not.toMatch(/DESIGN\.md/)
    })
  }

  const cited = execFileSync('git', ['ls-files', '--', '.', ':!test/unit/docs.test.ts'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
  it('no file cites a design or reference document the repository does not hold', () => {
    const citing = cited.filter((file) => /DESIGN\.md|\breference\/[\w-]+\.md/.test(readFileSync(resolve(ROOT, file), 'utf8')))
    expect(citing).toEqual([])
  })

  it('only the tools build (scripts/tools.sh) looks beside the repository (../shared)', () => {
    const all = execFileSync('git', ['ls-files', '--', '.', ':!test/unit/docs.test.ts'], { cwd: ROOT, encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
    expect(all.filter((file) => /\.\.\/shared(?![\w-])/.test(readFileSync(resolve(ROOT, file), 'utf8')))).toEqual(['scripts/tools.sh'])
  })

  it(".ci/run is the README's test command, as written there", () => {
    const readme = readFileSync(resolve(ROOT, 'README.md'), 'utf8')
    const command = /^# run the tests.*\n(.+)$/m.exec(readme)?.[1] ?? ''
    expect(command).toMatch(/task setup && task test$/)
    const ci = readFileSync(resolve(ROOT, '.ci/run'), 'utf8')
      .split('\n')
      .filter((line) => line && !line.startsWith('#'))
    expect(ci).toEqual(['set -euo pipefail', 'cd "$(dirname "$0")/.."', command])
  })
})
