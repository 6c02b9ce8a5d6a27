import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { parseDocument } from 'yaml'

/** The API server URL a kubeconfig points at (its first cluster). */
export function kubeconfigServer(path: string): string | undefined {
  const doc = parseDocument(readFileSync(path, 'utf8'))
  const server = doc.getIn(['clusters', 0, 'cluster', 'server'])
  return typeof server === 'string' ? server : undefined
}

/** Points every cluster of the kubeconfig at `server`, keeping the file private (0600). */
export function setKubeconfigServer(path: string, server: string): void {
  const doc = parseDocument(readFileSync(path, 'utf8'))
  const clusters = doc.get('clusters')
  const count = Array.isArray((clusters as { items?: unknown[] } | undefined)?.items) ? ((clusters as { items: unknown[] }).items.length) : 0
  for (let i = 0; i < count; i++) doc.setIn(['clusters', i, 'cluster', 'server'], server)
  writeFileSync(path, String(doc), { mode: 0o600 })
  chmodSync(path, 0o600)
}

export function apiUrl(host: string): string {
  return `https://${host.includes(':') ? `[${host}]` : host}:6443`
}
