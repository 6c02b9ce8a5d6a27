import { copyFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadInventory, selectNodes } from '../../lib/input/inventory.js'
import { clusterDir, inputErrors, threeNodes } from './fixtures.js'

describe('inventory', () => {
  it('reads a talhelper cluster directory', () => {
    const dir = clusterDir(threeNodes)
    const inv = loadInventory(dir)
    expect(inv.clusterName).toBe('demo')
    expect(inv.nodes.map((n) => [n.name, n.address, n.role])).toEqual([
      ['cp-1', '127.0.0.11', 'controlplane'],
      ['wrkr-1', '127.0.0.21', 'worker'],
      ['wrkr-2', '127.0.0.22', 'worker'],
    ])
    expect(inv.nodes[0]?.configFile).toBe(join(dir, 'clusterconfig', 'demo-cp-1.yaml'))
    expect(inv.vip).toBe('127.0.0.10')
  })

  it('knows the endpoint is a node address (no VIP)', () => {
    const dir = clusterDir(threeNodes)
    writeFileSync(
      join(dir, 'talconfig.yaml'),
      `clusterName: demo\nendpoint: https://127.0.0.11:6443\nnodes:\n  - hostname: cp-1\n    ipAddress: 127.0.0.11\n    controlPlane: true\n`,
    )
    expect(loadInventory(dir).vip).toBeUndefined()
  })

  it('names file and line of a duplicate hostname', () => {
    const dir = clusterDir([...threeNodes, { hostname: 'wrkr-1', ip: '127.0.0.23', cp: false }])
    const [msg] = inputErrors(() => loadInventory(dir))
    expect(msg).toBe(`${join(dir, 'talconfig.yaml')}:16: duplicate node name "wrkr-1" (also nodes[1]) (fix: give every node its own name)`)
  })

  it('names a duplicate address', () => {
    const dir = clusterDir([...threeNodes, { hostname: 'wrkr-3', ip: '127.0.0.22', cp: false }])
    expect(inputErrors(() => loadInventory(dir))[0]).toMatch(
      /talconfig\.yaml:17: duplicate address 127\.0\.0\.22 of wrkr-3 \(also nodes\[2\]\)/,
    )
  })

  it('names a missing machine config with the command that generates it', () => {
    const dir = clusterDir(threeNodes, { skipConfigFor: ['wrkr-2'] })
    expect(inputErrors(() => loadInventory(dir))[0]).toMatch(
      /talconfig\.yaml:12: wrkr-2: machine config .*demo-wrkr-2\.yaml not found \(fix: run `talhelper genconfig`/,
    )
  })

  it('refuses an inventory without a control plane', () => {
    const dir = clusterDir(threeNodes.map((n) => ({ ...n, cp: false })))
    expect(inputErrors(() => loadInventory(dir))[0]).toMatch(/no control plane node in the inventory/)
  })

  it('refuses an empty inventory', () => {
    const dir = clusterDir(threeNodes, { talconfig: 'clusterName: demo\nendpoint: https://127.0.0.10:6443\nnodes: []\n' })
    expect(inputErrors(() => loadInventory(dir))[0]).toMatch(/talconfig\.yaml:3: the inventory lists no nodes/)
  })

  it('reports a YAML syntax error with its line', () => {
    const dir = clusterDir(threeNodes, { talconfig: 'clusterName: demo\nendpoint: [oops\nnodes: []\n' })
    expect(inputErrors(() => loadInventory(dir))[0]).toMatch(/talconfig\.yaml:\d+: YAML syntax error/)
  })

  it('refuses names with shell metacharacters', () => {
    const dir = clusterDir([{ hostname: 'cp-1;rm -rf', ip: '127.0.0.11', cp: true }])
    expect(inputErrors(() => loadInventory(dir))[0]).toMatch(/nodes\[0\]\.hostname "cp-1;rm -rf" is not a valid node name/)
  })

  it('refuses an address that is not an IP (the example placeholders)', () => {
    const dir = clusterDir([{ hostname: 'cp-1', ip: '<cp-1-address>', cp: true }])
    expect(inputErrors(() => loadInventory(dir))[0]).toMatch(/"<cp-1-address>" of cp-1 is not an IP address \(fix: .*task demo/)
  })

  it('refuses a malformed talosconfig', () => {
    const dir = clusterDir(threeNodes)
    writeFileSync(join(dir, 'clusterconfig', 'talosconfig'), 'context: demo\ncontexts:\n  demo:\n    ca: not-base64!!\n')
    expect(inputErrors(() => loadInventory(dir))[0]).toMatch(/talosconfig:4: talosconfig context "demo" has no valid ca/)
  })

  it('reads nodes.yaml for gen-config clusters', () => {
    const dir = clusterDir(threeNodes)
    writeFileSync(join(dir, 'cp.yaml'), 'version: v1alpha1\n')
    rmSync(join(dir, 'talconfig.yaml'))
    copyFileSync(join(dir, 'clusterconfig', 'talosconfig'), join(dir, 'talosconfig'))
    writeFileSync(
      join(dir, 'nodes.yaml'),
      'endpoint: https://127.0.0.11:6443\nnodes:\n  - { name: cp-1, ip: 127.0.0.11, role: controlplane, config: cp.yaml }\n',
    )
    const inv = loadInventory(dir)
    expect(inv.nodes).toHaveLength(1)
    expect(inv.nodes[0]?.role).toBe('controlplane')
    expect(inv.talosconfig).toBe(join(dir, 'talosconfig'))
  })

  it('nodes.yaml: the Talos version is the installer image tag the configs ask for (the version warnings need it)', () => {
    const dir = clusterDir(threeNodes)
    writeFileSync(
      join(dir, 'cp.yaml'),
      'version: v1alpha1\nmachine:\n  type: controlplane\n  install:\n    disk: /dev/sda\n    image: factory.talos.dev/installer/abc123:v1.13.7\n',
    )
    rmSync(join(dir, 'talconfig.yaml'))
    copyFileSync(join(dir, 'clusterconfig', 'talosconfig'), join(dir, 'talosconfig'))
    writeFileSync(
      join(dir, 'nodes.yaml'),
      'endpoint: https://127.0.0.11:6443\nnodes:\n  - { name: cp-1, ip: 127.0.0.11, role: controlplane, config: cp.yaml }\n',
    )
    expect(loadInventory(dir).talosVersion).toBe('v1.13.7')
  })

  it('selects NODES by name or address and refuses unknown entries', () => {
    const inv = loadInventory(clusterDir(threeNodes))
    expect(selectNodes(inv, 'wrkr-2,127.0.0.11').map((n) => n.name)).toEqual(['cp-1', 'wrkr-2'])
    expect(selectNodes(inv, '').map((n) => n.name)).toHaveLength(3)
    expect(inputErrors(() => selectNodes(inv, 'cp-1,nope'))[0]).toMatch(
      /NODES names "nope", not in the inventory \(fix: use names or addresses from the inventory: cp-1, wrkr-1, wrkr-2\)/,
    )
  })
})
