import { describe, expect, it } from 'vitest'
import { classify, essence } from '../../lib/tools/classify.js'
import { isTransient, type ErrorKind } from '../../lib/core/errors.js'
import type { ToolResult } from '../../lib/tools/exec.js'

function failed(stderr: string, extra: Partial<ToolResult> = {}): ToolResult {
  return {
    call: { tool: 'talosctl', args: ['get'] },
    ok: false,
    exitCode: 1,
    stdout: '',
    stderr,
    durationMs: 10,
    timedOut: false,
    aborted: false,
    ...extra,
  }
}

const unavailable = (desc: string): string => `rpc error: code = Unavailable desc = connection error: desc = "${desc}"`

// Every error text of docs/design.md "What the real tools do" (talosctl: connection outcomes and the bootstrap checks of
// internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go in siderolabs/talos), with the kind it must get.
const CASES: Array<[string, ErrorKind]> = [
  [
    `error executing bootstrap: ${unavailable('transport: Error while dialing: dial tcp 127.0.0.2:50000: connect: connection refused')}`,
    'unreachable',
  ],
  [unavailable('transport: Error while dialing: dial tcp 127.0.0.2:50000: i/o timeout'), 'timeout'],
  [unavailable('transport: Error while dialing: dial tcp 127.0.0.2:50000: connect: no route to host'), 'unreachable'],
  [unavailable('error reading server preface: remote error: tls: certificate required'), 'configured'],
  [
    unavailable(
      'transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority',
    ),
    'maintenance',
  ],
  [
    unavailable(
      'transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of \\"x509: Ed25519 verification failure\\" while trying to verify candidate authority certificate \\"talos\\")',
    ),
    'pki-mismatch',
  ],
  [unavailable('error reading server preface: remote error: tls: unknown certificate authority'), 'pki-mismatch'],
  [
    unavailable(
      'transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-11-26T14:00:00Z is before 2026-11-26T16:00:00Z',
    ),
    'clock',
  ],
  [
    unavailable(
      'transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate is valid for 10.0.0.21, 127.0.0.1, ::1, not 192.0.2.21',
    ),
    'cert-sans',
  ],
  [unavailable('error reading server preface: remote error: tls: expired certificate'), 'pki-mismatch'],
  ["error applying new configuration: leaf peer certificate doesn't match the provided fingerprints: [abc]", 'pki-mismatch'],
  [
    'error applying new configuration: rpc error: code = InvalidArgument desc = configuration validation failed: 1 error occurred:\n\t* install instructions are required in "metal" mode\n\n',
    'config-invalid',
  ],
  [
    'error applying new configuration: rpc error: code = InvalidArgument desc = runtime configuration validation failed: 1 error occurred:\n\t* no disks matched the expression: disk.size >= 100000000000u\n\n',
    'disk-mismatch',
  ],
  [
    "1 error occurred:\n\t* v1alpha1.Config: 1 error occurred:\n\t* install.extraKernelArgs and install.grubUseUKICmdline can't be used together\n\n",
    'config-invalid',
  ],
  ['error applying new configuration: rpc error: code = Unknown desc = failed to parse config: yaml: line 3', 'config-invalid'],
  [
    'error executing bootstrap: 1 error occurred:\n\t* 127.0.0.2: rpc error: code = FailedPrecondition desc = bootstrap is not available yet\n\n',
    'not-ready-yet',
  ],
  ['error executing bootstrap: rpc error: code = FailedPrecondition desc = time is not in sync yet', 'not-ready-yet'],
  [
    'error executing bootstrap: rpc error: code = FailedPrecondition desc = bootstrap can only be performed on a control plane node',
    'wrong-node',
  ],
  ['error executing bootstrap: rpc error: code = Unimplemented desc = bootstrap is only available on control plane nodes', 'wrong-node'],
  ['rpc error: code = PermissionDenied desc = not authorized', 'unauthorized'],
  ['error getting version: rpc error: code = Unavailable desc = error reading from server: EOF', 'unreachable'],
  ['Error: UPGRADE FAILED: context deadline exceeded', 'timeout'],
  [
    'Error: Kubernetes cluster unreachable: Get "https://127.0.0.2:6443/version": dial tcp 127.0.0.2:6443: connect: connection refused',
    'unreachable',
  ],
  ['error: timed out waiting for the condition on nodes/wrkr-1', 'timeout'],
  ['something nobody has seen before', 'unknown'],
  // as the real talosctl v1.12.11 and helm v3.21.4 print them against the simulator
  // (test/sim/talosctl-ops.test.ts, test/sim/talosctl-real.test.ts, test/sim/helm.test.ts)
  [`${unavailable('transport: Error while dialing: dial tcp 127.31.1.99:50000: connect: connection refused')}\n`, 'unreachable'],
  ['1 error occurred:\n\t* rpc error: code = DeadlineExceeded desc = context deadline exceeded\n\n\n', 'timeout'],
  [
    'error listing services: 1 error occurred:\n\t* 127.31.1.21: rpc error: code = Unavailable desc = error reading from server: EOF\n\n\n',
    'unreachable',
  ],
  ['error executing reset: rpc error: code = PermissionDenied desc = not authorized\n', 'unauthorized'],
  // not retried: the bootstrap phase reads it as "already bootstrapped" (lib/phases/etcd.ts)
  [
    'error executing bootstrap: 1 error occurred:\n\t* 127.37.1.11: rpc error: code = AlreadyExists desc = etcd data directory is not empty\n\n\n',
    'unknown',
  ],
  // etcd's strict reconfiguration check as machined wraps it (v1alpha1_server.go EtcdRemoveMemberByID,
  // internal/pkg/etcd RemoveMemberByMemberID): transient, it clears once every peer has been connected 5 s
  [
    'error removing member: 1 error occurred:\n\t* 127.0.0.2: rpc error: code = Unknown desc = failed to remove member: failed to remove member 1311768467294899695: etcdserver: unhealthy cluster\n\n\n',
    'not-ready-yet',
  ],
  // one change at a time on a node (day 2): retried, never a failure of the change itself
  [
    'error applying new configuration: rpc error: code = FailedPrecondition desc = another apply configuration is already in progress',
    'busy',
  ],
  [
    'error applying new configuration: rpc error: code = FailedPrecondition desc = configuration was already applied and node is rebooting, cannot apply more configuration changes until next reboot',
    'busy',
  ],
  ['Error: release: not found\n', 'unknown'],
  ['Error: uninstall: Release not loaded: cilium: release: not found\n', 'unknown'],
]

