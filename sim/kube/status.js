// metav1.Status errors, shaped as kube-apiserver sends them (k8s.io/apimachinery pkg/api/errors/errors.go).

export class ApiError extends Error {
  constructor(code, reason, message, details = {}) {
    super(message)
    this.code = code
    this.reason = reason
    this.details = details
  }

  toStatus() {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      details: this.details,
      code: this.code,
    }
  }
}

// "secrets" or "deployments.apps" as the messages spell a resource.
export const qualified = (def) => (def.group ? `${def.plural}.${def.group}` : def.plural)

function details(def, name) {
  const d = { name, kind: def.plural }
  if (def.group) d.group = def.group
  return d
}

export const notFound = (def, name) => new ApiError(404, 'NotFound', `${qualified(def)} "${name}" not found`, details(def, name))
export const alreadyExists = (def, name) =>
  new ApiError(409, 'AlreadyExists', `${qualified(def)} "${name}" already exists`, details(def, name))
export const conflict = (def, name) =>
  new ApiError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualified(def)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    details(def, name),
  )
export const noRoute = () => new ApiError(404, 'NotFound', 'the server could not find the requested resource', {})
export const badRequest = (message) => new ApiError(400, 'BadRequest', message, {})
export const invalid = (def, name, causeText) =>
  new ApiError(422, 'Invalid', `${def.kind} "${name}" is invalid: ${causeText}`, {
    name,
    kind: def.kind,
    ...(def.group ? { group: def.group } : {}),
  })
export const methodNotAllowed = () =>
  new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {})
export const unavailable = (message) => new ApiError(503, 'ServiceUnavailable', message, {})
export const expired = (requested, oldest) => new ApiError(410, 'Expired', `too old resource version: ${requested} (${oldest})`, {})
