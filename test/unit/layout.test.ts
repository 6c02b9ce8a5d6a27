// The layout is the architecture (docs/development.md): lib/ is grouped by layer, no module imports
// itself through others (type-only imports count: a circle of types is a circle of concerns), and no
// phase imports another phase (what phases share lives in lib/phases/shared/).
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { describe, expect, it } from 'vitest'

const LIB = join(import.meta.dirname, '..', '..', 'lib')

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sourceFiles(path)
    return name.endsWith('.ts') ? [path] : []
  })
}

/** lib-relative path -> the lib-relative paths it imports (static, dynamic and type-only). */
export function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>()
  for (const file of sourceFiles(root)) {
    const text = readFileSync(file, 'utf8')
    const targets = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) =>
      relative(root, normalize(join(dirname(file), m[1]!.replace(/\.js$/, '.ts')))),
    )
    graph.set(relative(root, file), [...new Set(targets)])
  }
  return graph
}

/** Every import circle, each as the modules on it (Tarjan's strongly connected components). */
export function importCircles(graph: Map<string, string[]>): string[][] {
  let index = 0
  const indices = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const circles: string[][] = []
  const visit = (node: string): void => {
    indices.set(node, index)
    low.set(node, index++)
    stack.push(node)
    onStack.add(node)
    for (const next of graph.get(node) ?? []) {
      if (!indices.has(next)) {
        visit(next)
        low.set(node, Math.min(low.get(node)!, low.get(next)!))
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, indices.get(next)!))
      }
    }
    if (low.get(node) === indices.get(node)) {
      const component: string[] = []
      let member: string
      do {
        member = stack.pop()!
        onStack.delete(member)
        component.push(member)
      } while (member !== node)
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) circles.push(component.sort())
    }
  }
  for (const node of graph.keys()) if (!indices.has(node)) visit(node)
  return circles
}

describe('the layout of lib/', () => {
  const graph = importGraph(LIB)

  it('has no import circle', () => {
    expect(importCircles(graph)).toEqual([])
  })

  it('finds a circle when there is one (the check itself)', () => {
    const withCircle = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ])
    expect(importCircles(withCircle)).toEqual([['a.ts', 'b.ts', 'c.ts']])
  })

  it('has no phase that imports another phase', () => {
    const phase = (path: string): boolean => /^phases\/[^/]+\.ts$/.test(path) && path !== 'phases/index.ts'
    const crossings = [...graph].flatMap(([from, targets]) => (phase(from) ? targets.filter(phase).map((to) => `${from} -> ${to}`) : []))
    expect(crossings).toEqual([])
  })

  it('keeps the core a leaf: core/ imports nothing else of lib/', () => {
    const outward = [...graph].flatMap(([from, targets]) =>
      from.startsWith('core/') ? targets.filter((to) => !to.startsWith('core/')).map((to) => `${from} -> ${to}`) : [],
    )
    expect(outward).toEqual([])
  })

  it('keeps files out of the root of lib/ (every module sits in its layer)', () => {
    const atRoot = readdirSync(LIB).filter((name) => statSync(join(LIB, name)).isFile())
    expect(atRoot).toEqual([])
  })
})
