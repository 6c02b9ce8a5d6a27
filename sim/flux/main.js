// The simulated flux CLI (behaves as flux2 v2.9.x): check, install, bootstrap git, get kustomizations,
// reconcile, version. Messages go to stderr with flux's ►/✚/◎/✔/⚠️/✗ prefixes; errors print as
// `✗ <err>` and exit 1. It never contacts the Git URL (there is no Git server on loopback): the
// clone/commit/push steps are reported as flux reports them on success.
import { parseFlags, findCommand } from './pflag.js'

export { FLUX_VERSION } from './manifests.js'

const ROOT = {
  timeout: { type: 'duration', def: 300000 },
  verbose: { type: 'bool' },
  'ns-follows-kube-context': { type: 'bool' },
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  cluster: { type: 'string' },
  user: { type: 'string' },
  namespace: { type: 'string', short: 'n', def: 'flux-system' },
  server: { type: 'string' },
  token: { type: 'string' },
  'insecure-skip-tls-verify': { type: 'bool' },
  'client-certificate': { type: 'string' },
  'client-key': { type: 'string' },
  'certificate-authority': { type: 'string' },
  'tls-server-name': { type: 'string' },
  as: { type: 'string' },
  'as-group': { type: 'stringArray' },
  'as-uid': { type: 'string' },
  'cache-dir': { type: 'string' },
  'disable-compression': { type: 'bool' },
  'kube-api-qps': { type: 'string' },
  'kube-api-burst': { type: 'int', def: 300 },
  help: { type: 'bool', short: 'h' },
}

const COMPONENTS = {
  components: { type: 'stringSlice', def: ['source-controller', 'kustomize-controller', 'helm-controller', 'notification-controller'] },
  'components-extra': { type: 'stringSlice' },
}

const BOOTSTRAP = {
  ...COMPONENTS,
  version: { type: 'string', short: 'v' },
  registry: { type: 'string', def: 'ghcr.io/fluxcd' },
  'registry-creds': { type: 'string' },
  'image-pull-secret': { type: 'string' },
  branch: { type: 'string', def: 'main' },
  'recurse-submodules': { type: 'bool' },
  'sparse-checkout': { type: 'stringSlice' },
  manifests: { type: 'string' },
  'watch-all-namespaces': { type: 'bool', def: true },
  'network-policy': { type: 'bool', def: true },
  'token-auth': { type: 'bool' },
  'log-level': { type: 'string', def: 'info' },
  'cluster-domain': { type: 'string', def: 'cluster.local' },
  'toleration-keys': { type: 'stringSlice' },
  'secret-name': { type: 'string', def: 'flux-system' },
  'ssh-key-algorithm': { type: 'string', def: 'ecdsa' },
  'ssh-rsa-bits': { type: 'string', def: '2048' },
  'ssh-hostkey-algos': { type: 'stringSlice' },
  'ssh-ecdsa-curve': { type: 'string', def: 'p384' },
  'ssh-hostname': { type: 'string' },
  'ca-file': { type: 'string' },
  'private-key-file': { type: 'string' },
  'author-name': { type: 'string', def: 'Flux' },
  'author-email': { type: 'string' },
  'gpg-key-ring': { type: 'string' },
  'gpg-passphrase': { type: 'string' },
  'gpg-key-id': { type: 'string' },
  'commit-message-appendix': { type: 'string' },
  force: { type: 'bool' },
}

