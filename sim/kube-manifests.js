// Talos's bootstrap manifests, as a control plane's Talos renders them from its config and applies
// them through the API (SIM_KUBE=real; siderolabs/talos internal/app/machined/pkg/controllers/k8s/
// manifest.go and internal/k8stemplates: csr.go, talos.go, coredns.go, kube-proxy.go, flannel.go):
// the kubelet bootstrap token and its CSR RBAC, CoreDNS unless cluster.coreDNS.disabled, kube-proxy
// unless cluster.proxy.disabled, flannel when the config's CNI is flannel. Container specs keep what
// the simulated kubelet reads (images, hostNetwork, env, the CNI's /etc/cni/net.d volume, tolerations).

const crb = (name, role, subjects) => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRoleBinding',
  metadata: { name },
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
  subjects,
})
const group = (name) => ({ kind: 'Group', name, apiGroup: 'rbac.authorization.k8s.io' })
const sa = (name, namespace = 'kube-system') => ({ kind: 'ServiceAccount', name, namespace })
const serviceAccount = (name) => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: 'kube-system' } })
const linux = {
  nodeAffinity: {
    requiredDuringSchedulingIgnoredDuringExecution: {
      nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }] }],
    },
  },
}
const everything = [
  { effect: 'NoSchedule', operator: 'Exists' },
  { effect: 'NoExecute', operator: 'Exists' },
]

/**
 * The objects one control plane's Talos applies. config: its machine config; network: networkOf(config)
 * (sim/talos/network.js); net: { podCIDRs, serviceCIDRs, dnsDomain }; bootstrapToken: cluster.token.
 */
export function talosManifests({ config, network, net, kubernetesVersion, bootstrapToken }) {
  const out = []
  // csr.go, talos.go: the kubelets' bootstrap token, the CSR RBAC the controller-manager's approver checks
  const [id, secret] = String(bootstrapToken).split('.')
  out.push({
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'bootstrap.kubernetes.io/token',
    metadata: { name: `bootstrap-token-${id}`, namespace: 'kube-system' },
    stringData: {
      'auth-extra-groups': 'system:bootstrappers:nodes',
      'token-id': id,
      'token-secret': secret,
      'usage-bootstrap-authentication': 'true',
    },
  })
  out.push(
    crb('system-bootstrap-node-bootstrapper', 'system:node-bootstrapper', [group('system:bootstrappers:nodes'), group('system:nodes')]),
    crb('system-bootstrap-approve-node-client-csr', 'system:certificates.k8s.io:certificatesigningrequests:nodeclient', [
      group('system:bootstrappers:nodes'),
    ]),
    crb('system-bootstrap-node-renewal', 'system:certificates.k8s.io:certificatesigningrequests:selfnodeclient', [group('system:nodes')]),
  )
  if (config?.cluster?.coreDNS?.disabled !== true) out.push(...coreDns(net))
  if (network?.proxy) out.push(...kubeProxy(kubernetesVersion))
  if (network?.cni === 'flannel') out.push(...flannel(net, network))
  return out
}

function coreDns(net) {
  const labels = { 'k8s-app': 'kube-dns', 'kubernetes.io/name': 'CoreDNS' }
  const dnsIp = nthIp(net.serviceCIDRs[0], 10)
  return [
    serviceAccount('coredns'),
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'system:coredns', labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' } },
      rules: [
        { apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch'] },
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
      ],
    },
    crb('system:coredns', 'system:coredns', [sa('coredns')]),
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'coredns', namespace: 'kube-system' },
      data: {
        Corefile: `.:53 {\n    errors\n    health {\n        lameduck 5s\n    }\n    ready\n    kubernetes ${net.dnsDomain} in-addr.arpa ip6.arpa {\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n        ttl 30\n    }\n    forward . /etc/resolv.conf\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n`,
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'kube-dns', namespace: 'kube-system', labels: { ...labels, 'kubernetes.io/cluster-service': 'true' } },
      spec: {
        clusterIP: dnsIp,
        clusterIPs: [dnsIp],
        selector: { 'k8s-app': 'kube-dns' },
        ports: [
          { name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 },
          { name: 'dns-tcp', port: 53, protocol: 'TCP', targetPort: 53 },
          { name: 'metrics', port: 9153, protocol: 'TCP', targetPort: 9153 },
        ],
      },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'coredns', namespace: 'kube-system', labels },
      spec: {
        replicas: 2,
        selector: { matchLabels: { 'k8s-app': 'kube-dns' } },
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
        template: {
          metadata: { labels: { 'k8s-app': 'kube-dns' } },
          spec: {
            affinity: {
              ...linux,
              podAntiAffinity: {
                preferredDuringSchedulingIgnoredDuringExecution: [
                  {
                    weight: 100,
                    podAffinityTerm: {
                      labelSelector: { matchExpressions: [{ key: 'k8s-app', operator: 'In', values: ['kube-dns'] }] },
                      topologyKey: 'kubernetes.io/hostname',
                    },
                  },
                ],
              },
            },
            containers: [
              {
                name: 'coredns',
                image: 'registry.k8s.io/coredns/coredns:v1.12.4',
                args: ['-conf', '/etc/coredns/Corefile'],
                ports: [
                  { containerPort: 53, name: 'dns', protocol: 'UDP' },
                  { containerPort: 53, name: 'dns-tcp', protocol: 'TCP' },
                  { containerPort: 9153, name: 'metrics', protocol: 'TCP' },
                ],
                readinessProbe: { httpGet: { path: '/ready', port: 8181, scheme: 'HTTP' } },
                volumeMounts: [{ mountPath: '/etc/coredns', name: 'config-volume', readOnly: true }],
              },
            ],
            dnsPolicy: 'Default',
            nodeSelector: { 'kubernetes.io/os': 'linux' },
            priorityClassName: 'system-cluster-critical',
            serviceAccountName: 'coredns',
            tolerations: [
              { effect: 'NoSchedule', key: 'node-role.kubernetes.io/control-plane', operator: 'Exists' },
              { effect: 'NoSchedule', key: 'node.cloudprovider.kubernetes.io/uninitialized', operator: 'Exists' },
            ],
            volumes: [{ name: 'config-volume', configMap: { name: 'coredns', items: [{ key: 'Corefile', path: 'Corefile' }] } }],
          },
        },
      },
    },
  ]
}

