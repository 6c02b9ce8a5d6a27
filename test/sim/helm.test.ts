// The real helm (v4.3.1 from `task tools`; what differs on helm 3 is said where it does) against the simulated Kubernetes API (sim/kube) and the
// simulator's chart repository (sim/charts): every command the product runs (lib/tools/helm.ts) and
// the ones the README shows, with the outputs the real client prints. What the API must do for them
// follows helm's and client-go's source: pkg/storage/driver/secrets.go (release Secrets, listed by
// label selector owner=helm), pkg/kube/ready.go (--wait: observedGeneration, a DaemonSet's
// updatedNumberScheduled/numberReady, a Deployment's ready count read from its new ReplicaSet found
// by client-go's deploymentutil.GetNewReplicaSet), pkg/kube/client.go deleteResource (DELETE with
// protobuf DeleteOptions from the typed client), pkg/repo/chartrepo.go (index.yaml through --repo
// and --ca-file). Ranges 127.50.0.x, 127.50.1.x, 127.50.2.x.
import { execFile, execFileSync } from 'node:child_process'
import fs from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
// @ts-ignore plain JS test kit
import { startKubeForTest, run } from '../../sim/testkit.js'
import { realTool } from '../support/real-tools.js'
import { startOn, type Started } from './helpers.js'

type Kit = Awaited<ReturnType<typeof startKubeForTest>>
interface Call {
  tool: string
  call: string
  command: string
  outcome: string
}

const tool = realTool('helm')
if (tool.skip) console.warn(`SKIPPED test/sim/helm.test.ts: ${tool.skip}`)
// the suite runs helm 4 (`task tools`); an operator's helm 3 on PATH is linked instead, and
// test/e2e/helm3.test.ts runs a whole bootstrap on helm 3
const HELM_VERSION = tool.skip ? '' : execFileSync(tool.path, ['version', '--short'], { encoding: 'utf8' }).trim().split('+')[0]!
const HELM4 = HELM_VERSION.startsWith('v4.')

const kubectl = (k: Kit, ...args: string[]) => run('kubectl', ['--kubeconfig', k.kubeconfig, ...args], { env: k.env })
const DEPLOYED =
  /^NAME: cilium\nLAST DEPLOYED: \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\nNAMESPACE: kube-system\nSTATUS: deployed\nREVISION: (\d+)\n(?:DESCRIPTION: (?:Install|Upgrade) complete\n)?TEST SUITE: None\nNOTES:\nYou have successfully installed Cilium\.\n\nYour release version is 1\.18\.4\.\n$/

