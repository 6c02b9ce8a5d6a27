#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:node NODE=<name or address> [RESET=true]
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'node',
  phases: ['preflight', 'apply', 'verify', 'bootstrap', 'wait-ready'],
  tools: ['kubectl', 'helm'],
  recover: true,
  usage: 'task bootstrap:node NODE=<name or address> [RESET=true] [CLUSTER_DIR=dir] [DRY_RUN=true] [-- --yes --retries N ...]',
})
