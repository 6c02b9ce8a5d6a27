// The talosctl command tree (the subset the product uses), with talosctl's flags, texts and arg rules.
import { io } from '../cli-io.js'
import { Command, args } from './command.js'

// persistent flags every "talos" command gets (talos.addCommand)
const talosFlags = () => [
  { name: 'talosconfig', type: 'string', def: '', usage: "The path to the Talos configuration file. Defaults to 'TALOSCONFIG' env variable if set, otherwise '$HOME/.talos/config' and '/var/run/secrets/talos.dev/config' in order." },
  { name: 'nodes', short: 'n', type: 'stringSlice', def: [], usage: 'target the specified nodes' },
  { name: 'endpoints', short: 'e', type: 'stringSlice', def: [], usage: 'override default endpoints in Talos configuration' },
  { name: 'cluster', short: 'c', type: 'string', def: '', usage: 'Cluster to connect to if a proxy endpoint is used.' },
  { name: 'context', type: 'string', def: '', usage: 'Context to be used in command' },
  { name: 'siderov1-keys-dir', type: 'string', def: '', usage: "The path to the SideroV1 auth PGP keys directory. Defaults to 'SIDEROV1_KEYS_DIR' env variable if set, otherwise '$HOME/.talos/keys'. Only valid for Contexts that use SideroV1 auth." },
]

const enumFlag = (name, short, options, def, usage, typeName) => ({
  name, short, type: 'enum', options, def, usage, typeName: typeName ?? options.join(', '),
  invalid() { return `possible options are: ${this.typeName}` },
})

const trackFlags = [
  { name: 'wait', type: 'bool', def: true, usage: 'wait for the operation to complete, tracking its progress. always set to true when --debug is set' },
  { name: 'debug', type: 'bool', def: false, usage: 'debug operation from kernel logs. --wait is set to true when this flag is set' },
  { name: 'timeout', type: 'duration', def: 30 * 60000, usage: 'time to wait for the operation is complete if --debug or --wait is set' },
]

const lazy = (mod, fn) => async (ctx) => (await import(`./cmd/${mod}.js`))[fn](ctx)

const talos = (spec) => new Command({ ...spec, persistentFlags: talosFlags(), group: 'talos' })

