#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:apply
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'apply',
  phases: ['apply'],
  usage: 'task bootstrap:apply [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --reapply --fail-fast --retries N ...]',
})
