#!/usr/bin/env -S node --import tsx/esm
// task bootstrap:apply
import { runCommand } from '../lib/commands/run-command.js'

process.exitCode = await runCommand({
  command: 'apply',
  phases: ['apply'],
  usage: 'task bootstrap:apply [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --reapply --fail-fast --retries N ...]',
})
