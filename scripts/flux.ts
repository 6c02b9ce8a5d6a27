#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:flux
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'flux',
  phases: ['flux'],
  tools: ['kubectl', 'helm', 'flux'],
  usage: 'task bootstrap:flux [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
