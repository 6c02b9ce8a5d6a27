// The simulated helm CLI (behaves as helm v3.21.x): the subset the product uses.
// Errors print as cobra does for helm: `Error: <message>` on stderr, exit 1.
import { parseFlags, findCommand } from './pflag.js'

export const HELM_VERSION = 'v3.21.4'
const GIT_COMMIT = '1a2b3c4d5e6f70819a2b3c4d5e6f708192a3b4c5'
const GO_VERSION = 'go1.25.6'

const GLOBAL = {
  namespace: { type: 'string', short: 'n' },
  kubeconfig: { type: 'string' },
  'kube-context': { type: 'string' },
  'kube-token': { type: 'string' },
  'kube-as-user': { type: 'string' },
  'kube-as-group': { type: 'stringArray' },
  'kube-apiserver': { type: 'string' },
  'kube-ca-file': { type: 'string' },
  'kube-tls-server-name': { type: 'string' },
  'kube-insecure-skip-tls-verify': { type: 'bool' },
  debug: { type: 'bool' },
  'registry-config': { type: 'string' },
  'repository-config': { type: 'string' },
  'repository-cache': { type: 'string' },
  'burst-limit': { type: 'int', def: 100 },
  qps: { type: 'string' },
  'content-cache': { type: 'string' },
  help: { type: 'bool', short: 'h' },
}

const OUTPUT = { output: { type: 'string', short: 'o', def: 'table' } }

const CHART_PATH = {
  version: { type: 'string' },
  verify: { type: 'bool' },
  keyring: { type: 'string' },
  repo: { type: 'string' },
  username: { type: 'string' },
  password: { type: 'string' },
  'cert-file': { type: 'string' },
  'key-file': { type: 'string' },
  'ca-file': { type: 'string' },
  'insecure-skip-tls-verify': { type: 'bool' },
  'plain-http': { type: 'bool' },
  'pass-credentials': { type: 'bool' },
}

const VALUES = {
  values: { type: 'stringSlice', short: 'f' },
  set: { type: 'stringArray' },
  'set-string': { type: 'stringArray' },
  'set-file': { type: 'stringArray' },
  'set-json': { type: 'stringArray' },
  'set-literal': { type: 'stringArray' },
}

const INSTALL_COMMON = {
  'create-namespace': { type: 'bool' },
  'dry-run': { type: 'string', noOptDefVal: 'client' },
  'hide-secret': { type: 'bool' },
  force: { type: 'bool' },
  'no-hooks': { type: 'bool' },
  'disable-openapi-validation': { type: 'bool' },
  'skip-crds': { type: 'bool' },
  timeout: { type: 'duration', def: 300000 },
  wait: { type: 'bool' },
  'wait-for-jobs': { type: 'bool' },
  atomic: { type: 'bool' },
  devel: { type: 'bool' },
  'render-subchart-notes': { type: 'bool' },
  'hide-notes': { type: 'bool' },
  'skip-schema-validation': { type: 'bool' },
  labels: { type: 'stringToString', short: 'l' },
  description: { type: 'string' },
  'dependency-update': { type: 'bool' },
  'enable-dns': { type: 'bool' },
  'take-ownership': { type: 'bool' },
  'post-renderer': { type: 'string' },
  'post-renderer-args': { type: 'stringArray' },
  ...CHART_PATH,
  ...VALUES,
  ...OUTPUT,
}

const COMMANDS = {
  upgrade: {
    use: 'upgrade [RELEASE] [CHART]',
    flags: {
      ...INSTALL_COMMON,
      install: { type: 'bool', short: 'i' },
      'recreate-pods': { type: 'bool' },
      'reset-values': { type: 'bool' },
      'reuse-values': { type: 'bool' },
      'reset-then-reuse-values': { type: 'bool' },
      'history-max': { type: 'int', def: 10 },
      'cleanup-on-fail': { type: 'bool' },
    },
  },
  install: {
    use: 'install [NAME] [CHART]',
    flags: {
      ...INSTALL_COMMON,
      'generate-name': { type: 'bool', short: 'g' },
      'name-template': { type: 'string' },
      replace: { type: 'bool' },
    },
  },
  status: {
    use: 'status RELEASE_NAME',
    flags: { revision: { type: 'int' }, 'show-desc': { type: 'bool' }, 'show-resources': { type: 'bool' }, ...OUTPUT },
  },
  list: {
    use: 'list [flags]',
    aliases: ['ls'],
    flags: {
      short: { type: 'bool', short: 'q' },
      'no-headers': { type: 'bool' },
      'time-format': { type: 'string' },
      date: { type: 'bool', short: 'd' },
      reverse: { type: 'bool', short: 'r' },
      all: { type: 'bool', short: 'a' },
      uninstalled: { type: 'bool' },
      superseded: { type: 'bool' },
      uninstalling: { type: 'bool' },
      deployed: { type: 'bool' },
      failed: { type: 'bool' },
      pending: { type: 'bool' },
      'all-namespaces': { type: 'bool', short: 'A' },
      max: { type: 'int', short: 'm', def: 256 },
      offset: { type: 'int' },
      filter: { type: 'string', short: 'f' },
      selector: { type: 'string', short: 'l' },
      ...OUTPUT,
    },
  },
  uninstall: {
    use: 'uninstall RELEASE_NAME [...]',
    aliases: ['del', 'delete', 'un'],
    flags: {
      'dry-run': { type: 'bool' },
      'no-hooks': { type: 'bool' },
      'ignore-not-found': { type: 'bool' },
      'keep-history': { type: 'bool' },
      wait: { type: 'bool' },
      cascade: { type: 'string', def: 'background' },
      timeout: { type: 'duration', def: 300000 },
      description: { type: 'string' },
    },
  },
  get: {
    sub: {
      values: { use: 'get values RELEASE_NAME', flags: { revision: { type: 'int' }, all: { type: 'bool', short: 'a' }, ...OUTPUT } },
    },
  },
  version: {
    use: 'version [flags]',
    flags: { short: { type: 'bool' }, template: { type: 'string' }, client: { type: 'bool', short: 'c' } },
  },
  repo: {
    sub: {
      add: { use: 'repo add [NAME] [URL]', flags: { 'force-update': { type: 'bool' }, username: { type: 'string' }, password: { type: 'string' } } },
      update: { use: 'repo update [REPO1 [REPO2 ...]] [flags]', aliases: ['up'], flags: { 'fail-on-repo-update-fail': { type: 'bool' }, timeout: { type: 'duration', def: 120000 } } },
      list: { use: 'repo list [flags]', aliases: ['ls'], flags: { ...OUTPUT } },
    },
  },
}

