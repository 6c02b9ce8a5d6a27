// The simulator's OCI registry (sim/charts/oci.js) as the real helm pulls from it: trusted through
// SSL_CERT_FILE alone (no --ca-file, no --plain-http), every chart of cluster-template's bootstrap
// helmfile under any repository path ending in its name and at any version asked, in helm's push
// format (the config and layer media types of helm pkg/registry/constants.go); each chart installed
// with --wait creates what its real chart creates that --wait and the product look at, and a chart
// whose pods crash-loop (a scenario `chart` fault) fails --wait with the pod's own message.
// Range 127.52.0.x.
import fs from 'node:fs'
import https from 'node:https'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
// @ts-ignore plain JS test kit
import { startKubeForTest, run } from '../../sim/testkit.js'
import { realTool } from '../support/real-tools.js'

type Kit = Awaited<ReturnType<typeof startKubeForTest>>
const tool = realTool('helm')
if (tool.skip) console.warn(`SKIPPED test/sim/oci.test.ts: ${tool.skip}`)

/** GET from the registry with its CA, as a client that follows the distribution spec */
function get(k: Kit, path: string, accept = 'application/vnd.oci.image.manifest.v1+json') {
  return new Promise<{ status: number; type: string; digest: string; body: string }>((resolve, reject) => {
    const [host, port] = (k.registry as string).split(':')
    https
      .get({ host, port: Number(port), path, ca: fs.readFileSync(k.repo.caFile), headers: { accept } }, (res) => {
        let body = ''
        res.on('data', (c: Buffer) => (body += c.toString()))
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            type: String(res.headers['content-type']),
            digest: String(res.headers['docker-content-digest']),
            body,
          }),
        )
      })
      .on('error', reject)
  })
}

