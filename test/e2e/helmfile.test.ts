// Issue 29, the helmfile side: a repository shaped like cluster-template (its bootstrap helmfile of
// either era, chart references rewritten to the simulator's OCI registry keeping their path, the
// configs with CoreDNS disabled, cni: none) bootstrapped with no cni or flux section in
// bootstrap.yaml (topf era: no bootstrap.yaml at all): the CRDs first, each release its own step in needs order (the CNI and what it
// needs in wait-ready, the rest before the Flux handover), Flux from the helmfile's FluxInstance
// handed over; a chart whose pods cannot start named with its release, chart, workload and reason,
// and the printed command recovering it once the cause is gone. Addresses 127.147.x and 127.148.x.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse, parseDocument, stringify } from 'yaml'
import { realTool } from '../support/real-tools.js'
import { inTurn, SIDE_BY_SIDE } from '../support/in-turn.js'
import { writeClusterTemplate, type Era } from '../support/cluster-template.js'
import { deployedRelease, writeRelease } from '../support/helm-release.js'
import { E2eCluster, runInFreshShell, type TaskResult } from './harness.js'

const helmfile = realTool('helmfile')
if (helmfile.skip) console.warn(`SKIPPED test/e2e/helmfile.test.ts: ${helmfile.skip}`)
const SLOW = 240_000
const why = (r: TaskResult): string => `${r.stdout}\n${r.stderr}`.slice(-4000)

/** cluster-template's configs: Talos's CoreDNS off (its helmfile installs it); no cni or flux settings */
function asClusterTemplate(cluster: E2eCluster, era: Era): void {
  const configs = join(cluster.clusterDir, 'clusterconfig')
  for (const f of readdirSync(configs).filter((f) => f.endsWith('.yaml'))) {
    const doc = parseDocument(readFileSync(join(configs, f), 'utf8'))
    doc.setIn(['cluster', 'coreDNS'], { disabled: true })
    writeFileSync(join(configs, f), doc.toString({ lineWidth: 0 }))
  }
  const file = join(cluster.clusterDir, 'bootstrap.yaml')
  // the topf era runs with no bootstrap.yaml at all (the defaults); the talhelper era keeps the simulator's waits only
  if (era === 'topf') rmSync(file)
  else {
    const settings = parse(readFileSync(file, 'utf8')) as Record<string, unknown>
    delete settings.cni
    delete settings.flux
    writeFileSync(file, stringify(settings))
  }
  writeClusterTemplate(cluster.dir, era, cluster.sim.env.SIM_OCI_REGISTRY!)
}

const stepsOf = (cluster: E2eCluster, phase: string) => cluster.report().phases.find((p) => p.name === phase)?.steps ?? []

