#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:verify
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'verify',
  phases: ['verify'],
  usage: 'task bootstrap:verify [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