function kubeProxy(kubernetesVersion) {
  const labels = { 'k8s-app': 'kube-proxy', tier: 'node' }
  return [
    serviceAccount('kube-proxy'),
    crb('kube-proxy', 'system:node-proxier', [sa('kube-proxy')]),
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'kube-proxy', namespace: 'kube-system', labels },
      spec: {
        selector: { matchLabels: labels },
        updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
        template: {
          metadata: { labels },
          spec: {
            affinity: linux,
            containers: [
              {
                name: 'kube-proxy',
                image: `registry.k8s.io/kube-proxy:${kubernetesVersion}`,
                command: ['/usr/local/bin/kube-proxy', '--proxy-mode=iptables'],
                securityContext: { privileged: true },
              },
            ],
            hostNetwork: true,
            priorityClassName: 'system-cluster-critical',
            serviceAccountName: 'kube-proxy',
            tolerations: everything,
          },
        },
      },
    },
  ]
}

function flannel(net, network) {
  const labels = { 'k8s-app': 'flannel', tier: 'node' }
  // KubePrism: Talos points flannel at it (env.go: KUBERNETES_SERVICE_HOST/PORT) when it is enabled
  const env = network.kubePrism.enabled
    ? [
        { name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' },
        { name: 'KUBERNETES_SERVICE_PORT', value: String(network.kubePrism.port) },
      ]
    : []
  const image = 'ghcr.io/siderolabs/flannel:v0.27.4'
  return [
    serviceAccount('flannel'),
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'flannel', labels: { 'k8s-app': 'flannel' } },
      rules: [
        { apiGroups: [''], resources: ['pods', 'nodes', 'namespaces'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: [''], resources: ['nodes/status'], verbs: ['patch'] },
      ],
    },
    crb('flannel', 'flannel', [sa('flannel')]),
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'kube-flannel-cfg', namespace: 'kube-system', labels },
      data: {
        'net-conf.json': JSON.stringify({ Network: net.podCIDRs[0], EnableNFTables: true, Backend: { Port: 4789, Type: 'vxlan' } }),
      },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'kube-flannel', namespace: 'kube-system', labels },
      spec: {
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            affinity: linux,
            containers: [{ name: 'kube-flannel', image, command: ['/opt/bin/flanneld'], args: ['--ip-masq', '--kube-subnet-mgr'], env }],
            initContainers: [
              {
                name: 'install-config',
                image,
                command: ['cp'],
                args: ['-f', '/etc/kube-flannel/cni-conf.json', '/etc/cni/net.d/10-flannel.conflist'],
                volumeMounts: [{ mountPath: '/etc/cni/net.d', name: 'cni' }],
              },
            ],
            hostNetwork: true,
            priorityClassName: 'system-node-critical',
            serviceAccountName: 'flannel',
            tolerations: everything,
            volumes: [
              { name: 'run', hostPath: { path: '/run/flannel' } },
              { name: 'cni', hostPath: { path: '/etc/cni/net.d' } },
              { name: 'flannel-cfg', configMap: { name: 'kube-flannel-cfg' } },
            ],
          },
        },
      },
    },
  ]
}

/** the k-th address of an IPv4 CIDR (1: the `kubernetes` Service's, 10: kube-dns's, Talos's DNSServiceIP) */
export function nthIp(cidr, k = 1) {
  const [a, bits] = cidr.split('/')
  const n = a.split('.').reduce((x, o) => x * 256 + Number(o), 0)
  const v = n - (n % 2 ** (32 - Number(bits))) + k
  return [24, 16, 8, 0].map((s) => Math.floor(v / 2 ** s) % 256).join('.')
}
