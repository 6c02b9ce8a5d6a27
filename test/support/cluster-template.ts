// A repository shaped like onedr0p/cluster-template, written by the tests (never copied from it):
// the bootstrap helmfile of either era and the kubernetes/apps/<namespace>/<app>/app/ files its
// templates read (the chart from ocirepository.yaml, the values from helmrelease.yaml).
//   talhelper era: bootstrap/helmfile.d/00-crds.yaml, 01-apps.yaml (chart and version in the file),
//                  templates/values.yaml.gotmpl;
//   topf era:      bootstrap/helmfile/{crds,apps,default}.yaml, templates/release.yaml.gotmpl and
//                  values.yaml.gotmpl (chart and version read from each app's OCIRepository).
// Chart references are public ones (oci://ghcr.io/…, oci://quay.io/…, oci://mirror.gcr.io/…) and
// are rewritten to the simulator's registry keeping their path, as the hidden checks do.
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { stringify } from 'yaml'
// @ts-ignore plain JS: the simulator's cilium values (the Talos guide's)
import { CILIUM_VALUES } from '../../sim/writer.js'

export type Era = 'talhelper' | 'topf'

interface App {
  namespace: string
  name: string
  chart: string
  version: string
  needs?: string[]
  values: Record<string, unknown>
}

/** the releases cluster-template installs before Flux, with the values its helmreleases carry */
export function bootstrapApps(fluxUrl: string): App[] {
  return [
    {
      namespace: 'kube-system',
      name: 'cilium',
      chart: 'oci://quay.io/cilium/charts/cilium',
      version: '1.19.4',
      // kube-proxy-free through KubePrism, as the template's machine configs need (the Talos guide's values)
      values: { ...(CILIUM_VALUES as Record<string, unknown>), k8sServiceHost: '127.0.0.1', operator: { replicas: 1 } },
    },
    {
      namespace: 'kube-system',
      name: 'coredns',
      chart: 'oci://ghcr.io/coredns/charts/coredns',
      version: '1.45.2',
      needs: ['kube-system/cilium'],
      values: { fullnameOverride: 'coredns', k8sAppLabelOverride: 'kube-dns', service: { name: 'kube-dns', clusterIP: '127.96.0.10' } },
    },
    {
      namespace: 'kube-system',
      name: 'spegel',
      chart: 'oci://ghcr.io/spegel-org/helm-charts/spegel',
      version: '0.7.0',
      needs: ['kube-system/coredns'],
      values: { spegel: { containerdSock: '/run/containerd/containerd.sock' } },
    },
    {
      namespace: 'cert-manager',
      name: 'cert-manager',
      chart: 'oci://quay.io/jetstack/charts/cert-manager',
      version: 'v1.20.2',
      needs: ['kube-system/spegel'],
      values: { crds: { enabled: true } },
    },
    {
      namespace: 'flux-system',
      name: 'flux-operator',
      chart: 'oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator',
      version: '0.49.0',
      needs: ['cert-manager/cert-manager'],
      values: { serviceMonitor: { create: false } },
    },
    {
      namespace: 'flux-system',
      name: 'flux-instance',
      chart: 'oci://ghcr.io/controlplaneio-fluxcd/charts/flux-instance',
      version: '0.49.0',
      needs: ['flux-system/flux-operator'],
      values: {
        instance: {
          components: ['source-controller', 'kustomize-controller', 'helm-controller', 'notification-controller'],
          sync: { kind: 'GitRepository', url: fluxUrl, ref: 'refs/heads/main', path: 'kubernetes/flux/cluster' },
        },
      },
    },
  ]
}

const CRD_CHARTS = [
  { namespace: 'network', name: 'cloudflare-dns', chart: 'oci://ghcr.io/home-operations/charts-mirror/external-dns', version: '1.21.1' },
  { namespace: 'network', name: 'envoy-gateway', chart: 'oci://mirror.gcr.io/envoyproxy/gateway-helm', version: 'v1.8.0' },
  {
    namespace: 'observability',
    name: 'prometheus-operator-crds',
    chart: 'oci://ghcr.io/prometheus-community/charts/prometheus-operator-crds',
    version: '29.0.0',
  },
]

