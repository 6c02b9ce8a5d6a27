#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:wait-ready
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'wait-ready',
  phases: ['wait-ready'],
  tools: ['kubectl', 'helm'],
  usage: 'task bootstrap:wait-ready [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
