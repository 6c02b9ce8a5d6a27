// The kubeconfig as machined streams it: a gzipped tar holding one file named `kubeconfig`
// (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go Kubeconfig; talosctl reads the first entry).
import { tgz } from '../tgz.js'

export function kubeconfigArchive(text, mtime = Math.floor(Date.now() / 1000)) {
  return tgz([['kubeconfig', text]], mtime, 0o600)
}
