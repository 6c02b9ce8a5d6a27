#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:etcd
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'bootstrap',
  phases: ['bootstrap'],
  // the kubeconfig step asks the endpoint's /readyz with kubectl
  tools: ['kubectl'],
  usage: 'task bootstrap:etcd [CLUSTER_DIR=dir] [NODES=a,b] [CONCURRENCY=n] [DRY_RUN=true] [-- --fail-fast --retries N ...]',
})
