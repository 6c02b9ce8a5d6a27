import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    restoreMocks: true,
    // the real control plane (SIM_KUBE=real) starts its API server in 5-15 s on a loaded machine and
    // runs real controllers between the phases: a case's budget is three times the model's
    testTimeout: process.env.SIM_KUBE === 'real' ? 180_000 : 60_000,
    hookTimeout: process.env.SIM_KUBE === 'real' ? 180_000 : 60_000,
    // rows of a describe.concurrent (the fault matrices' withCluster rows) in flight at once: most of a
    // row is waiting, but more starves 2 cores; a queued row's timeout starts only when it runs
    // (vitest's limiter is outside the test's timeout), so a row's budget is its own run
    maxConcurrency: 3,
    pool: 'forks',
    // three files at once on CI's 2 cores: with two, the whole suite used 1.58 cores of 2 (2966 CPU-s
    // in 1872 s: a file's waits on the simulator and its deadlines leave a core idle); each file has its
    // own 127.x.y range, so they never meet (docs/development.md)
    maxWorkers: 3,
  },
})
