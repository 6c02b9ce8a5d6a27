#!/usr/bin/env -S node --import tsx/esm
// task bootstrap:preflight
import { runCommand } from '../lib/commands/run-command.js'

process.exitCode = await runCommand({
  command: 'preflight',
  phases: ['preflight'],
  usage: 'task bootstrap:preflight [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