describe.skipIf(!!tool.skip)('the real helm: cilium from the chart repository on a cluster with registered nodes', () => {
  let k: Kit
  beforeAll(async () => {
    k = await startKubeForTest({
      ip: '127.50.0.1',
      speed: 1000,
      nodes: [
        { name: 'cp-1', ip: '127.50.0.11', role: 'controlplane' },
        { name: 'wrkr-1', ip: '127.50.0.21', role: 'worker' },
      ],
    })
  })
  afterAll(async () => k?.close())
  const helm = (...args: string[]) => run('helm', args, { env: k.env })
  const install = [
    'upgrade',
    '--install',
    'cilium',
    'CHART',
    '--namespace',
    'kube-system',
    '--version',
    '1.18.4',
    '--set',
    'k8sServiceHost=localhost',
    '--set',
    'k8sServicePort=7445',
    '--set',
    'operator.replicas=1',
    '--wait',
    '--timeout',
    '30s',
  ]
  const withChart = (args: string[]) => args.flatMap((a) => (a === 'CHART' ? k.chart : [a]))

  it('upgrade --install --wait from --repo with --ca-file: the chart fetched from index.yaml, the agents ready, nodes Ready', async () => {
    expect(k.kube.nodeReady('cp-1')).toBe(false)
    const first = await helm(...withChart(install))
    expect(first.stderr).toBe('')
    expect(first.code).toBe(0)
    expect(first.stdout).toMatch(/^Release "cilium" does not exist\. Installing it now\.\n/)
    expect(first.stdout.replace(/^.*\n/, '')).toMatch(DEPLOYED)
    expect(k.repo.requests).toEqual(['GET /index.yaml', 'GET /cilium-1.18.4.tgz'])
    // the chart's values reached the agent as the env its readiness depends on (sim/kube/controllers.js)
    const env = await kubectl(k, '-n', 'kube-system', 'get', 'ds', 'cilium', '-o', 'jsonpath={.spec.template.spec.containers[0].env}')
    expect(JSON.parse(env.stdout)).toEqual([
      { name: 'KUBERNETES_SERVICE_HOST', value: 'localhost' },
      { name: 'KUBERNETES_SERVICE_PORT', value: '7445' },
    ])
    // the Service --wait checked: given a cluster IP from the service range (pkg/kube/ready.go serviceReady)
    expect(
      (await kubectl(k, '-n', 'kube-system', 'get', 'svc', 'hubble-peer', '-o', 'jsonpath={.spec.type} {.spec.clusterIP}')).stdout,
    ).toMatch(/^ClusterIP 127\.96\.\d+\.\d+$/)
    const deadline = Date.now() + 10_000
    while (!(k.kube.nodeReady('cp-1') && k.kube.nodeReady('wrkr-1')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    expect([k.kube.nodeReady('cp-1'), k.kube.nodeReady('wrkr-1')]).toEqual([true, true])
  })

  it('--wait on a Deployment: it returned once the new ReplicaSet, controlled by the Deployment, had its pod ready', async () => {
    const rs = JSON.parse((await kubectl(k, '-n', 'kube-system', 'get', 'rs', '-l', 'io.cilium/app=operator', '-o', 'json')).stdout) as {
      items: Array<{
        metadata: { name: string; ownerReferences: Array<{ kind: string; name: string; controller: boolean }> }
        spec: { template: { metadata: { labels: Record<string, string> } } }
        status: { readyReplicas?: number; observedGeneration: number }
      }>
    }
    expect(rs.items).toHaveLength(1)
    const [set] = rs.items
    expect(set!.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Deployment', name: 'cilium-operator', controller: true }),
    ])
    expect(set!.metadata.name).toBe(`cilium-operator-${set!.spec.template.metadata.labels['pod-template-hash']}`)
    expect(set!.status.readyReplicas).toBe(1)
    const deploy = JSON.parse((await kubectl(k, '-n', 'kube-system', 'get', 'deploy', 'cilium-operator', '-o', 'json')).stdout) as {
      metadata: { generation: number }
      status: { observedGeneration: number }
    }
    expect(deploy.status.observedGeneration).toBe(deploy.metadata.generation)
  })

  it('a rerun is revision 2; releases stored as Secrets owner=helm, one per revision', async () => {
    const second = await helm(...withChart(install))
    expect(second.code).toBe(0)
    expect(second.stdout).toMatch(/^Release "cilium" has been upgraded\. Happy Helming!\n/)
    expect(second.stdout.replace(/^.*\n/, '').match(DEPLOYED)?.[1]).toBe('2')
    const secrets = await kubectl(
      k,
      '-n',
      'kube-system',
      'get',
      'secrets',
      '-l',
      'owner=helm',
      '-o',
      'jsonpath={range .items[*]}{.metadata.name} {.type} {.metadata.labels.status}{"\\n"}{end}',
    )
    expect(secrets.stdout).toBe(
      'sh.helm.release.v1.cilium.v1 helm.sh/release.v1 superseded\nsh.helm.release.v1.cilium.v2 helm.sh/release.v1 deployed\n',
    )
  })

  it('changed values: helm patches the objects (strategic merge); the DaemonSet rolls to a new generation, the Deployment to a new ReplicaSet, and --wait waits for both', async () => {
    const before = JSON.parse((await kubectl(k, '-n', 'kube-system', 'get', 'ds', 'cilium', '-o', 'json')).stdout) as {
      metadata: { generation: number }
    }
    const r = await helm(
      ...withChart(install),
      '--set',
      'image.tag=v1.18.4-patched',
      '--set',
      'operator.image.tag=v1.18.4-patched',
      '--set',
      'ipam.mode=kubernetes',
    )
    expect(r.stderr).toBe('')
    expect(r.stdout.replace(/^.*\n/, '').match(DEPLOYED)?.[1]).toBe('3')
    const patches = (k.calls as Call[])
      .filter((c) => c.call === 'kube' && c.command.startsWith('PATCH'))
      .map((c) => `${c.command} ${c.outcome}`)
    expect(patches).toEqual(
      expect.arrayContaining([
        'PATCH /apis/apps/v1/namespaces/kube-system/daemonsets/cilium ok',
        'PATCH /api/v1/namespaces/kube-system/configmaps/cilium-config ok',
      ]),
    )
    const ds = JSON.parse((await kubectl(k, '-n', 'kube-system', 'get', 'ds', 'cilium', '-o', 'json')).stdout) as {
      metadata: { generation: number }
      spec: { template: { spec: { containers: Array<{ image: string; env: unknown[] }> } } }
      status: { observedGeneration: number; updatedNumberScheduled: number; desiredNumberScheduled: number }
    }
    expect(ds.metadata.generation).toBe(before.metadata.generation + 1)
    expect(ds.status.observedGeneration).toBe(ds.metadata.generation)
    expect(ds.spec.template.spec.containers[0]!.image).toBe('quay.io/cilium/cilium:v1.18.4-patched')
    expect(ds.spec.template.spec.containers[0]!.env).toHaveLength(2)
    expect((await kubectl(k, '-n', 'kube-system', 'get', 'cm', 'cilium-config', '-o', 'jsonpath={.data.ipam}')).stdout).toBe('kubernetes')
    const sets = (
      await kubectl(
        k,
        '-n',
        'kube-system',
        'get',
        'rs',
        '-l',
        'io.cilium/app=operator',
        '-o',
        'jsonpath={range .items[*]}{.spec.template.spec.containers[0].image} {.spec.replicas} {.status.readyReplicas}{"\\n"}{end}',
      )
    ).stdout
    expect(sets.trim().split('\n').sort()).toEqual([
      'quay.io/cilium/operator-generic:v1.18.4 0 ',
      'quay.io/cilium/operator-generic:v1.18.4-patched 1 1',
    ])
  })

  it('status, list (-o json with --filter, as lib/tools/helm.ts reads the release), get values, history', async () => {
    // helm 4's status lists the release's resources too (read back from the API), before the notes
    const status = (await helm('status', 'cilium', '-n', 'kube-system')).stdout
    if (HELM4) expect(status).toMatch(/\nRESOURCES:\n[\s\S]*==> v1\/DaemonSet\nNAME +DESIRED .*\ncilium +2 +2 +2 +2 +2 /)
    expect(status.replace(/RESOURCES:\n(?:.*\n)*?\n\n(?=TEST SUITE)/, '')).toMatch(DEPLOYED)
    // status -o json strips the chart (cmd/helm/status.go): the chart version comes from list
    const json = JSON.parse((await helm('status', 'cilium', '-n', 'kube-system', '-o', 'json')).stdout) as {
      info: { status: string }
      chart?: unknown
      version: number
    }
    expect([json.info.status, json.chart, json.version]).toEqual(['deployed', undefined, 3])
    const listed = JSON.parse(
      (await helm('list', '-n', 'kube-system', '--filter', '^cilium$', '--deployed', '--failed', '--pending', '-o', 'json')).stdout,
    ) as unknown[]
    expect(listed).toEqual([
      expect.objectContaining({
        name: 'cilium',
        namespace: 'kube-system',
        revision: '3',
        status: 'deployed',
        chart: 'cilium-1.18.4',
        app_version: '1.18.4',
      }),
    ])
    const lines = (await helm('list', '-A')).stdout.split('\n')
    expect(lines[0]).toMatch(/^NAME  \tNAMESPACE  \tREVISION\tUPDATED +\tSTATUS  \tCHART        \tAPP VERSION$/)
    expect(lines[1]).toMatch(
      /^cilium\tkube-system\t3       \t\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \+0000 UTC\tdeployed\tcilium-1\.18\.4\t1\.18\.4     $/,
    )
    expect((await helm('get', 'values', 'cilium', '-n', 'kube-system', '-o', 'json')).stdout).toBe(
      '{"image":{"tag":"v1.18.4-patched"},"ipam":{"mode":"kubernetes"},"k8sServiceHost":"localhost","k8sServicePort":7445,"operator":{"image":{"tag":"v1.18.4-patched"},"replicas":1}}\n',
    )
    expect(
      (await helm('history', 'cilium', '-n', 'kube-system')).stdout
        .split('\n')
        .map((l) => l.split('\t').map((c) => c.trim()))
        .slice(1, 4)
        .map((c) => [c[0], c[2], c[5]]),
    ).toEqual([
      ['1', 'superseded', 'Install complete'],
      ['2', 'superseded', 'Upgrade complete'],
      ['3', 'deployed', 'Upgrade complete'],
    ])
    expect(await helm('status', 'nope', '-n', 'kube-system')).toEqual({ code: 1, stdout: '', stderr: 'Error: release: not found\n' })
  })

  it('uninstall --wait: DELETEs with protobuf DeleteOptions accepted, the objects and release Secrets gone', async () => {
    const calls = () => (k.calls as Call[]).filter((c) => c.call === 'kube' && c.command.startsWith('DELETE'))
    const r = await helm('uninstall', 'cilium', '-n', 'kube-system', '--wait')
    expect(r).toEqual({ code: 0, stdout: 'release "cilium" uninstalled\n', stderr: '' })
    expect(
      calls()
        .map((c) => `${c.command} ${c.outcome}`)
        .sort(),
    ).toEqual([
      'DELETE /api/v1/namespaces/kube-system/configmaps/cilium-config ok',
      'DELETE /api/v1/namespaces/kube-system/secrets/sh.helm.release.v1.cilium.v1 ok',
      'DELETE /api/v1/namespaces/kube-system/secrets/sh.helm.release.v1.cilium.v2 ok',
      'DELETE /api/v1/namespaces/kube-system/secrets/sh.helm.release.v1.cilium.v3 ok',
      'DELETE /api/v1/namespaces/kube-system/serviceaccounts/cilium ok',
      'DELETE /api/v1/namespaces/kube-system/serviceaccounts/cilium-operator ok',
      'DELETE /api/v1/namespaces/kube-system/services/hubble-peer ok',
      'DELETE /apis/apps/v1/namespaces/kube-system/daemonsets/cilium ok',
      'DELETE /apis/apps/v1/namespaces/kube-system/deployments/cilium-operator ok',
    ])
    const left = (await kubectl(k, '-n', 'kube-system', 'get', 'ds,deploy,rs,secrets,sa,cm,svc', '-o', 'name')).stdout.split('\n')
    expect(left.filter((n) => /cilium|hubble|sh\.helm/.test(n))).toEqual([])
    expect(left).toContain('deployment.apps/coredns') // what the cluster made stays
    expect(await helm('uninstall', 'cilium', '-n', 'kube-system')).toEqual({
      code: 1,
      stdout: '',
      stderr: 'Error: uninstall: Release not loaded: cilium: release: not found\n',
    })
  })
})

describe.skipIf(!!tool.skip)('the real helm: failures', () => {
  let k: Kit
  beforeAll(async () => {
    // cilium's DaemonSet allows 2 unavailable pods (its chart default), and helm's --wait counts it
    // ready at desired - maxUnavailable: so the fault must hit all three nodes to make --wait time out
    const nodes = ['cp-1', 'wrkr-1', 'wrkr-2'].map((name, i) => ({ name, ip: `127.50.1.${11 + i}`, role: i ? 'worker' : 'controlplane' }))
    k = await startKubeForTest({ ip: '127.50.1.1', speed: 1000, nodes, faults: new Set(nodes.map((n) => `${n.name}:cni`)) })
  })
  afterAll(async () => k?.close())
  const helm = (...args: string[]) => run('helm', args, { env: k.env })

  it('--wait times out when the CNI pods never get ready; the failed revision is recorded', async () => {
    const r = await helm(
      'upgrade',
      '-i',
      'cilium',
      ...k.chart,
      '-n',
      'kube-system',
      '--set',
      'operator.replicas=1',
      '--wait',
      '--timeout=1s',
    )
    expect(r.code).toBe(1)
    expect(r.stdout).toBe('Release "cilium" does not exist. Installing it now.\n')
    // helm 4's wait (kstatus) names what was not ready before helm's own words
    if (HELM4)
      expect(r.stderr).toMatch(
        /^Error: resource DaemonSet\/kube-system\/cilium not ready\. status: InProgress, message: .*\n(?:resource .*\n)*context deadline exceeded\n$/,
      )
    else expect(r.stderr).toBe('Error: context deadline exceeded\n')
    expect(k.kube.nodeReady('cp-1')).toBe(false)
    const again = await helm(
      'upgrade',
      '-i',
      'cilium',
      ...k.chart,
      '-n',
      'kube-system',
      '--set',
      'operator.replicas=1',
      '--wait',
      '--timeout',
      '500ms',
    )
    if (HELM4)
      expect(again.stderr).toMatch(
        /^(?:level=WARN .*\n)?Error: UPGRADE FAILED: resource .* not ready\. status: InProgress, .*\n(?:resource .*\n)*context deadline exceeded\n$/,
      )
    else expect(again.stderr).toBe('Error: UPGRADE FAILED: context deadline exceeded\n')
    // helm 4 prints the description by default and dropped --show-desc
    const st = await helm('status', 'cilium', '-n', 'kube-system', ...(HELM4 ? [] : ['--show-desc']))
    expect(st.stdout).toMatch(
      /STATUS: failed\nREVISION: 2\nDESCRIPTION: Upgrade "cilium" failed: (?:resource .*\n)*context deadline exceeded\n/,
    )
  })

  it('the repository: no CA, refused, unknown chart or version; an unreachable cluster', async () => {
    const installing = 'Release "x" does not exist. Installing it now.\n'
    expect(await helm('upgrade', '-i', 'x', 'cilium', '--repo', k.repo.url)).toEqual({
      code: 1,
      stdout: installing,
      stderr: `Error: looks like "${k.repo.url}" is not a valid chart repository or cannot be reached: Get "${k.repo.url}index.yaml": tls: failed to verify certificate: x509: certificate signed by unknown authority\n`,
    })
    expect((await helm('upgrade', '-i', 'x', 'cilium', '--repo', 'https://127.0.0.1:1/', '--ca-file', k.repo.caFile)).stderr).toBe(
      'Error: looks like "https://127.0.0.1:1/" is not a valid chart repository or cannot be reached: Get "https://127.0.0.1:1/index.yaml": dial tcp 127.0.0.1:1: connect: connection refused\n',
    )
    expect((await helm('upgrade', '-i', 'x', 'nope', '--repo', k.repo.url, '--ca-file', k.repo.caFile)).stderr).toBe(
      `Error: chart "nope" not found in ${k.repo.url} repository\n`,
    )
    expect((await helm('upgrade', '-i', 'x', ...k.chart, '--version', '9.9.9')).stderr).toBe(
      `Error: chart "cilium" version "9.9.9" not found in ${k.repo.url} repository\n`,
    )
    fs.writeFileSync(
      k.kubeconfig + '.down',
      fs.readFileSync(k.kubeconfig, 'utf8').replace('https://127.50.1.1:6443', 'https://127.50.1.9:6443'),
    )
    expect(await helm('upgrade', '--install', 'cilium', ...k.chart, '-n', 'kube-system', '--kubeconfig', k.kubeconfig + '.down')).toEqual({
      code: 1,
      stdout: '',
      // helm 4 writes the first word in lower case
      stderr: `Error: ${HELM4 ? 'k' : 'K'}ubernetes cluster unreachable: Get "https://127.50.1.9:6443/version": dial tcp 127.50.1.9:6443: connect: connection refused\n`,
    })
  })
})

describe.skipIf(!!tool.skip)('.sim/env', () => {
  let s: Started
  beforeAll(async () => {
    s = await startOn('127.50.2', { cps: 1, workers: 0, speed: 1000 })
  })
  afterAll(async () => {
    await s?.stop()
  })

  it("puts the real helm first on PATH (helm 4: helm version --short is v4.3.1); bootstrap.yaml names the simulator's repository and CA", async () => {
    expect(tool.path).toBe(resolve('.tools/bin/helm'))
    const v = await new Promise<{ stdout: string }>((done) =>
      execFile(
        'bash',
        ['-c', `source '${join(s.sim.dir, 'env')}' && command -v helm && helm version --short`],
        { encoding: 'utf8' },
        (_e, stdout) => done({ stdout }),
      ),
    )
    expect(v.stdout).toBe(`${join(s.sim.dir, 'bin', 'helm')}\n${HELM_VERSION}\n`)
    expect(HELM_VERSION).toBe('v4.3.1')
    expect(fs.realpathSync(join(s.sim.dir, 'bin', 'helm'))).toBe(fs.realpathSync(tool.path!))
    const settings = fs.readFileSync(join(s.sim.clusterDir, 'bootstrap.yaml'), 'utf8')
    expect(settings).toContain(`  chart: cilium\n  repo: ${s.sim.chartRepo.url}\n  caFile: charts-ca.crt\n`)
    expect(s.sim.chartRepo.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/$/)
  })
})