/** An error printed as `Error: <message>`. */
export class HelmError extends Error {}

function allFlagSpecs(tree, acc = { ...GLOBAL }) {
  for (const c of Object.values(tree)) {
    Object.assign(acc, c.flags || {})
    if (c.sub) allFlagSpecs(c.sub, acc)
  }
  return acc
}

function usageError(cmdPath, n, kind, use) {
  const plural = n === 1 ? 'argument' : 'arguments'
  const what = kind === 'exact' ? `requires ${n} ${plural}` : kind === 'min' ? `requires at least ${n} ${plural}` : 'accepts no arguments'
  return new HelmError(`"${cmdPath}" ${what}\n\nUsage:  helm ${use}${use.includes("[flags]") ? "" : " [flags]"}`)
}

/** Run helm with argv; returns the exit code. Output goes to the given streams. */
export async function main(argv, { stdout = process.stdout, stderr = process.stderr } = {}) {
  const out = (s) => stdout.write(s)
  const ctx = { out, err: (s) => stderr.write(s), argv }
  let command = ''
  try {
    const { path: cmdPath, node, rest } = findCommand(argv, { sub: COMMANDS }, allFlagSpecs(COMMANDS))
    if (!cmdPath.length || node.sub) {
      const word = rest.find((r) => !r.startsWith('-'))
      if (word !== undefined) throw new HelmError(`unknown command "${word}" for "helm${cmdPath.length ? ' ' + cmdPath.join(' ') : ''}"\nRun 'helm${cmdPath.length ? ' ' + cmdPath.join(' ') : ''} --help' for usage.`)
      parseFlags(rest, { ...GLOBAL })
      out('The Kubernetes package manager\n\nUsage:\n  helm [command]\n')
      return 0
    }
    command = cmdPath.join(' ')
    const { flags, args, changed } = parseFlags(rest, { ...GLOBAL, ...node.flags })
    ctx.flags = flags
    ctx.changed = changed
    ctx.command = command
    if (flags.help) {
      out(`Usage:\n  helm ${node.use}\n`)
      return 0
    }
    if (flags.output !== undefined && !['table', 'json', 'yaml'].includes(flags.output)) {
      throw new HelmError(`invalid argument "${flags.output}" for "-o, --output" flag: invalid format type`)
    }
    const handlers = await import('./commands.js')
    switch (command) {
      case 'upgrade':
        if (args.length !== 2) throw usageError('helm upgrade', 2, 'exact', node.use)
        return await handlers.upgrade(ctx, args[0], args[1])
      case 'install':
        if (args.length < 1) throw usageError('helm install', 1, 'min', node.use)
        return await handlers.install(ctx, args)
      case 'status':
        if (args.length !== 1) throw usageError('helm status', 1, 'exact', node.use)
        return await handlers.status(ctx, args[0])
      case 'list':
        if (args.length) throw usageError('helm list', 0, 'none', node.use)
        return await handlers.list(ctx)
      case 'uninstall':
        if (args.length < 1) throw usageError('helm uninstall', 1, 'min', node.use)
        return await handlers.uninstall(ctx, args)
      case 'get values':
        if (args.length !== 1) throw usageError('helm get values', 1, 'exact', node.use)
        return await handlers.getValues(ctx, args[0])
      case 'version':
        if (args.length) throw usageError('helm version', 0, 'none', node.use)
        if (flags.short) out(`${HELM_VERSION}+g${GIT_COMMIT.slice(0, 7)}\n`)
        else out(`version.BuildInfo{Version:"${HELM_VERSION}", GitCommit:"${GIT_COMMIT}", GitTreeState:"clean", GoVersion:"${GO_VERSION}"}\n`)
        return 0
      case 'repo add':
        if (args.length !== 2) throw usageError('helm repo add', 2, 'exact', 'repo add [NAME] [URL] [flags]')
        out(`"${args[0]}" has been added to your repositories\n`)
        return 0
      case 'repo update':
        out('Hang tight while we grab the latest from your chart repositories...\n')
        for (const r of args.length ? args : ['cilium', 'coredns']) out(`...Successfully got an update from the "${r}" chart repository\n`)
        out('Update Complete. ⎈Happy Helming!⎈\n')
        return 0
      case 'repo list':
        out('NAME   \tURL                           \ncilium \thttps://helm.cilium.io        \ncoredns\thttps://coredns.github.io/helm\n')
        return 0
      default:
        throw new HelmError(`unknown command "${command}" for "helm"`)
    }
  } catch (e) {
    const msg = e instanceof HelmError || !e.stack ? e.message : e.message
    stderr.write(`Error: ${msg}\n`)
    if (ctx.record) await ctx.record(`error: ${msg}`)
    return 1
  } finally {
    if (ctx.client) ctx.client.close()
  }
}
