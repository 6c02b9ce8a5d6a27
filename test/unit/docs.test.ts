// Issue 19 item 3: the docs are self-contained: every link resolves to a file in the repository,
// none leaves it, and nothing sends the reader to a document the repository does not have.
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
})
