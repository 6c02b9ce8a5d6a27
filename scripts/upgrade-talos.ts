#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task upgrade:talos
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'upgrade-talos',
  phases: ['preflight', 'upgrade-talos'],
  tools: ['kubectl'],
  planInDryRun: true,
  usage:
    'task upgrade:talos TALOS_VERSION=v1.13.9 | IMAGE=<installer> [SCHEMATIC=id] [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [GATE_COMMAND=...] [-- --allow-downgrade --upgrade-timeout 30m ...]',
})
