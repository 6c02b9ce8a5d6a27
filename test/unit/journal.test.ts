// The journal's per-node recording (issue 26 item 7): each outcome on disk as it happens, an apply
// marked before it is sent and settled once its outcome is known, the mark kept by a failure whose
// outcome is unknown (an interrupted call) and read back by the next run.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Journal } from '../../lib/state/journal.js'

let dir: string | undefined
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true })
  dir = undefined
})

const onDisk = (d: string): { nodes: Record<string, Record<string, { status: string; sent?: string; provisional?: boolean }>> } =>
  JSON.parse(readFileSync(join(d, '.bootstrap', 'journal.json'), 'utf8'))

describe('journal, per node', () => {
  it('writes each outcome at once; a sent apply is marked until settled, and a later run reads the mark', () => {
    dir = mkdtempSync(join(tmpdir(), 'tb-journal-'))
    const journal = Journal.load(dir)
    journal.sending('wrkr-1', 'apply')
    expect(onDisk(dir).nodes['wrkr-1']?.apply?.sent).toEqual(expect.any(String))
    expect(Journal.load(dir).tookConfig('wrkr-1')).toBe(true)

    // interrupted mid-call: the failure keeps the mark (the outcome is not known)
    journal.recordNode('apply', { name: 'wrkr-1', status: 'failed' })
    expect(onDisk(dir).nodes['wrkr-1']?.apply).toMatchObject({ status: 'failed', sent: expect.any(String) })
    expect(Journal.load(dir).tookConfig('wrkr-1')).toBe(true)

    // refused by the node: settled, the mark gone
    journal.settled('wrkr-1', 'apply')
    expect(onDisk(dir).nodes['wrkr-1']?.apply?.sent).toBeUndefined()
    expect(Journal.load(dir).tookConfig('wrkr-1')).toBe(false)

    journal.sending('cp-1', 'apply')
    journal.settled('cp-1', 'apply', 'ok')
    journal.recordNode('verify', { name: 'cp-1', status: 'ok' })
    const again = Journal.load(dir)
    expect(again.discarded).toBe(false)
    expect(again.done('cp-1', 'apply')).toBe(true)
    expect(again.done('cp-1', 'verify')).toBe(true)
    expect(onDisk(dir).nodes['cp-1']?.apply?.sent).toBeUndefined()
  })

  it('a dry run reads the journal and writes nothing', () => {
    dir = mkdtempSync(join(tmpdir(), 'tb-journal-'))
    const journal = Journal.load(dir)
    journal.readOnly = true
    journal.sending('wrkr-1', 'apply')
    journal.recordNode('apply', { name: 'wrkr-1', status: 'ok' })
    expect(() => readFileSync(join(dir as string, '.bootstrap', 'journal.json'))).toThrow(/ENOENT/)
  })

  it('a verify ok only by inference (a silent worker taken to wait for the control plane) is not verified until a later phase ends ok', () => {
    dir = mkdtempSync(join(tmpdir(), 'tb-journal-'))
    const journal = Journal.load(dir)
    journal.recordNode('apply', { name: 'wrkr-1', status: 'ok' })
    journal.recordNode('verify', { name: 'wrkr-1', status: 'ok' }, true)
    // the phase's results recorded whole at its end keep the mark
    journal.record({ name: 'verify', nodes: [{ name: 'wrkr-1', status: 'ok' }] } as Parameters<Journal['record']>[0])
    expect(onDisk(dir).nodes['wrkr-1']?.verify).toMatchObject({ status: 'ok', provisional: true })
    let again = Journal.load(dir)
    expect(again.done('wrkr-1', 'verify')).toBe(true)
    expect(again.verified('wrkr-1')).toBe(false)

    // its wait-ready never heard from it either: still not verified
    journal.recordNode('wait-ready', { name: 'wrkr-1', status: 'failed' })
    expect(Journal.load(dir).verified('wrkr-1')).toBe(false)

    // a later verify that heard it replaces the mark
    journal.recordNode('verify', { name: 'wrkr-1', status: 'ok' })
    again = Journal.load(dir)
    expect(onDisk(dir).nodes['wrkr-1']?.verify?.provisional).toBeUndefined()
    expect(again.verified('wrkr-1')).toBe(true)

    // confirmed by a later phase of the node
    journal.recordNode('verify', { name: 'wrkr-2', status: 'ok' }, true)
    journal.recordNode('wait-ready', { name: 'wrkr-2', status: 'ok' })
    expect(Journal.load(dir).verified('wrkr-2')).toBe(true)
  })
})
