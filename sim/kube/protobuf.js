// Decoding of the protobuf bodies kubectl's typed clients send (`kubectl create namespace`,
// `create secret`, `create configmap`, `create serviceaccount` POST, `drain`'s evictions; `certificate approve` PUT
// application/vnd.kubernetes.protobuf). Only the kinds and fields those commands fill in;
// responses stay JSON (kubectl's Accept lists application/json too).

function fields(buf) {
  const out = []
  let i = 0
  const varint = () => {
    let result = 0n
    let shift = 0n
    for (;;) {
      const b = buf[i++]
      if (b === undefined) throw new Error('truncated protobuf')
      result |= BigInt(b & 0x7f) << shift
      if (!(b & 0x80)) return result
      shift += 7n
    }
  }
  while (i < buf.length) {
    const key = Number(varint())
    const no = key >> 3
    const wire = key & 7
    if (wire === 0) out.push({ no, value: varint() })
    else if (wire === 2) {
      const len = Number(varint())
      out.push({ no, bytes: buf.subarray(i, i + len) })
      i += len
    } else if (wire === 5) {
      out.push({ no, bytes: buf.subarray(i, i + 4) })
      i += 4
    } else if (wire === 1) {
      out.push({ no, bytes: buf.subarray(i, i + 8) })
      i += 8
    } else throw new Error(`unsupported wire type ${wire}`)
  }
  return out
}

const str = (f) => f.bytes.toString('utf8')
function map(fs, no, asBytes) {
  const m = {}
  for (const f of fs.filter((x) => x.no === no)) {
    const entry = fields(f.bytes)
    const k = entry.find((x) => x.no === 1)
    const v = entry.find((x) => x.no === 2)
    m[k ? str(k) : ''] = v ? (asBytes ? v.bytes.toString('base64') : str(v)) : ''
  }
  return Object.keys(m).length ? m : undefined
}

function objectMeta(buf) {
  const fs = fields(buf)
  const meta = {}
  const s = (no, name) => {
    const f = fs.find((x) => x.no === no)
    if (f && f.bytes.length) meta[name] = str(f)
  }
  s(1, 'name')
  s(2, 'generateName')
  s(3, 'namespace')
  s(6, 'resourceVersion')
  const labels = map(fs, 11)
  if (labels) meta.labels = labels
  const annotations = map(fs, 12)
  if (annotations) meta.annotations = annotations
  const fin = fs.filter((x) => x.no === 14).map(str)
  if (fin.length) meta.finalizers = fin
  return meta
}

