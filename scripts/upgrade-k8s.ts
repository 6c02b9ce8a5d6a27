#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task upgrade:k8s
import { runCommand } from '../lib/commands/run-command.ts'

process.exitCode = await runCommand({
  command: 'upgrade-k8s',
  phases: ['preflight', 'upgrade-k8s'],
  tools: ['kubectl'],
  planInDryRun: true,
  usage:
    'task upgrade:k8s TO=v1.35.0 [CLUSTER_DIR=dir] [DRY_RUN=true] [-- --k8s-upgrade-timeout 60m --stall-timeout 10m --endpoint https://<control plane>:6443]',
})