describe.skipIf(!!tool.skip)('the OCI registry of simulated charts, pulled and installed by the real helm', () => {
  let k: Kit
  const crash = new Map<string, string>()
  beforeAll(async () => {
    k = await startKubeForTest({
      ip: '127.52.0.1',
      speed: 1000,
      crash,
      coreDNS: false, // cluster-template's configs: its helmfile installs CoreDNS
      nodes: [
        { name: 'cp-1', ip: '127.52.0.11', role: 'controlplane' },
        { name: 'wrkr-1', ip: '127.52.0.21', role: 'worker' },
      ],
    })
  })
  afterAll(async () => k?.close())
  // the registry trusted as .sim/env makes it: SSL_CERT_FILE names the system's roots and the simulator's CA
  const trusted = () => ({ ...k.env, SSL_CERT_FILE: k.trustFile })
  const helm = (...args: string[]) => run('helm', args, { env: trusted(), timeoutMs: 90_000 })
  const kubectl = (...args: string[]) => run('kubectl', ['--kubeconfig', k.kubeconfig, ...args], { env: k.env })

  it('helm pull: any path ending in the chart name, any version asked, trusted through SSL_CERT_FILE alone', async () => {
    const out = join(k.dir, 'pulled')
    fs.mkdirSync(out)
    for (const [ref, version] of [
      ['home-operations/charts-mirror/cilium', '1.19.4'],
      ['quay.io/jetstack/charts/cert-manager', 'v1.20.2'],
      ['coredns', '1.45.2'],
      ['controlplaneio-fluxcd/charts/flux-operator', '0.49.0'],
      ['controlplaneio-fluxcd/charts/flux-instance', '0.49.0'],
      ['spegel-org/helm-charts/spegel', '0.7.0'],
    ] as const) {
      const r = await helm('pull', `oci://${k.registry}/${ref}`, '--version', version, '-d', out)
      // helm reports the pull (pkg/registry/client.go Pull): helm 3 on stderr, helm 4 on stdout
      expect(`${r.stdout}${r.stderr}`, ref).toMatch(new RegExp(`^Pulled: ${k.registry}/${ref}:${version}\nDigest: sha256:[0-9a-f]{64}\n$`))
      expect(r.code, ref).toBe(0)
      const name = ref.split('/').pop()!
      expect(fs.existsSync(join(out, `${name}-${version}.tgz`)), `${name}-${version}.tgz`).toBe(true)
      const shown = await helm('show', 'chart', join(out, `${name}-${version}.tgz`))
      expect(shown.stdout).toMatch(new RegExp(`^name: ${name}$`, 'm'))
      expect(shown.stdout).toMatch(new RegExp(`^version: ${version}$`, 'm'))
    }
    // without the trust bundle the registry's certificate is refused, as a real registry's self-signed one would be
    const refused = await run('helm', ['pull', `oci://${k.registry}/cilium`, '--version', '1.0.0', '-d', out], { env: k.env })
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/x509|certificate/)
  })

  it("helm's push format: an image manifest with the helm config and chart layer media types, its digest, blobs by digest; tags/list; unknown names", async () => {
    const m = await get(k, '/v2/some/path/coredns/manifests/1.2.3')
    expect(m.status).toBe(200)
    expect(m.type).toBe('application/vnd.oci.image.manifest.v1+json')
    const manifest = JSON.parse(m.body) as {
      schemaVersion: number
      config: { mediaType: string; digest: string; size: number }
      layers: Array<{ mediaType: string; digest: string; size: number }>
    }
    expect(manifest.schemaVersion).toBe(2)
    expect(manifest.config.mediaType).toBe('application/vnd.cncf.helm.config.v1+json')
    expect(manifest.layers.map((l) => l.mediaType)).toEqual(['application/vnd.cncf.helm.chart.content.v1.tar+gzip'])
    const { createHash } = await import('node:crypto')
    expect(m.digest).toBe(`sha256:${createHash('sha256').update(m.body).digest('hex')}`)
    const config = await get(k, `/v2/some/path/coredns/blobs/${manifest.config.digest}`, '*/*')
    expect(JSON.parse(config.body)).toMatchObject({ name: 'coredns', version: '1.2.3' })
    // a version with build metadata is tagged with `_` for `+` (helm pkg/registry), and comes back as asked
    const plus = await get(k, '/v2/coredns/manifests/1.2.3_build.1')
    expect(plus.status).toBe(200)
    const tags = JSON.parse((await get(k, '/v2/x/coredns/tags/list', '*/*')).body) as { tags: string[] }
    expect(tags.tags).toEqual(expect.arrayContaining(['1.2.3', '1.2.3_build.1']))
    const unknown = await get(k, '/v2/ghcr.io/nobody/not-a-chart/manifests/1.0.0')
    expect(unknown.status).toBe(404)
    expect(JSON.parse(unknown.body).errors[0].code).toBe('NAME_UNKNOWN')
    const pulled = await helm('pull', `oci://${k.registry}/nobody/not-a-chart`, '--version', '1.0.0', '-d', join(k.dir, 'none'))
    expect(pulled.code).toBe(1)
    expect(pulled.stderr).toMatch(/not found/)
  })

  it('each chart installed with --wait creates what the real one does: the CNI DaemonSet, CoreDNS, spegel, cert-manager with its CRDs, flux-operator and its FluxInstance', async () => {
    const install = (release: string, ns: string, ref: string, version: string, ...values: string[]) =>
      helm(
        'upgrade',
        '--install',
        release,
        `oci://${k.registry}/${ref}`,
        '--version',
        version,
        '--namespace',
        ns,
        '--create-namespace',
        '--wait',
        '--timeout',
        '60s',
        ...values.flatMap((v) => ['--set', v]),
      )
    const steps: Array<[string, string, string, string, string[]]> = [
      [
        'cilium',
        'kube-system',
        'quay.io/cilium/charts/cilium',
        '1.19.4',
        ['k8sServiceHost=localhost', 'k8sServicePort=7445', 'operator.replicas=1'],
      ],
      [
        'coredns',
        'kube-system',
        'ghcr.io/coredns/charts/coredns',
        '1.45.2',
        ['fullnameOverride=coredns', 'k8sAppLabelOverride=kube-dns', 'service.name=kube-dns'],
      ],
      ['spegel', 'kube-system', 'ghcr.io/spegel-org/helm-charts/spegel', '0.7.0', []],
      ['cert-manager', 'cert-manager', 'quay.io/jetstack/charts/cert-manager', 'v1.20.2', ['crds.enabled=true']],
      ['flux-operator', 'flux-system', 'ghcr.io/controlplaneio-fluxcd/charts/flux-operator', '0.49.0', []],
      ['flux-instance', 'flux-system', 'ghcr.io/controlplaneio-fluxcd/charts/flux-instance', '0.49.0', []],
    ]
    for (const [release, ns, ref, version, values] of steps) {
      const r = await install(release, ns, ref, version, ...values)
      expect(r.stderr, release).not.toMatch(/Error/)
      expect(`${r.stdout}${r.stderr}`, release).toMatch(
        new RegExp(`Pulled: ${k.registry}/${ref}:${version}\nDigest: sha256:[0-9a-f]{64}\n`),
      )
      expect(r.code, release).toBe(0)
    }
    const names = async (ns: string, kind: string) =>
      (await kubectl('-n', ns, 'get', kind, '-o', 'jsonpath={range .items[*]}{.metadata.name} {end}')).stdout.trim().split(' ').sort()
    expect(await names('kube-system', 'daemonsets')).toEqual(['cilium', 'spegel'])
    expect(await names('kube-system', 'deployments')).toEqual(['cilium-operator', 'coredns'])
    expect(await names('kube-system', 'services')).toEqual(expect.arrayContaining(['hubble-peer', 'kube-dns']))
    expect(await names('cert-manager', 'deployments')).toEqual(['cert-manager', 'cert-manager-cainjector', 'cert-manager-webhook'])
    expect((await kubectl('get', 'crd', 'clusterissuers.cert-manager.io', '-o', 'jsonpath={.spec.scope}')).stdout).toBe('Cluster')
    // flux-operator reconciled the FluxInstance: Flux's controllers are installed beside it
    expect(await names('flux-system', 'deployments')).toEqual(
      expect.arrayContaining(['flux-operator', 'source-controller', 'kustomize-controller']),
    )
    expect(await names('flux-system', 'fluxinstances')).toEqual(['flux'])
    const list = await helm('list', '-A', '-o', 'json')
    expect((JSON.parse(list.stdout) as Array<{ name: string; chart: string }>).map((r) => r.chart).sort()).toEqual([
      'cert-manager-v1.20.2',
      'cilium-1.19.4',
      'coredns-1.45.2',
      'flux-instance-0.49.0',
      'flux-operator-0.49.0',
      'spegel-0.7.0',
    ])
  })

  it("a chart whose pods cannot start (scenario `chart` fault): --wait times out and the pod crash-loops with the container's own message; cleared, it runs", async () => {
    crash.set('coredns', 'plugin/forward: no nameservers found')
    const r = await helm(
      'upgrade',
      '--install',
      'dns2',
      `oci://${k.registry}/coredns`,
      '--version',
      '1.45.3',
      '--namespace',
      'dns2',
      '--create-namespace',
      '--wait',
      '--timeout',
      '3s',
    )
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/context deadline exceeded|timed out/)
    const pods = JSON.parse((await kubectl('-n', 'dns2', 'get', 'pods', '-o', 'json')).stdout) as {
      items: Array<{
        status: { containerStatuses: Array<{ state: { waiting?: { reason: string } }; lastState: { terminated?: { message?: string } } }> }
      }>
    }
    expect(pods.items.length).toBeGreaterThan(0)
    const status = pods.items[0]!.status.containerStatuses[0]!
    expect(status.state.waiting?.reason).toBe('CrashLoopBackOff')
    expect(status.lastState.terminated?.message).toBe('plugin/forward: no nameservers found')
    // the cause gone, the next restart runs: the pod turns ready without a new install
    crash.delete('coredns')
    const deadline = Date.now() + 15_000
    let ready = ''
    while (Date.now() < deadline && ready !== 'True') {
      ready = (await kubectl('-n', 'dns2', 'get', 'pods', '-o', 'jsonpath={.items[0].status.conditions[?(@.type=="Ready")].status}')).stdout
      await new Promise((r) => setTimeout(r, 200))
    }
    expect(ready).toBe('True')
  })
})
