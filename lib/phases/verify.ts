import type { Phase } from '../engine/phase.js'
import { StatusReads } from '../wait/status-reads.js'
import { bootstrapNodeIfAny } from './shared/bootstrap-node.js'
import { endpointReading } from './shared/endpoint.js'
import { ControlPlaneVerifications, verifyNode } from './shared/node-verification.js'

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
