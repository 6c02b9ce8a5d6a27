import { join, resolve } from 'node:path'
import type { CommandArgs } from '../cli/args.ts'
import { runWrapped } from './command.ts'
import { errorMessage, ExitCode, InputError } from '../core/errors.ts'
import { Facts } from '../engine/facts.ts'
import { setHintContext } from '../cli/hints.ts'
import { loadInventory, selectNodes } from '../input/inventory.ts'
import { generateConfigs, generatorSecretFiles, type GenerateOptions } from '../input/generate.ts'
import { MachineConfig } from '../input/machine-config.ts'
import { bootstrapControlPlane, controlPlanes, kubeNodeName, type Inventory } from '../core/model.ts'
import { Journal } from '../state/journal.ts'
import { acquireLock } from '../state/lock.ts'
import { output } from '../cli/output.ts'
import type { Phase } from '../engine/phase.ts'
import { phasesFor } from '../phases/index.ts'
import { finalCheck } from './final-check.ts'
import { retargetBootstrapHints, retargetClusterStepHints } from './bootstrap-hints.ts'
import { Redactor, redactProcessOutput } from '../input/redact.ts'
import type { Report } from '../core/results.ts'
import { stateDir, statePaths, toolCacheDir } from '../state/paths.ts'
import { TOOL_ANSWERS_FILE, ToolAnswers } from '../state/tool-answers.ts'
import { writeReport } from '../state/report-store.ts'
import { checkStateFiles, commandLog, handedStateDir, openedStateDir } from '../state/state-files.ts'
import type { PhaseName, PhaseResult } from '../core/results.ts'
import type { Run } from '../engine/run.ts'
import { runPhases } from '../engine/runner.ts'
import { checkSettingsFit, loadSettings, type Settings } from '../input/settings.ts'
import { failureDetails, selectionNotes, summaryTable } from '../report/summary.ts'
import { versionsLine } from '../report/versions.ts'
import { requireTools, ToolRunner, type ToolName } from '../tools/exec.ts'
import { Flux } from '../tools/flux.ts'
import { Sops } from '../tools/sops.ts'
import { Helm } from '../tools/helm.ts'
import { Helmfile } from '../tools/helmfile.ts'
import { findBootstrapHelmfile } from '../input/bootstrap-helmfile.ts'
import { Kubectl } from '../tools/kubectl.ts'
import { Talosctl } from '../tools/talosctl.ts'

export interface CommandSpec {
  /** name in reports: a phase name, or talos / all / node */
  command: string
  phases: PhaseName[]
  /** tools this command needs besides talosctl */
  tools?: ToolName[]
  /** bootstrap:node: one node (--node), recovered into a running cluster; RESET=true adds the reset phase */
  recover?: boolean
  /**
   * DRY_RUN runs the plan: the reads and the nodes' own dry runs (cluster:apply), and changes
   * nothing; without it a dry run runs no call at all
   */
  planInDryRun?: boolean
  usage: string
}

/** The body of every phase script: parse, load, lock, run the phases as one tree, summarise, report, exit. */
export async function runCommand(spec: CommandSpec, argv = process.argv.slice(2), env = process.env): Promise<number> {
  let release: (() => void) | undefined
  try {
    return await runWrapped({ usage: spec.usage, stopping: 'in-flight calls aborted, report and journal written' }, argv, env, (ctx) =>
      execute(spec, ctx.args, env, ctx.signal, (r) => (release = r)),
    )
  } finally {
    release?.()
  }
}

