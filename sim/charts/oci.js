// An OCI registry of helm charts, as real helm (and helmfile through it) pulls `oci://` charts:
// the OCI distribution spec's read side (GET /v2/, manifests by tag or digest, blobs by digest,
// tags/list; HEAD of each; errors as {errors:[{code,message,detail}]}) and helm's push format
// (helm pkg/registry/constants.go, client.go: an image manifest whose config is the chart's
// metadata as application/vnd.cncf.helm.config.v1+json and whose one layer is the chart archive
// as application/vnd.cncf.helm.chart.content.v1.tar+gzip; tags are versions with `+` as `_`).
// Every chart the simulator knows is served under any repository path ending in its name
// (oci://<registry>/home-operations/charts-mirror/cilium and oci://<registry>/cilium alike) and at
// any version asked: the chart is built for that version. Served on the chart repository's HTTPS
// listener (repo.js), so the same CA is the trust.
import { createHash } from 'node:crypto'
import { parse } from 'yaml'
import { ciliumChartFiles, CILIUM_VERSIONS } from './cilium.js'
import { fluxOperatorChartFiles, FLUX_OPERATOR_VERSIONS } from './flux-operator.js'
import { APP_CHARTS, appChartFiles } from './apps.js'
import { tgz } from '../tgz.js'

const CREATED = '2025-11-20T00:00:00Z'
export const HELM_CONFIG_TYPE = 'application/vnd.cncf.helm.config.v1+json'
export const HELM_CHART_TYPE = 'application/vnd.cncf.helm.chart.content.v1.tar+gzip'
const MANIFEST_TYPE = 'application/vnd.oci.image.manifest.v1+json'

/** chart name → (version) → files; the tags/list a repository answers with */
const SERVED = {
  cilium: { files: ciliumChartFiles, tags: CILIUM_VERSIONS },
  'flux-operator': { files: fluxOperatorChartFiles, tags: FLUX_OPERATOR_VERSIONS },
  ...Object.fromEntries(Object.keys(APP_CHARTS).map((name) => [name, { files: (v) => appChartFiles(name, v), tags: ['1.0.0'] }])),
}
export const OCI_CHARTS = Object.keys(SERVED)

// a version helm would accept as a chart version (Masterminds semver, optional leading v)
const SEMVER = /^v?\d+(\.\d+){0,2}(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/
const sha256 = (b) => `sha256:${createHash('sha256').update(b).digest('hex')}`

/** Returns handle(req, res, path): true when the request was a registry one (path under v2/). */
export function createOciRegistry() {
  const blobs = new Map() // digest → { bytes, type }
  const manifests = new Map() // `${chart}:${version}` → { bytes, digest }
  const asked = new Map() // chart → versions pulled, listed by tags/list after the defaults

  function build(chart, version) {
    const key = `${chart}:${version}`
    if (manifests.has(key)) return manifests.get(key)
    const files = SERVED[chart].files(version)
    const chartYaml = parse(files.find(([f]) => f === `${chart}/Chart.yaml`)[1])
    const layer = tgz(files, Math.floor(Date.parse(CREATED) / 1000))
    const config = Buffer.from(JSON.stringify(chartYaml))
    const blob = (bytes, type) => {
      const digest = sha256(bytes)
      blobs.set(digest, { bytes, type })
      return { mediaType: type, digest, size: bytes.length }
    }
    const manifest = {
      schemaVersion: 2,
      mediaType: MANIFEST_TYPE,
      config: blob(config, HELM_CONFIG_TYPE),
      layers: [blob(layer, HELM_CHART_TYPE)],
      annotations: {
        'org.opencontainers.image.created': CREATED,
        'org.opencontainers.image.description': chartYaml.description ?? '',
        'org.opencontainers.image.title': chart,
        'org.opencontainers.image.version': version,
      },
    }
    const bytes = Buffer.from(JSON.stringify(manifest))
    const built = { bytes, digest: sha256(bytes) }
    blobs.set(built.digest, { bytes, type: MANIFEST_TYPE })
    manifests.set(key, built)
    return built
  }

  const error = (res, status, code, message, detail) =>
    res
      .writeHead(status, { 'content-type': 'application/json', 'docker-distribution-api-version': 'registry/2.0' })
      .end(JSON.stringify({ errors: [{ code, message, detail }] }))

  function send(req, res, bytes, type, digest) {
    res.writeHead(200, {
      'content-type': type,
      'content-length': bytes.length,
      'docker-content-digest': digest,
      'docker-distribution-api-version': 'registry/2.0',
    })
    res.end(req.method === 'HEAD' ? undefined : bytes)
  }

  return function handle(req, res, path) {
    if (path !== 'v2' && !path.startsWith('v2/')) return false
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      error(res, 405, 'UNSUPPORTED', 'the operation is unsupported')
      return true
    }
    if (path === 'v2' || path === 'v2/') {
      res.writeHead(200, { 'content-type': 'application/json', 'docker-distribution-api-version': 'registry/2.0' }).end('{}')
      return true
    }
    const m = /^v2\/(.+)\/(manifests|blobs|tags)\/([^/]+)$/.exec(path)
    if (!m) {
      error(res, 404, 'NOT_FOUND', 'not found')
      return true
    }
    const [, repository, what, ref] = m
    const chart = repository.split('/').pop()
    if (!SERVED[chart]) {
      error(res, 404, 'NAME_UNKNOWN', 'repository name not known to registry', { name: repository })
      return true
    }
    if (what === 'tags') {
      if (ref !== 'list') error(res, 404, 'NOT_FOUND', 'not found')
      else {
        const tags = [...new Set([...SERVED[chart].tags, ...(asked.get(chart) ?? [])])].map((v) => v.replaceAll('+', '_'))
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ name: repository, tags }))
      }
      return true
    }
    if (ref.startsWith('sha256:')) {
      const found = blobs.get(ref)
      if (!found)
        error(res, 404, what === 'blobs' ? 'BLOB_UNKNOWN' : 'MANIFEST_UNKNOWN', `${what === 'blobs' ? 'blob' : 'manifest'} unknown`, {
          digest: ref,
        })
      else send(req, res, found.bytes, found.type, ref)
      return true
    }
    const version = ref.replaceAll('_', '+')
    if (what !== 'manifests' || !SEMVER.test(version)) {
      error(res, 404, 'MANIFEST_UNKNOWN', 'manifest unknown', { tag: ref })
      return true
    }
    const built = build(chart, version)
    asked.set(chart, [...new Set([...(asked.get(chart) ?? []), version])])
    send(req, res, built.bytes, MANIFEST_TYPE, built.digest)
    return true
  }
}