/** oci://<public registry>/<path> → oci://<registry>/<path> */
export const toRegistry = (chart: string, registry: string): string =>
  chart.replace(/^oci:\/\/(ghcr\.io|quay\.io|mirror\.gcr\.io)\//, `oci://${registry}/`)

function write(file: string, text: string): void {
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(file, text)
}

const yamlDoc = (o: unknown): string => `---\n${stringify(o, { lineWidth: 0 })}`

/**
 * Writes the repository under `root` (its .git marks the top the product searches up to) with the
 * charts served by `registry`. `apps` defaults to bootstrapApps.
 */
export function writeClusterTemplate(
  root: string,
  era: Era,
  registry: string,
  apps: App[] = bootstrapApps('ssh://git@127.0.0.1/fleet.git'),
): void {
  mkdirSync(join(root, '.git'), { recursive: true })
  for (const app of [...apps, ...CRD_CHARTS.map((c) => ({ ...c, values: {} }))]) {
    const appDir = join(root, 'kubernetes', 'apps', app.namespace, app.name, 'app')
    write(
      join(appDir, 'helmrelease.yaml'),
      yamlDoc({
        apiVersion: 'helm.toolkit.fluxcd.io/v2',
        kind: 'HelmRelease',
        metadata: { name: app.name },
        spec: { chartRef: { kind: 'OCIRepository', name: app.name }, interval: '1h', values: app.values },
      }),
    )
    write(
      join(appDir, 'ocirepository.yaml'),
      yamlDoc({
        apiVersion: 'source.toolkit.fluxcd.io/v1',
        kind: 'OCIRepository',
        metadata: { name: app.name },
        spec: {
          interval: '15m',
          layerSelector: { mediaType: 'application/vnd.cncf.helm.chart.content.v1.tar+gzip', operation: 'copy' },
          ref: { tag: app.version },
          url: toRegistry(app.chart, registry),
        },
      }),
    )
  }
  const needs = (app: App): Record<string, unknown> => (app.needs ? { needs: app.needs } : {})
  if (era === 'talhelper') {
    const dir = join(root, 'bootstrap', 'helmfile.d')
    write(
      join(dir, '00-crds.yaml'),
      yamlDoc({
        helmDefaults: { args: ['--include-crds', '--no-hooks'] },
        releases: CRD_CHARTS.map((c) => ({
          name: c.name,
          namespace: c.namespace,
          chart: toRegistry(c.chart, registry),
          version: c.version,
        })),
      }),
    )
    write(
      join(dir, '01-apps.yaml'),
      yamlDoc({
        helmDefaults: { cleanupOnFail: true, wait: true, waitForJobs: true },
        releases: apps.map((a) => ({
          name: a.name,
          namespace: a.namespace,
          chart: toRegistry(a.chart, registry),
          version: a.version,
          values: ['./templates/values.yaml.gotmpl'],
          ...needs(a),
        })),
      }),
    )
    write(
      join(dir, 'templates', 'values.yaml.gotmpl'),
      '{{ (fromYaml (readFile (printf "../../../kubernetes/apps/%s/%s/app/helmrelease.yaml" .Release.Namespace .Release.Name))).spec.values | toYaml }}\n',
    )
    return
  }
  const dir = join(root, 'bootstrap', 'helmfile')
  const inherit = { inherit: [{ template: 'default' }] }
  write(
    join(dir, 'default.yaml'),
    yamlDoc({
      templates: {
        default: {
          chart: '{{ (fromYaml (tpl (readFile "./templates/release.yaml.gotmpl") .)).chart }}',
          version: '{{ (fromYaml (tpl (readFile "./templates/release.yaml.gotmpl") .)).version }}',
          values: ['./templates/values.yaml.gotmpl'],
        },
      },
    }),
  )
  write(
    join(dir, 'apps.yaml'),
    yamlDoc({
      helmDefaults: { cleanupOnFail: true, forceConflicts: true, wait: true, waitForJobs: true },
      bases: ['default.yaml'],
      releases: apps.map((a) => ({ name: a.name, namespace: a.namespace, ...inherit, ...needs(a) })),
    }),
  )
  write(
    join(dir, 'crds.yaml'),
    yamlDoc({
      helmDefaults: { args: ['--include-crds', '--no-hooks'] },
      bases: ['default.yaml'],
      releases: CRD_CHARTS.map((c) => ({ name: c.name, namespace: c.namespace, ...inherit })),
    }),
  )
  write(
    join(dir, 'templates', 'release.yaml.gotmpl'),
    [
      '{{- $oci := fromYaml (readFile (printf "../../kubernetes/apps/%s/%s/app/ocirepository.yaml" .Release.Namespace .Release.Name)) -}}',
      'chart: {{ $oci.spec.url }}',
      'version: {{ $oci.spec.ref.tag }}',
      '',
    ].join('\n'),
  )
  write(
    join(dir, 'templates', 'values.yaml.gotmpl'),
    '{{ (fromYaml (readFile (printf "../../../kubernetes/apps/%s/%s/app/helmrelease.yaml" .Release.Namespace .Release.Name))).spec.values | toYaml }}\n',
  )
}
