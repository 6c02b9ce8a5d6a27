#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task cluster:apply
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'cluster-apply',
  phases: ['preflight', 'cluster-apply'],
  tools: ['kubectl'],
  planInDryRun: true,
  usage:
    'task cluster:apply [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [MODE=auto|no-reboot|reboot|staged|try] [-- --drain-timeout 5m ...]',
})
