// `get disks` as a real node prints it: empty fields omitted (pkg/machinery/resources/block/disk.go
// omitempty), the loop device listed. Range 127.36.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { startOn, talosCall, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => { await c?.stop(); c = null })

describe('get disks', () => {
  it('omits empty serial, wwid and a false rotational; lists loop0 without a transport', async () => {
    c = await startOn('127.36.1', { cps: 1, workers: 0, image: 'disk' })
    const r = await talosCall(c.sim, '127.36.1.11', 'resources.Get', { type: 'disks' })
    const byId = Object.fromEntries(r.messages![0]!.data.resources.map((x: { metadata: { id: string }; spec: Record<string, unknown> }) => [x.metadata.id, x.spec]))
    expect(Object.keys(byId).sort()).toEqual(['loop0', 'sda'])
    expect(byId.sda).toMatchObject({ dev_path: '/dev/sda', size: 100e9, model: 'QEMU HARDDISK', transport: 'virtio', readonly: false, cdrom: false })
    for (const k of ['serial', 'wwid', 'rotational']) expect(byId.sda, k).not.toHaveProperty(k)
    expect(byId.loop0).toMatchObject({ dev_path: '/dev/loop0', readonly: true })
    expect(byId.loop0).not.toHaveProperty('transport')
  })
})
