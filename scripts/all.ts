#!/usr/bin/env -S node --import tsx/esm
// task bootstrap:all
import { runCommand } from '../lib/commands/run-command.js'

process.exitCode = await runCommand({
  command: 'all',
  phases: ['preflight', 'apply', 'verify', 'bootstrap', 'wait-ready', 'flux'],
  tools: ['kubectl', 'helm', 'flux'],
  usage: 'task bootstrap:all [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
