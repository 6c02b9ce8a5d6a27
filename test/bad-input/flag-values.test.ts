// Issue 27, item 6: a variable's value is never read as a flag (RESET=--yes, DRY_RUN=--dry-run=false),
// and names from the settings (chart, release, daemonset, namespaces) are checked as what they are
// before helm or kubectl could take one for a flag; upgrade:k8s's TO. Each: exit 2, no node touched. Range 127.212.1.x.
import { beforeEach, describe, it } from 'vitest'
import { BadInputBed, expectBadInput, lineOf, useBed } from './helpers.js'

const bedOf = useBed('127.212.1')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

describe('a boolean variable whose value looks like a flag', () => {
  it('RESET=--yes does not confirm the reset (bootstrap:node)', async () => {
    const result = await bed.cluster.task('bootstrap:node', { NODE: 'wrkr-1', RESET: '--yes' })
    expectBadInput(result, bed, { what: /^flag --reset: reset must be true or false, got "--yes"$/, fix: /RESET=true or RESET=false/ })
  })

  it('DRY_RUN=--dry-run=false does not turn a dry run into a real one (bootstrap:talos)', async () => {
    const result = await bed.cluster.task('bootstrap:talos', { DRY_RUN: '--dry-run=false' })
    expectBadInput(result, bed, {
      what: /^flag --dry-run: dry-run must be true or false, got "--dry-run=false"$/,
      fix: /DRY_RUN=true or DRY_RUN=false/,
    })
  })

  it('DRY_RUN=--yes on bootstrap:node with RESET=true', async () => {
    const result = await bed.cluster.task('bootstrap:node', { NODE: 'wrkr-1', RESET: 'true', DRY_RUN: '--yes' })
    expectBadInput(result, bed, { what: /^flag --dry-run: dry-run must be true or false, got "--yes"$/, fix: /DRY_RUN=true/ })
  })
})

describe('upgrade:k8s: TO checked before any node is read', () => {
  it('TO=1.35 (no patch) is no Kubernetes version', async () => {
    const result = await bed.cluster.task('upgrade:k8s', { TO: '1.35' })
    expectBadInput(result, bed, { what: /^TO "1\.35" is not a Kubernetes version like v1\.35\.0$/, fix: /TO=v1\.35\.0/ })
  })

  it('TO=--dry-run=false is a value, not a flag', async () => {
    const result = await bed.cluster.task('upgrade:k8s', { TO: '--dry-run=false' })
    expectBadInput(result, bed, { what: /^TO "--dry-run=false" is not a Kubernetes version like v1\.35\.0$/, fix: /TO=v1\.35\.0/ })
  })

  it('NODES is not taken: upgrade-k8s upgrades every node', async () => {
    const result = await bed.cluster.task('upgrade:k8s', { TO: 'v1.35.0', NODES: 'wrkr-1' })
    expectBadInput(result, bed, { what: /^upgrade:k8s upgrades every node of the cluster/, fix: /leave NODES unset/ })
  })
})

describe('names from bootstrap.yaml checked as what they are', () => {
  const cases: Array<{ key: string; from: string | RegExp; to: string; what: RegExp }> = [
    { key: 'chart', from: 'chart: cilium', to: 'chart: --help', what: /^cni\.chart "--help" is not a chart reference/ },
    { key: 'release', from: 'release: cilium', to: 'release: --dry-run', what: /^cni\.release "--dry-run" is not a helm release name/ },
    {
      key: 'namespace',
      from: 'namespace: kube-system',
      to: 'namespace: "--all-namespaces"',
      what: /^cni\.namespace "--all-namespaces" is not a namespace name/,
    },
    { key: 'daemonset', from: 'daemonset: cilium', to: 'daemonset: "-A"', what: /^cni\.daemonset "-A" is not an object name/ },
    {
      key: 'repo',
      from: /repo: https:\/\/127\.0\.0\.1:\d+\//,
      to: 'repo: --insecure-skip-tls-verify',
      what: /^cni\.repo "--insecure-skip-tls-verify" is not a chart repository URL/,
    },
    { key: 'version', from: 'version: 1.18.4', to: 'version: "--devel"', what: /^cni\.version "--devel" is not a chart version/ },
  ]
  for (const c of cases) {
    it(`cni.${c.key}: ${c.to.split(': ')[1]} (bootstrap:talos)`, async () => {
      const file = bed.edit('bootstrap.yaml', c.from, c.to)
      const result = await bed.cluster.task('bootstrap:talos')
      expectBadInput(result, bed, { file, line: lineOf(file, c.to), what: c.what, fix: /write / })
    })
  }

  it('a readiness gate namespace that is a flag', async () => {
    const file = bed.path('bootstrap.yaml')
    bed.write(
      'bootstrap.yaml',
      `${bed.read('bootstrap.yaml')}readinessGates:\n  - { name: csi, namespace: "--all-namespaces", selector: app=csi }\n`,
    )
    const result = await bed.cluster.task('bootstrap:wait-ready')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, '--all-namespaces'),
      what: /^readinessGates\.0\.namespace "--all-namespaces" is not a namespace name/,
      fix: /write namespace:/,
    })
  })
})
