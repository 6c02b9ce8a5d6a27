// Issue 17, item 2: machine configs and CNI settings that do not fit together stop the run with
// exit 2, `<file>:<line>: <what> (fix: …)`, before any node is touched. Real `task -x` against a
// simulated cluster on 127.87.1.x (one control plane, two workers; configs as the simulator writes
// them: cni none, kube-proxy disabled, KubePrism on 7445; settings with the Talos guide's cilium values).
import { beforeEach, describe, expect, it } from 'vitest'
import { BadInputBed, expectBadInput, lineOf, useBed } from './helpers.js'

const bedOf = useBed('127.87.1')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

const SETTINGS = 'bootstrap.yaml'
const CP = 'clusterconfig/e2e-cp-1.yaml'
const WORKER = 'clusterconfig/e2e-wrkr-2.yaml'

describe('machine configs against the CNI settings: exit 2 before any node is touched', () => {
  it('a control plane whose CNI is flannel next to cilium from the settings (bootstrap:talos)', async () => {
    const file = bed.edit(CP, 'name: none', 'name: flannel')
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'name: flannel'),
      what: /^cp-1: cluster\.network\.cni\.name is flannel: Talos installs its own flannel next to cilium from bootstrap\.yaml, two CNIs on every node$/,
      fix: /set cluster\.network\.cni\.name: none .*or remove cni: from bootstrap\.yaml/,
    })
  })

  it('no CNI in the settings while every config says none (bootstrap:preflight)', async () => {
    const settings = bed.path(SETTINGS)
    bed.write(SETTINGS, 'retries: 2\n')
    const file = bed.path(CP)
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'name: none'),
      what: /no node could ever turn Ready$/,
      fix: new RegExp(`add a cni: section to ${settings.replace(/[.]/g, '\\.')}`),
    })
  })

  it('kube-proxy disabled and cilium values without k8sServiceHost/k8sServicePort (bootstrap:talos)', async () => {
    bed.edit(SETTINGS, /\n {4}k8sServiceHost: localhost\n {4}k8sServicePort: 7445/, '')
    const file = bed.path(SETTINGS)
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, '  values:') + 1,
      what: /^cni\.values has no k8sServiceHost and k8sServicePort but e2e-cp-1\.yaml disables kube-proxy \(cluster\.proxy\.disabled: true\): cilium could not reach the API server/,
      fix: /k8sServiceHost: localhost and k8sServicePort: 7445/,
    })
  })

  it('k8sServicePort that is not the KubePrism port, with wait-ready run alone (bootstrap:wait-ready)', async () => {
    const file = bed.edit(SETTINGS, 'k8sServicePort: 7445', 'k8sServicePort: 6443')
    const result = await bed.cluster.task('bootstrap:wait-ready')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'k8sServicePort'),
      what: /^cni\.values\.k8sServicePort is 6443 but KubePrism listens on 7445/,
      fix: /^set k8sServicePort: 7445$/,
    })
  })

  it('one worker with KubePrism disabled: the configs disagree, and cilium needs it there (bootstrap:preflight)', async () => {
    const file = bed.edit(WORKER, /kubePrism:\n(\s+)enabled: true/, 'kubePrism:\n$1enabled: false')
    const line = lineOf(file, 'enabled: false')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(
      result,
      bed,
      {
        file,
        line,
        what: /^wrkr-2: machine\.features\.kubePrism\.enabled is false here but true in e2e-cp-1\.yaml \(cp-1\): the configs of one cluster disagree$/,
        fix: /enable KubePrism on every node/,
      },
      {
        file,
        line,
        what: /^wrkr-2: KubePrism is disabled .*k8sServiceHost: localhost/,
        fix: /machine\.features\.kubePrism\.enabled: true/,
      },
    )
  })

  it('a chart that is not cilium: the CNI name is still checked; the checks skipped are named', async () => {
    bed.edit(SETTINGS, 'chart: cilium', 'chart: tigera-operator')
    const file = bed.edit(CP, 'name: none', 'name: flannel')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'name: flannel'),
      what: /Talos installs its own flannel next to tigera-operator/,
      fix: /cni\.name: none/,
    })
    expect(result.stderr).toMatch(/CNI check: chart tigera-operator is not cilium: checked the CNI name only; .* not checked/)
  })
})
