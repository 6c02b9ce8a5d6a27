// A kubectl a hint names goes where the run's own kubectl calls go: through a control plane's API
// server once the run left the endpoint (upgrade:k8s with the VIP down, or --endpoint).
import { describe, expect, it } from 'vitest'
import { kubectlCommand, setHintContext, setHintKubeServer } from '../../lib/cli/hints.js'

describe('kubectlCommand', () => {
  it('names the kubeconfig, then the server the run switched to', () => {
    setHintContext({ clusterDir: '/c', talosconfig: '/c/talosconfig', kubeconfig: '/c/no kubeconfig', controlPlanes: [] })
    expect(kubectlCommand('get nodes')).toBe("kubectl --kubeconfig '/c/no kubeconfig' get nodes")
    setHintKubeServer('https://127.0.0.11:6443')
    expect(kubectlCommand('get nodes')).toBe("kubectl --kubeconfig '/c/no kubeconfig' --server https://127.0.0.11:6443 get nodes")
  })
})
