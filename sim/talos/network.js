// What a node's machine config says about the cluster network, as Talos reads it
// (talos-src pkg/machinery/config/types/v1alpha1): cluster.network.cni.name absent means flannel
// (v1alpha1_clusterconfig.go CNI()); kube-proxy is deployed unless cluster.proxy.disabled
// (v1alpha1_proxyconfig.go Enabled()); KubePrism runs only with enabled: true, on port 7445 unless
// set (v1alpha1_features.go). undefined for a node with no config.
export function networkOf(config) {
  if (!config) return undefined
  const prism = config.machine?.features?.kubePrism
  return {
    cni: config.cluster?.network?.cni?.name || 'flannel',
    proxy: config.cluster?.proxy?.disabled !== true,
    kubePrism: { enabled: prism?.enabled === true, port: Number(prism?.port) || 7445 },
    // what a control plane's Talos applies besides its own manifests (controllers/k8s/control_plane.go
    // ControlPlaneExtraManifestsController): the inline manifests; URLs (extraManifests, cni.urls) are
    // never fetched here, nothing outside loopback is reached
    inlineManifests: (config.cluster?.inlineManifests ?? []).filter((m) => typeof m?.contents === 'string'),
  }
}
