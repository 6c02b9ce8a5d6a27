#!/usr/bin/env -S node --import tsx/esm
// task cluster:apply
import { runCommand } from '../lib/commands/run-command.js'

process.exitCode = await runCommand({
  command: 'cluster-apply',
  phases: ['preflight', 'cluster-apply'],
  tools: ['kubectl'],
  planInDryRun: true,
  usage:
    'task cluster:apply [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [MODE=auto|no-reboot|reboot|staged|try] [-- --drain-timeout 5m ...]',
})
