#!/usr/bin/env -S node --import tsx/esm
// task bootstrap:verify
import { runCommand } from '../lib/commands/run-command.js'

process.exitCode = await runCommand({
  command: 'verify',
  phases: ['verify'],
  usage: 'task bootstrap:verify [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
