#!/usr/bin/env node
// Simulated helm (v3.21.x) as a node process: what sim/bin/helm runs when no simulator serves it.
import { main } from './main.js'

process.exitCode = await main(process.argv.slice(2))
