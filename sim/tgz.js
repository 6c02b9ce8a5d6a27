// A gzipped ustar archive: a chart as `helm package` writes it (pkg/chart/loader/archive.go reads it),
// and the kubeconfig machined streams (sim/grpc/archive.js).
import zlib from 'node:zlib'

function header(name, size, mtime, mode) {
  const h = Buffer.alloc(512)
  const put = (s, off, len) => h.write(s, off, Math.min(len, Buffer.byteLength(s)), 'utf8')
  const oct = (n, len) => n.toString(8).padStart(len - 1, '0') + '\0'
  put(name, 0, 100)
  put(oct(mode, 8), 100, 8)
  put(oct(0, 8), 108, 8)
  put(oct(0, 8), 116, 8)
  put(oct(size, 12), 124, 12)
  put(oct(mtime, 12), 136, 12)
  h.fill(' ', 148, 156)
  h.write('0', 156)
  put('ustar\u000000', 257, 8)
  let sum = 0
  for (const b of h) sum += b
  put(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8)
  return h
}

/** files: [[path, text]] → gzip(tar), each file with `mode` */
export function tgz(files, mtime = 0, mode = 0o644) {
  const parts = []
  for (const [name, text] of files) {
    if (Buffer.byteLength(name) > 100) throw new Error(`tar: name too long: ${name}`)
    const body = Buffer.from(text)
    parts.push(header(name, body.length, mtime, mode), body, Buffer.alloc((512 - (body.length % 512)) % 512))
  }
  parts.push(Buffer.alloc(1024))
  return zlib.gzipSync(Buffer.concat(parts))
}
