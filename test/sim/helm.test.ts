// The simulated helm CLI against the simulated Kubernetes API (sim/kube), as a child process.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
// @ts-ignore plain JS test kit
import { startKubeForTest, run } from '../../sim/helm/testkit.js'

type Kit = Awaited<ReturnType<typeof startKubeForTest>>

describe('helm: cilium on a cluster with registered nodes', () => {
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

  it('installs with --wait: DaemonSet pods Ready, nodes Ready; a rerun is a new revision, unchanged', async () => {
    expect(k.kube.nodeReady('cp-1')).toBe(false)
    const args = ['upgrade', '--install', 'cilium', 'cilium/cilium', '--namespace', 'kube-system', '--version', '1.17.9', '--wait', '--timeout', '30s']
    const first = await run('helm', args, { env: k.env })
    expect(first.stderr).toBe('')
    expect(first.code).toBe(0)
    expect(first.stdout).toMatch(/^Release "cilium" does not exist\. Installing it now\.\nNAME: cilium\nLAST DEPLOYED: \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\nNAMESPACE: kube-system\nSTATUS: deployed\nREVISION: 1\nTEST SUITE: None\nNOTES:\n/)
    // helm's --wait tolerates cilium's maxUnavailable (2): on two nodes it may return before any
    // pod is ready, as real helm does; the nodes turn Ready once their CNI pods are
    const deadline = Date.now() + 10_000
    while (!(k.kube.nodeReady('cp-1') && k.kube.nodeReady('wrkr-1')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    expect(k.kube.nodeReady('cp-1')).toBe(true)
    expect(k.kube.nodeReady('wrkr-1')).toBe(true)

    const writesBefore = k.calls.filter((c: any) => c.call === 'kube' && /daemonsets|deployments|configmaps|serviceaccounts/.test(c.command)).length
    const second = await run('helm', args, { env: k.env })
    expect(second.code).toBe(0)
    expect(second.stdout).toMatch(/^Release "cilium" has been upgraded\. Happy Helming!\nNAME: cilium\n[^]*REVISION: 2\n/)
    const writesAfter = k.calls.filter((c: any) => c.call === 'kube' && /daemonsets|deployments|configmaps|serviceaccounts/.test(c.command)).length
    expect(writesAfter).toBe(writesBefore)
    const outcomes = k.calls.filter((c: any) => c.tool === 'helm' && c.call === 'helm').map((c: any) => c.outcome)
    expect(outcomes.slice(-2)).toEqual(['ok', 'unchanged'])

    // releases are stored as helm v3 stores them
    const secrets = await run('kubectl', ['--kubeconfig', k.kubeconfig, '-n', 'kube-system', 'get', 'secrets', '-l', 'owner=helm', '-o', 'jsonpath={range .items[*]}{.metadata.name} {.type} {.metadata.labels.status}{"\\n"}{end}'], { env: k.env })
    expect(secrets.stdout).toBe('sh.helm.release.v1.cilium.v1 helm.sh/release.v1 superseded\nsh.helm.release.v1.cilium.v2 helm.sh/release.v1 deployed\n')
  })

  it('a changed value rolls the DaemonSet and records "ok"', async () => {
    const r = await run('helm', ['upgrade', 'cilium', 'cilium/cilium', '-n', 'kube-system', '--version', '1.17.9', '--set', 'ipam.mode=kubernetes', '--wait'], { env: k.env })
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('REVISION: 3\n')
    expect(k.calls.filter((c: any) => c.tool === 'helm' && c.call === 'helm').at(-1).outcome).toBe('ok')
    const vals = await run('helm', ['get', 'values', 'cilium', '-n', 'kube-system', '-o', 'json'], { env: k.env })
    expect(vals.stdout).toBe('{"ipam":{"mode":"kubernetes"}}\n')
  })

  it('prints status and list as helm does', async () => {
    const st = await run('helm', ['status', 'cilium', '-n', 'kube-system'], { env: k.env })
    expect(st.stdout).toMatch(/^NAME: cilium\nLAST DEPLOYED: .+\nNAMESPACE: kube-system\nSTATUS: deployed\nREVISION: 3\nTEST SUITE: None\n/)
    const ls = await run('helm', ['list', '-A'], { env: k.env })
    const lines = ls.stdout.split('\n')
    expect(lines[0]).toMatch(/^NAME  \tNAMESPACE  \tREVISION\tUPDATED +\tSTATUS  \tCHART        \tAPP VERSION$/)
    expect(lines[1]).toMatch(/^cilium\tkube-system\t3       \t\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \+0000 UTC\tdeployed\tcilium-1\.17\.9\t1\.17\.9     $/)
    const js = JSON.parse((await run('helm', ['ls', '-n', 'kube-system', '-o', 'json'], { env: k.env })).stdout)
    expect(js).toEqual([expect.objectContaining({ name: 'cilium', namespace: 'kube-system', revision: '3', status: 'deployed', chart: 'cilium-1.17.9', app_version: '1.17.9' })])
    const none = await run('helm', ['status', 'nope', '-n', 'kube-system'], { env: k.env })
    expect(none).toMatchObject({ code: 1, stdout: '', stderr: 'Error: release: not found\n' })
  })

  it('refuses to adopt objects it does not own (coredns made by the cluster)', async () => {
    const r = await run('helm', ['install', 'coredns', 'coredns/coredns', '-n', 'kube-system'], { env: k.env })
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^Error: INSTALLATION FAILED: Unable to continue with install: Deployment "coredns" in namespace "kube-system" exists and cannot be imported into the current release: invalid ownership metadata; label validation error: missing key "app.kubernetes.io\/managed-by": must be set to "Helm"/)
  })
})

describe('helm: failures', () => {
  let k: Kit
  beforeAll(async () => {
    // cilium's DaemonSet allows 2 unavailable pods (its chart default), and helm v3's --wait counts it
    // ready at desired - maxUnavailable: so the fault must hit all three nodes to make --wait time out
    const nodes = ['cp-1', 'wrkr-1', 'wrkr-2'].map((name, i) => ({ name, ip: `127.50.1.${11 + i}`, role: i ? 'worker' : 'controlplane' }))
    k = await startKubeForTest({ ip: '127.50.1.1', speed: 1000, nodes, faults: new Set(nodes.map((n) => `${n.name}:cni`)) })
  })
  afterAll(async () => k?.close())

  it('--wait times out with the real text when the CNI pod never gets ready', async () => {
    const t0 = Date.now()
    const r = await run('helm', ['upgrade', '-i', 'cilium', 'cilium', '--repo', 'https://helm.cilium.io', '-n', 'kube-system', '--wait', '--timeout=1s'], { env: k.env })
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000)
    expect(r.code).toBe(1)
    expect(r.stdout).toBe('Release "cilium" does not exist. Installing it now.\n')
    expect(r.stderr).toBe('Error: INSTALLATION FAILED: context deadline exceeded\n')
    expect(k.kube.nodeReady('cp-1')).toBe(false)
    const again = await run('helm', ['upgrade', '-i', 'cilium', 'cilium/cilium', '-n', 'kube-system', '--wait', '--timeout', '500ms'], { env: k.env })
    expect(again.stderr).toBe('Error: UPGRADE FAILED: context deadline exceeded\n')
    const st = await run('helm', ['status', 'cilium', '-n', 'kube-system', '--show-desc'], { env: k.env })
    expect(st.stdout).toContain('STATUS: failed\nREVISION: 2\nDESCRIPTION: Upgrade "cilium" failed: context deadline exceeded\n')
    expect(k.calls.filter((c: any) => c.tool === 'helm' && c.call === 'helm').at(-2).outcome).toBe('error: UPGRADE FAILED: context deadline exceeded')
  })

  it('fails on unknown flags, bad arguments and an unreachable cluster as helm does', async () => {
    expect(await run('helm', ['upgrade', '--install', 'x', 'cilium/cilium', '--foo'], { env: k.env })).toMatchObject({ code: 1, stderr: 'Error: unknown flag: --foo\n' })
    expect(await run('helm', ['upgrade', 'x'], { env: k.env })).toMatchObject({ code: 1, stderr: 'Error: "helm upgrade" requires 2 arguments\n\nUsage:  helm upgrade [RELEASE] [CHART] [flags]\n' })
    expect((await run('helm', ['upgrade', '-i', 'x', 'cilium/cilium', '--timeout', '5'], { env: k.env })).stderr).toBe('Error: invalid argument "5" for "--timeout" flag: time: missing unit in duration "5"\n')
    expect((await run('helm', ['upgrade', '-i', 'x', 'nope/cilium'], { env: k.env })).stderr).toBe('Error: repo nope not found\n')
    const down = await run('helm', ['upgrade', '--install', 'cilium', 'cilium/cilium', '-n', 'kube-system', '--kube-apiserver', 'x', '--kubeconfig', k.kubeconfig.replace('kubeconfig', 'other')], { env: k.env })
    expect(down.code).toBe(1)
    const fs = await import('node:fs')
    const text = fs.readFileSync(k.kubeconfig, 'utf8').replace('https://127.50.1.1:6443', 'https://127.50.1.9:6443')
    fs.writeFileSync(k.kubeconfig + '.down', text)
    const refused = await run('helm', ['upgrade', '--install', 'cilium', 'cilium/cilium', '-n', 'kube-system', '--kubeconfig', k.kubeconfig + '.down'], { env: k.env })
    expect(refused).toMatchObject({ code: 1, stdout: '', stderr: 'Error: Kubernetes cluster unreachable: Get "https://127.50.1.9:6443/version": dial tcp 127.50.1.9:6443: connect: connection refused\n' })
  })

  it('prints its version as helm v3.21 does', async () => {
    const r = await run('helm', ['version'])
    expect(r.stdout).toMatch(/^version\.BuildInfo\{Version:"v3\.21\.\d+", GitCommit:"[0-9a-f]{40}", GitTreeState:"clean", GoVersion:"go1\.\d+\.\d+"\}\n$/)
    expect((await run('helm', ['version', '--short'])).stdout).toMatch(/^v3\.21\.\d+\+g[0-9a-f]{7}\n$/)
  })
})
