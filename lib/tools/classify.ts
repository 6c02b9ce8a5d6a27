import type { ErrorKind } from '../core/errors.ts'
import type { ToolResult } from './exec.ts'

interface Rule {
  kind: ErrorKind
  pattern: RegExp
  /** what the text means, put before it */
  means?: string
}

/**
 * Ordered: the first match wins. The texts are what the real talosctl, kubectl, helm and flux print
 * (test/unit/classify.test.ts holds each as a row; docs/failures.md names what each means).
 */
const RULES: readonly Rule[] = [
  // Go crypto/x509 CertificateInvalidError (Expired): the client's time is outside the certificate's validity
  {
    kind: 'clock',
    pattern: /x509: certificate has expired or is not yet valid/,
    means: "the node's certificate is not valid at this workstation's time (the node's clock or this one is off)",
  },
  // Go crypto/x509 HostnameError: the address dialled is not among the certificate's SANs
  {
    kind: 'cert-sans',
    pattern: /x509: certificate is valid for .*, not |x509: cannot validate certificate for .* because it doesn't contain any IP SANs/,
    means: "the address used is not in the node's certificate",
  },
  { kind: 'configured', pattern: /tls: certificate required/ },
  {
    kind: 'pki-mismatch',
    pattern:
      /possibly because of .*verification failure|tls: unknown certificate authority|tls: bad certificate|expired certificate|doesn't match the provided fingerprints/,
  },
  { kind: 'maintenance', pattern: /x509: certificate signed by unknown authority/ },
  { kind: 'unauthorized', pattern: /code = PermissionDenied desc = not authorized/ },
  { kind: 'disk-mismatch', pattern: /no disks matched the expression/ },
  {
    kind: 'wrong-node',
    pattern:
      /bootstrap can only be performed on a control plane node|bootstrap is only available on control plane nodes|only available on control plane nodes/,
  },
  // etcd's strict reconfiguration check (etcdserver/server.go mayRemoveMember, ErrUnhealthy): a voting
  // member's removal is refused while another voter is down or connected for less than 5 s (its
  // HealthInterval); it clears by itself once the peers settle (Talos's own leave retries it for 5 min)
  {
    kind: 'not-ready-yet',
    pattern: /etcdserver: unhealthy cluster/,
    means: 'etcd refuses to change its membership while another member is down or has been connected for less than 5 s',
  },
  // upgrade:talos (docs/day2-design.md 1.1, 1.3): the installer could not be pulled (legacy: validated
  // inside the Upgrade RPC; v1.13: ImageService.Pull's NotFound), and the node's refusals of the upgrade
  {
    kind: 'image-missing',
    pattern: /error validating installer image|error pulling upgrade image|NotFound error pulling image/,
    means: 'the node could not pull the installer image',
  },
  {
    kind: 'upgrade-refused',
    pattern: /error validating etcd for upgrade|upgrade failed with exit code|machine is not installed|Talos is not installed/,
    means: 'the node refused the upgrade',
  },
  // one change at a time on a node (v1alpha1_server.go ApplyConfiguration: applyConfigMu.TryLock, and the
  // refusal while an apply reboots it; lifecycle.go's install lock; the etcd upgrade mutex)
  {
    kind: 'busy',
    pattern:
      /another apply configuration is already in progress|configuration was already applied and node is rebooting|another installation\/upgrade is already in progress|mutex: Locked by another session/,
    means: 'the node is busy with another change',
  },
  {
    kind: 'not-ready-yet',
    pattern:
      /bootstrap is not available yet|time is not in sync yet|failed to create etcd client|etcd is not running|is not registered on any nodes/,
  },
  {
    kind: 'config-invalid',
    pattern:
      /configuration validation failed|code = InvalidArgument|install instructions are required|either install disk or diskSelector|can't be used together|failed to parse config|unknown machine type|doesn't contain v1alpha1 config/,
  },
  { kind: 'timeout', pattern: /context deadline exceeded|i\/o timeout|timed out waiting for the condition|Client\.Timeout exceeded/ },
  {
    kind: 'unreachable',
    pattern:
      /connection refused|no route to host|connection reset|network is unreachable|code = Unavailable|Unable to connect to the server|cluster unreachable|error reading from server: EOF|ServiceUnavailable|the server is currently unable/i,
  },
]

/** Turns a failed tool call into a kind and the one line that says why. */
export function classify(result: ToolResult): { kind: ErrorKind; message: string } {
  if (result.aborted) return { kind: 'interrupted', message: 'interrupted' }
  if (result.timedOut) {
    return {
      kind: 'timeout',
      message: `${result.call.tool} ${result.call.args[0] ?? ''} did not answer within ${Math.round(result.durationMs / 1000)}s`,
    }
  }
  const text = `${result.stderr}\n${result.stdout}`
  const message = essence(result.stderr || result.stdout) || `${result.call.tool} exited with code ${result.exitCode}`
  for (const rule of RULES) {
    if (rule.pattern.test(text)) return { kind: rule.kind, message: rule.means ? `${rule.means}: ${message}` : message }
  }
  return { kind: 'unknown', message }
}

/** The meaningful part of a tool's error output: no usage block, no multierror framing, one line. */
export function essence(stderr: string): string {
  const withoutUsage = stderr.split(/\n\s*\nUsage:/)[0] ?? stderr
  return withoutUsage
    .replace(/\d+ errors? occurred:/g, '')
    .split('\n')
    .map((l) => l.trim().replace(/^\* /, ''))
    .filter((l) => l && !/^WARNING: .*server version .* is older than client/.test(l))
    .join(' ')
    .replace(/\s+/g, ' ')
    .slice(0, 500)
}
