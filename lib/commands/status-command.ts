// The body of scripts/status.ts: parse, load the cluster, read, print the table; `--watch` repeats.
import { toolCacheDir } from '../state/paths.ts'
import { resolve } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import ora from 'ora'
import { runWrapped } from './command.ts'
import { loadCluster } from './run-command.ts'
import { ExitCode } from '../core/errors.ts'
import { fluxRoot } from '../input/settings.ts'
import { lockHolder } from '../state/lock.ts'
import { selectNodes } from '../input/inventory.ts'
import { output } from '../cli/output.ts'
import { checkLines, readHealthChecks, readStatus, STATUS_DEADLINE_MS, statusTable, type StatusTools } from './status.ts'
import { ToolRunner } from '../tools/exec.ts'
import { versionsLine } from '../report/versions.ts'
import { Kubectl } from '../tools/kubectl.ts'
import { Talosctl } from '../tools/talosctl.ts'

export const STATUS_USAGE = 'task status [CLUSTER_DIR=dir] [NODES=a,b] [-- --watch] [--poll-interval 5s] [--call-timeout 3s]'

/** Exit 0 when every selected node is running and Ready, 1 otherwise (docs/design.md); --watch until Ctrl-C, then the last table's code. */
export async function statusCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return runWrapped({ usage: STATUS_USAGE }, argv, env, async ({ args, signal }) => {
    const { settings, inventory, redactor } = loadCluster(args, env)
    const nodes = selectNodes(inventory, args.nodes)
    // an explicit --call-timeout may lengthen the deadline; the 30 s default must not
    const deadlineMs = args.settingFlags['call-timeout'] ? settings.callTimeoutMs : Math.min(settings.callTimeoutMs, STATUS_DEADLINE_MS)
    const runner = new ToolRunner({ env, callTimeoutMs: deadlineMs, signal, dryRun: false, redactor })
    const kubeconfig = resolve(inventory.clusterDir, settings.kubeconfig)
    const tools: StatusTools = {
      inventory,
      runner,
      talosctl: new Talosctl(runner, inventory),
      kubectl: new Kubectl(runner, { kubeconfig, clusterName: inventory.clusterName, cacheDir: toolCacheDir(inventory.clusterDir) }),
      kubeconfig,
      deadlineMs,
    }
    const live = args.watch && process.stdout.isTTY === true
    // interrupted before the first table: 130; in --watch, Ctrl-C ends with the last table's verdict
    let code: number = ExitCode.interrupted
    for (;;) {
      const table = await readStatus(tools, nodes, settings.flux ? fluxRoot(settings.flux) : undefined, { versions: true })
      // the checks wait-ready ends with, once each (read only while every selected node is up)
      const checks = table.rows.every((r) => r.healthy) ? await readHealthChecks(tools, table.via) : []
      if (signal.aborted) return code
      const unhealthy = checks.some((c) => c.status === 'failed' || c.status === 'unreadable')
      code = table.rows.every((r) => r.healthy) && !unhealthy ? ExitCode.ok : ExitCode.nodeFailed
      const lines = [statusTable(table)]
      if (table.lastRun) lines.push(table.lastRun)
      if (table.flux) lines.push(table.flux)
      // nodes a run is applying or installing read as down or booting: say the run is under way
      const holder = lockHolder(inventory.clusterDir)
      if (holder) lines.push(`a run is in progress: ${holder}; its nodes may be installing or rebooting, and LAST RUN is the run before it`)
      // the nodes run more than one Talos or Kubernetes version (an upgrade stopped half-way)
      if (table.versions?.mixed) lines.push(versionsLine(table.versions, false))
      // the checks wait-ready ends with, after a blank line (the table ends at one)
      if (checks.length > 0) lines.push('', checkLines(checks))
      else if (!table.rows.every((r) => r.healthy)) lines.push('', 'health: not checked while a node is not running and Ready')
      if (args.watch)
        lines.unshift(
          `${new Date().toISOString()}  ${inventory.clusterName}: ${table.rows.filter((r) => r.healthy).length}/${table.rows.length} running and Ready (every ${Math.round(settings.pollIntervalMs / 100) / 10}s; Ctrl-C stops)`,
        )
      // a terminal is redrawn in place; a pipe gets one table after the other
      if (live) output.clearScreen()
      output.table(redactor.redact(lines.join('\n')))
      for (const w of table.warnings) output.warn(redactor.redact(w))
      if (!args.watch) return code
      if (!live) output.table('')
      // on a terminal, the wait between two tables is a spinner (ora): the table alone looks frozen
      const spinner = live
        ? ora({ text: `next refresh in ${Math.round(settings.pollIntervalMs / 1000)}s (Ctrl-C stops)`, stream: process.stderr }).start()
        : undefined
      try {
        await sleep(settings.pollIntervalMs, undefined, { signal })
      } catch {
        return code
      } finally {
        spinner?.stop()
      }
    }
  })
}
