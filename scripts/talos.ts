#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:talos
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'talos',
  phases: ['preflight', 'apply', 'verify', 'bootstrap', 'wait-ready'],
  tools: ['kubectl', 'helm'],
  usage: 'task bootstrap:talos [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
