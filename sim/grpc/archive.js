// The kubeconfig as machined streams it: a gzipped tar holding one file named `kubeconfig`
// (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go Kubeconfig; talosctl reads the first entry).
import { gzipSync } from 'node:zlib'

function tarHeader(name, size, mtime) {
  const h = Buffer.alloc(512)
  const put = (text, offset, length) => h.write(text, offset, length, 'ascii')
  const octal = (n, length) => n.toString(8).padStart(length - 1, '0')
  put(name, 0, 100)
  put(octal(0o600, 8), 100, 8)
  put(octal(0, 8), 108, 8)
  put(octal(0, 8), 116, 8)
  put(octal(size, 12), 124, 12)
  put(octal(mtime, 12), 136, 12)
  put('        ', 148, 8) // checksum counts as spaces while summing
  put('0', 156, 1)
  put('ustar\u000000', 257, 8)
  let sum = 0
  for (const b of h) sum += b
  put(`${octal(sum, 7)}\u0000 `, 148, 8)
  return h
}

export function kubeconfigArchive(text, mtime = Math.floor(Date.now() / 1000)) {
  const body = Buffer.from(text, 'utf8')
  const pad = Buffer.alloc((512 - (body.length % 512)) % 512)
  return gzipSync(Buffer.concat([tarHeader('kubeconfig', body.length, mtime), body, pad, Buffer.alloc(1024)]))
}
