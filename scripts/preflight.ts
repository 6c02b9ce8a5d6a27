#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:preflight
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'preflight',
  phases: ['preflight'],
  usage: 'task bootstrap:preflight [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
