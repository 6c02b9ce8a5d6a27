// Release storage as helm v3's Secret driver does it: one Secret per revision named
// sh.helm.release.v1.<name>.v<revision>, type helm.sh/release.v1, labels owner=helm,name,status,version,
// data.release = base64(gzip(JSON of the release)).
import zlib from 'node:zlib'

const OWNER = 'helm'

export const secretName = (name, version) => `sh.helm.release.v1.${name}.v${version}`

export function encodeRelease(rel) {
  const gz = zlib.gzipSync(Buffer.from(JSON.stringify(rel)), { level: 9 })
  return gz.toString('base64')
}

export function decodeRelease(data) {
  let b = Buffer.from(data, 'base64')
  if (b[0] === 0x1f && b[1] === 0x8b) b = zlib.gunzipSync(b)
  return JSON.parse(b.toString('utf8'))
}

function toSecret(rel) {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: secretName(rel.name, rel.version),
      namespace: rel.namespace,
      labels: { name: rel.name, owner: OWNER, status: rel.info.status, version: String(rel.version) },
    },
    type: 'helm.sh/release.v1',
    // a Secret's data is base64 again on the wire
    data: { release: Buffer.from(encodeRelease(rel)).toString('base64') },
  }
}

function fromSecret(s) {
  const inner = Buffer.from(s.data?.release || '', 'base64').toString('utf8')
  const rel = decodeRelease(inner)
  rel.namespace = rel.namespace || s.metadata.namespace
  return rel
}

/** All stored revisions (of one release when `name` is given), in namespace `ns` or all when null. */
export async function listReleases(client, ns, name) {
  const labelSelector = name ? `name=${name},owner=${OWNER}` : `owner=${OWNER}`
  const items = await client.list('Secret', ns || undefined, { labelSelector })
  const out = []
  for (const s of items) {
    if (s.type && s.type !== 'helm.sh/release.v1') continue
    try {
      out.push(fromSecret(s))
    } catch {
      /* not a release we can read */
    }
  }
  return out.sort((a, b) => a.version - b.version)
}

export async function createRelease(client, rel) {
  await client.create(toSecret(rel))
}

export async function updateRelease(client, rel) {
  const s = toSecret(rel)
  await client.patch('Secret', rel.namespace, s.metadata.name, { metadata: { labels: s.metadata.labels }, data: s.data })
}

export async function deleteRelease(client, rel) {
  await client.delete('Secret', rel.namespace, secretName(rel.name, rel.version))
}

/** Keep at most `max` revisions (helm's --history-max, default 10); 0 keeps all. */
export async function pruneHistory(client, revisions, max) {
  if (!max || revisions.length <= max) return
  const old = revisions.slice(0, revisions.length - max).filter((r) => r.info.status !== 'deployed')
  for (const r of old) await deleteRelease(client, r)
}

/** Go's time.ANSIC in UTC: "Mon Jan _2 15:04:05 2006". */
export function formatANSIC(iso) {
  const d = new Date(iso)
  const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
  const p = (n) => String(n).padStart(2, '0')
  return `${days[d.getUTCDay()]} ${months[d.getUTCMonth()]} ${String(d.getUTCDate()).padStart(2, ' ')} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} ${d.getUTCFullYear()}`
}

/** Go's time.Time.String() in UTC: "2006-01-02 15:04:05.999999999 +0000 UTC". */
export function formatGoTime(iso) {
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d+))?Z$/.exec(new Date(iso).toISOString())
  const frac = (m[3] || '').replace(/0+$/, '')
  return `${m[1]} ${m[2]}${frac ? '.' + frac : ''} +0000 UTC`
}