/** What every command loads first: settings, the inventory, and a redactor that knows their secrets. */
export function loadCluster(
  args: Pick<CommandArgs, 'clusterDir' | 'settingFlags'>,
  env: NodeJS.ProcessEnv,
  generate?: Pick<GenerateOptions, 'generate' | 'dryRun'>,
): { settings: Settings; inventory: Inventory; redactor: Redactor } {
  // every line printed from here on goes through the redactor, input errors included; it learns
  // each secret before the file that could quote it is parsed (a config path that resolves to the
  // deploy key prints the key's lines only masked)
  const redactor = new Redactor()
  redactProcessOutput(redactor)
  const input = { clusterDir: args.clusterDir, env, flags: args.settingFlags }
  const settings = loadSettings(input)
  const dir = resolve(args.clusterDir)
  // credentials in a URL's user info are never printed, in a plan, a progress line or a report
  for (const url of [settings.cni?.repo, settings.flux?.git?.url, settings.flux?.operator?.repo, settings.flux?.operator?.chart])
    if (url) redactor.addUrlCredentials(url)
  if (settings.flux?.git?.privateKeyFile) redactor.addFile(resolve(dir, settings.flux.git.privateKeyFile))
  if (settings.flux?.sopsAgeKeyFile) redactor.addFile(resolve(dir, settings.flux.sopsAgeKeyFile))
  // the Secret manifests applied before Flux (git tokens, SOPS keys) can come back in a Kustomization's message
  for (const file of settings.flux?.secrets ?? []) redactor.addFromYamlFile(resolve(dir, file))
  const inventoryOptions = {
    env,
    ...(settings.talconfig ? { talconfig: settings.talconfig } : {}),
    ...(settings.talhelperOutDir ? { talhelperOutDir: settings.talhelperOutDir } : {}),
  }
  // the operator's generator first, so that nothing reads (or applies) a config older than its inputs;
  // the secrets bundle it reads is learned before, so that a generator's error never prints a key
  for (const file of generatorSecretFiles(args.clusterDir)) redactor.addFromYamlFile(file)
  if (generate) generateConfigs(args.clusterDir, inventoryOptions, { ...generate, env, say: output.info, warn: output.warn })
  const inventory = loadInventory(args.clusterDir, inventoryOptions)
  redactor.addFromYamlFile(inventory.talosconfig)
  for (const node of inventory.nodes) for (const doc of MachineConfig.of(node.configFile).values()) redactor.addFromMachineConfig(doc)
  checkSettingsFit(input, settings, inventory)
  const cps = controlPlanes(inventory)
  // the bootstrap control plane first: hints name it where one control plane is enough
  const first = settings.bootstrapNode ? bootstrapControlPlane(inventory, settings.bootstrapNode) : undefined
  setHintContext({
    clusterDir: inventory.clusterDir,
    talosconfig: inventory.talosconfig,
    kubeconfig: resolve(inventory.clusterDir, settings.kubeconfig),
    clusterName: inventory.clusterName,
    controlPlanes: first ? [first, ...cps.filter((n) => n !== first)] : cps,
  })
  return { settings, inventory, redactor }
}

