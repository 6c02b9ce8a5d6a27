// `talosctl memory --verbose` as the health check's memory read parses it: each node's MemTotal in kB
// (cmd/talosctl/cmd/talos/memory.go verboseRender: `NODE: <node>` then `MemTotal: <n> kB`, one block per node).
import { describe, expect, it } from 'vitest'
import { parseMemTotals } from '../../lib/tools/talosctl.js'

const block = (node: string, kB: number): string =>
  [`NODE: ${node}`, `MemTotal: ${kB} kB`, 'MemFree: 2996 kB', 'MemAvailable: 3396 kB', 'HugePagesTotal: 0', 'Hugepagesize: 0 kB'].join('\n')

describe('parseMemTotals', () => {
  it("reads each node's MemTotal, not another field's figure", () => {
    const out = `${block('127.0.0.11', 4091904)}\n${block('127.0.0.21', 819200)}\n`
    expect([...parseMemTotals(out)]).toEqual([
      ['127.0.0.11', 4091904],
      ['127.0.0.21', 819200],
    ])
  })

  it('a node without a MemTotal line is absent, not 0', () => {
    expect(parseMemTotals('NODE: 127.0.0.11\nMemFree: 12 kB\n').size).toBe(0)
    expect(parseMemTotals('').size).toBe(0)
  })
})
