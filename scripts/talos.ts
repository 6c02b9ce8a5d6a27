#!/usr/bin/env -S node --import tsx/esm
// task bootstrap:talos
import { runCommand } from '../lib/commands/run-command.js'

process.exitCode = await runCommand({
  command: 'talos',
  phases: ['preflight', 'apply', 'verify', 'bootstrap', 'wait-ready'],
  tools: ['kubectl', 'helm'],
  usage: 'task bootstrap:talos [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
