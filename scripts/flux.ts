#!/usr/bin/env -S node --import tsx/esm
// task bootstrap:flux
import { runCommand } from '../lib/commands/run-command.js'

process.exitCode = await runCommand({
  command: 'flux',
  phases: ['flux'],
  tools: ['kubectl', 'helm', 'flux'],
  usage: 'task bootstrap:flux [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