export function buildTree() {
  const v13 = /^v?1\.(1[3-9]|[2-9]\d)/.test(io().env.SIM_TALOSCTL_VERSION || 'v1.12.11')
  const applyModes = ['auto', 'no-reboot', 'reboot', 'staged', 'try']
  const commands = [
    talos({
      use: 'apply-config', aliases: ['apply'], short: 'Apply a new configuration to a node', args: args.max(1),
      flags: [
        { name: 'file', short: 'f', type: 'string', def: '', usage: 'the filename of the updated configuration' },
        { name: 'insecure', short: 'i', type: 'bool', def: false, usage: 'apply the config using the insecure (encrypted with no auth) maintenance service' },
        { name: 'dry-run', type: 'bool', def: false, usage: 'check how the config change will be applied in dry-run mode' },
        { name: 'cert-fingerprint', type: 'stringSlice', def: [], usage: 'list of server certificate fingeprints to accept (defaults to no check)' },
        { name: 'config-patch', short: 'p', type: 'stringArray', def: [], usage: 'the list of config patches to apply to the local config file before sending it to the node' },
        { name: 'timeout', type: 'duration', def: 60000, usage: 'the config will be rolled back after specified timeout (if try mode is selected)' },
        enumFlag('mode', 'm', applyModes, 'auto', 'apply config mode'),
      ],
      run: lazy('apply', 'applyConfig'),
    }),
    talos({
      use: 'bootstrap', short: 'Bootstrap the etcd cluster on the specified node.', args: args.none,
      long: `When Talos cluster is created etcd service on control plane nodes enter the join loop waiting
to join etcd peers from other control plane nodes. One node should be picked as the bootstrap node.
When bootstrap command is issued, the node aborts join process and bootstraps etcd cluster as a single node cluster.
Other control plane nodes will join etcd cluster once Kubernetes is bootstrapped on the bootstrap node.

This command should not be used when "init" type node are used.

Talos etcd cluster can be recovered from a known snapshot with '--recover-from=' flag.`,
      flags: [
        { name: 'recover-from', type: 'string', def: '', usage: 'recover etcd cluster from the snapshot' },
        { name: 'recover-skip-hash-check', type: 'bool', def: false, usage: 'skip integrity check when recovering etcd (use when recovering from data directory copy)' },
      ],
      run: lazy('simple', 'bootstrap'),
    }),
    talos({
      use: 'config', short: 'Manage the client configuration file (talosconfig)',
      commands: [
        new Command({ use: 'endpoint <endpoint>...', aliases: ['endpoints'], short: 'Set the endpoint(s) for the current context', args: args.min(1), run: lazy('config', 'endpoint') }),
        new Command({ use: 'node <endpoint>...', aliases: ['nodes'], short: 'Set the node(s) for the current context', args: () => null, run: lazy('config', 'node') }),
        new Command({ use: 'context <context>', aliases: ['use-context'], short: 'Set the current context', args: args.exact(1), run: lazy('config', 'context') }),
        new Command({ use: 'contexts', aliases: ['get-contexts'], short: 'List defined contexts', args: args.none, run: lazy('config', 'contexts') }),
        new Command({
          use: 'info', short: 'Show information about the current context', args: args.none, run: lazy('config', 'info'),
          flags: [{ name: 'output', short: 'o', type: 'string', def: 'text', usage: 'output format (json|yaml|text). Default text.' }],
        }),
      ],
    }),
    talos({
      use: 'dmesg', short: 'Retrieve kernel logs', args: args.none,
      flags: [
        { name: 'follow', short: 'f', type: 'bool', def: false, usage: 'specify if the kernel log should be streamed' },
        { name: 'tail', type: 'bool', def: false, usage: 'specify if only new messages should be sent (makes sense only when combined with --follow)' },
      ],
      run: lazy('simple', 'dmesg'),
    }),
    talos({
      use: 'etcd', short: 'Manage etcd',
      long: 'Manage etcd',
      commands: [
        new Command({ use: 'leave', short: 'Tell nodes to leave etcd cluster', args: args.none, run: lazy('etcd', 'leave') }),
        new Command({ use: 'members', short: 'Get the list of etcd cluster members', args: args.none, run: lazy('etcd', 'members') }),
        new Command({
          use: 'remove-member <member ID>', short: 'Remove the node from etcd cluster', args: args.exact(1), run: lazy('etcd', 'removeMember'),
          long: `Use this command only if you want to remove a member which is in broken state.
If there is no access to the node, or the node can't access etcd to call etcd leave.
Always prefer etcd leave over this command.`,
        }),
        new Command({ use: 'status', short: 'Get the status of etcd cluster member', long: 'Returns the status of etcd member on the node, use multiple nodes to get status of all members.', args: args.none, run: lazy('etcd', 'status') }),
      ],
    }),
    talos({
      use: 'get <type> [<id>]', aliases: ['g'], args: args.range(1, 2),
      short: "Get a specific resource or list of resources (use 'talosctl get rd' to see all available resource types).",
      long: `Similar to 'kubectl get', 'talosctl get' returns a set of resources from the OS.
To get a list of all available resource definitions, issue 'talosctl get rd'`,
      flags: [
        { name: 'namespace', type: 'string', def: '', usage: 'resource namespace (default is to use default namespace per resource)' },
        { name: 'output', short: 'o', type: 'string', def: 'table', usage: 'output mode (json, table, yaml, jsonpath)' },
        { name: 'watch', short: 'w', type: 'bool', def: false, usage: 'watch resource changes' },
        { name: 'insecure', short: 'i', type: 'bool', def: false, usage: 'get resources using the insecure (encrypted with no auth) maintenance service' },
      ],
      run: lazy('get', 'get'),
    }),
    talos({
      use: 'health', short: 'Check cluster health', args: args.none,
      flags: [
        { name: 'init-node', type: 'string', def: '', usage: 'specify IPs of init node' },
        { name: 'control-plane-nodes', type: 'stringSlice', def: [], usage: 'specify IPs of control plane nodes' },
        { name: 'worker-nodes', type: 'stringSlice', def: [], usage: 'specify IPs of worker nodes' },
        { name: 'wait-timeout', type: 'duration', def: 20 * 60000, usage: 'timeout to wait for the cluster to be ready' },
        { name: 'k8s-endpoint', type: 'string', def: '', usage: 'use endpoint instead of kubeconfig default' },
        { name: 'server', type: 'bool', def: true, usage: 'run server-side check' },
        { name: 'run-e2e', type: 'bool', def: false, usage: 'run Kubernetes e2e test' },
      ],
      run: lazy('simple', 'health'),
    }),
    talos({
      use: 'kubeconfig [local-path]', short: 'Download the admin kubeconfig from the node', args: args.max(1),
      long: `Download the admin kubeconfig from the node.
If merge flag is true, config will be merged with ~/.kube/config or [local-path] if specified.
Otherwise, kubeconfig will be written to PWD or [local-path] if specified.

If merge flag is false and [local-path] is "-", config will be written to stdout.`,
      flags: [
        { name: 'force', short: 'f', type: 'bool', def: false, usage: 'Force overwrite of kubeconfig if already present, force overwrite on kubeconfig merge' },
        { name: 'force-context-name', type: 'string', def: '', usage: 'Force context name for kubeconfig merge' },
        { name: 'merge', short: 'm', type: 'bool', def: true, usage: 'Merge with existing kubeconfig' },
      ],
      run: lazy('kubeconfig', 'kubeconfig'),
    }),
    talos({
      use: 'reboot', short: 'Reboot a node', args: args.none,
      flags: [
        v13
          ? enumFlag('mode', 'm', ['default', 'force', 'powercycle'], 'default', 'select the reboot mode: "default", "powercycle" (skips kexec), "force" (skips graceful teardown)', 'string')
          : { name: 'mode', short: 'm', type: 'string', def: 'default', usage: 'select the reboot mode: "default", "powercycle" (skips kexec), "force" (skips graceful teardown)' },
        ...trackFlags,
      ],
      run: lazy('lifecycle', 'reboot'),
    }),
    talos({
      use: 'reset', short: 'Reset a node', args: args.none,
      flags: [
        { name: 'graceful', type: 'bool', def: true, usage: 'if true, attempt to cordon/drain node and leave etcd (if applicable)' },
        { name: 'reboot', type: 'bool', def: false, usage: 'if true, reboot the node after resetting instead of shutting down' },
        { name: 'insecure', type: 'bool', def: false, usage: 'reset using the insecure (encrypted with no auth) maintenance service' },
        enumFlag('wipe-mode', '', ['all', 'system-disk', 'user-disks'], 'all', 'disk reset mode'),
        { name: 'user-disks-to-wipe', type: 'stringSlice', def: [], usage: 'if set, wipes defined devices in the list' },
        { name: 'system-labels-to-wipe', type: 'stringSlice', def: [], usage: 'if set, just wipe selected system disk partitions by label but keep other partitions intact' },
        ...trackFlags,
      ],
      run: lazy('lifecycle', 'reset'),
    }),
    talos({
      use: 'service [<id> [start|stop|restart|status]]', aliases: ['services'], args: args.max(2),
      short: 'Retrieve the state of a service (or all services), control service state',
      long: `Service control command. If run without arguments, lists all the services and their state.
If service ID is specified, default action 'status' is executed which shows status of a single list service.
With actions 'start', 'stop', 'restart', service state is updated respectively.`,
      run: lazy('service', 'service'),
    }),
    talos({
      use: 'version', short: 'Prints the version', args: args.none,
      flags: [
        { name: 'short', type: 'bool', def: false, usage: 'Print the short version' },
        { name: 'client', type: 'bool', def: false, usage: 'Print client version only' },
        { name: 'insecure', short: 'i', type: 'bool', def: false, usage: 'use Talos maintenance mode API' },
        { name: 'json', type: 'bool', def: false, usage: '', hidden: true },
      ],
      run: lazy('version', 'version'),
    }),
    new Command({
      use: 'validate', short: 'Validate config', args: args.none, group: 'mgmt', required: ['mode'],
      flags: [
        { name: 'config', short: 'c', type: 'string', def: '', usage: 'the path of the config file' },
        { name: 'mode', short: 'm', type: 'string', def: '', usage: 'the mode to validate the config for (valid values are metal, cloud, and container)' },
        { name: 'strict', type: 'bool', def: false, usage: 'treat validation warnings as errors' },
      ],
      run: lazy('validate', 'validate'),
    }),
  ]
  commands.sort((a, b) => (a.name < b.name ? -1 : 1))
  const root = new Command({
    use: 'talosctl', short: 'A CLI for out-of-band management of Kubernetes nodes created by Talos', commands,
  })
  root.groups = [
    { id: 'talos', title: 'Manage running Talos clusters:' },
    { id: 'mgmt', title: 'Commands to generate and manage machine configuration offline:' },
    { id: 'cluster', title: 'Local Talos cluster commands:' },
  ]
  const help = new Command({
    use: 'help [command]', short: 'Help about any command', args: () => null,
    long: `Help provides help for any command in the application.
Simply type talosctl help [path to command] for full details.`,
    run: async ({ positional }) => {
      const { cmd } = root.find(positional)
      io().stdout.write(cmd.helpString())
    },
  })
  help.parent = root
  root.commands.push(help)
  root.commands.sort((a, b) => (a.name < b.name ? -1 : 1))
  return root
}
