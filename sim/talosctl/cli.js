#!/usr/bin/env node
// Simulated talosctl as a node process: what sim/bin/talosctl runs when no simulator serves it
// (and what the conformance tests run). Plain ESM, lazy imports: starts in well under 150 ms.
import { interrupt, main } from './main.js'

const onSignal = () => { if (interrupt() === 'exit') process.exit(1) }
process.on('SIGINT', onSignal)
process.on('SIGTERM', onSignal)

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code
  // flush stdout/stderr, then leave even if a hung socket is still open
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)))
})