for (const [era, range] of [
  ['talhelper', '127.147.1'],
  ['topf', '127.148.1'],
] as const) {
  // the eras' describes (and the CoreDNS one) run side by side, each on its own cluster and range; the tests
  // of each run in turn on its cluster
  describe.skipIf(!!helmfile.skip)(`the bootstrap helmfile (${era} era) from nothing to Flux handed over`, SIDE_BY_SIDE, () => {
    const talhelperOnly = era === 'talhelper' ? inTurn : it.skip
    let cluster: E2eCluster
    beforeAll(async () => {
      cluster = await E2eCluster.start(range, { cps: 1, workers: 1 })
      asClusterTemplate(cluster, era)
    })
    afterAll(async () => {
      await cluster?.stop()
    })

    inTurn('bad input: a needs naming no release is exit 2 naming the file, the line and the fix; no node touched', async () => {
      const apps = join(cluster.dir, era === 'talhelper' ? 'bootstrap/helmfile.d/01-apps.yaml' : 'bootstrap/helmfile/apps.yaml')
      const good = readFileSync(apps, 'utf8')
      writeFileSync(apps, good.replace('- kube-system/cilium', '- kube-system/cillium'))
      try {
        const r = await cluster.task('bootstrap:all')
        expect(r.code, why(r)).toBe(2)
        const line = good.split('\n').findIndex((l) => l.includes('- kube-system/cilium')) + 1
        expect(r.stderr).toContain(
          `${apps}:${line}: release kube-system/coredns needs kube-system/cillium, which is no release of this helmfile (fix: correct the needs of coredns (as namespace/name of a release of this file))`,
        )
        expect(cluster.calls()).toEqual([])
      } finally {
        writeFileSync(apps, good)
      }
    })

    inTurn('a dry run prints every release with its chart and version, in needs order, the CNI in wait-ready', async () => {
      const r = await cluster.task('bootstrap:all', { DRY_RUN: 'true' })
      expect(r.code, why(r)).toBe(0)
      const reg = cluster.sim.env.SIM_OCI_REGISTRY!
      const lines = `${r.stdout}\n${r.stderr}`.split('\n').filter((l) => /would install [\w-]+\/[\w-]+: /.test(l))
      expect(lines.map((l) => /would install (\S+): (\S+ \S+)/.exec(l)?.slice(1, 3).join(' '))).toEqual([
        `kube-system/cilium oci://${reg}/cilium/charts/cilium 1.19.4`,
        `kube-system/coredns oci://${reg}/coredns/charts/coredns 1.45.2`,
        `kube-system/spegel oci://${reg}/spegel-org/helm-charts/spegel 0.7.0`,
        `cert-manager/cert-manager oci://${reg}/jetstack/charts/cert-manager v1.20.2`,
        `flux-system/flux-operator oci://${reg}/controlplaneio-fluxcd/charts/flux-operator 0.49.0`,
        `flux-system/flux-instance oci://${reg}/controlplaneio-fluxcd/charts/flux-instance 0.49.0`,
      ])
      expect(r.stdout + r.stderr).toMatch(/would apply the CRDs rendered from .*crds\.yaml/)
    })

    inTurn(
      'bootstrap:all: CRDs, each release its own step, Flux handed over; a rerun leaves every release as it is; nothing written in HOME or TMPDIR',
      async () => {
        // helmfile runs helm: both get their caches under .bootstrap/cache, never the operator's HOME or TMPDIR
        const home = mkdtempSync(join(cluster.dir, 'home-'))
        const tmp = mkdtempSync(join(cluster.dir, 'tmp-'))
        const r = await cluster.task('bootstrap:all', {}, [], {
          HOME: home,
          TMPDIR: tmp,
          XDG_CACHE_HOME: '',
          XDG_CONFIG_HOME: '',
          XDG_DATA_HOME: '',
        })
        expect(r.code, why(r)).toBe(0)
        expect(readdirSync(home), 'written in HOME').toEqual([])
        expect(readdirSync(tmp), 'written in TMPDIR').toEqual([])
        expect(r.stdout + r.stderr).toMatch(/helmfile v1\.8\.0|helmfile \S+/)
        const wait = stepsOf(cluster, 'wait-ready')
        expect(wait.find((s) => s.name === 'helmfile-crds')).toMatchObject({ status: 'ok', detail: '6 CRD(s) applied' })
        expect(wait.find((s) => s.name === 'release kube-system/cilium')).toMatchObject({ status: 'ok' })
        expect(wait.map((s) => s.name).filter((n) => n.startsWith('release '))).toEqual(['release kube-system/cilium'])
        const flux = stepsOf(cluster, 'flux')
        expect(flux.map((s) => s.name).filter((n) => n.startsWith('release '))).toEqual([
          'release kube-system/coredns',
          'release kube-system/spegel',
          'release cert-manager/cert-manager',
          'release flux-system/flux-operator',
          'release flux-system/flux-instance',
        ])
        for (const s of flux.filter((s) => s.name.startsWith('release '))) expect(s.status, s.name).toBe('ok')
        expect(flux.find((s) => s.name === 'flux-kustomization')).toMatchObject({ status: 'ok' })
        expect(flux.find((s) => s.name === 'flux-kustomization')?.detail).toMatch(/^handed over: /)
        const releases = await cluster.kubectl([
          'get',
          'secrets',
          '-A',
          '-l',
          'owner=helm,status=deployed',
          '-o',
          'jsonpath={range .items[*]}{.metadata.labels.name} {end}',
        ])
        expect(releases.stdout.trim().split(' ').sort()).toEqual([
          'cert-manager',
          'cilium',
          'coredns',
          'flux-instance',
          'flux-operator',
          'spegel',
        ])
        const crd = await cluster.kubectl([
          'get',
          'crd',
          'gateways.gateway.networking.k8s.io',
          '-o',
          'jsonpath={.metadata.managedFields[0].manager}',
        ])
        expect(crd.stdout).toBe('talos-bootstrap')

        const again = await cluster.task('bootstrap:all')
        expect(again.code, why(again)).toBe(0)
        for (const s of stepsOf(cluster, 'flux').filter((s) => s.name.startsWith('release ')))
          expect(s.detail, s.name).toMatch(/already deployed, workloads ready$/)
      },
      SLOW * 2,
    )

    inTurn(
      "a chart whose pods cannot start: the release, namespace, chart, the first failing workload and its pod's reason; the printed command recovers it",
      async () => {
        // cert-manager moves to a version whose pods crash
        const oci = join(cluster.dir, 'kubernetes/apps/cert-manager/cert-manager/app/ocirepository.yaml')
        writeFileSync(oci, readFileSync(oci, 'utf8').replace('tag: v1.20.2', 'tag: v1.20.3'))
        const apps = join(cluster.dir, 'bootstrap/helmfile.d/01-apps.yaml')
        if (era === 'talhelper') writeFileSync(apps, readFileSync(apps, 'utf8').replace('version: v1.20.2', 'version: v1.20.3'))
        cluster.sim.addFault({ kind: 'chart', chart: 'cert-manager', message: 'error: failed to load the webhook serving certificate' })
        const r = await cluster.task('bootstrap:all', { BOOTSTRAP_FLUX_TIMEOUT: '1m', BOOTSTRAP_READY_TIMEOUT: '20s' })
        expect(r.code, why(r)).toBe(1)
        const step = stepsOf(cluster, 'flux').find((s) => s.name === 'release cert-manager/cert-manager')
        expect(step?.status).toBe('failed')
        expect(step?.error?.kind).toBe('release')
        expect(step?.error?.message).toMatch(
          /^release cert-manager\/cert-manager \(oci:\/\/\S+\/jetstack\/charts\/cert-manager v1\.20\.3\) failed: Deployment cert-manager\/(cert-manager[\w-]*): 0\/1 ready; pod \1-\S+: CrashLoopBackOff: error: failed to load the webhook serving certificate; helm said: Error: UPGRADE FAILED: /,
        )
        // what comes after it never started
        expect(stepsOf(cluster, 'flux').find((s) => s.name === 'release flux-system/flux-operator')?.status).toBe('not-run')
        const hint = step?.error?.hint ?? ''
        expect(hint).toMatch(/-n cert-manager describe deployment cert-manager/)
        const command = /then run: (task -d .*)$/.exec(hint)?.[1]
        expect(command, hint).toBeTruthy()
        cluster.sim.clearFault(null, 'chart')
        const fixed = await runInFreshShell(cluster, command!)
        expect(fixed.code, why(fixed)).toBe(0)
        expect(stepsOf(cluster, 'flux').find((s) => s.name === 'release cert-manager/cert-manager')?.detail).toMatch(/v1\.20\.3 deployed/)
      },
      SLOW * 2,
    )

    // a pending release may be the work of a helm still running (the helm a killed helmfile started
    // goes on): it is read again for a while before it is named; one that stays pending is named with
    // a recovery that runs as printed
    talhelperOnly(
      'a release left pending: waited for while a helm may finish it; still pending, named with its revision and a rollback that recovers',
      async () => {
        const deployed = await deployedRelease(cluster, 'spegel', 'kube-system')
        const pending = {
          ...deployed,
          name: 'spegel',
          version: deployed.version + 1,
          info: { ...deployed.info, status: 'pending-upgrade' },
        }
        await writeRelease(cluster, 'kube-system', pending)
        // the helm holding it finishes once the run has found the release pending and waits
        const { child, done } = cluster.spawnTask('bootstrap:flux', { BOOTSTRAP_READY_TIMEOUT: '60s' })
        let seen = ''
        let finished: Promise<TaskResult> | undefined
        child.stdout?.on('data', (d: Buffer) => {
          seen += d.toString()
          if (!finished && seen.includes('spegel is pending-upgrade: waiting for the helm that holds it to finish'))
            finished = cluster.kubectl(['-n', 'kube-system', 'delete', 'secret', `sh.helm.release.v1.spegel.v${pending.version}`])
        })
        const settled = await done
        expect(settled.code, why(settled)).toBe(0)
        expect(finished, 'the run never said it waits for the pending release').toBeDefined()
        expect((await finished)?.code).toBe(0)
        expect(stepsOf(cluster, 'flux').find((s) => s.name === 'release kube-system/spegel')?.detail).toMatch(/already deployed/)

        await writeRelease(cluster, 'kube-system', pending)
        const stuck = await cluster.task('bootstrap:flux', { BOOTSTRAP_READY_TIMEOUT: '5s' })
        expect(stuck.code, why(stuck)).toBe(1)
        const step = stepsOf(cluster, 'flux').find((s) => s.name === 'release kube-system/spegel')
        expect(step?.error?.message).toBe(
          `release kube-system/spegel is pending-upgrade (revision ${pending.version}) and stayed so for 5.0s: an earlier helm was interrupted`,
        )
        const hint = step?.error?.hint ?? ''
        const rollback = /`(helm rollback [^`]+)`/.exec(hint)?.[1]
        const command = /then run: (task -d .*)$/.exec(hint)?.[1]
        expect(rollback, hint).toMatch(/^helm rollback spegel -n kube-system --kubeconfig \S+/)
        const rolled = await runInFreshShell(cluster, rollback!)
        expect(rolled.code, why(rolled)).toBe(0)
        const fixed = await runInFreshShell(cluster, command!)
        expect(fixed.code, why(fixed)).toBe(0)
        expect(stepsOf(cluster, 'flux').find((s) => s.name === 'release kube-system/spegel')?.status).toBe('ok')
      },
      SLOW,
    )
  })
}

describe('CoreDNS disabled in the configs and nothing installing it', SIDE_BY_SIDE, () => {
  let cluster: E2eCluster
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.147.2', { cps: 1, workers: 1 })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  inTurn('is bad input: exit 2 naming the config, the line of coreDNS.disabled and the fix; no node touched', async () => {
    const configs = join(cluster.clusterDir, 'clusterconfig')
    const cp = join(configs, 'e2e-cp-1.yaml')
    for (const f of readdirSync(configs).filter((f) => f.endsWith('.yaml'))) {
      const doc = parseDocument(readFileSync(join(configs, f), 'utf8'))
      doc.setIn(['cluster', 'coreDNS'], { disabled: true })
      writeFileSync(join(configs, f), doc.toString({ lineWidth: 0 }))
    }
    // the line of disabled under cluster.coreDNS (the proxy's disabled comes earlier)
    const lines = readFileSync(cp, 'utf8').split('\n')
    const line = lines.findIndex((l, i) => /^\s+disabled: true$/.test(l) && /^\s+coreDNS:$/.test(lines[i - 1] ?? '')) + 1
    expect(line).toBeGreaterThan(0)
    const r = await cluster.task('bootstrap:talos')
    expect(r.code, why(r)).toBe(2)
    expect(r.stderr).toContain(
      `${cp}:${line}: cp-1: cluster.coreDNS.disabled is true and nothing installs CoreDNS (no kube-dns Service or coredns Deployment in the configs' inlineManifests or extraManifests): no pod could resolve a name, Flux's included (fix: remove cluster.coreDNS.disabled`,
    )
    expect(cluster.calls()).toEqual([])
  })
})
