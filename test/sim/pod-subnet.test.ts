// The generated configs' pod subnet holds a /24 for every node: Talos gives kube-controller-manager no
// --node-cidr-mask-size (control_plane_static_pod.go), so each Node takes its default /24, 256 of them
// in a /16; the 300-node bench with the real control plane (SIM_KUBE=real) needs a wider one. No addresses.
import { describe, expect, it } from 'vitest'
import { podSubnet } from '../../sim/writer.js'

const toInt = (ip: string): number => ip.split('.').reduce((a, o) => a * 256 + Number(o), 0)

describe('the pod subnet of the generated configs', () => {
  it('is 127.244.0.0/16 up to 256 nodes, as before', () => {
    for (const n of [1, 6, 30, 256]) expect(podSubnet(n)).toBe('127.244.0.0/16')
  })
  it.each([257, 300, 512, 513, 1000, 3000])('%i nodes: a /24 for each, aligned, inside 127.0.0.0/8', (nodes) => {
    const [base = '', bits = ''] = podSubnet(nodes).split('/')
    const prefix = Number(bits)
    expect(2 ** (24 - prefix)).toBeGreaterThanOrEqual(nodes)
    expect(toInt(base) % 2 ** (32 - prefix)).toBe(0)
    expect(base.startsWith('127.')).toBe(true)
  })
  it('300 nodes (the bench): 127.244.0.0/15, 512 Node CIDRs', () => {
    expect(podSubnet(300)).toBe('127.244.0.0/15')
  })
})
