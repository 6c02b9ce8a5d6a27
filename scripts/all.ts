#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:all
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'all',
  phases: ['preflight', 'apply', 'verify', 'bootstrap', 'wait-ready', 'flux'],
  tools: ['kubectl', 'helm', 'flux'],
  usage: 'task bootstrap:all [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
