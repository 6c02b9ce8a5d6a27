// A chart repository over HTTPS on loopback, as real helm reads one (pkg/repo/chartrepo.go,
// pkg/repo/index.go: GET <url>/index.yaml, then the entry's urls[0] relative to it; pkg/getter/
// httpgetter.go: TLS trust from --ca-file). It serves the cilium chart it builds (cilium.js) and
// flux-operator's (flux-operator.js); under /v2/ the same listener is an OCI registry of every
// simulated chart (oci.js).
import { createHash } from 'node:crypto'
import https from 'node:https'
import { stringify } from 'yaml'
import { ciliumChartFiles, CILIUM_DESCRIPTION, CILIUM_VERSIONS } from './cilium.js'
import { fluxOperatorChartFiles, FLUX_OPERATOR_DESCRIPTION, FLUX_OPERATOR_VERSIONS } from './flux-operator.js'
import { tgz } from '../tgz.js'
import { createOciRegistry } from './oci.js'

const CREATED = '2025-11-20T00:00:00Z'

/** what the repository serves: chart name → its versions, files and index fields */
const CHARTS = {
  cilium: {
    versions: CILIUM_VERSIONS,
    files: ciliumChartFiles,
    description: CILIUM_DESCRIPTION,
    home: 'https://cilium.io/',
    kubeVersion: '>= 1.21.0-0',
  },
  'flux-operator': {
    versions: FLUX_OPERATOR_VERSIONS,
    files: fluxOperatorChartFiles,
    description: FLUX_OPERATOR_DESCRIPTION,
    home: 'https://fluxcd.control-plane.io/',
    kubeVersion: '>= 1.30.0-0',
  },
}

/** name-version.tgz → { name, version, bytes }, built once */
function buildCharts() {
  const mtime = Math.floor(Date.parse(CREATED) / 1000)
  return new Map(
    Object.entries(CHARTS).flatMap(([name, c]) =>
      c.versions.map((v) => [`${name}-${v}.tgz`, { name, version: v, bytes: tgz(c.files(v), mtime) }]),
    ),
  )
}

function indexYaml(charts) {
  const entries = {}
  for (const [file, c] of charts) {
    const meta = CHARTS[c.name]
    ;(entries[c.name] ??= []).push({
      apiVersion: 'v2',
      appVersion: c.version,
      created: CREATED,
      description: meta.description,
      digest: createHash('sha256').update(c.bytes).digest('hex'),
      home: meta.home,
      kubeVersion: meta.kubeVersion,
      name: c.name,
      urls: [file],
      version: c.version,
    })
  }
  return stringify({ apiVersion: 'v1', entries, generated: CREATED })
}

/**
 * Listen on host:port (0: any free port) with the given server certificate; resolves to
 * { url, registry, close(), requests } (registry: host:port of the OCI registry; requests: the
 * paths asked for, in order).
 */
export function startChartRepo({ host = '127.0.0.1', port = 0, cert, key }) {
  const charts = buildCharts()
  const index = indexYaml(charts)
  const requests = []
  const oci = createOciRegistry()
  const srv = https.createServer({ cert, key }, (req, res) => {
    const path = new URL(req.url, 'https://x').pathname.replace(/^\/+/, '')
    requests.push(`${req.method} /${path}`)
    if (oci(req, res, path)) return
    const body = path === 'index.yaml' ? Buffer.from(index) : charts.get(path)?.bytes
    if (req.method !== 'GET' || !body) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found\n')
      return
    }
    res
      .writeHead(200, { 'content-type': path === 'index.yaml' ? 'text/yaml' : 'application/gzip', 'content-length': body.length })
      .end(body)
  })
  return new Promise((resolve, reject) => {
    srv.once('error', reject)
    srv.listen(port, host, () => {
      const a = srv.address()
      resolve({
        url: `https://${host}:${a.port}/`,
        registry: `${host}:${a.port}`,
        requests,
        close: () =>
          new Promise((r) => {
            srv.closeAllConnections?.()
            srv.close(() => r())
          }),
      })
    })
  })
}
