// gRPC-style errors the node API returns ({code, message}); the CLI prints
// `rpc error: code = <code> desc = <message>`.
export class RpcError extends Error {
  constructor(code, message) {
    super(message)
    this.code = code
  }
  toJSON() {
    return { code: this.code, message: this.message }
  }
  toString() {
    return `rpc error: code = ${this.code} desc = ${this.message}`
  }
}
export const rpc = (code, message) => new RpcError(code, message)

/** hashicorp/go-multierror text */
export function multierror(errors) {
  const n = errors.length
  return `${n} error${n === 1 ? '' : 's'} occurred:\n${errors.map((e) => `\t* ${e}`).join('\n')}\n\n`
}

/** what a grpc-go client sees when dialing an address fails */
export const dialRefused = (ip) =>
  `connection error: desc = "transport: Error while dialing: dial tcp ${ip}:50000: connect: connection refused"`
export const unknownAuthority = (mismatch) =>
  `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority${
    mismatch
      ? ' (possibly because of \\"x509: Ed25519 verification failure\\" while trying to verify candidate authority certificate \\"talos\\")'
      : ''
  }"`
