#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// task bootstrap:report: the last run (or RUN=<file>) as a per-node timeline, and an SVG beside the report
import { reportCommand } from '../lib/commands/report-command.ts'

process.exitCode = await reportCommand(process.argv.slice(2), process.env)
