import type { Phase } from '../engine/phase.ts'
import { StatusReads } from '../wait/status-reads.ts'
import { bootstrapNodeIfAny } from './shared/bootstrap-node.ts'
import { endpointReading } from './shared/endpoint.ts'
import { ControlPlaneVerifications, verifyNode } from './shared/node-verification.ts'

export const verify: Phase = {
  name: 'verify',
  title: 'Verify nodes left maintenance and are up',
  steps: (run) => {
    const endpoint = endpointReading(run)
    const reads = new StatusReads(run, undefined, () => bootstrapNodeIfAny(run))
    const controlPlanes = new ControlPlaneVerifications()
    return [
      {
        kind: 'node',
        title: 'Verify nodes',
        readOnly: true,
        would: 'would wait until it is up on the authenticated API',
        run: (node, r, report) => verifyNode(node, r, report, reads, endpoint, controlPlanes),
      },
    ]
  },
}