describe('classify', () => {
  it.each(CASES)('%s -> %s', (stderr, kind) => {
    expect(classify(failed(stderr)).kind).toBe(kind)
  })

  it('a call killed at its deadline is a timeout, an aborted one interrupted', () => {
    expect(classify(failed('', { timedOut: true, exitCode: null, durationMs: 30_000 })).kind).toBe('timeout')
    expect(classify(failed('', { aborted: true, exitCode: null })).kind).toBe('interrupted')
  })

  it('only waiting kinds are retried', () => {
    expect(isTransient('unreachable')).toBe(true)
    expect(isTransient('timeout')).toBe(true)
    expect(isTransient('not-ready-yet')).toBe(true)
    expect(isTransient('busy')).toBe(true)
    for (const kind of ['configured', 'pki-mismatch', 'config-invalid', 'disk-mismatch', 'unknown'] as const)
      expect(isTransient(kind)).toBe(false)
  })

  it("names etcd's unhealthy-cluster refusal of a membership change when it persists past the retries", () => {
    const { kind, message } = classify(
      failed(
        'rpc error: code = Unknown desc = failed to remove member: failed to remove member 1311768467294899695: etcdserver: unhealthy cluster\n',
      ),
    )
    expect(kind).toBe('not-ready-yet')
    expect(message).toBe(
      'etcd refuses to change its membership while another member is down or has been connected for less than 5 s: rpc error: code = Unknown desc = failed to remove member: failed to remove member 1311768467294899695: etcdserver: unhealthy cluster',
    )
  })

  it('keeps the meaning and drops the usage block and multierror framing', () => {
    const text =
      'error executing bootstrap: 1 error occurred:\n\t* 127.0.0.2: rpc error: code = AlreadyExists desc = etcd data directory is not empty\n\n\n'
    expect(essence(text)).toBe(
      'error executing bootstrap: 127.0.0.2: rpc error: code = AlreadyExists desc = etcd data directory is not empty',
    )
    expect(essence('unknown flag: --foo\n\nUsage:\n  talosctl get <type> [flags]\n')).toBe('unknown flag: --foo')
  })
})
