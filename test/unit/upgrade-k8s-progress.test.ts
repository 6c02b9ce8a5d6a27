// upgrade:k8s: talosctl upgrade-k8s's lines (docs/day2-design.md 1.6, as the real talosctl v1.12.11
// prints them against the simulator: test/sim/upgrade-k8s-api.test.ts) turned into per-node progress,
// and its manifest diffs (the bootstrap token's secret among them) never shown.
import { describe, expect, it } from 'vitest'
import { K8sProgress } from '../../lib/phases/upgrade-k8s.js'
import { tagOf } from '../../lib/input/versions.js'

const NAMES: Record<string, string> = { '10.0.0.11': 'cp-1', '10.0.0.12': 'cp-2', '10.0.0.21': 'wrkr-1' }
const progress = (): K8sProgress => new K8sProgress((ip) => NAMES[ip] ?? ip)

describe('K8sProgress', () => {
  it('names the node, the component and its change in each line about a node', () => {
    const p = progress()
    const shown = [
      'automatically detected the lowest Kubernetes version 1.34.1',
      'discovered controlplane nodes ["10.0.0.11" "10.0.0.12"]',
      ' > "10.0.0.21": Talos version 1.12.11 is compatible with Kubernetes version 1.35.0',
      ' > "10.0.0.11": pre-pulling registry.k8s.io/kube-apiserver:v1.35.0',
      'updating "kube-apiserver" to version "1.35.0"',
      ' > "10.0.0.12": starting update',
      ' > update kube-apiserver: v1.34.1 -> 1.35.0',
      ' > "10.0.0.12": machine configuration patched',
      ' > "10.0.0.12": kube-apiserver: waiting, config version mismatch: got "1", expected "2"',
      ' < "10.0.0.12": successfully updated',
      'updating kubelet to version "1.35.0"',
      ' > "10.0.0.21": waiting for kubelet restart',
    ].map((l) => p.line(l))
    expect(shown).toEqual([
      'automatically detected the lowest Kubernetes version 1.34.1',
      'discovered controlplane nodes ["10.0.0.11" "10.0.0.12"]',
      'wrkr-1: pre-check: Talos version 1.12.11 is compatible with Kubernetes version 1.35.0',
      'cp-1: pre-check: pre-pulling registry.k8s.io/kube-apiserver:v1.35.0',
      'kube-apiserver -> 1.35.0',
      'cp-2: kube-apiserver -> 1.35.0: starting update',
      undefined,
      'cp-2: kube-apiserver v1.34.1 -> 1.35.0: machine configuration patched',
      'cp-2: kube-apiserver v1.34.1 -> 1.35.0: waiting, config version mismatch: got "1", expected "2"',
      'cp-2: kube-apiserver v1.34.1 -> 1.35.0: successfully updated',
      'kubelet -> 1.35.0',
      'wrkr-1: kubelet -> 1.35.0: waiting for kubelet restart',
    ])
    expect(p.where()).toBe('kubelet on wrkr-1')
  })

  it('shows the manifests sync by name, never its diffs', () => {
    const p = progress()
    const lines = [
      'updating manifests',
      ' > processing manifest v1.Secret/kube-system/bootstrap-token-ywsqwa',
      '--- a/v1.Secret/kube-system/bootstrap-token-ywsqwa',
      '+++ b/v1.Secret/kube-system/bootstrap-token-ywsqwa',
      '@@ -1 +1,11 @@',
      '+stringData:',
      '+  token-secret: 6w3y73casu4yfasz',
      ' < applied successfully',
      'waiting for all manifests to be applied',
    ]
    const shown = lines.map((l) => p.line(l)).filter((l) => l !== undefined)
    expect(shown).toEqual([
      'updating manifests',
      'manifests: v1.Secret/kube-system/bootstrap-token-ywsqwa',
      'manifests: applied successfully',
      'waiting for all manifests to be applied',
    ])
    expect(shown.join('\n')).not.toContain('6w3y73casu4yfasz')
    expect(p.where()).toBe('manifests')
  })

  it('says where it stood before any component', () => {
    expect(progress().where()).toBe('before its first component')
  })
})

describe('tagOf', () => {
  it('reads the tag of an image reference, a registry port and a digest left out', () => {
    expect(tagOf('registry.k8s.io/kube-apiserver:v1.35.0')).toBe('v1.35.0')
    expect(tagOf('registry.local:5000/kube-apiserver:v1.35.0@sha256:0123')).toBe('v1.35.0')
    expect(tagOf('registry.local:5000/kube-apiserver')).toBeUndefined()
    expect(tagOf(undefined)).toBeUndefined()
  })
})
