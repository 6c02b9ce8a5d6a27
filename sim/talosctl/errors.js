// Go-shaped error values: gRPC status errors, per-node errors, hashicorp/go-multierror lists.
import { io } from '../cli-io.js'

export class RpcError extends Error {
  constructor(code, desc) {
    super(`rpc error: code = ${code} desc = ${desc}`)
    this.code = code
    this.desc = desc
  }
}

/** A Go string as %q prints it (enough for ASCII/UTF-8 text). */
export function goQuote(s) {
  return '"' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\t/g, '\\t').replace(/\r/g, '\\r') + '"'
}

/** An Unavailable transport error, as grpc-go wraps dial/handshake failures. */
export function unavailable(inner) {
  return new RpcError('Unavailable', `connection error: desc = ${goQuote(inner)}`)
}

export function multiError(errors) {
  const n = errors.length
  const head = n === 1 ? '1 error occurred:' : `${n} errors occurred:`
  return new Error(head + '\n' + errors.map((e) => `\t* ${e.message ?? e}`).join('\n') + '\n\n')
}

/** Turn a wire error {code, message} into an RpcError. */
export function fromWire(e) {
  return new RpcError(e.code ?? 'Unknown', e.message ?? '')
}

/** Split a reply's messages into good ones and a multierror of `<node>: <err>` (client.FilterMessages). */
export function filterMessages(messages) {
  const good = []
  const errs = []
  for (const m of messages) {
    if (m.error) errs.push(new Error(`${m.node}: ${fromWire(m.error).message}`))
    else good.push(m)
  }
  return { good, err: errs.length ? multiError(errs) : null }
}

export const warn = (text) => io().stderr.write(`WARNING: ${text}\n`)
