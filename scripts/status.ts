#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:status: one table of every node (stage, ready, etcd, kubelet, Kubernetes Ready, last run)
import { statusCommand } from '../lib/commands/status-command.ts'

process.exitCode = await statusCommand(process.argv.slice(2), process.env)