const COMMANDS = {
  check: { flags: { pre: { type: 'bool' }, ...COMPONENTS, 'poll-interval': { type: 'duration', def: 5000 } } },
  install: {
    flags: {
      ...COMPONENTS,
      version: { type: 'string', short: 'v' },
      export: { type: 'bool' },
      registry: { type: 'string', def: 'ghcr.io/fluxcd' },
      'registry-creds': { type: 'string' },
      'image-pull-secret': { type: 'string' },
      'watch-all-namespaces': { type: 'bool', def: true },
      'network-policy': { type: 'bool', def: true },
      'log-level': { type: 'string', def: 'info' },
      'cluster-domain': { type: 'string', def: 'cluster.local' },
      'toleration-keys': { type: 'stringSlice' },
      manifests: { type: 'string' },
      force: { type: 'bool' },
    },
  },
  bootstrap: {
    sub: {
      git: {
        flags: {
          ...BOOTSTRAP,
          url: { type: 'string' },
          interval: { type: 'duration', def: 60000 },
          path: { type: 'string' },
          username: { type: 'string', short: 'u', def: 'git' },
          password: { type: 'string', short: 'p' },
          silent: { type: 'bool', short: 's' },
          'allow-insecure-http': { type: 'bool' },
          'with-bearer-token': { type: 'bool' },
        },
      },
    },
  },
  get: {
    flags: {
      'all-namespaces': { type: 'bool', short: 'A' },
      'no-header': { type: 'bool' },
      'status-selector': { type: 'string' },
      'label-selector': { type: 'string', short: 'l' },
      watch: { type: 'bool', short: 'w' },
    },
    sub: {
      kustomizations: { aliases: ['ks', 'kustomization'], flags: { 'show-source': { type: 'bool' } } },
      sources: { sub: { git: { flags: {} } } },
    },
  },
  reconcile: {
    sub: {
      kustomization: { aliases: ['ks', 'kustomizations'], flags: { 'with-source': { type: 'bool' } } },
      source: { sub: { git: { flags: {} } } },
    },
  },
  version: { flags: { client: { type: 'bool' }, output: { type: 'string', short: 'o', def: 'yaml' } } },
}

function specsFor(pathWords) {
  let specs = { ...ROOT }
  let node = { sub: COMMANDS }
  for (const w of pathWords) {
    node = node.sub[w]
    Object.assign(specs, node.flags || {})
  }
  return specs
}

function allSpecs(tree, acc = { ...ROOT }) {
  for (const c of Object.values(tree)) {
    Object.assign(acc, c.flags || {})
    if (c.sub) allSpecs(c.sub, acc)
  }
  return acc
}

/** The flux logger: every message on stderr. */
export function makeLogger(stderr) {
  const line = (p) => (fmt) => stderr.write(`${p} ${fmt}\n`)
  return { action: line('►'), generate: line('✚'), waiting: line('◎'), success: line('✔'), warning: line('⚠️'), failure: line('✗') }
}

/** An error main prints as `✗ <message>`. */
export class FluxError extends Error {}

export async function main(argv, { stdout = process.stdout, stderr = process.stderr, stdin = process.stdin } = {}) {
  const log = makeLogger(stderr)
  const ctx = { log, out: (s) => stdout.write(s), err: (s) => stderr.write(s), stdin, argv }
  try {
    const { path: p, node, rest } = findCommand(argv, { sub: COMMANDS }, allSpecs(COMMANDS))
    const word = rest.find((r) => !r.startsWith('-'))
    if (!p.length || (node.sub && !node.flags) || (node.sub && p[0] === 'reconcile')) {
      parseFlags(rest, specsFor(p))
      if (word !== undefined) throw new FluxError(`unknown command "${word}" for "flux${p.length ? ' ' + p.join(' ') : ''}"`)
      stdout.write(`Command line utility for assembling Kubernetes CD pipelines the GitOps way.\n\nUsage:\n  flux [command]\n`)
      return 0
    }
    const { flags, args } = parseFlags(rest, specsFor(p))
    ctx.flags = flags
    ctx.command = p.join(' ')
    if (flags.help) {
      stdout.write(`Usage:\n  flux ${ctx.command} [flags]\n`)
      return 0
    }
    const cmd = await import('./commands.js')
    switch (ctx.command) {
      case 'check':
        if (args.length) throw new FluxError(`unknown command "${args[0]}" for "flux check"`)
        return await cmd.check(ctx)
      case 'install':
        return await cmd.install(ctx)
      case 'bootstrap git':
        return await cmd.bootstrapGit(ctx)
      case 'get':
      case 'get kustomizations':
        if (ctx.command === 'get') throw new FluxError(`unknown command "${word ?? ''}" for "flux get"`)
        return await cmd.getKustomizations(ctx, args)
      case 'get sources git':
        return await cmd.getGitRepositories(ctx, args)
      case 'reconcile kustomization':
        return await cmd.reconcileKustomization(ctx, args)
      case 'reconcile source git':
        return await cmd.reconcileGit(ctx, args)
      case 'version':
        return await cmd.version(ctx)
      default:
        throw new FluxError(`unknown command "${ctx.command}" for "flux"`)
    }
  } catch (e) {
    log.failure(e.message)
    if (ctx.record) await ctx.record(`error: ${e.message}`)
    return 1
  } finally {
    if (ctx.client) ctx.client.close()
  }
}