async function execute(
  spec: CommandSpec,
  args: CommandArgs,
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  onLock: (release: () => void) => void,
): Promise<number> {
  const startedAt = new Date()
  const planOnly = spec.planInDryRun === true && args.dryRun
  // a plan-only dry run runs its reads: the tools, the lock and the state directory as a run's
  const dryRun = args.dryRun && !planOnly
  const { settings, inventory, redactor } = loadCluster(args, env, { generate: !args.noGenerate, dryRun: args.dryRun })
  const nodes = spec.recover ? selectNodes(inventory, requireNode(args.node, inventory), 'NODE') : selectNodes(inventory, args.nodes)
  const names = spec.recover && args.reset ? spec.phases.flatMap((p) => (p === 'preflight' ? [p, 'reset' as const] : [p])) : spec.phases
  const phases: Phase[] = phasesFor(names)

  // the operator's bootstrap helmfile, when the repository has one, is installed with the real helmfile
  const toolNames: ToolName[] = [
    ...(spec.tools ?? []),
    ...(spec.tools?.includes('helm') && findBootstrapHelmfile(inventory.clusterDir) ? (['helmfile'] as const) : []),
  ]
  requireTools(env, ['talosctl', ...toolNames])
  const state = stateDir(inventory.clusterDir)
  // nothing under .bootstrap is written through a link, and the directory must be writable: known before any node is touched
  if (!dryRun)
    checkStateFiles(
      inventory.clusterDir,
      [
        ...['lock', 'commands.log', 'journal.json', 'last-run.json', 'kubeconfig.fetched'].map((f) => join(state, f)),
        join(toolCacheDir(inventory.clusterDir), TOOL_ANSWERS_FILE),
      ],
      [join(state, 'runs'), toolCacheDir(inventory.clusterDir)],
      // the lock is linked into place (link(2)): two names for a moment is how it is taken
      [join(state, 'lock')],
    )
  if (!dryRun) onLock(acquireLock(inventory.clusterDir, output.warn))

  const tools = new ToolRunner({
    env,
    callTimeoutMs: settings.callTimeoutMs,
    signal,
    dryRun,
    redactor,
    ...(dryRun
      ? {}
      : {
          log: commandLog(inventory.clusterDir, statePaths(inventory.clusterDir).commandsLog, output.warn),
          tmpDir: {
            handed: handedStateDir(inventory.clusterDir, join(toolCacheDir(inventory.clusterDir), 'tmp')),
            plain: join(toolCacheDir(inventory.clusterDir), 'tmp'),
          },
          answers: new ToolAnswers(inventory.clusterDir, join(toolCacheDir(inventory.clusterDir), TOOL_ANSWERS_FILE)),
        }),
  })
  const kubeconfig = resolve(inventory.clusterDir, settings.kubeconfig)
  // the tools' caches: through the handle of the directory checked above (a dry run creates nothing there)
  const cacheDir = toolCacheDir(inventory.clusterDir)
  const kube = {
    kubeconfig,
    clusterName: inventory.clusterName,
    cacheDir,
    ...(dryRun ? {} : { handedCacheDir: handedStateDir(inventory.clusterDir, cacheDir) }),
  }
  const journalWarnings: string[] = []
  const run: Run = {
    command: spec.command,
    settings,
    inventory,
    nodes,
    options: {
      dryRun,
      failFast: args.failFast,
      reapply: args.reapply,
      recover: spec.recover ?? false,
      reset: args.reset,
      yes: args.yes,
      ...(planOnly ? { planOnly: true } : {}),
      ...(args.mode !== undefined ? { mode: args.mode } : {}),
      ...(args.allowK8sDowngrade ? { allowK8sDowngrade: true } : {}),
      ...(args.acceptDowntime ? { acceptDowntime: true } : {}),
      upgrade: args.upgrade,
      k8s: args.k8s,
    },
    signal,
    facts: new Facts(),
    redactor,
    tools,
    talosctl: new Talosctl(tools, inventory),
    kubectl: new Kubectl(tools, kube, inventory.nodes.map(kubeNodeName)),
    helm: new Helm(tools, kube),
    helmfile: new Helmfile(tools, kube),
    flux: new Flux(tools, kube),
    sops: new Sops(tools, env),
    kubeconfig,
    failed: new Map(),
    journal: Journal.load(inventory.clusterDir, (message) => journalWarnings.push(message)),
    warn: output.warn,
  }
  run.journal.readOnly = args.dryRun

  // the versions and the offline checks are independent local work: both at once; the header
  // still comes first, so warnings from the checks wait for it
  const held: string[] = [...journalWarnings]
  run.warn = (message) => held.push(message)
  // a journal of the wrong shape was ignored: rewrite it now, not only after the first phase
  if (run.journal.discarded && !args.dryRun) run.journal.save()
  const checks = (async () => {
    for (const phase of phases) await phase.check?.(run)
  })()
  checks.catch(() => undefined) // awaited below, once the header is out
  const versions = await toolVersions(run, toolNames)
  output.info(
    `${versions}; cluster ${inventory.clusterName} (${inventory.endpoint}); ${nodes.length} node(s); concurrency ${settings.concurrency}${dryRun ? '; DRY RUN: nothing is run' : planOnly ? '; DRY RUN: the plan only, nothing is changed' : ''}`,
  )
  run.warn = output.warn
  for (const message of held) run.warn(message)
  await checks

  let results: PhaseResult[] = []
  let interrupted = false
  try {
    results = await runPhases(run, phases)
  } catch (err) {
    if (!signal.aborted) throw err
    interrupted = true
  }
  interrupted ||= signal.aborted
  if (interrupted && !args.dryRun) {
    // the phase in flight when the run stopped: keep what its nodes finished
    try {
      for (const phase of results) run.journal.record(phase)
      run.journal.save()
    } catch (err) {
      output.warn(`the journal could not be written (${errorMessage(err)}): a rerun reads the nodes' live state instead`)
    }
  }

  // what a day-2 phase learned of each node (its state, the versions from and to) goes in its result
  for (const phase of results)
    for (const node of phase.nodes) {
      const day2 = phase.name === 'upgrade-talos' ? run.facts.of(node.name).day2 : undefined
      if (day2) node.day2 = day2
    }
  retargetBootstrapHints(results, spec.command, spec.recover ?? false)
  retargetClusterStepHints(results, spec.command, spec.recover ?? false)
  const phasesOk = !interrupted && results.length === phases.length && results.every((p) => p.ok)
  // a multi-phase command ends at exit 0 only over what bootstrap:status would call healthy
  const problems = phasesOk && !args.dryRun && spec.phases.length > 1 ? await finalCheck(run) : []
  interrupted ||= signal.aborted
  const ok = phasesOk && !interrupted && problems.length === 0
  const report: Report = {
    version: 1,
    command: spec.command,
    ok,
    ...(interrupted ? { interrupted: true } : {}),
    ...(dryRun ? { dryRun: true, plan: tools.plan } : planOnly ? { dryRun: true } : {}),
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    settings: { ...settings },
    phases: results,
    ...(problems.length > 0 ? { finalCheck: problems.map((p) => ({ node: p.node.name, message: p.message, hint: p.hint })) } : {}),
    ...(run.facts.cluster.versions ? { versions: run.facts.cluster.versions } : {}),
  }
  if (dryRun) {
    output.table(redactor.redact(summaryTable(nodes, results, true)))
    output.table(redactor.redact(planText(tools.plan)))
  } else {
    // the summary first: a report that cannot be written (a full disk) must not cost the operator the table
    output.table(redactor.redact(summaryTable(nodes, results)))
    for (const line of selectionNotes(results)) output.info(redactor.redact(line))
    // a day-2 command ends with the versions every node runs (a cluster left at mixed versions said so)
    if (report.versions) output.info(redactor.redact(versionsLine(report.versions)))
    for (const line of failureDetails(results)) output.error(redactor.redact(line))
    for (const p of problems) {
      output.error(redactor.redact(`final check: ${p.node.name} (${p.node.address}): ${p.message}`))
      output.error(redactor.redact(`  next: ${p.hint}`))
    }
    try {
      const written = writeReport(inventory.clusterDir, report, redactor)
      const opened = openedStateDir(inventory.clusterDir)
      if (opened && opened !== state)
        output.warn(`${state} was replaced during the run: this run wrote on into the directory it had opened, now ${opened}`)
      output.info(`report: ${written}`)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      const what = err instanceof InputError ? err.format() : `${code ?? 'error'}: ${errorMessage(err)}`
      output.error(
        redactor.redact(
          `the report could not be written under ${stateDir(inventory.clusterDir)} (${what}); the summary above is this run's result`,
        ),
      )
      // nodes were touched: not bad input, a run that did not end cleanly
      return interrupted ? ExitCode.interrupted : ExitCode.nodeFailed
    }
  }
  if (interrupted) return ExitCode.interrupted
  return ok ? ExitCode.ok : ExitCode.nodeFailed
}