const DECODERS = {
  Namespace: (fs) => {
    const spec = fs.find((x) => x.no === 2)
    const finalizers = spec
      ? fields(spec.bytes)
          .filter((x) => x.no === 1)
          .map(str)
      : []
    return finalizers.length ? { spec: { finalizers } } : {}
  },
  Secret: (fs) => {
    const o = {}
    const data = map(fs, 2, true)
    if (data) o.data = data
    const type = fs.find((x) => x.no === 3)
    if (type) o.type = str(type)
    const sd = map(fs, 4)
    if (sd) o.stringData = sd
    const imm = fs.find((x) => x.no === 5)
    if (imm) o.immutable = Boolean(imm.value)
    return o
  },
  ConfigMap: (fs) => {
    const o = {}
    const data = map(fs, 2)
    if (data) o.data = data
    const bin = map(fs, 3, true)
    if (bin) o.binaryData = bin
    return o
  },
  ServiceAccount: () => ({}),
  // `kubectl drain` POSTs one per pod to .../pods/{name}/eviction (k8s.io/api policy/v1
  // generated.proto: metadata 1, deleteOptions 2)
  Eviction: (fs) => {
    const opts = fs.find((x) => x.no === 2)
    return opts ? { deleteOptions: deleteOptionsOf(fields(opts.bytes)) } : {}
  },
  // `kubectl certificate approve|deny` PUTs the whole CSR to /approval with its condition added
  // (k8s.io/api certificates/v1 generated.proto: spec 2, status 3)
  CertificateSigningRequest: (fs) => {
    const o = {}
    const spec = fs.find((x) => x.no === 2)
    if (spec) {
      const sf = fields(spec.bytes)
      const one = (no) => sf.find((x) => x.no === no)
      const many = (no) => sf.filter((x) => x.no === no).map(str)
      o.spec = {
        ...(one(1) ? { request: one(1).bytes.toString('base64') } : {}),
        ...(one(7) ? { signerName: str(one(7)) } : {}),
        ...(one(8) ? { expirationSeconds: Number(one(8).value) } : {}),
        usages: many(5),
        ...(one(2) ? { username: str(one(2)) } : {}),
        ...(one(3) ? { uid: str(one(3)) } : {}),
        groups: many(4),
      }
    }
    const status = fs.find((x) => x.no === 3)
    if (status) {
      const conditions = fields(status.bytes)
        .filter((x) => x.no === 1)
        .map((c) => {
          const cf = fields(c.bytes)
          const text = (no) => (cf.find((x) => x.no === no) ? str(cf.find((x) => x.no === no)) : undefined)
          const out = { type: text(1), status: text(6) }
          for (const [no, name] of [
            [2, 'reason'],
            [3, 'message'],
          ])
            if (text(no) !== undefined) out[name] = text(no)
          for (const [no, name] of [
            [4, 'lastUpdateTime'],
            [5, 'lastTransitionTime'],
          ]) {
            const t = cf.find((x) => x.no === no)
            const seconds = t ? fields(t.bytes).find((x) => x.no === 1) : undefined
            if (seconds) out[name] = new Date(Number(seconds.value) * 1000).toISOString().replace(/\.\d+Z$/, 'Z')
          }
          return out
        })
      const certificate = fields(status.bytes).find((x) => x.no === 2)
      o.status = { conditions, ...(certificate ? { certificate: certificate.bytes.toString('base64') } : {}) }
    }
    return o
  },
}

// Returns the JSON form of the object, or throws (unsupported kind / bad bytes).
export function decodeProtobufObject(buf) {
  if (buf.length < 4 || buf.subarray(0, 4).toString('latin1') !== 'k8s\u0000')
    throw new Error('provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]')
  const unknown = fields(buf.subarray(4))
  const tm = unknown.find((x) => x.no === 1)
  const raw = unknown.find((x) => x.no === 2)
  const typeMeta = tm ? fields(tm.bytes) : []
  const apiVersion = typeMeta.find((x) => x.no === 1) ? str(typeMeta.find((x) => x.no === 1)) : ''
  const kind = typeMeta.find((x) => x.no === 2) ? str(typeMeta.find((x) => x.no === 2)) : ''
  const decode = DECODERS[kind]
  if (!decode) throw new Error(`protobuf bodies of kind ${kind || '(none)'} are not supported by the simulator; send JSON`)
  const fs = raw ? fields(raw.bytes) : []
  const meta = fs.find((x) => x.no === 1)
  return { apiVersion, kind, metadata: meta ? objectMeta(meta.bytes) : {}, ...decode(fs) }
}

// DeleteOptions' fields (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto): gracePeriodSeconds 1,
// propagationPolicy 4, dryRun 5. Returns the JSON form's fields.
function deleteOptionsOf(fs) {
  const o = {}
  const grace = fs.find((x) => x.no === 1 && x.value !== undefined)
  if (grace) o.gracePeriodSeconds = Number(BigInt.asIntN(64, grace.value))
  const prop = fs.find((x) => x.no === 4 && x.bytes)
  if (prop) o.propagationPolicy = str(prop)
  const dry = fs.filter((x) => x.no === 5 && x.bytes).map(str)
  if (dry.length) o.dryRun = dry
  return o
}

// The DeleteOptions body client-go's typed clients send with a DELETE (helm's release Secrets on
// uninstall, its resources with PropagationPolicy Background: pkg/kube/client.go deleteResource).
// Returns the JSON form.
export function decodeDeleteOptions(buf) {
  if (buf.length < 4 || buf.subarray(0, 4).toString('latin1') !== 'k8s\u0000')
    throw new Error('provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]')
  const unknown = fields(buf.subarray(4))
  const raw = unknown.find((x) => x.no === 2)
  const fs = raw ? fields(raw.bytes) : []
  return { kind: 'DeleteOptions', apiVersion: 'meta.k8s.io/v1', ...deleteOptionsOf(fs) }
}
