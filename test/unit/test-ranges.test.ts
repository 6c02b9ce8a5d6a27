// Test files run in parallel, each on its own 127.x.y range (sim/ARCHITECTURE.md): a range quoted in
// two files makes their simulators fight over the same addresses, a failure that shows only when the
// two happen to overlap in time. Branches written in parallel picked the same ranges more than once.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, expect, it } from 'vitest'

function testFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f)
    return statSync(p).isDirectory() ? testFiles(p) : p.endsWith('.test.ts') ? [p] : []
  })
}

/** every range a file starts a simulator on: a quoted '127.a.b' (the harnesses add the last octet) */
export function rangesByFile(files: string[]): Map<string, string[]> {
  const owners = new Map<string, string[]>()
  for (const file of files) {
    const ranges = new Set(readFileSync(file, 'utf8').match(/(?<=['"`])127\.\d{1,3}\.\d{1,3}(?=['"`])/g) ?? [])
    for (const range of ranges) owners.set(range, [...(owners.get(range) ?? []), relative(process.cwd(), file)])
  }
  return owners
}

describe('test address ranges', () => {
  it('no 127.x.y range is used by two test files', () => {
    const shared = [...rangesByFile(testFiles('test')).entries()].filter(([, files]) => files.length > 1)
    expect(shared).toEqual([])
  })
})
