// Loaded into every node process of a measured run through NODE_OPTIONS=--import; does nothing
// except in the orchestrator (a scripts/*.ts entry, or bench/baseline.ts), where it writes the process's own rusage
// (CPU, peak RSS) to BENCH_RUSAGE_OUT as it exits: the one figure /proc sampling can miss (the
// last moments) and that a parent's rusage cannot separate from the tool processes it started.
import { writeFileSync } from 'node:fs'

const out = process.env.BENCH_RUSAGE_OUT
if (out && /[\\/](scripts[\\/][\w-]+|bench[\\/]baseline)\.ts$/.test(process.argv[1] ?? '')) {
  process.on('exit', (code) => {
    const u = process.resourceUsage()
    writeFileSync(
      out,
      `${JSON.stringify({ pid: process.pid, code, userUs: u.userCPUTime, systemUs: u.systemCPUTime, maxRssKb: u.maxRSS })}\n`,
    )
  })
}
