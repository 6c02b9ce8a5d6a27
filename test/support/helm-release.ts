// helm's own record of a release (pkg/storage/driver/secrets.go): a Secret
// `sh.helm.release.v1.<name>.v<revision>` labelled owner=helm, name, status and version, whose
// `release` is the base64 of the gzipped JSON release. Tests write one to leave a release as an
// interrupted helm leaves it.
import { gunzipSync, gzipSync } from 'node:zlib'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect } from 'vitest'

interface Kubectl {
  kubectl(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>
}

interface ReleaseBody {
  version: number
  info: { status: string; description?: string }
  [key: string]: unknown
}

const secretName = (name: string, revision: number): string => `sh.helm.release.v1.${name}.v${revision}`

/** the deployed revision of a release and its decoded body */
export async function deployedRelease(cluster: Kubectl, name: string, namespace: string): Promise<ReleaseBody> {
  const got = await cluster.kubectl(['-n', namespace, 'get', 'secrets', '-l', `owner=helm,name=${name},status=deployed`, '-o', 'json'])
  expect(got.code, got.stderr).toBe(0)
  const items = (JSON.parse(got.stdout) as { items: { data: { release: string } }[] }).items
  expect(items, `no deployed revision of ${namespace}/${name}`).toHaveLength(1)
  const helmBase64 = Buffer.from(items[0]!.data.release, 'base64').toString('utf8')
  return JSON.parse(gunzipSync(Buffer.from(helmBase64, 'base64')).toString('utf8')) as ReleaseBody
}

/** writes (creates or replaces) one revision of a release with the given status */
export async function writeRelease(cluster: Kubectl, namespace: string, body: ReleaseBody & { name: string }): Promise<void> {
  const secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'helm.sh/release.v1',
    metadata: {
      name: secretName(body.name, body.version),
      namespace,
      labels: { name: body.name, owner: 'helm', status: body.info.status, version: String(body.version) },
    },
    stringData: { release: gzipSync(JSON.stringify(body)).toString('base64') },
  }
  const file = join(mkdtempSync(join(tmpdir(), 'tb-release-')), 'release.json')
  writeFileSync(file, JSON.stringify(secret))
  const applied = await cluster.kubectl(['apply', '--server-side', '--force-conflicts', '-f', file])
  expect(applied.code, applied.stderr).toBe(0)
}
