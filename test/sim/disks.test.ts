// `get disks` as a real node answers it: empty fields omitted (pkg/machinery/resources/block/disk.go
// omitempty), the loop device listed; the real talosctl prints them. Range 127.36.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { at, jsonDocs, startOn, talosctl, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})

describe('get disks', () => {
  it('omits empty serial, wwid and a false rotational; lists loop0 without a transport', async () => {
    c = await startOn('127.36.1', { cps: 1, workers: 0, image: 'disk' })
    const r = await talosctl(c.sim, ['get', 'disks', '--insecure', ...at('127.36.1.11'), '-o', 'json'])
    expect(r.code, r.stderr).toBe(0)
    const byId = Object.fromEntries(jsonDocs(r.stdout).map((x) => [x.metadata.id, x.spec]))
    expect(Object.keys(byId).sort()).toEqual(['loop0', 'sda'])
    expect(byId.sda).toMatchObject({
      dev_path: '/dev/sda',
      size: 100e9,
      model: 'QEMU HARDDISK',
      transport: 'virtio',
      readonly: false,
      cdrom: false,
    })
    for (const k of ['serial', 'wwid', 'rotational']) expect(byId.sda, k).not.toHaveProperty(k)
    expect(byId.loop0).toMatchObject({ dev_path: '/dev/loop0', readonly: true })
    expect(byId.loop0).not.toHaveProperty('transport')
    // the table leaves the omitted fields' cells empty
    const table = await talosctl(c.sim, ['get', 'disks', '--insecure', ...at('127.36.1.11')])
    expect(table.stdout).toMatch(/\n +runtime +Disk +loop0 +\d+ +75\.8 MB +true +\n/)
  })
})