/** Each tool's client version (asked all at once), and a warning when talosctl's minor differs from the cluster's Talos. */
async function toolVersions(run: Run, tools: ToolName[]): Promise<string> {
  const clientVersion = (tool: ToolName): Promise<string> =>
    tool === 'kubectl'
      ? run.kubectl.clientVersion()
      : tool === 'helm'
        ? run.helm.clientVersion()
        : tool === 'helmfile'
          ? run.helmfile.clientVersion()
          : tool === 'flux'
            ? run.flux.clientVersion()
            : run.talosctl.clientVersion()
  const others = tools.filter((tool) => tool !== 'talosctl')
  const [talosctl = '', ...versions] = await Promise.all(['talosctl' as const, ...others].map(clientVersion))
  const wanted = run.inventory.talosVersion
  const minor = (v: string): string | undefined => /^v?(\d+\.\d+)/.exec(v)?.[1]
  if (wanted && minor(talosctl) && minor(wanted) && minor(talosctl) !== minor(wanted)) {
    output.warn(
      `talosctl ${talosctl} but the cluster's talosVersion is ${wanted}: use a talosctl of the same minor version (flags and outputs differ between minors)`,
    )
  }
  return [`talosctl ${talosctl}`, ...others.map((tool, i) => `${tool} ${versions[i] ?? ''}`)].join(', ')
}

function requireNode(node: string | undefined, inventory: Inventory): string {
  if (!node || node.includes(',')) {
    const names = inventory.nodes.map((n) => n.name).join(', ')
    throw new InputError(node ? `NODE takes one node, got "${node}"` : 'NODE is required', {
      fix: `name one node: task bootstrap:node NODE=<name or address>, one of: ${names}`,
    })
  }
  return node
}

/** The dry run's plan: per node (cluster-wide commands first), every command in order. */
function planText(plan: ToolRunner['plan']): string {
  const byNode = new Map<string, string[]>()
  for (const step of plan) {
    const key = step.node ?? 'cluster'
    const commands = byNode.get(key) ?? []
    // a poll repeats its command; the plan lists it once in a row
    if (commands[commands.length - 1] !== step.command) commands.push(step.command)
    byNode.set(key, commands)
  }
  const lines = ['PLAN (dry run: nothing was run; these commands would run)']
  const keys = [...byNode.keys()].sort((a, b) => (a === 'cluster' ? -1 : b === 'cluster' ? 1 : 0))
  for (const key of keys) {
    lines.push(`${key}:`, ...(byNode.get(key) ?? []).map((c) => `  ${c}`))
  }
  return lines.join('\n')
}
